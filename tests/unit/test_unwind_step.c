/* The walk's one step and rule lookup (bpf/abi/unwind_step.h), the same
 * source the kernel program walks with, built here for user space and
 * tried on real stacks: programs of testdata/ stopped with ptrace at
 * known points (deep in an -O2 recursion, asleep in libc and in malloc
 * under a stripped -O2 C++ program, under -O0 frame pointers, in malloc
 * called by a signal handler that interrupted malloc), walked with the
 * tables dwleak compiles for their objects (unwinder/, tables/), the
 * memory read with process_vm_readv, and compared frame by frame with
 * libdw's unwind of the same stopped thread.  Walked again with the
 * kernel walker's inline try first, made to decline at each of its reads,
 * the frames must be the same; every row of the tables must give, through
 * the shared lookup, the rule table_lookup gives.  A rule perturbed in a
 * table must make the walk differ from libdw, or the comparison proves
 * nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>

#include "check.h"
#include "proc_maps.h"
#include "stopped_child.h"
#include "table.h"
#include "unwind_step.h"
#include "unwinder.h"

/* --- The user-space build's hooks --------------------------------------- */

/* A table, as this build finds one: the compiled table itself. */
struct unwind_table_ref {
	const struct unwind_table *t;
};

static const struct unwind_page *table_page(const struct unwind_table_ref *r, __u64 page)
{
	const struct unwind_table *t = r->t;

	if (page < t->first_page || page - t->first_page >= t->npages)
		return NULL;
	return &t->pages[page - t->first_page];
}

static const struct unwind_row *table_row(const struct unwind_table_ref *r, __u32 idx)
{
	return idx < r->t->nrows ? &r->t->rows[idx] : NULL;
}

static const struct unwind_rule *table_rule(const struct unwind_table_ref *r, __u32 idx)
{
	return idx < r->t->nrules ? &r->t->rules[idx] : NULL;
}

static const struct unwind_table_ops table_ops = { table_page, table_row, table_rule };

/* One walk: the registers the step is given first, so the hooks find the
 * rest from them. */
struct walk {
	struct unwind_regs r;
	const struct child *c;
	unsigned refuse_every; /* the try's reads: every Nth refused (0: none) */
	int refuse_word;       /* and every one of this kind (-1: none) */
	unsigned try_reads;
	unsigned refused[UNWIND_WORD_SIG_BP + 1];
	unsigned declines;
	unsigned notes[UNWIND_WORD_SIG_BP + 1];
	unsigned bp_uses;
};

static int child_read(struct unwind_regs *r, __u64 *dst, __u64 addr, enum unwind_word what)
{
	struct walk *w = (struct walk *)r;
	struct iovec local = { dst, sizeof(*dst) }, remote = { (void *)(uintptr_t)addr, sizeof(*dst) };

	(void)what;
	return process_vm_readv(w->c->pid, &local, 1, &remote, 1, 0) == sizeof(*dst) ? 0 : WALK_ERR_READ;
}

/* The try's reads: refused now and then, or every one of a kind, so that
 * tries decline at both their reads (the return address, then the rbp
 * saved at the CFA, after the return address was noted) and the full
 * step takes the frame after them. */
static int child_try_read(struct unwind_regs *r, __u64 *dst, __u64 addr, enum unwind_word what)
{
	struct walk *w = (struct walk *)r;

	if ((int)what == w->refuse_word || (w->refuse_every && ++w->try_reads % w->refuse_every == 0)) {
		w->refused[what]++;
		return WALK_ERR_READ;
	}
	return child_read(r, dst, addr, what);
}

static void child_note(struct unwind_regs *r, __u64 addr, __u64 val, enum unwind_word what)
{
	struct walk *w = (struct walk *)r;

	(void)addr;
	(void)val;
	w->notes[what]++;
}

static void child_bp_use(struct unwind_regs *r)
{
	((struct walk *)r)->bp_uses++;
}

static const struct unwind_step_ops step_ops = { child_read, child_note, child_bp_use };
static const struct unwind_step_ops try_ops = { child_try_read, child_note, child_bp_use };

/* --- Walking a stopped child --------------------------------------------- */

struct frames {
	__u64 pc[MAX_FRAMES];
	bool exact[MAX_FRAMES]; /* not a return address: the first frame, a signal
				 * trampoline and the frame it interrupted (libdw:
				 * an activation) */
	unsigned n;
	__u32 end; /* enum walk_end */
};

