/* The preload path of a session: LD_PRELOAD for -- CMD (the library
 * first, unless the program cannot take it), and what the libraries of
 * the processes traced at their sites counted. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf_symbols.h"
#include "preload.h"
#include "preload_env.h"
#include "preload_path.h"
#include "target.h"

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

char **session_preload_environ(const char *program, bool no_preload, bool mmap, char **base_env,
			       const struct session_log *log)
{
	const char *old = getenv("LD_PRELOAD"), *san;
	char *lib = NULL, *value = NULL, **envp;
	size_t n = 0, i, k = 0;
	int err;

	if (no_preload)
		return NULL;
	if (mmap) {
		session_say(log, SESSION_NOTE, "--mmap tells the allocator's own mmaps apart at its uprobes: not "
			    "preloading %s", DWLEAK_PRELOAD_NAME);
		return NULL;
	}
	err = preload_library_path(&lib);
	if (err) {
		session_say(log, SESSION_NOTE, "%s not found next to dwleak (DWLEAK_PRELOAD_LIB names it): tracing %s "
			    "with uprobes", DWLEAK_PRELOAD_NAME, program);
		return NULL;
	}
	san = sanitizer_of(program);
	if (san) {
		session_say(log, SESSION_NOTE, "%s is built with a sanitizer (it imports %s*), whose runtime must come "
			    "first in LD_PRELOAD: not preloading %s", program, san, DWLEAK_PRELOAD_NAME);
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
	while (base_env && base_env[n])
		n++;
	envp = value ? calloc(n + 2, sizeof(*envp)) : NULL;
	if (!envp) {
		free(value);
		session_say(log, SESSION_NOTE, "out of memory: tracing %s with uprobes", program);
		return NULL;
	}
	envp[k++] = value;
	for (i = 0; i < n; i++)
		if (strncmp(base_env[i], "LD_PRELOAD=", 11))
			envp[k++] = base_env[i];
	return envp;
}

void session_preload_environ_free(char **envp)
{
	if (envp)
		free(envp[0]); /* the LD_PRELOAD entry; the rest is BASE_ENV's */
	free(envp);
}

void preload_counts_read(const struct procs *ps, struct preload_counts *out)
{
	struct dwleak_preload_control c;
	size_t i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < ps->n; i++) {
		const struct proc *p = ps->v[i];

		if (!p->preload)
			continue;
		out->procs++;
		if (p->exited || preload_control_read(p->pid, &p->sites, &c))
			continue;
		out->read++;
		out->set_full += c.set_full;
		out->nested += c.nested;
	}
}
