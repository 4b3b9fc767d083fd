/* Symbolization of report frames with libdwfl, offline: each object gets its
 * own Dwfl (so its ELF addresses are its dwfl addresses up to one bias), is
 * read from an fd because the mapped file may be gone from disk, and keeps
 * a cache of resolved addresses because stacks of one report share frames.
 * What no local file has is fetched by build id through libdwfl's own
 * debuginfod client when the host turns lookups on, time-bounded, and
 * what is still missing is noted. */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <libelf.h>

#include "constants.h"
#include "demangle.h"
#include "symbol_alias.h"
#include "fd_snapshot.h"
#include "symbolize.h"

/* Where libdwfl looks by debuglink name before the user's dirs: the
 * object's dir, its .debug/ and the system root.  The leading '+' turns on
 * the CRC check of debuglink candidates so a stale file is never used. */
#define DEFAULT_DEBUGINFO_PATH "+:.debug:/usr/lib/debug"

#define MODULE_BUCKETS_MIN 16 /* power of two; grows with the module count */
#define ADDR_CACHE_MIN 64     /* power of two; grows at half load */

/*
 * One cached result.  USED marks a filled slot; FRAMES/N are the frames
 * sym_module_resolve() copies out for (ADDR, RETURN_ADDR).
 */
struct addr_entry {
	uint64_t addr;
	bool return_addr;
	bool used;
	struct sym_frame *frames;
	size_t n;
};

/*
 * An object and its Dwfl.  BIAS is what libdwfl adds to the object's ELF
 * addresses (0 for most, but offline reporting may place an ET_DYN higher).
 * BUILD_ID is NULL exactly when the object has none; then DEV/INO/SIZE/MTIME
 * identify the bytes.  CACHE is an open-addressed table of CACHE_CAP slots
 * (a power of two), at most half of them used.
 */
struct sym_module {
	struct sym_module *next; /* bucket chain */
	char *path;
	char *build_id;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	Dwarf_Addr bias;
	struct addr_entry *cache;
	size_t cache_cap;
	size_t cache_len;
	struct sym_aliases aliases;
	struct symbolizer *owner;
	bool debug_missing; /* the search for its separate debug file found none */
};

/*
 * CALLBACKS points at DEBUGINFO_PATH and must outlive every Dwfl made from
 * it, hence lives here.  MODULES is a chained hash table on the path with
 * N_BUCKETS (a power of two) buckets and N_MODULES entries.
 */
struct symbolizer {
	char *debuginfo_path;
	Dwfl_Callbacks callbacks;
	struct sym_module **modules;
	size_t n_buckets;
	size_t n_modules;
	struct sym_fetch fetch;	       /* debuginfod lookups: off until set */
	double fetch_spent_s;	       /* what the lookups took so far */
	debuginfod_client *client;     /* symbolizer_fetch_debuginfo()'s own, made on first use */
	struct sym_fetch_miss *misses; /* NMISSES of MISSES_CAP */
	size_t nmisses, misses_cap;
	struct sym_ahead *ahead;       /* symbolizer_prepare()'s, made on first use */
};

/*
 * Work done ahead (symbolizer_prepare, symbolizer_prepare_addr) by a
 * thread of the symbolizer's own while its owner goes on.  FILES: each
 * file handed once (its path and a dup of its fd, which the thread hands
 * to module_get; its module once opened); QUEUE: what the thread is yet
 * to do, from HEAD to N: open a file, or name an address of one into its
 * module's cache.  LOCK guards FILES, QUEUE, ACTIVE (the thread still
 * takes from the queue) and STOP (the owner wants the symbolizer back:
 * the thread ends after the item it does); JOINABLE and THREAD are the
 * owner's alone, and so are LAST_PATH/LAST_FD/LAST_FILE (the file the
 * last call named, found without a stat).  A file's FD is closed once its
 * module is opened (libdwfl has its own copy).
 */
struct sym_ahead_file {
	char *path;
	int fd;
	struct stat st;
	struct sym_module *mod; /* set by the thread once opened */
	bool failed;		/* module_get refused it */
};

struct sym_ahead_item {
	size_t file;
	uint64_t addr;
	bool resolve; /* name ADDR; else only open the file */
	bool return_addr;
};

struct sym_ahead {
	pthread_mutex_t lock;
	struct sym_ahead_file *files;
	size_t nfiles, files_cap;
	struct sym_ahead_item *queue;
	size_t head, n, cap;
	bool active, stop;
	bool joinable;
	pthread_t thread;
	const char *last_path;
	int last_fd;
	size_t last_file;
	bool servers; /* DEBUGINFOD_URLS named servers when A was made */
};

/* One lookup while it runs: the client's user data, for fetch_progress(). */
struct fetch_lookup {
	struct symbolizer *s;
	const char *path;
	double start;	/* CLOCK_MONOTONIC seconds */
	bool shown;	/* the host's progress was called */
	bool cancelled; /* by the symbolizer's bound */
};

/* A growing array of frames while one address is resolved. */
struct frame_list {
	struct sym_frame *v;
	size_t n;
	size_t cap;
};

static uint64_t hash_bytes(const void *p, size_t len, uint64_t h)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * FNV64_PRIME; /* FNV-1a */
	return h;
}

static uint64_t hash_path(const char *path)
{
	return hash_bytes(path, strlen(path), FNV64_OFFSET);
}

