/* Unit test for the preload library's rings of walked records
 * (preload/walk_ring.c) and dwleak's reader of them
 * (target/walk_ring_read.c), both included here so that the test sees the
 * writer's thread state and the round trip needs both sides.  Four threads
 * record while a reader thread drains over process_vm_readv and writes
 * tails back: every record read once, in each thread's order, none lost
 * but those counted as dropped; a signal handler that records in the
 * middle of its thread's record; a full ring drops and counts, and reads
 * on; a full directory counts, and a slot handed back is claimed again;
 * a fork's child gets rings of its own; copies of rings scribbled on are
 * errors of their own ring, never a crash (ASan/UBSan); frees cancel
 * their blocks' unread records (stamped with the free's time), step by step and
 * raced by two threads against a reader (every block's fate checked). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "check.h"

#include "../../preload/walk_ring.c"
#include "../../target/walk_ring_read.c"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_rand(void)
{
	return check_xorshift64(&rng);
}

/* Writes what walk_ring_tail_write says for every ring of D (dwleak would
 * write through /proc/PID/mem). */
static void tails_back(const struct walk_ring_drain *d)
{
	uint64_t addr, value;
	uint32_t i;

	for (i = 0; i < d->n; i++)
		if (walk_ring_tail_write(&d->ring[i], &addr, &value))
			__atomic_store_n((uint64_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
}

static uint64_t dir_addr(void)
{
	return (uint64_t)(uintptr_t)&walk_ring_directory;
}

/* --- Records of a known pattern: thread T's N-th record --- */

#define THREADS 4
#define SOURCES (THREADS + 2) /* the threads, the main thread, its signal handler */

static uint64_t addr_of(unsigned src, uint64_t seq)
{
	return ((uint64_t)(src + 1) << 40) | (seq << 4);
}

static uint32_t frames_of(uint64_t seq)
{
	return seq % 7 == 0 ? 0 : (uint32_t)(seq * 13 % 40);
}

static int put_pattern(unsigned src, uint64_t seq)
{
	uint64_t pcs[DWLEAK_MAX_FRAMES];
	uint32_t n = frames_of(seq), i;

	for (i = 0; i < n; i++)
		pcs[i] = seq * 1000 + i;
	return walk_ring_put(n ? WALK_RING_REC_ALLOC : WALK_RING_REC_FREE, (uint32_t)(seq % ALLOC_KIND_COUNT),
			     (uint32_t)(seq % WALK_END_COUNT), (uint32_t)(seq & 1), addr_of(src, seq), seq, pcs, n, NULL, 0);
}

/* What the reader saw of each source. */
struct seen {
	uint64_t next[SOURCES];	    /* the lowest sequence number it may see next */
	uint64_t got[SOURCES];	    /* records read */
	uint64_t tsc[SOURCES];	    /* the last one's */
	uint32_t tid[SOURCES];
	unsigned bad;
};

static int check_record(void *ctx, const struct walk_ring_rec *r)
{
	struct seen *s = ctx;
	unsigned src = (unsigned)(r->addr >> 40) - 1;
	uint64_t seq = (r->addr & ((1ull << 40) - 1)) >> 4;
	uint32_t n = frames_of(seq), i;

	if (src >= SOURCES || seq < s->next[src] || r->nframes != n || r->size != seq ||
	    r->kind != seq % ALLOC_KIND_COUNT || r->end != seq % WALK_END_COUNT || r->fp != (seq & 1) ||
	    r->type != (n ? WALK_RING_REC_ALLOC : WALK_RING_REC_FREE) || (s->tid[src] && r->tid != s->tid[src])) {
		if (s->bad++ < 5)
			fprintf(stderr, "bad record: source %u seq %lu (next %lu), %u frames, size %lu, tid %u\n", src,
				seq, src < SOURCES ? s->next[src] : 0, r->nframes, r->size, r->tid);
		return 0;
	}
	for (i = 0; i < n; i++)
		if (r->pcs[i] != seq * 1000 + i) {
			s->bad++;
			return 0;
		}
	/* one thread's tscs climb (the handler's may fall between two of
	 * the main thread's, not within its own) */
	if (r->tsc < s->tsc[src])
		s->bad++;
	s->tsc[src] = r->tsc;
	s->tid[src] = r->tid;
	s->next[src] = seq + 1;
	s->got[src]++;
	return 0;
}

/* --- Four writers, one reader draining concurrently --- */

#define PER_THREAD 300000

struct writer {
	unsigned src;
	uint64_t written, dropped;
	uint32_t tid;
};

static volatile int writers_done;

static void *writer_run(void *arg)
{
	struct writer *w = arg;
	uint64_t seq;
	int err;

	w->tid = (uint32_t)syscall(SYS_gettid);
	for (seq = 0; seq < PER_THREAD; seq++) {
		err = put_pattern(w->src, seq);
		if (err == -ENOBUFS) {
			w->dropped++;
			sched_yield(); /* a test's pace: most records read, some dropped */
		}
		else if (err)
			CHECK(0, "writer %u: %s", w->src, strerror(-err));
		else
			w->written++;
	}
	return NULL;
}

static struct walk_ring_drain drain_buf;

static void *reader_run(void *arg)
{
	struct seen *s = arg;
	int err;

	while (!__atomic_load_n(&writers_done, __ATOMIC_ACQUIRE)) {
		err = walk_ring_drain(check_self_read, check_self_write, NULL, dir_addr(), check_record, s, &drain_buf);
		CHECK(!err, "drain: %s: %s", strerror(-err), drain_buf.why);
		CHECK(drain_buf.bad == 0, "a ring in error: %s", drain_buf.ring[0].why);
		tails_back(&drain_buf);
	}
	return NULL;
}

/* Drains until nothing is left; returns the records read. */
static uint64_t drain_all(struct seen *s)
{
	uint64_t total = 0;
	uint32_t i;
	int err;

	do {
		err = walk_ring_drain(check_self_read, check_self_write, NULL, dir_addr(), check_record, s, &drain_buf);
		CHECK(!err, "drain: %s: %s", strerror(-err), drain_buf.why);
		for (i = 0; i < drain_buf.n; i++)
			CHECK(!drain_buf.ring[i].err, "slot %u: %s", drain_buf.ring[i].slot, drain_buf.ring[i].why);
		tails_back(&drain_buf);
		total += drain_buf.delivered;
	} while (drain_buf.delivered);
	return total;
}

static void test_round_trip(void)
{
	static struct seen s;
	struct writer w[THREADS];
	pthread_t t[THREADS], reader;
	uint64_t dropped = 0, got = 0;
	unsigned i;

	/* 64 KiB rings: about 400 records, so that they wrap hundreds of
	 * times and the reader falls behind now and then */
	walk_ring_directory.data_bits = 16;
	writers_done = 0;
	CHECK(!pthread_create(&reader, NULL, reader_run, &s));
	for (i = 0; i < THREADS; i++) {
		w[i] = (struct writer){ .src = i };
		CHECK(!pthread_create(&t[i], NULL, writer_run, &w[i]));
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&writers_done, 1, __ATOMIC_RELEASE);
	pthread_join(reader, NULL);
	drain_all(&s);
	EXPECT(s.bad == 0, "%u records out of order or wrong", s.bad);
	for (i = 0; i < THREADS; i++) {
		EXPECT(s.got[i] == w[i].written, "writer %u: %lu written, %lu read (%lu dropped)", i, w[i].written,
		       s.got[i], w[i].dropped);
		EXPECT(s.tid[i] == w[i].tid, "writer %u: records of thread %u, written by %u", i, s.tid[i], w[i].tid);
		dropped += w[i].dropped;
		got += s.got[i];
	}
	/* each ring's counters say the same */
	for (i = 0; i < drain_buf.n; i++) {
		const struct walk_ring_ring *r = &drain_buf.ring[i];
		unsigned k;

		for (k = 0; k < THREADS; k++)
			if (w[k].tid == r->tid)
				EXPECT(r->records == w[k].written && r->dropped == w[k].dropped,
				       "ring of writer %u: %lu records, %lu dropped counted", k, r->records, r->dropped);
	}
	printf("round trip: %d threads x %d records, 64 KiB rings: %lu read, %lu dropped (counted), "
	       "drained concurrently\n", THREADS, PER_THREAD, got, dropped);
}

/* --- A signal handler that records in the middle of its thread's record --- */

static volatile uint64_t handler_seq, handler_mid, handler_dropped;
static volatile int signaller_stop;

static void on_signal(int sig)
{
	int saved = errno, err;

	(void)sig;
	if (ring_tls.nest)
		handler_mid++;
	err = put_pattern(THREADS + 1, handler_seq);
	if (!err)
		handler_seq++;
	else if (err == -ENOBUFS) {
		handler_dropped++;
		handler_seq++;
	}
	errno = saved;
}

static void *signaller_run(void *arg)
{
	pthread_t target = *(pthread_t *)arg;

	while (!__atomic_load_n(&signaller_stop, __ATOMIC_ACQUIRE))
		pthread_kill(target, SIGUSR1);
	return NULL;
}

static void test_signal_nesting(void)
{
	static struct seen s;
	struct sigaction sa = { .sa_handler = on_signal };
	pthread_t self = pthread_self(), sig;
	uint64_t seq, written = 0, dropped = 0, signal_written;
	int err;

	walk_ring_directory.data_bits = 16;
	sigemptyset(&sa.sa_mask);
	CHECK(!sigaction(SIGUSR1, &sa, NULL));
	CHECK(!pthread_create(&sig, NULL, signaller_run, &self));
	for (seq = 0; seq < 2000000 && (seq < 200000 || handler_mid < 1000); seq++) {
		err = put_pattern(THREADS, seq);
		CHECK(!err || err == -ENOBUFS, "%s", strerror(-err));
		err ? dropped++ : written++;
		if (seq % 256 == 0)
			drain_all(&s);
	}
	__atomic_store_n(&signaller_stop, 1, __ATOMIC_RELEASE);
	pthread_join(sig, NULL);
	signal(SIGUSR1, SIG_IGN);
	drain_all(&s);
	signal_written = handler_seq - handler_dropped;
	EXPECT(s.bad == 0, "%u records out of order or wrong", s.bad);
	EXPECT(s.got[THREADS] == written, "main: %lu written, %lu read", written, s.got[THREADS]);
	EXPECT(s.got[THREADS + 1] == signal_written, "handler: %lu written, %lu read", signal_written,
	       s.got[THREADS + 1]);
	EXPECT(handler_mid > 0, "no signal came in the middle of a record");
	printf("signals: %lu records by the thread, %lu by its handler, %lu of them in the middle of the "
	       "thread's; %lu + %lu dropped (counted); all read in order\n", written, signal_written,
	       (unsigned long)handler_mid, dropped, (unsigned long)handler_dropped);
}

/* --- A full ring: drops counted, the reader consistent, then room again --- */

static void test_full(void)
{
	static struct seen s;
	uint64_t seq, ok = 0, dropped = 0, before;
	struct walk_ring_header *r;
	int err;

	walk_ring_directory.data_bits = 12;
	/* a new thread's ring: this test runs in one of its own */
	for (seq = 0; seq < 1000; seq++) {
		err = put_pattern(THREADS + 1, seq);
		CHECK(!err || err == -ENOBUFS, "%s", strerror(-err));
		err ? dropped++ : ok++;
	}
	r = ring_tls.ring;
	CHECK(r && r->data_bits == 12);
	EXPECT(dropped > 0 && r->dropped == dropped, "%lu dropped, %lu counted", dropped, (unsigned long)r->dropped);
	EXPECT(r->head - r->tail <= 4096 && r->published == r->head);
	before = drain_all(&s);
	EXPECT(before == ok, "%lu written, %lu read", ok, before);
	EXPECT(s.bad == 0);
	/* the records after the drops are the later ones: the sequence skips */
	EXPECT(put_pattern(THREADS + 1, seq) == 0, "no room after the drain");
	EXPECT(drain_all(&s) == 1);
	EXPECT(s.bad == 0);
	printf("full: 4 KiB ring, %lu records kept, %lu dropped and counted, room again once drained\n", ok,
	       dropped);
}

static void *full_run(void *arg)
{
	(void)arg;
	test_full();
	return NULL;
}

/* --- A full directory; slots handed back --- */

static pthread_barrier_t bar;
static int late_err[2];

/* Claims a slot and ends. */
static void *claim_run(void *arg)
{
	int *err = arg;

	*err = walk_ring_put(WALK_RING_REC_FREE, ALLOC_FREE, 0, 0, 0x1000, 0, NULL, 0, NULL, 0);
	return NULL;
}

/* Finds no slot, waits while they are handed back, finds one. */
static void *late_run(void *arg)
{
	(void)arg;
	late_err[0] = walk_ring_put(WALK_RING_REC_FREE, ALLOC_FREE, 0, 0, 0x1000, 0, NULL, 0, NULL, 0);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	late_err[1] = walk_ring_put(WALK_RING_REC_FREE, ALLOC_FREE, 0, 0, 0x1000, 0, NULL, 0, NULL, 0);
	return NULL;
}

static int count_record(void *ctx, const struct walk_ring_rec *r)
{
	(void)r;
	(*(uint64_t *)ctx)++;
	return 0;
}

static bool thread_alive(uint32_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%u", tid);
	return access(path, F_OK) == 0;
}

static void test_directory(void)
{
	uint64_t no_slot = walk_ring_directory.no_slot, n = 0, reclaimed = 0;
	struct walk_ring_write w[3];
	pthread_t t;
	int err = 0, made = 0, k, i;
	uint32_t j;

	walk_ring_directory.data_bits = 12;
	while (!err && made < 2 * WALK_RING_SLOTS) {
		CHECK(!pthread_create(&t, NULL, claim_run, &err));
		pthread_join(t, NULL);
		made++;
	}
	EXPECT(err == -ENOSPC, "%d threads, no full directory (%d)", made, err);
	EXPECT(walk_ring_directory.no_slot == no_slot + 1);
	CHECK(!pthread_barrier_init(&bar, NULL, 2));
	CHECK(!pthread_create(&t, NULL, late_run, NULL));
	pthread_barrier_wait(&bar);
	EXPECT(late_err[0] == -ENOSPC);
	/* dwleak's part: drained, the dead threads' slots handed back */
	err = walk_ring_drain(check_self_read, check_self_write, NULL, dir_addr(), count_record, &n, &drain_buf);
	CHECK(!err, "%s", drain_buf.why);
	tails_back(&drain_buf);
	EXPECT(drain_buf.n == WALK_RING_SLOTS, "%u live slots", drain_buf.n);
	for (j = 0; j < drain_buf.n; j++) {
		const struct walk_ring_ring *r = &drain_buf.ring[j];

		if (thread_alive(r->tid))
			continue;
		/* the drain's own count: it is this pass's + 1 each time */
		drain_buf.reclaimed = walk_ring_directory.reclaimed;
		k = walk_ring_reclaim_plan(&drain_buf, r, w);
		CHECK(k == 3, "slot %u: plan %d", r->slot, k);
		for (i = 0; i < k; i++) {
			if (w[i].len == 4)
				__atomic_store_n((uint32_t *)(uintptr_t)w[i].addr, (uint32_t)w[i].value, __ATOMIC_RELEASE);
			else
				__atomic_store_n((uint64_t *)(uintptr_t)w[i].addr, w[i].value, __ATOMIC_RELEASE);
		}
		reclaimed++;
	}
	EXPECT(reclaimed >= WALK_RING_SLOTS - 2, "%lu slots handed back", reclaimed);
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	EXPECT(late_err[1] == 0, "no slot after %lu were handed back (%d)", reclaimed, late_err[1]);
	printf("directory: full after %d threads (counted), %lu records read, %lu slots handed back, claimed "
	       "again\n", made, n, reclaimed);
}

/* --- A fork's child: rings of its own --- */

static void child_check(bool handler)
{
	struct walk_ring_drain *d = malloc(sizeof(*d));
	uint64_t n = 0;
	uint32_t i, live = 0;
	int err;

	if (!d)
		_exit(3);
	if (handler)
		walk_ring_fork_child();
	if (walk_ring_put(WALK_RING_REC_FREE, ALLOC_FREE, 0, 0, 0x2000, 0, NULL, 0, NULL, 0))
		_exit(4);
	err = walk_ring_drain(check_self_read, check_self_write, NULL, dir_addr(), count_record, &n, d);
	if (err || n != 1)
		_exit(5);
	for (i = 0; i < d->n; i++)
		if (!d->ring[i].err) {
			live++;
			if (d->ring[i].tid != (uint32_t)getpid())
				_exit(6);
		} else if (d->ring[i].err != -ENODATA) {
			_exit(7); /* the parent's rings read wiped */
		}
	_exit(live == 1 && (!handler || d->n == 1) ? 0 : 8);
}

static void test_fork(void)
{
	int status, h;
	pid_t pid;

	/* this thread has a ring with records the reader took */
	CHECK(!put_pattern(THREADS, 0));
	for (h = 0; h < 2; h++) {
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			child_check(h);
		CHECK(waitpid(pid, &status, 0) == pid);
		EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %s the atfork handler: status %#x",
		       h ? "with" : "without", status);
	}
	printf("fork: a child's records go to its own ring, with the atfork handler and without\n");
}

/* --- Scribbled copies: errors of their own ring, no crash --- */

struct copy {
	struct walk_ring_dir dir __attribute__((aligned(64)));
	uint8_t *ring[WALK_RING_SLOTS];
	size_t len[WALK_RING_SLOTS];
};

static void *unread_run(void *arg)
{
	uint64_t seq;

	(void)arg;
	for (seq = 0; seq < 20; seq++)
		put_pattern(THREADS + 1, seq);
	return NULL;
}

static void test_scribble(void)
{
	static struct copy c;
	static struct walk_ring_drain clean, dirty;
	uint32_t i, n = 0, victim, iter, bad_iters = 0;
	uint64_t count = 0;
	int err;

	/* rings holding records not read yet: three new threads' and this
	 * one's */
	for (i = 0; i < 3; i++) {
		pthread_t t;

		CHECK(!pthread_create(&t, NULL, unread_run, NULL));
		pthread_join(t, NULL);
	}
	for (i = 0; i < 100; i++)
		put_pattern(THREADS, 1000000 + i);
	memcpy(&c.dir, &walk_ring_directory, sizeof(c.dir));
	for (i = 0; i < WALK_RING_SLOTS; i++) {
		struct walk_ring_slot *s = &c.dir.slot[i];
		const struct walk_ring_header *h = (const void *)(uintptr_t)s->ring;

		if (s->state != WALK_RING_SLOT_LIVE)
			continue;
		c.len[i] = WALK_RING_MAP_BYTES(h->data_bits); /* the scratch too: rings may not overlap */
		c.ring[i] = aligned_alloc(4096, (c.len[i] + 4095) & ~4095ul);
		CHECK(c.ring[i]);
		memcpy(c.ring[i], h, c.len[i]);
		s->ring = (uint64_t)(uintptr_t)c.ring[i];
		n++;
	}
	CHECK(n > 1, "%u rings to copy", n);
	err = walk_ring_drain(check_self_read, check_self_write, NULL, (uint64_t)(uintptr_t)&c.dir, count_record, &count, &clean);
	CHECK(!err && !clean.bad, "the copy: %s", clean.why);
	for (iter = 0; iter < 20000; iter++) {
		struct copy *d = &c;
		uint32_t what = (uint32_t)(next_rand() % 4), k;
		uint8_t saved[64];
		uint64_t at, len;
		uint8_t *p;

		/* a victim ring, a few bytes of its header, its records, or the
		 * directory's slot, changed; put back after */
		victim = clean.ring[next_rand() % clean.n].slot;
		if (what == 0) {
			p = (uint8_t *)&d->dir.slot[victim];
			len = sizeof(struct walk_ring_slot);
		} else if (what == 1) {
			p = d->ring[victim];
			len = WALK_RING_DATA_OFFSET;
		} else {
			p = d->ring[victim] + WALK_RING_DATA_OFFSET;
			len = d->len[victim] - WALK_RING_DATA_OFFSET;
		}
		at = next_rand() % len;
		if (at > len - 8)
			at = len - 8;
		at &= ~7ull;
		memcpy(saved, p + at, 8);
		for (k = 0; k < 8; k++)
			if (next_rand() % 3 == 0)
				p[at + k] = (uint8_t)next_rand();
		if (what == 3) /* a plausible position: near the real ones */
			memcpy(p + at, &(uint64_t){ clean.ring[0].tail + (next_rand() % 64) * 8 }, 8);
		count = 0;
		err = walk_ring_drain(check_self_read, check_self_write, NULL, (uint64_t)(uintptr_t)&d->dir, count_record, &count, &dirty);
		CHECK(!err, "iteration %u: %s", iter, dirty.why);
		for (i = 0; i < dirty.n; i++) {
			const struct walk_ring_ring *r = &dirty.ring[i];

			if (r->err) {
				CHECK(r->why[0], "iteration %u: an error without a reason", iter);
				if (r->slot != victim && !strstr(r->why, "overlaps"))
					CHECK(0, "iteration %u: slot %u in error, slot %u scribbled: %s", iter, r->slot,
					      victim, r->why);
				bad_iters += r->slot == victim;
			} else if (r->slot != victim) {
				uint32_t q;

				for (q = 0; q < clean.n && clean.ring[q].slot != r->slot; q++)
					;
				CHECK(q < clean.n && clean.ring[q].delivered == r->delivered,
				      "iteration %u: slot %u read differently", iter, r->slot);
			}
		}
		memcpy(p + at, saved, 8);
	}
	printf("scribbles: 20000 changes to %u copied rings and their slots, %u made their ring an error, "
	       "none touched another\n", n, bad_iters);
	for (i = 0; i < WALK_RING_SLOTS; i++)
		free(c.ring[i]);
}

/* --- Cancelling: an allocation freed before dwleak claimed it --- */

/* Allocations of the cancel tests: sources CSRC0 and CSRC0 + 1, apart from
 * the other tests' addresses. */
#define CSRC0 16
#define CANCEL_ALLOCS 200000
#define CANCEL_HANDOFF 1024

static uint64_t caddr(unsigned src, uint64_t seq)
{
	return ((uint64_t)(src + 1) << 40) | (seq << 4);
}

static int cput(uint32_t type, uint64_t addr, uint32_t nframes)
{
	uint64_t pcs[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	return walk_ring_put(type, 0, WALK_END_OK, 0, addr, type == WALK_RING_REC_ALLOC ? 64 : 0, pcs, nframes, NULL,
			     0);
}

/* Whether frees may take their thread's last record back (the control
 * block's RETRACT), and each block a free took back (the thread's ring's
 * count moved). */
static bool ctake;
static uint8_t ctaken[2][CANCEL_ALLOCS];
static uint64_t ctaken_by[2];

/* A free as rings.c makes it: taken back, cancelled, or recorded. */
static bool cfree(uint64_t addr)
{
	struct walk_ring_header *mine = ring_tls.ring;
	uint64_t before = mine ? LOAD(mine->retracted) : 0;
	unsigned src = (unsigned)(addr >> 40) - 1 - CSRC0;
	uint64_t seq = (addr & ((1ull << 40) - 1)) >> 4;
	int err;

	if (walk_ring_cancel(addr, ctake)) {
		if (mine && LOAD(mine->retracted) != before && src <= 1 && seq < CANCEL_ALLOCS) {
			ctaken[src][seq] = 1;
			ctaken_by[src]++;
		}
		return true;
	}
	while ((err = cput(WALK_RING_REC_FREE, addr, 0)) == -ENOBUFS)
		sched_yield(); /* a full ring: the reader is behind (the library would wait) */
	CHECK(err == 0);
	return false;
}

struct ctype_count {
	uint64_t alloc, free, cancelled;
	uint64_t last_cancelled, last_cancelled_tsc, last_pos;
};

static int ctype_record(void *ctx, const struct walk_ring_rec *r)
{
	struct ctype_count *c = ctx;

	if ((r->addr >> 40) != CSRC0 + 1)
		return 0;
	if (r->type == WALK_RING_REC_ALLOC)
		c->alloc++;
	else if (r->type == WALK_RING_REC_CANCELLED)
		c->cancelled++, c->last_cancelled = r->addr, c->last_cancelled_tsc = r->freed_tsc;
	else
		c->free++;
	c->last_pos = r->pos;
	return 0;
}

static void cdrain(struct ctype_count *c)
{
	CHECK(walk_ring_drain(check_self_read, check_self_write, NULL, dir_addr(), ctype_record, c, &drain_buf) == 0);
	tails_back(&drain_buf);
}

/* One thread, step by step: cancelled before the claim, recorded after
 * it, and never by a free of another address or a second free. */
static void test_cancel_steps(void)
{
	struct ctype_count c = { 0 };
	uint64_t a = caddr(CSRC0, 1), b = caddr(CSRC0, 2), x = caddr(CSRC0, 3);

	cdrain(&c); /* what earlier tests left */
	memset(&c, 0, sizeof(c));
	CHECK(cput(WALK_RING_REC_ALLOC, a, 3) == 0);
	CHECK(!walk_ring_cancel(x, false)); /* no allocation of it recorded */
	CHECK(walk_ring_cancel(a, false));
	CHECK(!walk_ring_cancel(a, false)); /* forgotten once freed */
	cdrain(&c);
	CHECK(c.cancelled == 1 && c.last_cancelled == a && c.alloc == 0 && c.free == 0);
	/* claimed by a drain: its free is recorded */
	CHECK(cput(WALK_RING_REC_ALLOC, b, 2) == 0);
	cdrain(&c);
	CHECK(c.alloc == 1);
	CHECK(!cfree(b));
	cdrain(&c);
	CHECK(c.free == 1 && c.cancelled == 1);
	/* read but not yet consumed (CLAIMED written, TAIL not): recorded */
	CHECK(cput(WALK_RING_REC_ALLOC, a, 1) == 0);
	CHECK(walk_ring_drain(check_self_read, check_self_write, NULL, dir_addr(), ctype_record, &c, &drain_buf) == 0);
	CHECK(!cfree(a));
	tails_back(&drain_buf);
	cdrain(&c);
	CHECK(c.alloc == 2 && c.free == 2 && c.cancelled == 1);

	/* the cancelled record carries the free's time, after its allocation's */
	{
		uint64_t t0;
		struct walk_ring_header *r = ring_tls.ring;
		struct walk_ring_record *rec;
		uint64_t pos;

		t0 = tsc_now(); /* the allocation's stamp is after it, the free's not before that */
		CHECK(cput(WALK_RING_REC_ALLOC, b, 2) == 0);
		CHECK(walk_ring_cancel(b, false));
		cdrain(&c);
		CHECK(c.cancelled == 2 && c.last_cancelled == b && c.last_cancelled_tsc >= t0);
		/* a record caught while its free stamps it (CANCELLING): the
		 * drain stops before it, and the next one reads it and on */
		CHECK(cput(WALK_RING_REC_ALLOC, a, 2) == 0);
		pos = LOAD(r->published) - WALK_RING_RECORD_BYTES(2);
		rec = (struct walk_ring_record *)((uint8_t *)r + WALK_RING_DATA_OFFSET + (pos & r->mask));
		CHECK(rec->check == WALK_RING_CHECK(pos, WALK_RING_REC_ALLOC) && rec->addr == a);
		rec->check = WALK_RING_CHECK(pos, WALK_RING_REC_CANCELLING);
		CHECK(cput(WALK_RING_REC_ALLOC, x, 1) == 0);
		cdrain(&c);
		CHECK(c.cancelled == 2 && c.alloc == 2); /* nothing read past it */
		rec->check = WALK_RING_CHECK(pos, WALK_RING_REC_CANCELLED);
		cdrain(&c);
		CHECK(c.cancelled == 3 && c.last_cancelled == a && c.alloc == 3);
		CHECK(!cfree(x));
		cdrain(&c);
	}
}

/* A reader whose first read of this thread's ring header runs HOOK
 * right after it (as if the thread went on between dwleak's two reads). */
static void (*hook_after_header)(void);
static uint64_t hook_header;

static int hooked_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	int err = check_self_read(ctx, addr, buf, len);
	void (*hook)(void) = hook_after_header;

	if (!err && addr == hook_header && hook) {
		hook_after_header = NULL;
		hook();
	}
	return err;
}

static uint64_t tb_x, tb_y, tb_z;
static uint32_t tb_y_frames;

/* The thread between the reader's header read and its claim: takes X
 * back, then writes Y (TB_Y_FRAMES frames) where X was, and Z. */
static void take_back_and_write(void)
{
	CHECK(cfree(tb_x));
	CHECK(cput(WALK_RING_REC_ALLOC, tb_y, tb_y_frames) == 0);
	if (tb_z)
		CHECK(cput(WALK_RING_REC_ALLOC, tb_z, 1) == 0);
}

/* This thread's ring in the last drain (NULL: not read). */
static const struct walk_ring_ring *my_ring(void)
{
	uint32_t i;

	for (i = 0; i < drain_buf.n; i++)
		if (drain_buf.ring[i].slot == ring_tls.slot)
			return &drain_buf.ring[i];
	return NULL;
}

static void cdrain_hooked(struct ctype_count *c, void (*hook)(void))
{
	uint32_t i;

	hook_header = (uint64_t)(uintptr_t)ring_tls.ring;
	hook_after_header = hook;
	CHECK(walk_ring_drain(hooked_read, check_self_write, NULL, dir_addr(), ctype_record, c, &drain_buf) == 0);
	CHECK(!hook_after_header); /* it ran */
	for (i = 0; i < drain_buf.n; i++)
		CHECK(drain_buf.ring[i].err == 0, "%s", drain_buf.ring[i].why);
	tails_back(&drain_buf);
}

/* Taking back (walk_ring_abi.h), step by step: a free of the thread's
 * last record unclaimed leaves nothing; not the last, or claimed, it is
 * cancelled or recorded as before; and a reader that read the header
 * before a take-back reads no byte written after it. */
static void test_take_back_steps(void)
{
	struct walk_ring_header *r;
	struct ctype_count c = { 0 };
	uint64_t a = caddr(CSRC0, 11), b = caddr(CSRC0, 12), x = caddr(CSRC0, 13), head, taken;

	ctake = true;
	cdrain(&c); /* what earlier tests left in this thread's ring */
	memset(&c, 0, sizeof(c));
	r = ring_tls.ring;
	CHECK(r != NULL);
	head = LOAD(r->head);
	taken = LOAD(r->retracted);

	/* the last record, unclaimed: taken back, the ring as before it */
	CHECK(cput(WALK_RING_REC_ALLOC, a, 3) == 0);
	CHECK(LOAD(r->head) == head + WALK_RING_RECORD_BYTES(3));
	CHECK(cfree(a));
	CHECK(LOAD(r->head) == head && LOAD(r->published) == head && LOAD(r->retracted) == taken + 1);
	cdrain(&c);
	CHECK(c.alloc == 0 && c.cancelled == 0 && c.free == 0);

	/* not the last: cancelled in place; then the last one taken back */
	CHECK(cput(WALK_RING_REC_ALLOC, a, 2) == 0);
	CHECK(cput(WALK_RING_REC_ALLOC, b, 1) == 0);
	CHECK(cfree(a));
	CHECK(LOAD(r->retracted) == taken + 1);
	CHECK(cfree(b));
	CHECK(LOAD(r->retracted) == taken + 2);
	CHECK(LOAD(r->head) == head + WALK_RING_RECORD_BYTES(2));
	cdrain(&c);
	CHECK(c.cancelled == 1 && c.last_cancelled == a && c.alloc == 0 && c.free == 0);

	/* claimed (the reader wrote CLAIMED past it, as before its reads):
	 * neither taken back nor cancelled quietly: its free is recorded */
	head = LOAD(r->head);
	CHECK(cput(WALK_RING_REC_ALLOC, b, 2) == 0);
	__atomic_store_n(&r->claimed, LOAD(r->published), __ATOMIC_SEQ_CST);
	CHECK(!cfree(b));
	CHECK(LOAD(r->retracted) == taken + 2);
	cdrain(&c);
	CHECK(c.cancelled == 1 && c.alloc == 1 && c.free == 1); /* read as an allocation and its free */

	/* the reader read the header, then the thread took X back and wrote
	 * a longer Y where X was, and Z after it: the reader's claim covers
	 * X's end only, and it reads nothing of Y (it crosses that end) */
	memset(&c, 0, sizeof(c));
	tb_x = x, tb_y = a, tb_z = b, tb_y_frames = 4;
	CHECK(cput(WALK_RING_REC_ALLOC, tb_x, 1) == 0);
	cdrain_hooked(&c, take_back_and_write);
	CHECK(c.alloc == 0 && c.cancelled == 0 && c.free == 0);
	CHECK(my_ring() && my_ring()->short_of && !my_ring()->taken_back);
	cdrain(&c); /* the next drain reads Y and Z */
	CHECK(c.alloc == 2 && c.cancelled == 0 && c.free == 0);
	CHECK(!cfree(tb_y) && !cfree(tb_z)); /* claimed: recorded */
	cdrain(&c);
	CHECK(c.free == 2);

	/* ... a shorter Y and nothing after: the second read's PUBLISHED is
	 * the lower, Y read whole and nothing of what X left past it */
	memset(&c, 0, sizeof(c));
	tb_x = x, tb_y = a, tb_z = 0, tb_y_frames = 0;
	CHECK(cput(WALK_RING_REC_ALLOC, tb_x, 5) == 0);
	cdrain_hooked(&c, take_back_and_write);
	CHECK(c.alloc == 1 && c.cancelled == 0 && c.free == 0);
	CHECK(my_ring() && my_ring()->taken_back && !my_ring()->short_of);
	CHECK(!cfree(tb_y));
	cdrain(&c);
	ctake = false;
}

/* Two threads allocate and free (their own blocks and each other's)
 * while a reader drains and claims: every block's fate as the reader
 * saw it must be its true one, whichever side won each race. */
enum cstate { C_NONE, C_LIVE, C_FREE_FIRST, C_CANCELLED, C_DONE, C_CANCELLED_FREED };

static uint8_t cseen[2][CANCEL_ALLOCS];
static uint8_t ctruth[2][CANCEL_ALLOCS]; /* 1: live at the end */
static uint64_t chand[2][CANCEL_HANDOFF];     /* each thread's blocks for the other to free */
static uint64_t chand_head[2], chand_tail[2];
static uint64_t ccancelled_by[2], cbad;
static volatile int cwriters_done;

static int cancel_record(void *ctx, const struct walk_ring_rec *r)
{
	unsigned src = (unsigned)(r->addr >> 40) - 1 - CSRC0;
	uint64_t seq = (r->addr & ((1ull << 40) - 1)) >> 4;
	uint8_t *st;

	(void)ctx;
	if (src > 1 || seq >= CANCEL_ALLOCS)
		return 0;
	st = &cseen[src][seq];
	switch (r->type) {
	case WALK_RING_REC_ALLOC:
		*st = *st == C_NONE ? C_LIVE : *st == C_FREE_FIRST ? C_DONE : (cbad++, *st);
		break;
	case WALK_RING_REC_CANCELLED:
		*st = *st == C_NONE ? C_CANCELLED : *st == C_FREE_FIRST ? C_CANCELLED_FREED : (cbad++, *st);
		break;
	default:
		*st = *st == C_LIVE ? C_DONE : *st == C_NONE ? C_FREE_FIRST : *st == C_CANCELLED ? C_CANCELLED_FREED
										   : (cbad++, *st);
	}
	return 0;
}

static void *cancel_reader(void *arg)
{
	static struct walk_ring_drain d;
	int last = 0;

	(void)arg;
	for (;;) {
		int done = __atomic_load_n(&cwriters_done, __ATOMIC_ACQUIRE);

		CHECK(walk_ring_drain(check_self_read, check_self_write, NULL, dir_addr(), cancel_record, NULL, &d) == 0);
		/* a record written where a taken-back one was, read torn, would
		 * be a ring's error here */
		for (uint32_t i = 0; i < d.n; i++)
			if (d.ring[i].err && cbad++ < 3)
				fprintf(stderr, "cancel race: %s\n", d.ring[i].why);
		tails_back(&d);
		if (last)
			break;
		last = done; /* one more drain after the writers ended: all published */
		usleep(50);
	}
	return NULL;
}

static void *cancel_writer(void *arg)
{
	unsigned me = (unsigned)(uintptr_t)arg, other = me ^ 1;
	uint64_t seq, rnd = 0x9e3779b97f4a7c15ull * (me + 1), r;

	for (seq = 0; seq < CANCEL_ALLOCS; seq++) {
		uint64_t a = caddr(CSRC0 + me, seq);

		while (cput(WALK_RING_REC_ALLOC, a, (uint32_t)(seq % 8)) == -ENOBUFS)
			sched_yield(); /* a full ring: the reader is behind */
		ctruth[me][seq] = 1;
		r = check_xorshift64(&rnd) % 8;
		if (r < 4) { /* freed at once, most often cancelled */
			ccancelled_by[me] += cfree(a);
			ctruth[me][seq] = 0;
		} else if (r < 6 && chand_head[me] - __atomic_load_n(&chand_tail[me], __ATOMIC_ACQUIRE) < CANCEL_HANDOFF) {
			/* for the other thread to free */
			chand[me][chand_head[me] % CANCEL_HANDOFF] = a;
			ctruth[me][seq] = 0;
			__atomic_store_n(&chand_head[me], chand_head[me] + 1, __ATOMIC_RELEASE);
		}
		/* the other's blocks, freed here */
		while (chand_tail[other] < __atomic_load_n(&chand_head[other], __ATOMIC_ACQUIRE)) {
			uint64_t b = chand[other][chand_tail[other] % CANCEL_HANDOFF];

			ccancelled_by[me] += cfree(b);
			__atomic_store_n(&chand_tail[other], chand_tail[other] + 1, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

/* TAKE: frees may take their thread's last record back as well. */
static void test_cancel_race(bool take)
{
	pthread_t w[2], rd;
	uint64_t i, live = 0, mism = 0, both = 0, cancelled = 0, taken = 0;
	unsigned t;

	ctake = take;
	memset(ctaken, 0, sizeof(ctaken));
	memset(ctaken_by, 0, sizeof(ctaken_by));

	memset(cseen, 0, sizeof(cseen));
	memset(ctruth, 0, sizeof(ctruth));
	memset(chand_head, 0, sizeof(chand_head));
	memset(chand_tail, 0, sizeof(chand_tail));
	memset(ccancelled_by, 0, sizeof(ccancelled_by));
	cbad = 0;
	cwriters_done = 0;
	CHECK(!pthread_create(&rd, NULL, cancel_reader, NULL));
	for (t = 0; t < 2; t++)
		CHECK(!pthread_create(&w[t], NULL, cancel_writer, (void *)(uintptr_t)t));
	for (t = 0; t < 2; t++)
		pthread_join(w[t], NULL);
	/* a handoff the other thread ended before taking: freed here */
	for (t = 0; t < 2; t++)
		while (chand_tail[t] < chand_head[t])
			ccancelled_by[t] += cfree(chand[t][chand_tail[t]++ % CANCEL_HANDOFF]);
	__atomic_store_n(&cwriters_done, 1, __ATOMIC_RELEASE);
	pthread_join(rd, NULL);
	for (t = 0; t < 2; t++)
		for (i = 0; i < CANCEL_ALLOCS; i++) {
			uint8_t s = cseen[t][i];

			live += ctruth[t][i];
			cancelled += s == C_CANCELLED || s == C_CANCELLED_FREED;
			both += s == C_CANCELLED_FREED;
			taken += ctaken[t][i];
			/* taken back: the reader saw nothing of it */
			if (ctaken[t][i] ? s != C_NONE
			    : ctruth[t][i] ? s != C_LIVE : s != C_DONE && s != C_CANCELLED && s != C_CANCELLED_FREED) {
				if (mism++ < 5)
					fprintf(stderr, "cancel race: thread %u block %lu: %s, seen as state %u\n", t, i,
						ctruth[t][i] ? "live" : "freed", s);
			}
		}
	printf("cancel race%s: %lu allocations, %lu live at the end, %lu taken back, %lu cancelled (%lu of them "
	       "also freed), %lu+%lu frees said cancelled or taken back\n", take ? " (taking back)" : "",
	       2ul * CANCEL_ALLOCS, live, taken, cancelled, both, ccancelled_by[0], ccancelled_by[1]);
	CHECK(mism == 0);
	CHECK(cbad == 0);
	/* what the writers were told is what the reader saw, less the races
	 * where both sides acted (a cancelled record also freed) */
	CHECK(cancelled - both + taken == ccancelled_by[0] + ccancelled_by[1]);
	/* most short-lived blocks never reach the reader */
	CHECK(cancelled + taken > CANCEL_ALLOCS / 4);
	CHECK(take ? taken > CANCEL_ALLOCS / 4 : taken == 0);
	ctake = false;
}


/* --- Stacks named once (walk_ring_abi.h) --- */

#define NSRC 24 /* caddr's source of these records */
#define NAMES_MAX 16

/* What the reader made of each record of source NSRC, by its seq. */
struct names_seen {
	struct walk_ring_names *names;
	uint32_t type[NAMES_MAX], named[NAMES_MAX], nframes[NAMES_MAX];
	int err[NAMES_MAX];
	uint64_t pc0[NAMES_MAX];
};

static int names_record(void *ctx, const struct walk_ring_rec *r0)
{
	struct names_seen *ns = ctx;
	struct walk_ring_rec r = *r0;
	uint64_t seq = (r.addr & ((1ull << 40) - 1)) >> 4;

	if ((r.addr >> 40) != NSRC + 1 || seq >= NAMES_MAX)
		return 0;
	ns->err[seq] = walk_ring_names_resolve(ns->names, &r);
	ns->type[seq] = r.type;
	ns->named[seq] = r0->named;
	ns->nframes[seq] = r.nframes;
	ns->pc0[seq] = r.nframes ? r.pcs[0] : 0;
	/* on the wire: a use carries no frames, a definition its own */
	CHECK(r0->named != WALK_RING_FLAG_STACK_REF || r0->nframes == 0, "seq %llu: a use with frames",
	      (unsigned long long)seq);
	return 0;
}

static int nput(uint64_t seq, uint32_t kind, uint64_t pc0, struct walk_stack_name *name, uint32_t gen)
{
	uint64_t pcs[6] = { pc0, pc0 + 1, pc0 + 2, pc0 + 3, pc0 + 4, pc0 + 5 };

	return walk_ring_put(WALK_RING_REC_ALLOC, kind, WALK_END_OK, 0, caddr(NSRC, seq), 64, pcs, 6, name, gen);
}

static void test_names(void)
{
	struct names_seen ns = { .names = walk_ring_names_new() };
	struct walk_stack_name a = { .slot = 5 }, b = { .slot = 6 };
	struct walk_ring_header *r;
	uint64_t head, taken;
	struct ctype_count c = { 0 };
	struct walk_ring_rec fake = { .type = WALK_RING_REC_ALLOC, .named = WALK_RING_FLAG_STACK_REF, .name = 5 };
	uint32_t i;

	CHECK(ns.names);
	ctake = true;
	cdrain(&c); /* what earlier tests left in this thread's ring */
	r = ring_tls.ring;
	CHECK(r != NULL);
	head = LOAD(r->head);
	/* 0: defined (frames); 1: named (none); 2: another kind, defined
	 * again; 3: a new generation (a new tracer), defined again; 4: named */
	CHECK(nput(0, ALLOC_MALLOC, 0xa000, &a, 7) == 0);
	CHECK(a.epoch == (7ull << 32 | LOAD(r->life)) && a.kind == ALLOC_MALLOC);
	CHECK(nput(1, ALLOC_MALLOC, 0xa000, &a, 7) == 0);
	CHECK(LOAD(r->head) == head + WALK_RING_RECORD_BYTES(6) + WALK_RING_RECORD_BYTES(0),
	      "a named record is its header only");
	CHECK(nput(2, ALLOC_CALLOC, 0xa000, &a, 7) == 0);
	CHECK(nput(3, ALLOC_CALLOC, 0xa000, &a, 8) == 0);
	CHECK(nput(4, ALLOC_CALLOC, 0xa000, &a, 8) == 0);
	/* 5: a definition freed at once, its thread's last record: cancelled,
	 * not taken back (6 names it) */
	taken = LOAD(r->retracted);
	CHECK(nput(5, ALLOC_MALLOC, 0xb000, &b, 8) == 0);
	CHECK(cfree(caddr(NSRC, 5)));
	CHECK(LOAD(r->retracted) == taken, "a definition taken back");
	CHECK(nput(6, ALLOC_MALLOC, 0xb000, &b, 8) == 0);
	/* 7: a name's use, freed at once: taken back (it defines nothing) */
	CHECK(nput(7, ALLOC_MALLOC, 0xb000, &b, 8) == 0);
	CHECK(cfree(caddr(NSRC, 7)));
	CHECK(LOAD(r->retracted) == taken + 1, "a use not taken back");
	/* 8: no name: frames */
	CHECK(nput(8, ALLOC_MALLOC, 0xc000, NULL, 8) == 0);
	CHECK(walk_ring_drain(check_self_read, check_self_write, NULL, dir_addr(), names_record, &ns, &drain_buf) ==
	      0);
	tails_back(&drain_buf);
	for (i = 0; i < 9; i++)
		CHECK(!ns.err[i], "seq %u: %s", i, strerror(-ns.err[i]));
	{
		static const uint32_t named[9] = { WALK_RING_FLAG_STACK_DEF, WALK_RING_FLAG_STACK_REF,
						   WALK_RING_FLAG_STACK_DEF, WALK_RING_FLAG_STACK_DEF,
						   WALK_RING_FLAG_STACK_REF, WALK_RING_FLAG_STACK_DEF,
						   WALK_RING_FLAG_STACK_REF, 0, 0 };
		static const uint64_t pc0[9] = { 0xa000, 0xa000, 0xa000, 0xa000, 0xa000, 0xb000, 0xb000, 0, 0xc000 };

		for (i = 0; i < 9; i++) {
			if (i == 7)
				continue; /* taken back: never read */
			CHECK(ns.named[i] == named[i], "seq %u: named %#x, want %#x", i, ns.named[i], named[i]);
			CHECK(ns.nframes[i] == 6 && ns.pc0[i] == pc0[i], "seq %u: %u frames from %#llx", i, ns.nframes[i],
			      (unsigned long long)ns.pc0[i]);
		}
		CHECK(ns.type[5] == WALK_RING_REC_CANCELLED && ns.type[7] == 0);
	}
	/* a reader that never read the definition (a new tracer), or one of
	 * another kind: the stack is lost, the record kept */
	walk_ring_names_free(ns.names);
	ns.names = walk_ring_names_new();
	CHECK(ns.names);
	fake.slot = drain_buf.ring[0].slot;
	CHECK(walk_ring_names_resolve(ns.names, &fake) == -ENOENT && fake.nframes == 0);
	{
		uint64_t pcs[2] = { 1, 2 };
		struct walk_ring_rec def = { .slot = fake.slot, .type = WALK_RING_REC_ALLOC, .kind = ALLOC_CALLOC,
					     .named = WALK_RING_FLAG_STACK_DEF, .name = 5, .nframes = 2, .pcs = pcs };

		CHECK(walk_ring_names_resolve(ns.names, &def) == 0);
		fake.kind = ALLOC_MALLOC;
		CHECK(walk_ring_names_resolve(ns.names, &fake) == -ENOENT);
		fake.kind = ALLOC_CALLOC;
		CHECK(walk_ring_names_resolve(ns.names, &fake) == 0 && fake.nframes == 2 && fake.pcs[1] == 2);
		fake.name = WALK_RING_STACK_SLOTS; /* out of bounds */
		CHECK(walk_ring_names_resolve(ns.names, &fake) == -ENOENT);
	}
	walk_ring_names_free(ns.names);
	ctake = false;
	printf("names: a stack's frames once per ring, tracer and kind; a definition never taken back\n");
}

int main(void)
{
	pthread_t t;

	test_round_trip();
	test_signal_nesting();
	CHECK(!pthread_create(&t, NULL, full_run, NULL));
	pthread_join(t, NULL);
	test_scribble();
	test_fork();
	test_directory();
	test_cancel_steps();
	test_take_back_steps();
	test_names();
	test_cancel_race(false);
	test_cancel_race(true);
	return check_failures ? 1 : 0;
}
