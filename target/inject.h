/* Loading the preload library into a running process that was not
 * started with it (issue 22): a thread of the process, stopped alone at a
 * safe point while the others run on, makes one call of pthread_create;
 * the new thread dlopen()s the library and calls its entry, which routes
 * the process's allocator calls through it (preload/route.c).  From then
 * on the process is traced at the library's sites as one started with
 * LD_PRELOAD (target/preload_sites.h: preload_sites_find_injected).
 *
 * Contract with the caller (the session):
 * - it holds no ptrace on PID while calling (the injector seizes one
 *   thread at a time itself, and detaches it before returning);
 * - on 0 the library is loaded and routing was done once (the control
 *   block's route_* counts say how completely); on -EEXIST it was there
 *   already (LD_PRELOAD'ed or injected before): use its sites as they are;
 * - on any other error nothing of the library is in the process and the
 *   caller falls back to uprobes, saying RESULT.reason; the process runs
 *   on untouched but for, at most, one page of its memory (the injector's
 *   data) and a private copy of one page of code (see inject.c).
 * The process's thread is never left stopped, and a SIGKILL of the
 * caller at any moment leaves it running as before (inject.c says how). */
#ifndef DWLEAK_INJECT_H
#define DWLEAK_INJECT_H

#include <stdint.h>
#include <sys/types.h>

/* The steps, for the test hook (inject_opts.pause). */
enum inject_phase {
	INJECT_PHASE_STOPPED,  /* a thread stopped, its state saved, nothing changed yet */
	INJECT_PHASE_SYSCALL,  /* the thread inside the injected mmap (its entry stop) */
	INJECT_PHASE_CALLING,  /* the thread about to run pthread_create */
	INJECT_PHASE_RESTORED, /* the thread restored and detached, the library loading */
};

struct inject_opts {
	unsigned safe_point_ms; /* how long to look for a thread at a safe point (0: 3000) */
	unsigned call_ms;	/* how long pthread_create may take in it (0: 5000) */
	unsigned load_ms;	/* how long the new thread may take to load and route (0: 10000) */
	/* test hook: called at each phase (NULL: none); a test pauses or
	 * kills the injector there */
	void (*pause)(void *arg, enum inject_phase phase, pid_t tid);
	void *pause_arg;
};

struct inject_result {
	char *reason;	    /* malloc'd: why it failed or was refused (NULL on success) */
	pid_t tid;	    /* the thread that made the call (0: none) */
	unsigned threads_tried; /* thread stops the search made */
	uint64_t lib_base;  /* where the library is mapped (its first mapping) */
	int entry_rc;	    /* what dwleak_injected_start returned */
	double ms_total;    /* the whole injection, checks included */
	double ms_stopped;  /* how long the chosen thread was stopped (the call excluded) */
	double ms_call;	    /* pthread_create in the thread, until it was restored */
	double ms_load;	    /* the wait, once the thread is put back, until the new thread's
			     * dlopen and routing have ended (they start with the call,
			     * so most of them is often over by then) */
};

/*
 * Loads the library at LIBRARY_PATH (absolute; root's, not writable by
 * anyone else, as every directory above it but a sticky one of root's,
 * such as /tmp) into process PID and routes
 * its allocator calls through it.  OPTS may be NULL.  Fills *RES (free
 * its reason with inject_result_free).  Returns 0, or a negative errno
 * with RES->reason saying why:
 *   -EEXIST   the library is loaded already;
 *   -ENOTSUP  refused: a static program, no glibc >= 2.34 (musl, older),
 *             setuid/setgid/capabilities (AT_SECURE), shadow stacks,
 *             another mount namespace, a seccomp filter that would stop
 *             the injection (strict mode included), an unsafe library file,
 *             a program that defines malloc itself;
 *   -EBUSY    another tracer holds a thread; the process is stopped; no
 *             thread reached a safe point in time (why for each);
 *   -ETIMEDOUT the call or the load did not end in time (the thread then
 *             resumes by itself once it returns; the library may still load);
 *   -EPROTO   the load failed in the process (dlopen's message, no entry,
 *             the entry's error);
 *   -ESRCH, -EPERM, -ENOMEM, -EIO as usual.
 */
int inject_library(pid_t pid, const char *library_path, const struct inject_opts *opts, struct inject_result *res);

void inject_result_free(struct inject_result *res);

#endif
