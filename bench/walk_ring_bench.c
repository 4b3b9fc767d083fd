/* What writing a walked record into the preload library's per-thread ring
 * costs (preload/walk_ring.c, compiled here with the library's flags):
 * ns per record of 20 frames, 1 and 2 writer threads, while a reader
 * thread drains every ring with dwleak's reader (target/walk_ring_read.c)
 * over process_vm_readv and writes the tails back, as dwleak will; next
 * to the cost of copying the 20 pcs alone, and with the stack named
 * once (walk_ring_abi.h: the records after the first carry no frames).
 * Times are CPU time of the writers (CLOCK_THREAD_CPUTIME_ID) over timed
 * batches of records, each batch written into a ring the reader has
 * emptied (see BATCH): no record of a timed batch is dropped; each row
 * the fastest of REPS runs.
 *
 * Usage: walk_ring_bench [--records N] [--reps N]   (10000000, 5) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "walk_ring.h"
#include "walk_ring_read.h"

#define FRAMES 20

static long records = 10000000, reps = 5;
static volatile int stop_reader;
static pthread_barrier_t start_line;

static double thread_cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int self_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	(void)ctx;
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

static int self_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = { (void *)buf, len }, remote = { (void *)(uintptr_t)addr, len };

	(void)ctx;
	return process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

static int count(void *ctx, const struct walk_ring_rec *r)
{
	(*(uint64_t *)ctx) += r->nframes;
	return 0;
}

static uint64_t read_total;

static void *reader_run(void *arg)
{
	static struct walk_ring_drain d;
	uint64_t addr, value;
	uint32_t i;

	(void)arg;
	while (!__atomic_load_n(&stop_reader, __ATOMIC_ACQUIRE)) {
		if (walk_ring_drain(self_read, self_write, NULL, (uint64_t)(uintptr_t)&walk_ring_directory, count, &read_total, &d))
			abort();
		for (i = 0; i < d.n; i++)
			if (walk_ring_tail_write(&d.ring[i], &addr, &value))
				__atomic_store_n((uint64_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
		usleep(20); /* dwleak drains periodically, not in a spin */
	}
	return NULL;
}

struct run {
	int copy_only; /* 1: the pcs copied only; 2: no reader, the writer empties its ring itself;
			* 3: with a reader, every record after the first names its stack (no frames) */
	double cpu_ns;
	long dropped;
};

/* This thread's ring (claimed by its first record). */
static struct walk_ring_header *own_ring(void)
{
	uint32_t tid = (uint32_t)gettid(), i;

	for (i = 0; i < WALK_RING_SLOTS; i++)
		if (walk_ring_directory.slot[i].tid == tid && walk_ring_directory.slot[i].state == WALK_RING_SLOT_LIVE)
			return (struct walk_ring_header *)(uintptr_t)walk_ring_directory.slot[i].ring;
	abort();
}

/* Records are written in batches of BATCH (a third of a 1 MiB ring), each
 * timed; between two, untimed, the writer waits for the reader to drain
 * its ring, so that every timed record is written, none dropped (a
 * thread that records faster than dwleak drains drops, which is cheaper
 * and not what is measured). */
#define BATCH 1500

static void *writer_run(void *arg)
{
	struct run *r = arg;
	uint64_t pcs[FRAMES], sink[FRAMES + 5];
	struct walk_ring_header *ring;
	struct walk_stack_name name = { .slot = 1 };
	double t0;
	long i = 0, j;
	int k;

	for (k = 0; k < FRAMES; k++)
		pcs[k] = 0x400000 + k * 64;
	/* the ring claimed, untimed */
	walk_ring_put(WALK_RING_REC_ALLOC, 0, 0, 0, 0x1000, 8, pcs, FRAMES, NULL, 0);
	ring = own_ring();
	pthread_barrier_wait(&start_line);
	while (i < records) {
		if (r->copy_only == 2)
			__atomic_store_n(&ring->tail, ring->published, __ATOMIC_RELEASE);
		while ((!r->copy_only || r->copy_only == 3) &&
		       __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE) != ring->published)
			sched_yield();
		t0 = thread_cpu_ns();
		for (j = 0; j < BATCH && i < records; j++, i++) {
			pcs[0] = (uint64_t)i;
			if (r->copy_only == 1) {
				memcpy(sink, pcs, sizeof(pcs));
				__asm__ volatile("" : : "r"(sink) : "memory");
			} else if (walk_ring_put(WALK_RING_REC_ALLOC, 0, 0, 0, 0x1000 + (uint64_t)i * 16, 64, pcs,
						 FRAMES, r->copy_only == 3 ? &name : NULL, 1)) {
				r->dropped++;
			}
		}
		r->cpu_ns += thread_cpu_ns() - t0;
	}
	return NULL;
}

static void row(int threads, int copy_only)
{
	double best = 0;
	long dropped = 0, rep;
	int t;

	for (rep = 0; rep < reps; rep++) {
		struct run run[2] = { { copy_only, 0, 0 }, { copy_only, 0, 0 } };
		pthread_t w[2];
		double ns = 0;

		pthread_barrier_init(&start_line, NULL, (unsigned)threads);
		for (t = 0; t < threads; t++)
			pthread_create(&w[t], NULL, writer_run, &run[t]);
		for (t = 0; t < threads; t++) {
			pthread_join(w[t], NULL);
			ns += run[t].cpu_ns;
		}
		pthread_barrier_destroy(&start_line);
		ns /= (double)records * threads;
		if (!rep || ns < best) {
			best = ns;
			dropped = run[0].dropped + (threads > 1 ? run[1].dropped : 0);
		}
	}
	printf("%-40s %d thread%s  %6.2f ns/record  (%ld of %ld dropped: ring full)\n",
	       copy_only == 1 ? "copy 20 pcs only" : copy_only == 2 ? "walk_ring_put, 20 frames, no reader" :
	       copy_only == 3 ? "walk_ring_put, 20 frames named, reader" : "walk_ring_put, 20 frames, reader",
	       threads, threads > 1 ? "s" : " ", best, copy_only == 1 ? 0 : dropped, records * threads);
}

int main(int argc, char **argv)
{
	pthread_t reader;
	int i;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--records"))
			records = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--reps"))
			reps = atol(argv[i + 1]);
	}
	walk_ring_directory.data_bits = WALK_RING_BITS_DEFAULT;
	pthread_create(&reader, NULL, reader_run, NULL);
	row(1, 1);
	row(1, 2);
	row(1, 0);
	row(1, 3);
	row(2, 0);
	row(2, 3);
	__atomic_store_n(&stop_reader, 1, __ATOMIC_RELEASE);
	pthread_join(reader, NULL);
	printf("reader: %llu frames read (draining every 20 us); directory: %llu records without a slot\n",
	       (unsigned long long)read_total, (unsigned long long)walk_ring_directory.no_slot);
	return 0;
}