static uint64_t hash_addr(uint64_t addr, bool return_addr)
{
	uint64_t h = addr * 2 + return_addr;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

int debug_dirs_add(const char ***dirs, size_t *n, const char *dir)
{
	const char **g = realloc(*dirs, (*n + 2) * sizeof(*g));

	if (!g)
		return -ENOMEM;
	g[(*n)++] = dir;
	g[*n] = NULL;
	*dirs = g;
	return 0;
}

/* ---- debuginfod ---- */

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

const char *sym_fetch_why(int err)
{
	switch (err) {
	case -ENOENT:
		return "no server has it";
	case -ECONNREFUSED:
		return "connection refused (is the server up, is the URL right?)";
	case -EHOSTUNREACH:
		return "the server's host name is not known";
	case -ETIME:
	case -ETIMEDOUT:
		return "no answer in time (DEBUGINFOD_TIMEOUT, DEBUGINFOD_MAXTIME)";
	case -ECONNRESET:
		return "the connection broke off";
	case -EACCES:
		return "the server refused access";
	case -EFBIG:
		return "larger than DEBUGINFOD_MAXSIZE";
	case -EINVAL:
		return "a URL in DEBUGINFOD_URLS is malformed";
	case -ECANCELED:
		return "dwleak's time for debuginfod lookups was spent (DWLEAK_DEBUGINFOD_SECONDS)";
	case -ENOMEM:
		return "out of memory";
	default:
		return strerror(-err);
	}
}

int sym_fetch_miss_text(const struct sym_fetch_miss *m, char **out)
{
	if (asprintf(out, "%s of %s (build id %s) could not be fetched from DEBUGINFOD_URLS: %s; %s",
		     m->supplement ? "the dwz supplement of the debug information" : "debug information", m->path,
		     m->build_id, sym_fetch_why(m->err),
		     m->supplement ? "its frames may lack names of inlined calls and source lines"
				   : "its frames have no source lines, and names only from its own symbols") < 0) {
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int module_get(struct symbolizer *s, const char *path, int fd, struct sym_module **out);
static int sym_module_resolve_unlocked(struct sym_module *m, uint64_t addr, bool return_addr,
				       const struct sym_frame **frames, size_t *n, bool *owned);

/* Takes S back from its thread: the item the thread does is finished,
 * the rest of the queue dropped (a report names what it needs itself).
 * Every call on S but the two prepares begins with it. */
static void ahead_wait(const struct symbolizer *s)
{
	struct sym_ahead *a = s->ahead;

	if (!a || !a->joinable)
		return;
	pthread_mutex_lock(&a->lock);
	a->stop = true;
	pthread_mutex_unlock(&a->lock);
	/* waited for now: back to the CPU share of any thread (it may be gone) */
	pthread_setschedparam(a->thread, SCHED_OTHER, &(struct sched_param){ 0 });
	pthread_join(a->thread, NULL);
	a->joinable = false;
	/* the thread is gone: nothing else touches A now */
	a->head = a->n = 0;
	a->stop = false;
}

/* The thread: each queued item done as a report would do it (a file's
 * module, its symbol table and its DWARF: the debug file found and its
 * compressed sections inflated; an address named into its module's
 * cache), until the queue is empty or its owner wants S back. */
static void *ahead_run(void *arg)
{
	struct symbolizer *s = arg;
	struct sym_ahead *a = s->ahead;
	struct sym_ahead_item it;
	struct sym_ahead_file f;
	const struct sym_frame *shared;
	struct sym_module *m;
	Dwarf_Addr bias;
	size_t nf;
	bool owned;

	/* work ahead takes only a CPU nothing else wants: on two CPUs, a
	 * program busy on both is not slowed by it (the report does what is
	 * left when it comes) */
	pthread_setschedparam(pthread_self(), SCHED_IDLE, &(struct sched_param){ 0 });
	for (;;) {
		pthread_mutex_lock(&a->lock);
		if (a->stop || a->head == a->n) {
			a->active = false;
			pthread_mutex_unlock(&a->lock);
			return NULL;
		}
		it = a->queue[a->head++];
		f = a->files[it.file];
		pthread_mutex_unlock(&a->lock);
		m = f.mod;
		if (!m && !f.failed) {
			bool failed = module_get(s, f.path, f.fd, &m) != 0;

			if (!failed) {
				dwfl_module_getsymtab(m->mod);
				dwfl_module_getdwarf(m->mod, &bias);
			}
			pthread_mutex_lock(&a->lock);
			a->files[it.file].mod = failed ? NULL : m;
			a->files[it.file].failed = failed;
			close(a->files[it.file].fd); /* the module has its own copy */
			a->files[it.file].fd = -1;
			pthread_mutex_unlock(&a->lock);
		}
		if (m && it.resolve && !sym_module_resolve_unlocked(m, it.addr, it.return_addr, &shared, &nf, &owned) &&
		    owned)
			sym_frames_free((struct sym_frame *)shared, nf);
	}
}

static void *array_grow(void *v, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *w;

	if (need <= *cap)
		return v;
	while (n < need)
		n *= 2;
	w = realloc(v, n * size);
	if (w)
		*cap = n;
	return w;
}

/* The file PATH (FD) is in A's files: its index at *FILE; added (with a
 * dup of FD; *ADDED set) when it was not.  The last call's PATH pointer
 * and FD are taken for the same file without a stat: were they another
 * file's by now, addresses would be named into the wrong module's cache,
 * which wastes the work but names nothing wrong.  Returns 0 or a
 * negative errno. */
static int ahead_file(struct sym_ahead *a, const char *path, int fd, size_t *file, bool *added)
{
	struct sym_ahead_file f = { NULL, -1, { 0 }, NULL, false };
	void *grown;
	size_t i;

	*added = false;
	if (a->last_path == path && a->last_fd == fd && a->nfiles) {
		*file = a->last_file;
		return 0;
	}
	if (fstat(fd, &f.st))
		return -errno;
	/* the thread writes only MOD and FAILED: the rest is read unlocked */
	for (i = 0; i < a->nfiles; i++) {
		const struct stat *st = &a->files[i].st;

		if (st->st_dev == f.st.st_dev && st->st_ino == f.st.st_ino && st->st_size == f.st.st_size &&
		    st->st_mtim.tv_sec == f.st.st_mtim.tv_sec && st->st_mtim.tv_nsec == f.st.st_mtim.tv_nsec &&
		    !strcmp(a->files[i].path, path))
			break;
	}
	if (i == a->nfiles) {
		f.path = strdup(path);
		f.fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (!f.path || f.fd < 0) {
			int err = f.fd < 0 ? -errno : -ENOMEM;

			free(f.path);
			if (f.fd >= 0)
				close(f.fd);
			return err;
		}
		pthread_mutex_lock(&a->lock);
		grown = array_grow(a->files, &a->files_cap, a->nfiles + 1, sizeof(*a->files));
		if (grown) {
			a->files = grown;
			a->files[a->nfiles++] = f;
		}
		pthread_mutex_unlock(&a->lock);
		if (!grown) {
			free(f.path);
			close(f.fd);
			return -ENOMEM;
		}
		*added = true;
	}
	a->last_path = path;
	a->last_fd = fd;
	a->last_file = *file = i;
	return 0;
}

/* Items waiting at most: 24 MiB.  Past it an address is not queued (the
 * thread runs on idle CPU only, and a busy machine may give it none while
 * a service makes new stacks for days); the report names it when it
 * comes, as it names everything the thread did not: nothing is lost. */
#define AHEAD_QUEUE_MAX (1u << 20)

/* Queues IT, starting the thread when none takes from the queue. */
static int ahead_queue(struct symbolizer *s, const struct sym_ahead_item *it)
{
	struct sym_ahead *a = s->ahead;
	bool start;
	void *grown;

	pthread_mutex_lock(&a->lock);
	if (a->head == a->n)
		a->head = a->n = 0;
	if (it->resolve && a->n - a->head >= AHEAD_QUEUE_MAX) {
		pthread_mutex_unlock(&a->lock);
		return 0;
	}
	if (a->head > a->cap / 2) { /* the taken half reused */
		memmove(a->queue, a->queue + a->head, (a->n - a->head) * sizeof(*a->queue));
		a->n -= a->head;
		a->head = 0;
	}
	grown = array_grow(a->queue, &a->cap, a->n + 1, sizeof(*a->queue));
	if (grown) {
		a->queue = grown;
		a->queue[a->n++] = *it;
	}
	start = grown && !a->active;
	if (start)
		a->active = true;
	pthread_mutex_unlock(&a->lock);
	if (!grown)
		return -ENOMEM;
	if (!start)
		return 0; /* the running thread takes it */
	if (a->joinable) /* ended (ACTIVE was false), perhaps still returning */
		pthread_join(a->thread, NULL);
	a->joinable = !pthread_create(&a->thread, NULL, ahead_run, s);
	if (!a->joinable) {
		pthread_mutex_lock(&a->lock);
		a->active = false;
		a->head = a->n = 0;
		pthread_mutex_unlock(&a->lock);
		return -EAGAIN;
	}
	return 0;
}

/* What both prepares do: PATH's file known (FILE; ADDED: new), or why
 * not (-ECANCELED: lookups are on). */
static int ahead_begin(struct symbolizer *s, const char *path, int fd, size_t *file, bool *added)
{
	struct sym_ahead *a = s->ahead;

	if (!a) {
		const char *urls = getenv("DEBUGINFOD_URLS"); /* read once: this runs for every frame */

		a = calloc(1, sizeof(*a));
		if (!a || pthread_mutex_init(&a->lock, NULL)) {
			free(a);
			return -ENOMEM;
		}
		a->last_fd = -1;
		a->servers = urls && *urls;
		s->ahead = a;
	}
	/* a server is asked when a report is made, never while the traced
	 * command runs */
	if (s->fetch.on || a->servers)
		return -ECANCELED;
	return ahead_file(a, path, fd, file, added);
}

int symbolizer_prepare(struct symbolizer *s, const char *path, int fd)
{
	struct sym_ahead_item it = { 0 };
	bool added;
	int err = ahead_begin(s, path, fd, &it.file, &added);

	if (err)
		return err == -ECANCELED ? 0 : err;
	return added ? ahead_queue(s, &it) : 0; /* each file opened ahead once */
}

int symbolizer_prepare_addr(struct symbolizer *s, const char *path, int fd, uint64_t addr, bool return_addr)
{
	struct sym_ahead_item it = { .addr = addr, .resolve = true, .return_addr = return_addr };
	bool added;
	int err = ahead_begin(s, path, fd, &it.file, &added);

	if (err)
		return err == -ECANCELED ? 0 : err;
	return ahead_queue(s, &it);
}

void symbolizer_set_fetch(struct symbolizer *s, const struct sym_fetch *f)
{
	ahead_wait(s);
	s->fetch = *f;
}

size_t symbolizer_fetch_misses(const struct symbolizer *s, const struct sym_fetch_miss **out)
{
	ahead_wait(s);
	*out = s->misses;
	return s->nmisses;
}

/* Notes that the lookup of PATH's (BUILD_ID's) debug file or SUPPLEMENT
 * found nothing, for ERR; once per build id and kind.  A note that cannot
 * be kept for want of memory is let go: the frames say it all the same. */
static void miss_note(struct symbolizer *s, const char *path, const char *build_id, bool supplement, int err)
{
	struct sym_fetch_miss *m;

	for (size_t i = 0; i < s->nmisses; i++)
		if (s->misses[i].supplement == supplement && !strcmp(s->misses[i].build_id, build_id))
			return;
	if (s->nmisses == s->misses_cap) {
		size_t cap = s->misses_cap ? 2 * s->misses_cap : 8;

		m = realloc(s->misses, cap * sizeof(*m));
		if (!m)
			return;
		s->misses = m;
		s->misses_cap = cap;
	}
	m = &s->misses[s->nmisses];
	m->path = strdup(path);
	m->build_id = strdup(build_id);
	m->supplement = supplement;
	m->err = err;
	if (!m->path || !m->build_id) {
		free(m->path);
		free(m->build_id);
		return;
	}
	s->nmisses++;
}

/* libdebuginfod's progress callback, at least once a second while a
 * lookup runs: A is the bytes received once a server answers (before,
 * a count of waits), B the size when the server said it.  Returns
 * nonzero to cancel the lookup, once the symbolizer's bound is spent. */
static int fetch_progress(debuginfod_client *c, long a, long b)
{
	struct fetch_lookup *l = debuginfod_get_user_data(c);
	double took;

	if (!l)
		return 0;
	took = now_s() - l->start;
	if (l->s->fetch_spent_s + took >= l->s->fetch.seconds) {
		l->cancelled = true;
		return 1;
	}
	if (l->s->fetch.progress) {
		l->s->fetch.progress(l->s->fetch.arg, l->path, took, b > 0 ? a : 0, b > 0 ? b : 0);
		l->shown = true;
	}
	return 0;
}

/* Readies client C for a lookup of PATH's into L. */
static void fetch_begin(struct symbolizer *s, debuginfod_client *c, const char *path, struct fetch_lookup *l)
{
	*l = (struct fetch_lookup){ .s = s, .path = path, .start = now_s() };
	debuginfod_set_progressfn(c, fetch_progress);
	debuginfod_set_user_data(c, l);
}

/* Ends lookup L on client C, which gave FD: the time counted, the host
 * told, a failure noted for BUILD_ID (SUPPLEMENT: see miss_note()). */
static void fetch_end(debuginfod_client *c, struct fetch_lookup *l, int fd, const char *build_id, bool supplement)
{
	struct symbolizer *s = l->s;

	debuginfod_set_user_data(c, NULL);
	s->fetch_spent_s += now_s() - l->start;
	if (l->shown && s->fetch.done)
		s->fetch.done(s->fetch.arg);
	if (fd >= 0)
		return;
	/* libdwfl gives -1 for "not found" when no lookup could be made */
	miss_note(s, l->path, build_id, supplement, l->cancelled ? -ECANCELED : fd < -1 ? fd : -ENOENT);
}

int symbolizer_fetch_debuginfo(struct symbolizer *s, const char *path, const char *build_id, char **file)
{
	struct fetch_lookup l;
	int fd;

	ahead_wait(s);
	*file = NULL;
	if (!s->fetch.on)
		return -ENOSYS;
	if (!build_id[0] || strspn(build_id, "0123456789abcdef") != strlen(build_id))
		return -EINVAL;
	if (!s->client) {
		s->client = debuginfod_begin();
		if (!s->client)
			return -ENOMEM;
	}
	fetch_begin(s, s->client, path, &l);
	/* a length of 0: the build id is given as hex */
	fd = debuginfod_find_debuginfo(s->client, (const unsigned char *)build_id, 0, file);
	fetch_end(s->client, &l, fd, build_id, false);
	if (fd < 0)
		return l.cancelled ? -ECANCELED : fd;
	close(fd);
	return *file ? 0 : -ENOMEM;
}

/* ---- Finding separate debug files ---- */

/* libdwfl's own search for separate debug files, whose find it gets as a
 * copy (fd_snapshot): a debug file beside a user's program is the user's
 * to truncate while we read it.  The search ends with libdwfl's debuginfod
 * client when DEBUGINFOD_URLS is set; with lookups on, that client is
 * given the progress callback and its failures are noted.
 *
 * libdwfl asks for the debug file once for the symbol table and once for
 * DWARF when the first search failed: the second gets the same answer
 * without a search.  It asks for a dwz supplement with the supplement's
 * path as DEBUGLINK_FILE and no CRC (a .gnu_debuglink always has one). */
static int find_debuginfo_snapshot(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
				   const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
				   char **debuginfo_file_name)
{
	struct sym_module *m = userdata ? *userdata : NULL;
	bool supplement = debuglink_file && !debuglink_crc;
	debuginfod_client *c = NULL;
	struct fetch_lookup l;
	int fd, copy;

	if (m && !supplement && m->debug_missing)
		return -1;
	if (m && m->build_id && m->owner->fetch.on)
		c = dwfl_get_debuginfod_client(m->dwfl);
	if (c)
		fetch_begin(m->owner, c, m->path, &l);
	fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
					  debuglink_crc, debuginfo_file_name);
	if (c)
		fetch_end(c, &l, fd, m->build_id, supplement);
	if (m && !supplement && fd < 0)
		m->debug_missing = true;
	if (fd < 0)
		return fd;
	copy = fd_snapshot(fd);
	close(fd);
	return copy >= 0 ? copy : -1;
}

int symbolizer_new(const char *const *debug_dirs, struct symbolizer **out)
{
	struct symbolizer *s;
	size_t len = strlen(DEFAULT_DEBUGINFO_PATH) + 1;
	char *cwd = NULL;
	int err = -ENOMEM;

	*out = NULL;
	elf_version(EV_CURRENT);
	for (size_t i = 0; debug_dirs && debug_dirs[i]; i++) {
		if (!debug_dirs[i][0] || strchr(debug_dirs[i], ':'))
			return -EINVAL;
		/* Relative dirs become absolute: libdwfl would read them as
		 * subdirs of each object's dir and skip them for build ids. */
		if (debug_dirs[i][0] != '/' && !cwd) {
			cwd = getcwd(NULL, 0);
			if (!cwd)
				return -errno;
			if (strchr(cwd, ':')) {
				free(cwd);
				return -EINVAL;
			}
		}
		len += strlen(debug_dirs[i]) + 2 + (debug_dirs[i][0] != '/' ? strlen(cwd) : 0);
	}

	s = calloc(1, sizeof(*s));
	if (!s)
		goto out;
	s->debuginfo_path = malloc(len);
	s->n_buckets = MODULE_BUCKETS_MIN;
	s->modules = calloc(s->n_buckets, sizeof(*s->modules));
	if (!s->debuginfo_path || !s->modules)
		goto out;
	strcpy(s->debuginfo_path, DEFAULT_DEBUGINFO_PATH);
	for (size_t i = 0; debug_dirs && debug_dirs[i]; i++) {
		strcat(s->debuginfo_path, ":");
		if (debug_dirs[i][0] != '/') {
			strcat(s->debuginfo_path, cwd);
			strcat(s->debuginfo_path, "/");
		}
		strcat(s->debuginfo_path, debug_dirs[i]);
	}

	s->callbacks.find_elf = dwfl_build_id_find_elf;
	s->callbacks.find_debuginfo = find_debuginfo_snapshot;
	s->callbacks.section_address = dwfl_offline_section_address;
	s->callbacks.debuginfo_path = &s->debuginfo_path;
	*out = s;
	s = NULL;
	err = 0;
out:
	symbolizer_free(s);
	free(cwd);
	return err;
}

static void module_free(struct sym_module *m)
{
	for (size_t i = 0; i < m->cache_cap; i++)
		if (m->cache[i].used)
			sym_frames_free(m->cache[i].frames, m->cache[i].n);
	free(m->cache);
	sym_aliases_free(&m->aliases);
	if (m->dwfl)
		dwfl_end(m->dwfl); /* closes the fd libdwfl consumed */
	free(m->build_id);
	free(m->path);
	free(m);
}

void symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return;
	ahead_wait(s);
	if (s->ahead) {
		for (size_t i = 0; i < s->ahead->nfiles; i++) {
			free(s->ahead->files[i].path);
			if (s->ahead->files[i].fd >= 0)
				close(s->ahead->files[i].fd);
		}
		pthread_mutex_destroy(&s->ahead->lock);
		free(s->ahead->files);
		free(s->ahead->queue);
		free(s->ahead);
	}
	for (size_t b = 0; s->modules && b < s->n_buckets; b++) {
		struct sym_module *m = s->modules[b], *next;

		for (; m; m = next) {
			next = m->next;
			module_free(m);
		}
	}
	free(s->modules);
	free(s->debuginfo_path);
	if (s->client)
		debuginfod_end(s->client);
	for (size_t i = 0; i < s->nmisses; i++) {
		free(s->misses[i].path);
		free(s->misses[i].build_id);
	}
	free(s->misses);
	free(s);
}

/*
 * Reads the build id of the ELF object at FD as hex into *OUT (NULL when it
 * has none).  Returns 0, -ENOEXEC when FD is not ELF, -ENOMEM.
 */
static int read_build_id(int fd, char **out)
{
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL); /* read, not mapped: no SIGBUS */
	const void *bits;
	ssize_t len;
	int err = 0;

	*out = NULL;
	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out;
	}
	len = dwelf_elf_gnu_build_id(elf, &bits);
	if (len > 0) {
		const unsigned char *b = bits;

		*out = malloc(len * 2 + 1);
		if (!*out) {
			err = -ENOMEM;
			goto out;
		}
		for (ssize_t i = 0; i < len; i++)
			sprintf(*out + i * 2, "%02x", b[i]);
	}
