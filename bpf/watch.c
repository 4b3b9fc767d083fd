/* User side of the watcher (bpf/watch.bpf.c): the only includer of its
 * skeleton.  Phases: probe the kernel's BTF for each tracepoint (and the
 * shape of mark_victim's arguments, which changed in Linux 6.8), open,
 * configure (which programs load, exit_all), load, attach, then poll the
 * ring buffer into the caller's callback. */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "watch.skel.h"
#include "watch.h"

struct watch {
	struct watch_bpf *skel;
	struct ring_buffer *rb;
	struct watch_info info;
	void (*event)(void *ctx, const struct watch_event *e);
	void *ctx;
};

/* The tracepoint each type needs: its btf_trace_<NAME> typedef. */
static const char *const tp_names[WATCH_EVENT_COUNT] = { "sched_process_exec", "sched_process_exit",
							  "mark_victim", "sched_process_fork" };

/* How mark_victim passes its victim. */
enum victim_shape { VICTIM_NONE, VICTIM_TASK, VICTIM_PID };

/* The FUNC_PROTO behind btf_trace_NAME, or NULL. */
static const struct btf_type *tp_proto(const struct btf *btf, const char *name)
{
	char tname[64];
	const struct btf_type *t;
	int id;

	snprintf(tname, sizeof(tname), "btf_trace_%s", name);
	id = btf__find_by_name_kind(btf, tname, BTF_KIND_TYPEDEF);
	if (id < 0)
		return NULL;
	t = btf__type_by_id(btf, id);
	t = t ? btf__type_by_id(btf, t->type) : NULL; /* the pointer */
	t = t && btf_is_ptr(t) ? btf__type_by_id(btf, t->type) : NULL;
	return t && btf_is_func_proto(t) ? t : NULL;
}

/* mark_victim's first real argument (after the void *__data): a pointer
 * (task_struct, 6.8+) or an integer (pid). */
static enum victim_shape victim_shape(const struct btf *btf)
{
	const struct btf_type *proto = tp_proto(btf, "mark_victim"), *arg;

	if (!proto || btf_vlen(proto) < 2)
		return VICTIM_NONE;
	arg = btf__type_by_id(btf, btf_params(proto)[1].type);
	while (arg && (btf_is_typedef(arg) || btf_is_mod(arg)))
		arg = btf__type_by_id(btf, arg->type);
	if (arg && btf_is_ptr(arg))
		return VICTIM_TASK;
	if (arg && btf_is_int(arg))
		return VICTIM_PID;
	return VICTIM_NONE;
}

static int ring_event(void *ctx, void *data, size_t size)
{
	struct watch *w = ctx;

	if (size >= sizeof(struct watch_event) && w->event)
		w->event(w->ctx, data);
	return 0;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!getenv("DWLEAK_DEBUG"))
		return 0;
	(void)level;
	return vfprintf(stderr, fmt, ap);
}

