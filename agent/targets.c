/* The agent's targets: what each option names, resolved against the
 * cgroup mounts, and the three questions asked of them (is this process a
 * target, which are now, is this new exec one).  Files of other users'
 * processes are read with a size bound and parsed by pure functions. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "targets.h"

/* Bounds of the files read: /proc/PID/cgroup holds a line per hierarchy
 * (a dozen), each path at most PATH_MAX; a mount table of a host with
 * thousands of container mounts stays far under 16 MiB. */
#define CGROUP_FILE_MAX (128u << 10)
#define MOUNTINFO_MAX (16u << 20)
#define PROCS_FILE_MAX (64u << 20)
/* A cgroup tree deeper than this is not walked further (-ELOOP). */
#define CGROUP_DEPTH_MAX 64
#define NAME_MAX_BYTES 255

const char *const agent_target_options[AGENT_TARGET_KIND_COUNT] = {
#define AGENT_TARGET_KIND_OPTION(id, option) option,
	AGENT_TARGET_KINDS(AGENT_TARGET_KIND_OPTION)
#undef AGENT_TARGET_KIND_OPTION
};

/* A cgroup in one hierarchy: V2, or the v1 hierarchy whose mount options
 * hold CONTROLLER ("memory", "name=systemd").  REL is its path inside the
 * hierarchy as /proc/PID/cgroup writes it; DIR where it is in the file
 * system (NULL while it does not exist: a unit not started yet). */
struct cgroup_ref {
	bool v2;
	char *controller;
	char *rel;
	char *dir;
};

struct target {
	enum agent_target_kind kind;
	char *text;              /* the option's value as given */
	pid_t pid;               /* PID */
	char comm[AGENT_COMM_MAX + 1]; /* COMM: the first 15 bytes */
	struct cgroup_ref cg[2]; /* UNIT: v2 and name=systemd; CGROUP: one */
	size_t ncg;
};

struct agent_targets {
	char *root;              /* "" for the real file system */
	struct agent_cgroup_mount *mounts;
	size_t nmounts;
	struct target *v;
	size_t n, cap;
};

/* ---- Bounded reading ---- */

/* Reads ROOT + PATH (at most MAX bytes: more is -EFBIG) into *BUF
 * (malloc'd, NUL-terminated) and *LEN. */
static int file_read(const char *root, const char *path, size_t max, char **buf, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *full, *b = NULL;
	ssize_t r;
	int fd, err = 0;

	*buf = NULL;
	*len = 0;
	if (asprintf(&full, "%s%s", root, path) < 0)
		return -ENOMEM;
	fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	free(full);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (n + 1 >= cap) {
			char *nb;

			if (cap > max) {
				err = -EFBIG;
				break;
			}
			cap *= 2;
			nb = realloc(b, cap + 1);
			if (!nb) {
				err = -ENOMEM;
				break;
			}
			b = nb;
		} else if (!b && !(b = malloc(cap + 1))) {
			err = -ENOMEM;
			break;
		}
		r = read(fd, b + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max) {
			err = -EFBIG;
			break;
		}
	}
	close(fd);
	if (err) {
		free(b);
		return err;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

/* ---- Pure parsers ---- */

int agent_cgroup_lines(const char *text, size_t len,
		       int (*fn)(void *ctx, const struct agent_cgroup_line *line), void *ctx)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
		const char *c1 = memchr(p, ':', (size_t)(eol - p)), *c2;
		struct agent_cgroup_line l;
		unsigned long id = 0;
		int ret;

		if (eol == p) { /* an empty line (the last newline's) */
			p = eol + 1;
			continue;
		}
		if (!c1 || c1 == p || c1 - p > 10)
			return -EPROTO;
		for (const char *q = p; q < c1; q++) {
			if (*q < '0' || *q > '9')
				return -EPROTO;
			id = id * 10 + (unsigned long)(*q - '0');
		}
		c2 = memchr(c1 + 1, ':', (size_t)(eol - c1 - 1));
		if (!c2 || c2 + 1 >= eol || c2[1] != '/' || id > 0xffffffffu)
			return -EPROTO;
		l.id = (unsigned int)id;
		l.controllers = c1 + 1;
		l.controllers_len = (size_t)(c2 - c1 - 1);
		l.path = c2 + 1;
		l.path_len = (size_t)(eol - c2 - 1);
		if ((ret = fn(ctx, &l)))
			return ret;
		p = nl ? nl + 1 : end;
	}
	return 0;
}