out:
	elf_end(elf);
	return err;
}

/* Whether M was made from the file ST describes, unchanged since. */
static bool module_same_file(const struct sym_module *m, const struct stat *st)
{
	return m->dev == st->st_dev && m->ino == st->st_ino && m->size == st->st_size &&
	       m->mtime.tv_sec == st->st_mtim.tv_sec && m->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

static bool module_matches(const struct sym_module *m, const char *path, const char *build_id,
			   const struct stat *st)
{
	if (strcmp(m->path, path) != 0)
		return false;
	if (m->build_id || build_id)
		return m->build_id && build_id && strcmp(m->build_id, build_id) == 0;
	return module_same_file(m, st);
}

/* Doubles the module table when it gets as many modules as buckets. */
static void modules_grow(struct symbolizer *s)
{
	size_t n = s->n_buckets * 2;
	struct sym_module **t = calloc(n, sizeof(*t));

	if (!t)
		return; /* longer chains, still correct */
	for (size_t b = 0; b < s->n_buckets; b++) {
		struct sym_module *m = s->modules[b], *next;

		for (; m; m = next) {
			size_t nb = hash_path(m->path) & (n - 1);

			next = m->next;
			m->next = t[nb];
			t[nb] = m;
		}
	}
	free(s->modules);
	s->modules = t;
	s->n_buckets = n;
}

/*
 * Hands FD to a new Dwfl for M.  Sets *CONSUMED once libdwfl owns FD
 * (dwfl_end() closes it, even when a later step fails); until then FD is
 * still the caller's.
 */
static int module_report(struct symbolizer *s, struct sym_module *m, int fd, bool *consumed)
{
	void **userdata;

	*consumed = false;
	m->owner = s;
	m->dwfl = dwfl_begin(&s->callbacks);
	if (!m->dwfl)
		return -ENOMEM;
	/* The name and the file name are both PATH: libdwfl looks for
	 * debuglink files next to the file name, while FD gives the bytes. */
	m->mod = dwfl_report_offline(m->dwfl, m->path, m->path, fd);
	if (!m->mod)
		return -ENOEXEC;
	*consumed = true;
	/* the module's user data is M, for find_debuginfo_snapshot() */
	dwfl_module_info(m->mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	*userdata = m;
	if (dwfl_report_end(m->dwfl, NULL, NULL) != 0)
		return -ENOEXEC;
	if (!dwfl_module_getelf(m->mod, &m->bias))
		return -ENOEXEC;
	return 0;
}

int symbolizer_module(struct symbolizer *s, const char *path, int fd, struct sym_module **out)
{
	ahead_wait(s);
	return module_get(s, path, fd, out);
}

static int module_get(struct symbolizer *s, const char *path, int fd, struct sym_module **out)
{
	struct sym_module *m = NULL;
	char *build_id = NULL;
	struct stat st;
	size_t bucket;
	bool consumed;
	int own_fd, err;

	*out = NULL;
	/* the same file as a module already made (path, device, inode, size
	 * and mtime) has its build id: found without reading the ELF again,
	 * which a report does for every frame */
	if (fd >= 0 ? fstat(fd, &st) : stat(path, &st))
		return -errno;
	bucket = hash_path(path) & (s->n_buckets - 1);
	for (m = s->modules[bucket]; m; m = m->next) {
		if (!strcmp(m->path, path) && module_same_file(m, &st)) {
			*out = m;
			return 0;
		}
	}
	m = NULL;
	/* libdwfl maps what it reads: it gets a copy its owner cannot truncate */
	if (fd >= 0) {
		own_fd = fd_snapshot(fd);
	} else {
		int path_fd = open(path, O_RDONLY | O_CLOEXEC);

		own_fd = path_fd < 0 ? -errno : fd_snapshot(path_fd);
		if (path_fd >= 0)
			close(path_fd);
	}
	if (own_fd < 0)
		return own_fd == -EINVAL ? -ENOEXEC : own_fd;
	err = read_build_id(own_fd, &build_id);
	if (err)
		goto fail;

	for (m = s->modules[bucket]; m; m = m->next) {
		if (module_matches(m, path, build_id, &st)) {
			close(own_fd);
			free(build_id);
			*out = m;
			return 0;
		}
	}

	err = -ENOMEM;
	m = calloc(1, sizeof(*m));
	if (!m)
		goto fail;
	m->path = strdup(path);
	if (!m->path)
		goto fail;
	m->build_id = build_id;
	build_id = NULL;
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	m->size = st.st_size;
	m->mtime = st.st_mtim;
	err = module_report(s, m, own_fd, &consumed);
	if (consumed)
		own_fd = -1; /* now libdwfl's */
	if (err)
		goto fail;

	m->next = s->modules[bucket];
	s->modules[bucket] = m;
	if (++s->n_modules > s->n_buckets)
		modules_grow(s);
	*out = m;
	return 0;
fail:
	if (m)
		module_free(m);
	free(build_id);
	if (own_fd >= 0)
		close(own_fd);
	return err;
}

const char *sym_module_path(const struct sym_module *m)
{
	return m->path;
}

const char *sym_module_build_id(const struct sym_module *m)
{
	return m->build_id;
}

void sym_frames_free(struct sym_frame *frames, size_t n)
{
	if (!frames)
		return;
	for (size_t i = 0; i < n; i++) {
		free(frames[i].function);
		free(frames[i].symbol);
		free(frames[i].file);
	}
	free(frames);
}

/* A malloc'd copy of NAME as reports show it (symbol_demangle()).
 * *OK is set false on allocation failure (NAME NULL gives NULL, ok). */
static char *name_dup(const char *name, bool *ok)
{
	char *r;

	if (symbol_demangle(name, &r))
		*ok = false;
	return r;
}

static char *str_dup(const char *s, bool *ok)
{
	char *r;

	if (!s)
		return NULL;
	r = strdup(s);
	if (!r)
		*ok = false;
	return r;
}

/* A malloc'd copy of SYMBOL without its version, or NULL when that is
 * FUNCTION (demangled already), to keep one string where C names need no
 * other.  *OK is set false on allocation failure. */
static char *symbol_dup(const char *symbol, const char *function, bool *ok)
{
	char *r;

	if (symbol_unversioned(symbol, &r))
		*ok = false;
	if (r && function && !strcmp(r, function)) {
		free(r);
		r = NULL;
	}
	return r;
}

/* Appends a frame with copies of FUNCTION (demangled), SYMBOL (as it is,
 * see struct sym_frame) and FILE. */
static int frames_push(struct frame_list *fl, const char *function, const char *symbol,
		       uint64_t offset, const char *file, int line, bool inlined)
{
	struct sym_frame *f;
	bool ok = true;

	if (fl->n == fl->cap) {
		size_t cap = fl->cap ? fl->cap * 2 : 4;
		struct sym_frame *v = realloc(fl->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		fl->v = v;
		fl->cap = cap;
	}
	f = &fl->v[fl->n];
	f->function = name_dup(function, &ok);
	f->symbol = symbol_dup(symbol, f->function, &ok);
	f->offset = offset;
	f->file = str_dup(file, &ok);
	f->line = line > 0 ? line : 0;
	f->inlined = inlined;
	fl->n++;
	return ok ? 0 : -ENOMEM;
}

/*
 * The C++ or Rust linkage name of a subprogram or inlined instance
 * (demangled later, so names carry scope and parameters the way
 * addr2line -C prints them), else its DW_AT_name when NAME_OK, each looked up through
 * DW_AT_abstract_origin and DW_AT_specification.  A linkage name that is
 * not mangled is an asm label (glibc's __GI___libc_malloc for malloc) and
 * is passed over: the public name is what users know.
 */
static const char *die_function_name(Dwarf_Die *die, bool name_ok)
{
	static const unsigned int linkage_attrs[] = {
		DW_AT_linkage_name,
		DW_AT_MIPS_linkage_name,
	};
	Dwarf_Attribute attr;

	for (size_t i = 0; i < sizeof(linkage_attrs) / sizeof(linkage_attrs[0]); i++) {
		const char *name =
			dwarf_formstring(dwarf_attr_integrate(die, linkage_attrs[i], &attr));

		if (symbol_is_mangled(name))
			return name;
	}
	return name_ok ? dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr)) : NULL;
}

static bool die_udata(Dwarf_Die *die, unsigned int name, Dwarf_Word *out)
{
	Dwarf_Attribute attr;

	return dwarf_formudata(dwarf_attr(die, name, &attr), out) == 0;
}


/*
 * The innermost subprogram, inlined subroutine or lexical block of CUDIE
 * that holds ADDR.  dwarf_getscopes finds nothing in gcc's LTO units (the
 * "<artificial>" unit whose inlined code refers into other units; libdw
 * 0.188, eu-addr2line shows the same), so this walks the tree itself.
 */
static bool innermost_scope(Dwarf_Die *cudie, Dwarf_Addr addr, Dwarf_Die *out)
{
	Dwarf_Die parent = *cudie, child;
	bool found = false, descended;
	int tag;

	do {
		descended = false;
		if (dwarf_child(&parent, &child) != 0)
			break;
		do {
			tag = dwarf_tag(&child);
			if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine &&
			    tag != DW_TAG_lexical_block)
				continue;
			if (dwarf_haspc(&child, addr) <= 0)
				continue;
			*out = child;
			parent = child;
			found = descended = true;
			break;
		} while (dwarf_siblingof(&child, &child) == 0);
	} while (descended);
	return found;
}