/* The rule for runtime address LOOKUP, through the child's mappings and
 * the shared lookup, checked against the table compiler's own lookup; NULL
 * with *END set when there is none. */
static const struct unwind_rule *rule_at(const struct child *c, __u64 lookup, __u32 *end)
{
	ssize_t i = proc_maps_find(c->maps, c->nmaps, lookup);
	const struct unwind_rule *rule, *theirs;
	struct unwind_table_ref ref;
	struct unwind_object *o;
	struct file_key key;
	__u64 elf;

	if (i < 0) {
		*end = WALK_ERR_NO_MAPPING;
		return NULL;
	}
	key = (struct file_key){ .dev = c->maps[i].dev, .ino = c->maps[i].ino };
	o = unwinder_find(c->u, &key);
	if (!o || o->error || !o->table) {
		*end = WALK_ERR_NO_TABLE;
		return NULL;
	}
	elf = unwind_object_elf_addr(o, c->maps[i].start, c->maps[i].offset, lookup);
	ref.t = o->table;
	rule = unwind_rule_find(&ref, &table_ops, elf);
	theirs = table_lookup(o->table, elf, NULL, NULL);
	EXPECT(rule == theirs || (!rule && theirs && theirs->cfa_type == UNWIND_CFA_NONE),
	       "%s+%#llx: the shared lookup and table_lookup disagree", o->path, (unsigned long long)elf);
	if (!rule || rule->cfa_type == UNWIND_CFA_NONE) {
		*end = WALK_ERR_NO_FDE;
		return NULL;
	}
	return rule;
}

/* Walks the child from registers G, the way the kernel program does: each
 * frame tried first (when TRYING), then stepped. */
static void walk_child(const struct child *c, const struct user_regs_struct *g, struct walk *w, bool trying,
		       struct frames *f)
{
	const struct unwind_rule *rule;
	int ret;

	w->c = c;
	w->r = (struct unwind_regs){ .pc = g->rip, .sp = g->rsp, .bp = g->rbp, .bp_ok = 1, .exact_pc = 1 };
	f->n = 0;
	f->end = WALK_END_TRUNCATED;
	while (f->n < MAX_FRAMES) {
		f->pc[f->n] = w->r.pc;
		f->exact[f->n++] = w->r.exact_pc;
		rule = rule_at(c, unwind_lookup_pc(&w->r), &f->end);
		if (!rule)
			return;
		/* as the kernel program records it: the trampoline's first byte */
		f->exact[f->n - 1] |= rule->cfa_type == UNWIND_CFA_SIGNAL;
		ret = trying ? unwind_step_try(&w->r, rule, &f->end, &try_ops) : UNWIND_STEP_DECLINED;
		if (ret == UNWIND_STEP_DECLINED) {
			w->declines += trying;
			ret = unwind_step(&w->r, rule, &f->end, &step_ops);
		}
		if (ret != UNWIND_STEP_NEXT)
			return;
	}
	f->end = WALK_END_TRUNCATED;
}

/* Frames where the walk and libdw differ (pc, or whether it is an
 * activation), counting a frame only one of them has; printed unless
 * QUIET. */
static unsigned frames_differ(const struct frames *f, const struct oracle *o, bool quiet)
{
	unsigned i, n = f->n > o->n ? f->n : o->n, bad = 0;

	for (i = 0; i < n; i++) {
		bool same = i < f->n && i < o->n && f->pc[i] == o->pc[i] && f->exact[i] == o->activation[i];

		bad += !same;
		if (!quiet && (!same || getenv("VERBOSE")))
			printf("  #%-3u %c ours %#-14llx libdw %#-14llx %s\n", i, same ? ' ' : '!',
			       i < f->n ? (unsigned long long)f->pc[i] : 0ull,
			       i < o->n ? (unsigned long long)o->pc[i] : 0ull,
			       i < o->n ? oracle_name(o, o->pc[i], o->activation[i]) : "");
	}
	return bad;
}

/* How many of the walk's frames libdw names NAME (a prefix: gcc's clones
 * are NAME.constprop.0, glibc's entries have aliases). */
static unsigned frames_named(const struct frames *f, const struct oracle *o, const char *name)
{
	unsigned i, k = 0;

	for (i = 0; i < f->n && i < o->n; i++)
		k += !strncmp(oracle_name(o, f->pc[i], f->exact[i]), name, strlen(name));
	return k;
}

/* --- The checks ---------------------------------------------------------- */