void agent_cgroup_mounts_free(struct agent_cgroup_mount *m, size_t n)
{
	for (size_t i = 0; m && i < n; i++) {
		free(m[i].point);
		free(m[i].root);
		free(m[i].options);
	}
	free(m);
}

/* The next space-separated field of [*P, END) into *F (LEN bytes). */
static bool field_next(const char **p, const char *end, const char **f, size_t *len)
{
	while (*p < end && **p == ' ')
		(*p)++;
	if (*p >= end)
		return false;
	*f = *p;
	while (*p < end && **p != ' ')
		(*p)++;
	*len = (size_t)(*p - *f);
	return true;
}

/* A mountinfo path field unescaped: the kernel writes space, tab, newline
 * and backslash as \ and three octal digits.  NULL on -ENOMEM or -EPROTO
 * (*ERR). */
static char *unescape(const char *f, size_t len, int *err)
{
	char *s = malloc(len + 1), *o = s;

	if (!s) {
		*err = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < len; i++) {
		if (f[i] == '\\') {
			if (len - i < 4 || f[i + 1] < '0' || f[i + 1] > '3' || f[i + 2] < '0' || f[i + 2] > '7' ||
			    f[i + 3] < '0' || f[i + 3] > '7') {
				free(s);
				*err = -EPROTO;
				return NULL;
			}
			*o++ = (char)((f[i + 1] - '0') << 6 | (f[i + 2] - '0') << 3 | (f[i + 3] - '0'));
			i += 3;
		} else {
			*o++ = f[i];
		}
	}
	*o = '\0';
	if (memchr(s, '\0', (size_t)(o - s))) {
		free(s);
		*err = -EPROTO;
		return NULL;
	}
	return s;
}

int agent_mountinfo_parse(const char *text, size_t len, struct agent_cgroup_mount **out, size_t *n)
{
	const char *p = text, *end = text + len;
	struct agent_cgroup_mount *v = NULL;
	size_t cap = 0, count = 0;
	int err = 0;

	*out = NULL;
	*n = 0;
	while (p < end && !err) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *eol = nl ? nl : end;
		const char *f[6], *fs, *src, *opts, *q = p;
		size_t fl[6], fsl, srcl, optsl;
		bool dash = false;
		int i;

		/* id parent major:minor root point options [optional...] - fstype source superoptions */
		for (i = 0; i < 6; i++)
			if (!field_next(&q, eol, &f[i], &fl[i]))
				break;
		if (i < 6) {
			if (eol != p)
				err = -EPROTO;
			goto next;
		}
		while (field_next(&q, eol, &f[0], &fl[0]))
			if (fl[0] == 1 && f[0][0] == '-') {
				dash = true;
				break;
			}
		if (!dash || !field_next(&q, eol, &fs, &fsl) || !field_next(&q, eol, &src, &srcl) ||
		    !field_next(&q, eol, &opts, &optsl)) {
			err = -EPROTO;
			goto next;
		}
		bool v2 = fsl == 7 && !memcmp(fs, "cgroup2", 7);

		if (!v2 && !(fsl == 6 && !memcmp(fs, "cgroup", 6)))
			goto next;
		if (count == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct agent_cgroup_mount *nv = realloc(v, nc * sizeof(*nv));

			if (!nv) {
				err = -ENOMEM;
				break;
			}
			v = nv;
			cap = nc;
		}
		v[count] = (struct agent_cgroup_mount){ .v2 = v2 };
		v[count].root = unescape(f[3], fl[3], &err);
		v[count].point = v[count].root ? unescape(f[4], fl[4], &err) : NULL;
		v[count].options = v[count].point ? strndup(opts, optsl) : NULL;
		if (v[count].point && !v[count].options)
			err = -ENOMEM;
		count++;
		if (!err && (v[count - 1].root[0] != '/' || v[count - 1].point[0] != '/'))
			err = -EPROTO;
next:
		p = nl ? nl + 1 : end;
	}
	if (err) {
		agent_cgroup_mounts_free(v, count);
		return err;
	}
	*out = v;
	*n = count;
	return 0;
}

/* Whether comma-separated LIST (LEN bytes) holds the token TOK (TLEN). */
static bool list_has(const char *list, size_t len, const char *tok, size_t tlen)
{
	const char *p = list, *end = list + len;

	while (p <= end) {
		const char *c = memchr(p, ',', (size_t)(end - p)), *e = c ? c : end;

		if ((size_t)(e - p) == tlen && !memcmp(p, tok, tlen))
			return true;
		if (!c)
			break;
		p = c + 1;
	}
	return false;
}