/*
 * Pushes the DWARF frames of dwfl address PC: one per inlined instance,
 * innermost first, then the containing subprogram.  FILE/LINE start as the
 * line table's position of PC and move to each inline's call site.  Sets
 * *REACHED when the chain ended in a physical function.
 *
 * Names follow addr2line: an inlined instance by its C++ linkage name or
 * DW_AT_name; the physical function by its C++ linkage name, else by its
 * ELF symbol SYMNAME (which, unlike DW_AT_name, carries C++ scope and
 * parameters for static functions, and is the public alias), else by
 * DW_AT_name.
 */
static int frames_push_dwarf(struct sym_module *m, Dwarf_Addr pc, const char *symname,
			     uint64_t offset, const char *file, int line,
			     struct frame_list *fl, bool *reached)
{
	Dwarf_Addr dwbias;
	Dwarf_Die *cudie = dwfl_module_addrdie(m->mod, pc, &dwbias);
	Dwarf_Die *scopes = NULL, innermost;
	Dwarf_Files *files = NULL;
	int nscopes, err = 0;

	*reached = false;
	if (!cudie)
		return 0;
	/* dwarf_getscopes() continues from an inlined instance into its
	 * abstract origin's parents; the concrete nesting - the chain of
	 * inlines - comes from the parents of the innermost scope. */
	nscopes = dwarf_getscopes(cudie, pc - dwbias, &scopes);
	if (nscopes > 0) {
		innermost = scopes[0];
	} else if (!innermost_scope(cudie, pc - dwbias, &innermost)) {
		free(scopes);
		return 0;
	}
	free(scopes);
	scopes = NULL;
	nscopes = dwarf_getscopes_die(&innermost, &scopes);
	if (nscopes <= 0) {
		free(scopes);
		return 0;
	}
	if (dwarf_getsrcfiles(cudie, &files, NULL) != 0)
		files = NULL;