int watch_open(const struct watch_settings *s, void (*event)(void *ctx, const struct watch_event *e), void *ctx,
	       struct watch **out, char *why, size_t whylen)
{
	struct bpf_program *progs[WATCH_EVENT_COUNT];
	libbpf_print_fn_t old_print = NULL;
	enum victim_shape shape;
	bool any = false;
	struct watch *w;
	struct btf *btf;
	int err, t;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->event = event;
	w->ctx = ctx;
	/* probe: which tracepoints this kernel has */
	btf = btf__load_vmlinux_btf();
	if (!btf) {
		err = -errno;
		snprintf(why, whylen, "no kernel BTF (/sys/kernel/btf/vmlinux): %s", strerror(errno));
		free(w);
		return err;
	}
	shape = victim_shape(btf);
	for (t = 0; t < WATCH_EVENT_COUNT; t++) {
		bool has = t == WATCH_EVENT_VICTIM ? shape != VICTIM_NONE : tp_proto(btf, tp_names[t]) != NULL;

		w->info.live[t] = has && !(s->disable & 1u << t);
		w->info.how[t] = !has ? (t == WATCH_EVENT_VICTIM ? "no BTF tracepoint mark_victim in this kernel"
					 : t == WATCH_EVENT_EXEC ? "no BTF tracepoint sched_process_exec in this kernel"
					 : t == WATCH_EVENT_FORK ? "no BTF tracepoint sched_process_fork in this kernel"
								 : "no BTF tracepoint sched_process_exit in this kernel")
			       : !w->info.live[t] ? "left out (settings)"
			       : t == WATCH_EVENT_EXEC ? "tp_btf/sched_process_exec"
			       : t == WATCH_EVENT_EXIT ? "tp_btf/sched_process_exit"
			       : t == WATCH_EVENT_FORK ? "tp_btf/sched_process_fork"
			       : shape == VICTIM_TASK ? "tp_btf/mark_victim (task, uid)"
						      : "tp_btf/mark_victim (pid; no RSS)";
		any |= w->info.live[t];
	}
	btf__free(btf);
	if (!any) {
		*out = w;
		return 0;
	}
	/* open and configure; libbpf's messages only with DWLEAK_DEBUG while
	 * the watcher loads (WHY says what failed), the caller's printer
	 * back afterwards (bpf/probes.c sets its own) */
	old_print = libbpf_set_print(libbpf_quiet);
	w->skel = watch_bpf__open();
	if (!w->skel) {
		err = -errno;
		snprintf(why, whylen, "cannot open the watcher's BPF object: %s", strerror(errno));
		goto fail;
	}
	progs[WATCH_EVENT_EXEC] = w->skel->progs.watch_exec;
	progs[WATCH_EVENT_EXIT] = w->skel->progs.watch_exit;
	progs[WATCH_EVENT_VICTIM] = shape == VICTIM_PID ? w->skel->progs.watch_victim_pid : w->skel->progs.watch_victim;
	progs[WATCH_EVENT_FORK] = w->skel->progs.watch_fork;
	bpf_program__set_autoload(w->skel->progs.watch_victim, false);
	bpf_program__set_autoload(w->skel->progs.watch_victim_pid, false);
	for (t = 0; t < WATCH_EVENT_COUNT; t++)
		bpf_program__set_autoload(progs[t], w->info.live[t]);
	w->skel->rodata->exit_all = s->exit_all;
	/* load */
	err = watch_bpf__load(w->skel);
	if (err) {
		snprintf(why, whylen, "the kernel refused the watcher's BPF programs: %s (DWLEAK_DEBUG=1 says why)",
			 strerror(-err));
		goto fail;
	}
	/* attach, each on its own: one the kernel refuses is left out */
	for (t = 0; t < WATCH_EVENT_COUNT; t++) {
		struct bpf_link *l;

		if (!w->info.live[t])
			continue;
		l = bpf_program__attach(progs[t]);
		if (!l) {
			w->info.live[t] = false;
			w->info.how[t] = "its BTF tracepoint would not attach";
			continue;
		}
		/* the skeleton destroys the links it holds */
		if (t == WATCH_EVENT_EXEC)
			w->skel->links.watch_exec = l;
		else if (t == WATCH_EVENT_EXIT)
			w->skel->links.watch_exit = l;
		else if (t == WATCH_EVENT_FORK)
			w->skel->links.watch_fork = l;
		else if (shape == VICTIM_PID)
			w->skel->links.watch_victim_pid = l;
		else
			w->skel->links.watch_victim = l;
	}
	w->rb = ring_buffer__new(bpf_map__fd(w->skel->maps.watch_events), ring_event, w, NULL);
	if (!w->rb) {
		err = -errno;
		snprintf(why, whylen, "cannot read the watcher's ring buffer: %s", strerror(errno));
		goto fail;
	}
	libbpf_set_print(old_print);
	*out = w;
	return 0;
fail:
	libbpf_set_print(old_print);
	watch_close(w);
	return err;
}

void watch_info_get(const struct watch *w, struct watch_info *out)
{
	*out = w->info;
}

int watch_fd(const struct watch *w)
{
	return w->rb ? ring_buffer__epoll_fd(w->rb) : -1;
}

int watch_consume(struct watch *w)
{
	return w->rb ? ring_buffer__consume(w->rb) : 0;
}

int watch_pid_add(struct watch *w, pid_t pid)
{
	__u32 key = (__u32)pid;
	__u8 one = 1;

	if (!w->skel)
		return 0;
	if (bpf_map_update_elem(bpf_map__fd(w->skel->maps.watch_pids), &key, &one, BPF_ANY))
		return errno == E2BIG || errno == ENOMEM ? -E2BIG : -errno;
	return 0;
}

int watch_pid_remove(struct watch *w, pid_t pid)
{
	__u32 key = (__u32)pid;

	if (!w->skel)
		return 0;
	if (bpf_map_delete_elem(bpf_map__fd(w->skel->maps.watch_pids), &key))
		return -errno;
	return 0;
}

int watch_lost_read(const struct watch *w, uint64_t lost[WATCH_EVENT_COUNT])
{
	int ncpu = libbpf_num_possible_cpus();
	__u64 *v;

	memset(lost, 0, WATCH_EVENT_COUNT * sizeof(*lost));
	if (!w->skel)
		return 0;
	if (ncpu <= 0)
		return ncpu ? ncpu : -EINVAL;
	v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (__u32 t = 0; t < WATCH_EVENT_COUNT; t++) {
		if (bpf_map_lookup_elem(bpf_map__fd(w->skel->maps.watch_lost), &t, v)) {
			int err = -errno;

			free(v);
			return err;
		}
		for (int c = 0; c < ncpu; c++)
			lost[t] += v[c];
	}
	free(v);
	return 0;
}

void watch_close(struct watch *w)
{
	if (!w)
		return;
	ring_buffer__free(w->rb);
	watch_bpf__destroy(w->skel);
	free(w);
}
