/* Whether the running kernel can preempt a BPF program running in a
 * uprobe.  Uprobe programs run with migration disabled but preemption
 * enabled, so on a kernel that preempts kernel code two of them can
 * interleave on one CPU; the walker's per-CPU buffers then need the guard
 * in bpf/dwleak.bpf.c (walker_enter). */
#ifndef DWLEAK_PREEMPT_H
#define DWLEAK_PREEMPT_H

#include <stdbool.h>

enum preempt_model {
	PREEMPT_MODEL_UNKNOWN = 0,
	PREEMPT_MODEL_NONE,	 /* preempt=none, or a kernel built without preemption */
	PREEMPT_MODEL_VOLUNTARY, /* only at cond_resched(), which BPF programs never reach */
	PREEMPT_MODEL_FULL,
	PREEMPT_MODEL_LAZY,	 /* preempts kernel code at the next tick */
	PREEMPT_MODEL_RT,
};

struct preempt_info {
	enum preempt_model model;
	const char *source; /* where the model was read, for --stats */
};

/* Reads the model from, in turn: debugfs (sched/preempt), the kernel
 * version string, the kernel log's last "Dynamic Preempt:" line, the boot
 * command line's preempt=, the kernel config.  Never fails: the model is
 * PREEMPT_MODEL_UNKNOWN when none of them tells. */
void preempt_info_read(struct preempt_info *pi);

/* True unless the model is known not to preempt kernel code. */
bool preempt_model_preempts_bpf(enum preempt_model m);
const char *preempt_model_name(enum preempt_model m);

/* The parsers, on the text of each source (exposed for the unit test).
 * Each returns PREEMPT_MODEL_UNKNOWN when the text does not say. */
enum preempt_model preempt_parse_debugfs(const char *text);	/* "none voluntary (full) lazy" */
enum preempt_model preempt_parse_version(const char *uts, bool *dynamic); /* uname -v */
enum preempt_model preempt_parse_kmsg(const char *line);	/* "...Dynamic Preempt: full" */
enum preempt_model preempt_parse_cmdline(const char *cmdline); /* "... preempt=lazy ..." */
enum preempt_model preempt_parse_config_line(const char *line); /* one .config line */

#endif