	for (int i = 0; i < nscopes && !err; i++) {
		Dwarf_Die *scope = &scopes[i];
		int tag = dwarf_tag(scope);
		const char *name;
		Dwarf_Attribute attr;
		Dwarf_Word word;

		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram &&
		    tag != DW_TAG_entry_point)
			continue;
		if (tag != DW_TAG_inlined_subroutine) {
			name = die_function_name(scope, false);
			if (!name)
				name = symname ? symname : die_function_name(scope, true);
			err = frames_push(fl, name, symname ? symname : name, offset, file, line, false);
			*reached = true;
			break;
		}
		/* valgrind names an inlined call by its DW_AT_name, unqualified */
		name = die_function_name(scope, true);
		err = frames_push(fl, name, dwarf_formstring(dwarf_attr_integrate(scope, DW_AT_name, &attr)) ?: name,
				  offset, file, line, true);
		file = NULL;
		line = 0;
		if (files && die_udata(scope, DW_AT_call_file, &word))
			file = dwarf_filesrc(files, word, NULL, NULL);
		if (die_udata(scope, DW_AT_call_line, &word) && word <= INT32_MAX)
			line = (int)word;
	}
	/* When the chain ends without a subprogram (odd DWARF), the caller
	 * adds the ELF symbol with the last call site. */
	if (!err && !*reached && fl->n > 0) {
		err = frames_push(fl, symname, symname, offset, file, line, false);
		*reached = true;
	}
	free(scopes);
	return err;
}

