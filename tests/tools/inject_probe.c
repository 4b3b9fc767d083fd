/* The injector's test driver (tests/inject.sh, bench/run_inject_bench.sh):
 * target/inject.h and the injected library's control block, without BPF
 * and without the CLI.
 *
 *   inject_probe inject PID LIB [--pause-at PHASE] [--safe-ms N] [--load-ms N]
 *       load LIB into PID; prints "inject: ok tid=... ms=..." and the
 *       routing counts, or "inject: error NAME: reason" (exit 1; exit 3
 *       for EEXIST).  --pause-at stopped|syscall|calling|restored: print
 *       "inject: paused at PHASE" there and sleep (a test kills it).
 *   inject_probe counts PID      the control block: fired and route_* counts,
 *       and ring_records, the records its rings of walked records hold
 *       written (their headers' counts, every live ring)
 *   inject_probe arm PID         both semaphores to 1 and a new generation
 *       (exact mode): the sites "fire" (NOPs without a probe) and count
 *   inject_probe disarm PID      both semaphores back to 0
 *   inject_probe reroute PID     a route request (honoured at the next traced call)
 * Only this program prints; the library's path in the process is found by
 * its file name (DWLEAK_PRELOAD_NAME). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "inject.h"
#include "objects.h"
#include "preload.h"
#include "preload_sites.h"
#include "walk_ring_read.h"

static const char *const phase_names[] = { "stopped", "syscall", "calling", "restored" };
static int pause_at = -1;

static void pause_hook(void *arg, enum inject_phase p, pid_t tid)
{
	(void)arg;
	if ((int)p != pause_at)
		return;
	printf("inject: paused at %s (thread %d)\n", phase_names[p], tid);
	fflush(stdout);
	for (;;)
		pause();
}

static int sites_of(pid_t pid, struct preload_sites *s)
{
	struct proc_objects o;
	char *why = NULL;
	int err = proc_objects_of_pid(pid, &o);

	if (err) {
		fprintf(stderr, "inject_probe: pid %d: %s\n", pid, strerror(-err));
		return err;
	}
	err = preload_sites_find_injected(o.paths, o.names, o.n, s, &why);
	if (err)
		fprintf(stderr, "inject_probe: pid %d: no usable library: %s\n", pid, why ? why : strerror(-err));
	free(why);
	proc_objects_free(&o);
	return err;
}

static int mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	return process_vm_readv(*(pid_t *)ctx, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -EFAULT;
}

static int record_skip(void *ctx, const struct walk_ring_rec *rec)
{
	(void)ctx;
	(void)rec;
	return 0;
}

static int counts(pid_t pid, const struct preload_sites *s)
{
	struct dwleak_preload_control c;
	struct walk_ring_drain *d = calloc(1, sizeof(*d));
	unsigned long long ring_records = 0;
	int err = d ? preload_control_read(pid, s, &c) : -ENOMEM;
	uint32_t i;

	if (err) {
		fprintf(stderr, "inject_probe: control block: %s\n", strerror(-err));
		free(d);
		return 1;
	}
	/* read only: no tail written back, nothing claimed */
	if (c.rings_addr && walk_ring_drain(mem_read, NULL, &pid, c.rings_addr, record_skip, NULL, d) >= 0)
		for (i = 0; i < d->n; i++)
			ring_records += d->ring[i].records;
	free(d);
	printf("fired_alloc=%llu fired_free=%llu injected=%u route_request=%u route_done=%u passes=%u objects=%u "
	       "slots=%llu deferred=%u unreadable=%u elsewhere=%u failed=%u ring_records=%llu\n",
	       (unsigned long long)c.fired_alloc, (unsigned long long)c.fired_free, c.injected, c.route_request,
	       c.route_done, c.route_passes, c.route_objects, (unsigned long long)c.route_slots, c.route_deferred,
	       c.route_unreadable, c.route_elsewhere, c.route_failed, ring_records);
	return 0;
}

static int arm(pid_t pid, const struct preload_sites *s, uint16_t on)
{
	uint64_t a = preload_file_addr(pid, s, s->alloc_sem_off, 2), f = preload_file_addr(pid, s, s->free_sem_off, 2);
	char path[64];
	int fd, err = 0;

	if (on && preload_control_write(pid, s, 0, false, false))
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || !a || !f || pwrite(fd, &on, 2, (off_t)a) != 2 || pwrite(fd, &on, 2, (off_t)f) != 2)
		err = 1;
	if (fd >= 0)
		close(fd);
	if (err)
		fprintf(stderr, "inject_probe: cannot write the semaphores\n");
	return err;
}

int main(int argc, char **argv)
{
	struct inject_opts o = { .pause = pause_hook };
	struct preload_sites s;
	pid_t pid;
	int i, err;

	if (argc < 3) {
		fprintf(stderr, "usage: inject_probe inject|counts|arm|disarm|reroute PID [LIB] [options]\n");
		return 2;
	}
	pid = atoi(argv[2]);
	if (!strcmp(argv[1], "inject")) {
		struct inject_result r;

		if (argc < 4)
			return 2;
		for (i = 4; i + 1 < argc; i += 2) {
			if (!strcmp(argv[i], "--pause-at")) {
				for (pause_at = 0; pause_at < 4 && strcmp(phase_names[pause_at], argv[i + 1]); pause_at++)
					;
			} else if (!strcmp(argv[i], "--safe-ms")) {
				o.safe_point_ms = (unsigned)atoi(argv[i + 1]);
			} else if (!strcmp(argv[i], "--load-ms")) {
				o.load_ms = (unsigned)atoi(argv[i + 1]);
			}
		}
		err = inject_library(pid, argv[3], &o, &r);
		if (err) {
			printf("inject: error %s: %s (thread %d, %u thread stops)\n", strerrorname_np(-err) ?: "?",
			       r.reason ? r.reason : "?", r.tid, r.threads_tried);
			inject_result_free(&r);
			return err == -EEXIST ? 3 : 1;
		}
		printf("inject: ok tid=%d tries=%u total_ms=%.2f stopped_ms=%.3f call_ms=%.3f load_ms=%.2f base=0x%llx\n",
		       r.tid, r.threads_tried, r.ms_total, r.ms_stopped, r.ms_call, r.ms_load,
		       (unsigned long long)r.lib_base);
		inject_result_free(&r);
		if (sites_of(pid, &s))
			return 1;
		err = counts(pid, &s);
		preload_sites_free(&s);
		return err;
	}
	if (sites_of(pid, &s))
		return 1;
	if (!strcmp(argv[1], "counts")) {
		err = counts(pid, &s);
	} else if (!strcmp(argv[1], "arm") || !strcmp(argv[1], "disarm")) {
		err = arm(pid, &s, !strcmp(argv[1], "arm"));
	} else if (!strcmp(argv[1], "reroute")) {
		err = preload_route_request(pid, &s);
		if (err) {
			fprintf(stderr, "inject_probe: route request: %s\n", strerror(-err));
			err = 1;
		}
	} else {
		err = 2;
	}
	preload_sites_free(&s);
	return err;
}