/* ---- Targets ---- */

int agent_targets_new(const char *root, struct agent_targets **out)
{
	struct agent_targets *t = calloc(1, sizeof(*t));
	char *mi;
	size_t len;
	int err;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->root = strdup(root && strcmp(root, "/") ? root : "");
	if (!t->root) {
		free(t);
		return -ENOMEM;
	}
	err = file_read(t->root, "/proc/self/mountinfo", MOUNTINFO_MAX, &mi, &len);
	if (!err) {
		err = agent_mountinfo_parse(mi, len, &t->mounts, &t->nmounts);
		free(mi);
	}
	if (err) {
		agent_targets_free(t);
		return err;
	}
	*out = t;
	return 0;
}

static void cgroup_ref_free(struct cgroup_ref *c)
{
	free(c->controller);
	free(c->rel);
	free(c->dir);
}

void agent_targets_free(struct agent_targets *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].text);
		for (size_t j = 0; j < t->v[i].ncg; j++)
			cgroup_ref_free(&t->v[i].cg[j]);
	}
	free(t->v);
	agent_cgroup_mounts_free(t->mounts, t->nmounts);
	free(t->root);
	free(t);
}

size_t agent_targets_count(const struct agent_targets *t)
{
	return t->n;
}

/* A new target of KIND for TEXT at the end of T, or NULL (-ENOMEM). */
static struct target *target_push(struct agent_targets *t, enum agent_target_kind kind, const char *text)
{
	struct target *x;

	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		struct target *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		t->v = v;
		t->cap = cap;
	}
	x = &t->v[t->n];
	*x = (struct target){ .kind = kind, .text = strdup(text) };
	if (!x->text)
		return NULL;
	t->n++;
	return x;
}

static bool dir_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int agent_targets_add_pid(struct agent_targets *t, pid_t pid, char *why, size_t whylen)
{
	char path[64], text[16];
	struct target *x;

	why[0] = '\0';
	snprintf(path, sizeof(path), "%s/proc/%d", t->root, (int)pid);
	if (pid <= 0 || !dir_exists(path)) {
		snprintf(why, whylen, "no process with pid %d", (int)pid);
		return -ESRCH;
	}
	snprintf(text, sizeof(text), "%d", (int)pid);
	x = target_push(t, AGENT_TARGET_PID, text);
	if (!x)
		return -ENOMEM;
	x->pid = pid;
	return 0;
}

int agent_targets_add_comm(struct agent_targets *t, const char *name, char *why, size_t whylen)
{
	size_t len = strlen(name);
	struct target *x;

	why[0] = '\0';
	if (!len || len > NAME_MAX_BYTES || strchr(name, '/') || strchr(name, '\n')) {
		snprintf(why, whylen, "--comm takes a process name (as in /proc/PID/comm: no '/', at most %d bytes), "
			 "not '%.64s'", AGENT_COMM_MAX, name);
		return -EINVAL;
	}
	x = target_push(t, AGENT_TARGET_COMM, name);
	if (!x)
		return -ENOMEM;
	memcpy(x->comm, name, len > AGENT_COMM_MAX ? AGENT_COMM_MAX : len);
	if (len > AGENT_COMM_MAX)
		snprintf(why, whylen, "--comm %s matches processes named '%s': the kernel keeps %d bytes of a name",
			 name, x->comm, AGENT_COMM_MAX);
	return 0;
}

/* The mount of a hierarchy: V2, or v1 with CONTROLLER among its options. */
static const struct agent_cgroup_mount *mount_of_hierarchy(const struct agent_targets *t, bool v2,
							   const char *controller)
{
	for (size_t i = 0; i < t->nmounts; i++) {
		const struct agent_cgroup_mount *m = &t->mounts[i];

		if (m->v2 != v2)
			continue;
		if (v2 || list_has(m->options, strlen(m->options), controller, strlen(controller)))
			return m;
	}
	return NULL;
}

/* Sets C->dir from its mount M: REL under M's root, at M's point. */
static int cgroup_dir_set(const struct agent_targets *t, const struct agent_cgroup_mount *m, struct cgroup_ref *c)
{
	size_t rl = strlen(m->root);
	const char *sub;

	if (!strcmp(m->root, "/"))
		sub = c->rel;
	else if (!strncmp(c->rel, m->root, rl) && (c->rel[rl] == '/' || !c->rel[rl]))
		sub = c->rel + rl;
	else
		return 0; /* not visible through this mount */
	if (asprintf(&c->dir, "%s%s%s", t->root, m->point, !strcmp(sub, "/") ? "" : sub) < 0)
		return -ENOMEM;
	return 0;
}