/* Walks the child again, each frame tried first with the reads W refuses,
 * and checks the walk is F, the one stepped without tries. */
static void check_tried(const struct child *c, const char *what, const struct user_regs_struct *g,
			const struct frames *f, struct walk *w)
{
	struct frames tried;

	walk_child(c, g, w, true, &tried);
	EXPECT(tried.n == f->n && tried.end == f->end && !memcmp(tried.pc, f->pc, f->n * sizeof(f->pc[0])) &&
		       !memcmp(tried.exact, f->exact, f->n * sizeof(f->exact[0])),
	       "%s: tried first, the walk differs", what);
	printf("%s: the same tried first, %u of %u tries declined\n", what, w->declines, tried.n);
}

/* Walks the stopped child every way and compares with libdw; returns the
 * walk (for the caller's own checks), the oracle in *O (its Dwfl to end). */
static struct walk check_stop(struct child *c, const char *what, const struct user_regs_struct *g,
			      unsigned min_frames, struct frames *f, struct oracle *o)
{
	struct walk w = { 0 }, some = { .refuse_every = 3, .refuse_word = -1 };
	struct walk second = { .refuse_word = UNWIND_WORD_BP_AT_CFA };

	oracle_walk(c->pid, o);
	walk_child(c, g, &w, false, f);
	printf("%s: %u frames (%s), libdw %u (%s); rbp used %u times, restored from the CFA %u\n", what,
	       f->n, f->end == WALK_END_OK ? "to the outermost" : "cut short", o->n,
	       o->rc ? o->err : "to the outermost", w.bp_uses, w.notes[UNWIND_WORD_BP_AT_CFA]);
	EXPECT(frames_differ(f, o, false) == 0, "%s: the walk and libdw differ", what);
	EXPECT(f->end == WALK_END_OK && o->rc == 0, "%s: walk end %u, libdw %d", what, f->end, o->rc);
	EXPECT(f->n >= min_frames, "%s: %u frames, want %u at least", what, f->n, min_frames);
	/* the inline try and its declines give the same walk */
	check_tried(c, what, g, f, &some);
	EXPECT(some.declines > 0, "%s: no try declined", what);
	check_tried(c, what, g, f, &second);
	EXPECT(second.refused[UNWIND_WORD_BP_AT_CFA] == w.notes[UNWIND_WORD_BP_AT_CFA],
	       "%s: %u tries declined on their second read, %u frames restore rbp from the CFA", what,
	       second.refused[UNWIND_WORD_BP_AT_CFA], w.notes[UNWIND_WORD_BP_AT_CFA]);
	return w;
}

/* Perturbs the rule of frame K (+8 on its CFA offset, in the table the
 * walk reads) and checks that the comparison catches it; restores it. */
static void check_perturbed(struct child *c, const char *what, const struct user_regs_struct *g,
			    const struct frames *f, const struct oracle *o, unsigned k)
{
	const struct unwind_rule *rule;
	struct frames bad;
	struct walk w = { 0 };
	__u32 end;
	unsigned differ;

	CHECK(k + 1 < f->n);
	rule = rule_at(c, f->exact[k] ? f->pc[k] : f->pc[k] - 1, &end);
	CHECK(rule && (rule->cfa_type == UNWIND_CFA_RSP || rule->cfa_type == UNWIND_CFA_RBP));
	((struct unwind_rule *)rule)->cfa_off += 8;
	walk_child(c, g, &w, false, &bad);
	differ = frames_differ(&bad, o, true);
	((struct unwind_rule *)rule)->cfa_off -= 8;
	printf("%s: frame %u's rule perturbed: %u frames differ from libdw\n", what, k, differ);
	EXPECT(differ > 0, "%s: a perturbed rule went unnoticed", what);
}

/* Every row of every table the child's walks used, looked up at both
 * ends by the shared lookup, must give the rule table_lookup gives. */
static int span_agrees(const struct table_span *s, void *arg)
{
	struct unwind_table_ref ref = { arg };

	EXPECT(unwind_rule_find(&ref, &table_ops, s->start) == s->rule &&
		       unwind_rule_find(&ref, &table_ops, s->end - 1) == s->rule,
	       "row [%#llx, %#llx)", (unsigned long long)s->start, (unsigned long long)s->end);
	return 0;
}