/* Resolves without the cache; see sym_module_resolve(). */
static int resolve_uncached(struct sym_module *m, uint64_t addr, bool return_addr,
			    struct frame_list *fl)
{
	uint64_t lookup = return_addr && addr > 0 ? addr - 1 : addr;
	Dwarf_Addr pc = lookup + m->bias;
	const char *symname, *file = NULL;
	uint64_t offset = 0;
	GElf_Off symoff;
	GElf_Sym sym;
	Dwfl_Line *dl;
	int line = 0, err;
	bool reached;

	symname = dwfl_module_addrinfo(m->mod, pc, &symoff, &sym, NULL, NULL, NULL);
	if (symname) {
		symname = sym_aliases_best(&m->aliases, m->mod, pc - symoff, symname);
		offset = symoff + (addr - lookup);
	}
	dl = dwfl_module_getsrc(m->mod, pc);
	if (dl)
		file = dwfl_lineinfo(dl, NULL, &line, NULL, NULL, NULL);
	if (!file)
		line = 0;

	err = frames_push_dwarf(m, pc, symname, offset, file, line, fl, &reached);
	if (err || reached)
		return err;
	return frames_push(fl, symname, symname, offset, file, line, false);
}

static int frames_copy(const struct sym_frame *src, size_t n, struct sym_frame **out)
{
	struct sym_frame *v = calloc(n, sizeof(*v));
	bool ok = true;

	*out = NULL;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		v[i] = src[i];
		v[i].function = str_dup(src[i].function, &ok);
		v[i].symbol = str_dup(src[i].symbol, &ok);
		v[i].file = str_dup(src[i].file, &ok);
	}
	if (!ok) {
		sym_frames_free(v, n);
		return -ENOMEM;
	}
	*out = v;
	return 0;
}