/* Whether UNIT is a unit name systemd would take for a service. */
static bool unit_name_ok(const char *unit)
{
	size_t len = strlen(unit);

	if (len <= 8 || len > NAME_MAX_BYTES || strcmp(unit + len - 8, ".service"))
		return false;
	for (const char *p = unit; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr(":-_.\\@", *p))
			return false;
	return unit[0] != '@' && unit[0] != '.';
}

int agent_targets_add_unit(struct agent_targets *t, const char *unit, char *why, size_t whylen)
{
	static const struct {
		bool v2;
		const char *controller;
	} trees[] = { { true, NULL }, { false, "name=systemd" } };
	const char *at = strchr(unit, '@');
	struct target *x;
	char *rel;
	int n;

	why[0] = '\0';
	if (!unit_name_ok(unit)) {
		snprintf(why, whylen, "--unit takes a service's unit name, NAME.service, not '%.64s'", unit);
		return -EINVAL;
	}
	/* an instance of a template lives in the template's own slice */
	if (at)
		n = asprintf(&rel, "/system.slice/system-%.*s.slice/%s", (int)(at - unit), unit, unit);
	else
		n = asprintf(&rel, "/system.slice/%s", unit);
	if (n < 0)
		return -ENOMEM;
	x = target_push(t, AGENT_TARGET_UNIT, unit);
	if (!x) {
		free(rel);
		return -ENOMEM;
	}
	for (size_t i = 0; i < 2; i++) {
		const struct agent_cgroup_mount *m = mount_of_hierarchy(t, trees[i].v2, trees[i].controller);
		struct cgroup_ref *c;

		if (!m)
			continue;
		c = &x->cg[x->ncg++];
		*c = (struct cgroup_ref){ .v2 = trees[i].v2 };
		if ((trees[i].controller && !(c->controller = strdup(trees[i].controller))) ||
		    !(c->rel = strdup(rel)) || cgroup_dir_set(t, m, c)) {
			free(rel);
			return -ENOMEM;
		}
	}
	free(rel);
	if (!x->ncg) {
		free(x->text);
		t->n--;
		snprintf(why, whylen, "--unit %s: neither a cgroup2 file system nor a v1 name=systemd hierarchy is "
			 "mounted, so no unit has a cgroup", unit);
		return -ENOENT;
	}
	return 0;
}