static void check_lookups(const struct child *c)
{
	size_t i, spans = 0;

	for (i = 0; i < unwinder_count(c->u); i++) {
		struct unwind_object *o = unwinder_object(c->u, i);

		if (!o->table)
			continue;
		table_for_each_span(o->table, span_agrees, o->table);
		spans += o->table->nrows;
	}
	printf("lookups: %zu rows of %zu objects agree with table_lookup\n", spans, unwinder_count(c->u));
}

int main(void)
{
	struct user_regs_struct g;
	struct child c;
	struct frames f;
	struct oracle o;
	struct walk w;
	char *path;

	/* -O2, no frame pointers: 40 frames of recurse() under
	 * leak_at_bottom() and, one step further, libc's malloc */
	path = testdata_path("deep_recursion");
	child_start(&c, path, (char *[]){ path, "--depth", "40", "--iterations", "1", NULL });
	run_to(&c, "/deep_recursion", "leak_at_bottom", &g);
	check_stop(&c, "deep_recursion at leak_at_bottom", &g, 44, &f, &o);
	EXPECT(frames_named(&f, &o, "recurse") == 40, "40 frames of recurse()");
	dwfl_end(o.dwfl);
	run_to(&c, "/libc.so.6", "malloc", &g);
	check_stop(&c, "deep_recursion at malloc", &g, 45, &f, &o);
	EXPECT(frames_named(&f, &o, "leak_at_bottom") == 1 && frames_named(&f, &o, "_start") == 1);
	check_perturbed(&c, "deep_recursion at malloc", &g, &f, &o, 10);
	check_lookups(&c);
	dwfl_end(o.dwfl);
	child_end(&c);
	free(path);

	/* stripped, -O2 -fomit-frame-pointer, C++: asleep in libc, then in
	 * malloc under operator new (libstdc++) */
	path = testdata_path("seed_O2_stripped");
	child_start(&c, path,
		    (char *[]){ path, "--delay-ms", "1000", "--interval-ms", "1000", "--iterations", "0", NULL });
	run_to_sleep(&c, &g);
	check_stop(&c, "seed_O2_stripped asleep", &g, 6, &f, &o);
	dwfl_end(o.dwfl);
	run_to(&c, "/libc.so.6", "malloc", &g);
	check_stop(&c, "seed_O2_stripped at malloc", &g, 7, &f, &o);
	EXPECT(frames_named(&f, &o, "_Znwm") == 1, "no frame in operator new");
	check_perturbed(&c, "seed_O2_stripped at malloc", &g, &f, &o, 2);
	dwfl_end(o.dwfl);
	child_end(&c);
	free(path);

	/* frame pointers (-O0): CFAs from rbp, rbp restored from the frames */
	path = testdata_path("seed_O0_fp");
	child_start(&c, path, (char *[]){ path, "--iterations", "0", NULL });
	run_to(&c, "/seed_O0_fp", "_ZN7LeakLib14slowMemoryLeakEv", &g);
	run_to(&c, "/libc.so.6", "malloc", &g);
	w = check_stop(&c, "seed_O0_fp at malloc", &g, 8, &f, &o);
	EXPECT(w.bp_uses >= 3, "%u frames' CFAs from rbp", w.bp_uses);
	check_perturbed(&c, "seed_O0_fp at malloc", &g, &f, &o, 4);
	dwfl_end(o.dwfl);
	child_end(&c);
	free(path);

	/* a signal handler's malloc, its signal interrupting malloc's mmap:
	 * the walk crosses the signal frame into libc's malloc internals */
	path = testdata_path("sig_in_malloc");
	child_start(&c, path, (char *[]){ path, "--iterations", "1", NULL });
	run_to(&c, "/sig_in_malloc", "on_sigsys", &g);
	run_to(&c, "/libc.so.6", "malloc", &g);
	w = check_stop(&c, "sig_in_malloc at malloc in its handler", &g, 10, &f, &o);
	EXPECT(w.notes[UNWIND_WORD_SIG_PC] == 1 && w.notes[UNWIND_WORD_SIG_SP] == 1 && w.notes[UNWIND_WORD_SIG_BP] == 1,
	       "the walk did not cross one signal frame");
	EXPECT(frames_named(&f, &o, "on_sigsys") == 1 && frames_named(&f, &o, "big_alloc") == 1,
	       "the handler and the interrupted caller are not both on the walk");
	check_perturbed(&c, "sig_in_malloc at malloc in its handler", &g, &f, &o, 1);
	dwfl_end(o.dwfl);
	child_end(&c);
	free(path);
	return check_failures ? 1 : 0;
}