static struct addr_entry *cache_slot(struct addr_entry *t, size_t cap, uint64_t addr,
				     bool return_addr)
{
	size_t i = hash_addr(addr, return_addr) & (cap - 1);

	while (t[i].used && (t[i].addr != addr || t[i].return_addr != return_addr))
		i = (i + 1) & (cap - 1);
	return &t[i];
}

/* Makes room for one more entry; returns false when memory is short. */
static bool cache_reserve(struct sym_module *m)
{
	size_t cap = m->cache_cap ? m->cache_cap * 2 : ADDR_CACHE_MIN;
	struct addr_entry *t;

	if ((m->cache_len + 1) * 2 <= m->cache_cap)
		return true;
	t = calloc(cap, sizeof(*t));
	if (!t)
		return false;
	for (size_t i = 0; i < m->cache_cap; i++)
		if (m->cache[i].used)
			*cache_slot(t, cap, m->cache[i].addr, m->cache[i].return_addr) = m->cache[i];
	free(m->cache);
	m->cache = t;
	m->cache_cap = cap;
	return true;
}

int sym_module_resolve_shared(struct sym_module *m, uint64_t addr, bool return_addr,
			      const struct sym_frame **frames, size_t *n, bool *owned)
{
	ahead_wait(m->owner);
	return sym_module_resolve_unlocked(m, addr, return_addr, frames, n, owned);
}