int agent_targets_add_cgroup(struct agent_targets *t, const char *path, char *why, size_t whylen)
{
	const struct agent_cgroup_mount *best = NULL;
	size_t best_len = 0, pl;
	struct cgroup_ref *c;
	struct target *x;
	char *full, *rel, *opt, *save = NULL;
	int err;

	why[0] = '\0';
	if (path[0] != '/' || strstr(path, "/../") || strstr(path, "/./") ||
	    (strlen(path) >= 3 && !strcmp(path + strlen(path) - 3, "/..")) || strlen(path) > 4096) {
		snprintf(why, whylen, "--cgroup takes an absolute path without . or .. parts, not '%.64s'", path);
		return -EINVAL;
	}
	pl = strlen(path);
	while (pl > 1 && path[pl - 1] == '/')
		pl--;
	/* the cgroup mount deepest above PATH */
	for (size_t i = 0; i < t->nmounts; i++) {
		const struct agent_cgroup_mount *m = &t->mounts[i];
		size_t ml = strlen(m->point);

		if (ml <= pl && !strncmp(path, m->point, ml) && (path[ml] == '/' || ml == pl || ml == 1) &&
		    ml >= best_len) {
			best = m;
			best_len = ml;
		}
	}
	if (!best) {
		snprintf(why, whylen, "%.*s is in no cgroup file system (see /proc/self/mountinfo)", (int)pl, path);
		return -ENOENT;
	}
	if (asprintf(&full, "%s%.*s", t->root, (int)pl, path) < 0)
		return -ENOMEM;
	if (!dir_exists(full)) {
		snprintf(why, whylen, "no cgroup %.*s: no such directory", (int)pl, path);
		free(full);
		return -ENOENT;
	}
	/* its path inside the hierarchy, as /proc/PID/cgroup writes it */
	if (asprintf(&rel, "%s%.*s", strcmp(best->root, "/") ? best->root : "", (int)(pl - best_len),
		     path + best_len) < 0) {
		free(full);
		return -ENOMEM;
	}
	if (!rel[0]) {
		free(rel);
		rel = strdup("/");
	}
	x = target_push(t, AGENT_TARGET_CGROUP, path);
	if (!x || !rel) {
		free(full);
		free(rel);
		return -ENOMEM;
	}
	c = &x->cg[x->ncg++];
	*c = (struct cgroup_ref){ .v2 = best->v2, .rel = rel, .dir = full };
	if (!best->v2) {
		/* the hierarchy's first controller (or name=) names it in /proc/PID/cgroup */
		char *opts = strdup(best->options);

		if (!opts)
			return -ENOMEM;
		err = -ENOENT;
		for (opt = strtok_r(opts, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
			static const char *const flags[] = { "rw", "ro", "noprefix", "xattr", "clone_children",
							     "cpuset_v2_mode", "favordynmods", NULL };
			bool flag = !strncmp(opt, "release_agent=", 14);

			for (size_t k = 0; flags[k] && !flag; k++)
				flag = !strcmp(opt, flags[k]);
			if (flag)
				continue;
			c->controller = strdup(opt);
			err = c->controller ? 0 : -ENOMEM;
			break;
		}
		free(opts);
		if (err) {
			snprintf(why, whylen, "the cgroup mount at %s names no controller", best->point);
			return err;
		}
	}
	return 0;
}

/* ---- Matching ---- */

/* What the cgroup lines of one process are checked against (line_check's
 * context). */
struct cg_match {
	const struct cgroup_ref *c;
};

/* Whether LINE is C's hierarchy with a path in C's tree (C or below). */
static bool line_in(const struct agent_cgroup_line *l, const struct cgroup_ref *c)
{
	size_t rl = strlen(c->rel);

	if (c->v2 ? (l->id != 0 || l->controllers_len != 0)
		  : (l->id == 0 || !list_has(l->controllers, l->controllers_len, c->controller,
					     strlen(c->controller))))
		return false;
	if (rl == 1) /* the root holds every process */
		return true;
	return l->path_len >= rl && !memcmp(l->path, c->rel, rl) && (l->path_len == rl || l->path[rl] == '/');
}

static int line_check(void *ctx, const struct agent_cgroup_line *l)
{
	struct cg_match *m = ctx;

	return line_in(l, m->c) ? 1 : 0;
}

/* Whether the cgroup text (LEN bytes) puts its process in X's cgroups. */
static int cgroup_text_matches(const char *text, size_t len, const struct target *x)
{
	for (size_t j = 0; j < x->ncg; j++) {
		struct cg_match m = { &x->cg[j] };
		int r = agent_cgroup_lines(text, len, line_check, &m);

		if (r)
			return r;
	}
	return 0;
}

static bool comm_equal(const char *want, const char *comm, size_t len)
{
	size_t n = strnlen(comm, len);

	while (n && comm[n - 1] == '\n')
		n--;
	return n == strlen(want) && !memcmp(want, comm, n);
}

/* The match loop: PID, its comm (COMM, or read when NULL) and its cgroups
 * (read when a target needs them). */
static int match(const struct agent_targets *t, pid_t pid, const char *comm, size_t comm_len,
		 struct agent_match *m)
{
	char path[64], *cg = NULL, *own = NULL;
	size_t cglen = 0;
	int err = 0, found = 0;

	/* pass 0: pid and comm targets, which need no file or only comm;
	 * pass 1: the cgroup ones */
	for (size_t k = 0; k < 2 * t->n && !found && !err; k++) {
		size_t i = k % t->n;
		const struct target *x = &t->v[i];

		if ((k < t->n) != (x->kind == AGENT_TARGET_PID || x->kind == AGENT_TARGET_COMM))
			continue;
		switch (x->kind) {
		case AGENT_TARGET_PID:
			found = x->pid == pid;
			break;
		case AGENT_TARGET_COMM:
			if (!comm) {
				snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
				if ((err = file_read(t->root, path, 64, &own, &comm_len)))
					break;
				comm = own;
			}
			found = comm_equal(x->comm, comm, comm_len);
			break;
		default:
			if (!cg) {
				snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
				if ((err = file_read(t->root, path, CGROUP_FILE_MAX, &cg, &cglen)))
					break;
			}
			err = cgroup_text_matches(cg, cglen, x);
			if (err > 0) {
				found = 1;
				err = 0;
			}
			break;
		}
		if (found) {
			m->target = i;
			m->kind = x->kind;
			m->text = x->text;
		}
	}
	free(cg);
	free(own);
	if (err == -ENOENT || err == -ESRCH)
		return -ENOENT;
	return err ? err : found;
}

int agent_targets_match_pid(const struct agent_targets *t, pid_t pid, struct agent_match *m)
{
	return match(t, pid, NULL, 0, m);
}

int agent_targets_match_exec(const struct agent_targets *t, pid_t pid, const char *comm, struct agent_match *m)
{
	return match(t, pid, comm, strnlen(comm, AGENT_COMM_MAX + 1), m);
}

/* ---- Members ---- */

struct pid_set {
	pid_t *v;
	size_t n, cap;
};

static int pid_add(struct pid_set *s, long pid)
{
	if (pid <= 0 || pid > 4194304)
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		pid_t *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = (pid_t)pid;
	return 0;
}

/* Adds the pids of DIR's cgroup.procs and of every cgroup below it. */
static int cgroup_procs_add(const char *dir, int depth, struct pid_set *s)
{
	char *procs, *text, *p;
	size_t len;
	struct dirent *de;
	DIR *d;
	int err;

	if (depth > CGROUP_DEPTH_MAX)
		return -ELOOP;
	if (asprintf(&procs, "%s/cgroup.procs", dir) < 0)
		return -ENOMEM;
	err = file_read("", procs, PROCS_FILE_MAX, &text, &len);
	free(procs);
	if (err == -ENOENT)
		return 0; /* removed meanwhile */
	if (err)
		return err;
	for (p = text; *p && !err;) {
		char *e;
		long pid = strtol(p, &e, 10);

		if (e == p || (*e && *e != '\n')) {
			err = -EPROTO;
			break;
		}
		err = pid_add(s, pid);
		p = *e ? e + 1 : e;
	}
	free(text);
	if (err)
		return err;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (!err && (de = readdir(d))) {
		char *sub;

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (asprintf(&sub, "%s/%s", dir, de->d_name) < 0) {
			err = -ENOMEM;
			break;
		}
		err = cgroup_procs_add(sub, depth + 1, s);
		free(sub);
	}
	closedir(d);
	return err;
}

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

int agent_targets_members(const struct agent_targets *t, pid_t **pids, size_t *n)
{
	struct pid_set s = { 0 };
	bool by_comm = false;
	int err = 0;

	*pids = NULL;
	*n = 0;
	for (size_t i = 0; i < t->n && !err; i++) {
		const struct target *x = &t->v[i];
		char path[64];

		if (x->kind == AGENT_TARGET_PID) {
			snprintf(path, sizeof(path), "%s/proc/%d", t->root, (int)x->pid);
			if (dir_exists(path))
				err = pid_add(&s, x->pid);
		} else if (x->kind == AGENT_TARGET_COMM) {
			by_comm = true;
		} else {
			for (size_t j = 0; j < x->ncg && !err; j++)
				if (x->cg[j].dir)
					err = cgroup_procs_add(x->cg[j].dir, 0, &s);
		}
	}
	if (by_comm && !err) {
		char *proc;
		struct dirent *de;
		DIR *d;

		if (asprintf(&proc, "%s/proc", t->root) < 0)
			err = -ENOMEM;
		d = err ? NULL : opendir(proc);
		if (!err && !d)
			err = -errno;
		free(proc);
		while (!err && d && (de = readdir(d))) {
			struct agent_match m;
			char *e;
			long pid = strtol(de->d_name, &e, 10);
			int r;

			if (*e || pid <= 0)
				continue;
			r = match(t, (pid_t)pid, NULL, 0, &m);
			/* gone meanwhile, or not readable: not a member now */
			if (r > 0 && t->v[m.target].kind == AGENT_TARGET_COMM)
				err = pid_add(&s, pid);
			else if (r == -ENOMEM)
				err = r;
		}
		if (d)
			closedir(d);
	}
	if (err) {
		free(s.v);
		return err;
	}
	if (s.n)
		qsort(s.v, s.n, sizeof(*s.v), pid_cmp);
	*n = 0;
	for (size_t i = 0; i < s.n; i++)
		if (!*n || s.v[*n - 1] != s.v[i])
			s.v[(*n)++] = s.v[i];
	*pids = s.v;
	return 0;
}
