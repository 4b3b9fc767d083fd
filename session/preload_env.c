/* The preload path of the trace: LD_PRELOAD for -- CMD, the choice
 * between a process's preload sites and uprobes, the control block
 * written before the sites are attached, and what the libraries counted. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_preload.h"
#include "elf_symbols.h"
#include "trace_preload.h"

extern char **environ;

struct sanitizer_ctx {
	const char *found;
};

static void sanitizer_import(void *arg, const char *name)
{
	static const char *const runtimes[] = { "__asan_", "__tsan_", "__msan_", "__hwasan_" };
	struct sanitizer_ctx *c = arg;
	size_t i;

	for (i = 0; !c->found && i < sizeof(runtimes) / sizeof(runtimes[0]); i++)
		if (!strncmp(name, runtimes[i], strlen(runtimes[i])))
			c->found = runtimes[i];
}

/* The sanitizer runtime PROG is built against ("__asan_"...), or NULL. */
static const char *sanitizer_of(const char *prog)
{
	struct sanitizer_ctx c = { NULL };
	char *path = target_which(prog);
	int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;

	free(path);
	if (fd < 0)
		return NULL;
	elf_symbols_imports(fd, sanitizer_import, &c);
	close(fd);
	return c.found;
}

char **trace_preload_environ(const struct env *env)
{
	const char *old = getenv("LD_PRELOAD"), *san;
	char *lib = NULL, *value = NULL, **envp;
	size_t n = 0, i, k = 0;
	int err;

	if (env->no_preload)
		return NULL;
	if (env->mmap) {
		fprintf(stderr, "dwleak: note: --mmap tells the allocator's own mmaps apart at its uprobes: not "
				"preloading %s\n", DWLEAK_PRELOAD_NAME);
		return NULL;
	}
	err = preload_library_path(&lib);
	if (err) {
		fprintf(stderr, "dwleak: note: %s not found next to dwleak (DWLEAK_PRELOAD_LIB names it): "
				"tracing %s with uprobes\n", DWLEAK_PRELOAD_NAME, env->cmd[0]);
		return NULL;
	}
	san = sanitizer_of(env->cmd[0]);
	if (san) {
		fprintf(stderr, "dwleak: note: %s is built with a sanitizer (it imports %s*), whose runtime "
				"must come first in LD_PRELOAD: not preloading %s\n", env->cmd[0], san,
			DWLEAK_PRELOAD_NAME);
		free(lib);
		return NULL;
	}
	/* already there (LD_PRELOAD=$(dwleak preload) dwleak -- CMD): as is */
	if (old && strstr(old, DWLEAK_PRELOAD_NAME)) {
		free(lib);
		return NULL;
	}
	if (asprintf(&value, "LD_PRELOAD=%s%s%s", lib, old && *old ? ":" : "", old ? old : "") < 0)
		value = NULL;
	free(lib);
	while (environ && environ[n])
		n++;
	envp = value ? calloc(n + 2, sizeof(*envp)) : NULL;
	if (!envp) {
		free(value);
		fprintf(stderr, "dwleak: note: out of memory: tracing %s with uprobes\n", env->cmd[0]);
		return NULL;
	}
	envp[k++] = value;
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11))
			envp[k++] = environ[i];
	return envp;
}

void trace_preload_environ_free(char **envp)
{
	if (envp)
		free(envp[0]); /* the LD_PRELOAD entry; the rest is dwleak's environ */
	free(envp);
}

/* The allocator functions P calls that the library does not see (a
 * pointer from dlsym): uprobes, as without the library. */
static int complement_attach(struct tracer *tr, struct proc *p)
{
	char what[PATH_MAX + 64] = "";
	struct allocator rest;
	size_t i, n = 0;
	int err = preload_complement(&p->alloc, &rest);

	if (err)
		return err;
	for (i = 0; i < rest.nobjs; i++)
		n += rest.objs[i].nfuncs;
	err = n ? probes_proc_attach(tr->probes, &p->pp, &rest, what, sizeof(what)) : 0;
	allocator_free(&rest);
	return err;
}

/* Writes P's control block and attaches its sites; on failure says why
 * and leaves P for uprobes.  Returns 0 or 1. */
static int sites_attach(struct tracer *tr, struct proc *p)
{
	int err = preload_control_write(p->pid, &p->sites, (uint64_t)tr->env->sample_bytes);

	err = err ?: complement_attach(tr, p);
	err = err ?: probes_proc_attach_preload(tr->probes, &p->pp, &p->sites,
						  preload_control_addr(p->pid, &p->sites));
	if (!err) {
		p->preload = true;
		return 0;
	}
	probes_proc_detach(tr->probes, &p->pp);
	fprintf(stderr, "dwleak: note: pid %d: cannot use the sites of %s (%s): tracing it with uprobes\n", p->pid,
		p->sites.name, strerror(-err));
	preload_sites_free(&p->sites);
	return 1;
}

int trace_preload_attach(struct tracer *tr, struct proc *p)
{
	char *why = NULL;
	int err;

	trace_preload_forget(p);
	/* --mmap tells the allocator's own mmaps from the program's by the
	 * allocator calls pending in the kernel program: uprobes only */
	if (tr->env->no_preload || tr->env->mmap)
		return 1;
	err = preload_sites_find(p->objs.paths, p->objs.names, p->objs.n, &p->sites, &why);
	if (err == -ENOENT)
		return 1;
	if (err == -ENOMEM)
		return err;
	if (err) {
		fprintf(stderr, "dwleak: note: pid %d has %s, but its sites would not see every allocator call: "
				"%s; tracing it with uprobes\n", p->pid, DWLEAK_PRELOAD_NAME, why ? why : "?");
		free(why);
		return 1;
	}
	return sites_attach(tr, p);
}

int trace_preload_fork(struct tracer *tr, const struct proc *parent, struct proc *child)
{
	trace_preload_forget(child);
	if (!parent->preload)
		return 1;
	if (preload_sites_copy(&child->sites, &parent->sites))
		return -ENOMEM;
	return sites_attach(tr, child);
}

void trace_preload_forget(struct proc *p)
{
	p->preload = false;
	preload_sites_free(&p->sites);
}

void trace_preload_say(struct tracer *tr)
{
	struct dwleak_preload_control c;
	uint64_t full = 0, nested = 0;
	size_t i, n = 0, read = 0;

	for (i = 0; i < tr->procs.n; i++) {
		struct proc *p = tr->procs.v[i];

		if (!p->preload)
			continue;
		n++;
		if (p->exited || preload_control_read(p->pid, &p->sites, &c))
			continue;
		read++;
		full += c.set_full;
		nested += c.nested;
	}
	if (full)
		fprintf(stderr, "dwleak: warning: the preload library could not remember %llu sampled allocations "
				"(no memory for its set of sampled blocks): they are not in the report\n",
			(unsigned long long)full);
	if (tr->env->stats && n)
		fprintf(stderr, "dwleak: stats: %zu process(es) traced at the preload library's sites; in the %zu "
				"still running: %llu calls nested in another allocator call, %llu sampled "
				"allocations not remembered\n", n, read, (unsigned long long)nested,
			(unsigned long long)full);
}