/* sym_module_resolve_shared, from the thread that has M's symbolizer. */
static int sym_module_resolve_unlocked(struct sym_module *m, uint64_t addr, bool return_addr,
				       const struct sym_frame **frames, size_t *n, bool *owned)
{
	struct frame_list fl = { 0 };
	struct addr_entry *e;
	int err;

	*frames = NULL;
	*n = 0;
	*owned = false;
	if (m->cache_cap) {
		e = cache_slot(m->cache, m->cache_cap, addr, return_addr);
		if (e->used) {
			*frames = e->frames;
			*n = e->n;
			return 0;
		}
	}
	err = resolve_uncached(m, addr, return_addr, &fl);
	if (err) {
		sym_frames_free(fl.v, fl.n);
		return err;
	}
	/* the cache keeps FL; without room for it the caller owns it */
	if (!cache_reserve(m)) {
		*frames = fl.v;
		*n = fl.n;
		*owned = true;
		return 0;
	}
	e = cache_slot(m->cache, m->cache_cap, addr, return_addr);
	e->addr = addr;
	e->return_addr = return_addr;
	e->used = true;
	e->frames = fl.v;
	e->n = fl.n;
	m->cache_len++;
	*frames = fl.v;
	*n = fl.n;
	return 0;
}

int sym_module_resolve(struct sym_module *m, uint64_t addr, bool return_addr,
		       struct sym_frame **frames, size_t *n)
{
	const struct sym_frame *shared;
	bool owned;
	int err = sym_module_resolve_shared(m, addr, return_addr, &shared, n, &owned);

	*frames = NULL;
	if (err)
		return err;
	if (owned) {
		*frames = (struct sym_frame *)shared;
		return 0;
	}
	err = frames_copy(shared, *n, frames);
	if (err)
		*n = 0;
	return err;
}
