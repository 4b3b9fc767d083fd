/* Checks report/symbolize.c against binutils' addr2line as the oracle: a small
 * C++ program with nested inlines is built at test time, copied stripped
 * (with a debuglink, in a build-id debug dir, with MiniDebugInfo, bare) and
 * every address of its functions must name the same frames as
 * `addr2line -f -i -C -e` on the unstripped binary. */
#define _GNU_SOURCE /* asprintf, open_memstream */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "symbolize.h"

#define LIBC_PATH "/lib/x86_64-linux-gnu/libc.so.6"

/* The fixture.  inner_step is inlined into outer_step, which is inlined
 * into LeakLib::compute: addresses in compute have chains of three. */
static const char fixture_src[] =
	"#include <cstdlib>\n"
	"#include <cstring>\n"
	"\n"
	"static inline __attribute__((always_inline)) int inner_step(volatile int *p, int k)\n"
	"{\n"
	"	int acc = 0;\n"
	"	for (int i = 0; i < k; i++)\n"
	"		acc += p[i] * 3 + i;\n"
	"	return acc;\n"
	"}\n"
	"\n"
	"static inline __attribute__((always_inline)) int outer_step(volatile int *p, int k)\n"
	"{\n"
	"	return inner_step(p, k) ^ inner_step(p + 1, k - 1);\n"
	"}\n"
	"\n"
	"static __attribute__((noinline, noclone)) int lonely(int x)\n"
	"{\n"
	"	volatile int y = x;\n"
	"	return y * 7;\n"
	"}\n"
	"\n"
	"namespace LeakLib {\n"
	"__attribute__((noinline)) int compute(volatile int *p, int k)\n"
	"{\n"
	"	return outer_step(p, k) * 2 + lonely(k);\n"
	"}\n"
	"\n"
	"__attribute__((noinline)) void *slowMemoryLeak(size_t n)\n"
	"{\n"
	"	void *q = malloc(n);\n"
	"	if (q)\n"
	"		memset(q, 1, n);\n"
	"	return q;\n"
	"}\n"
	"}\n"
	"\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	volatile int buf[16] = { 0 };\n"
	"	(void)argv;\n"
	"	int r = LeakLib::compute(buf, argc + 3);\n"
	"	return LeakLib::slowMemoryLeak(r & 15) ? 0 : 1;\n"
	"}\n";

static char *tmpdir;

/* Runs a shell command built like printf; returns its exit status. */
static int run(const char *fmt, ...)
{
	va_list ap;
	char *cmd;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&cmd, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	rc = system(cmd);
	if (rc != 0)
		fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
	free(cmd);
	return rc;
}

static char *path_in(const char *rel)
{
	char *p;

	if (asprintf(&p, "%s/%s", tmpdir, rel) < 0) {
		perror("asprintf");
		exit(2);
	}
	return p;
}

/* ---- symbols of an object, from nm ---- */

struct nm_sym {
	uint64_t addr;
	uint64_t size;
	char *name; /* demangled */
};

struct nm_syms {
	struct nm_sym *v;
	size_t n;
};

/* Reads `nm -S -C --defined-only [-D] OBJ`. */
static int nm_read(const char *obj, bool dynamic, struct nm_syms *out)
{
	char *cmd, *line = NULL;
	size_t cap = 0;
	FILE *p;

	out->v = NULL;
	out->n = 0;
	if (asprintf(&cmd, "nm -S -C --defined-only %s '%s'", dynamic ? "-D" : "", obj) < 0)
		return -ENOMEM;
	p = popen(cmd, "r");
	free(cmd);
	if (!p)
		return -errno;
	while (getline(&line, &cap, p) > 0) {
		unsigned long long addr, size;
		char type;
		int pos = 0;
		struct nm_sym *v;

		if (sscanf(line, "%llx %llx %c %n", &addr, &size, &type, &pos) < 3 || !pos)
			continue;
		line[strcspn(line, "\n")] = 0;
		/* nm -D shows versions (malloc@@GLIBC_2.2.5); .dynsym names don't
		 * carry them.  C++ names never hold '@'. */
		line[pos + strcspn(line + pos, "@")] = 0;
		v = realloc(out->v, (out->n + 1) * sizeof(*v));
		if (!v)
			break;
		out->v = v;
		v[out->n].addr = addr;
		v[out->n].size = size;
		v[out->n].name = strdup(line + pos);
		out->n++;
	}
	free(line);
	return pclose(p) == 0 ? 0 : -EIO;
}

static void nm_free(struct nm_syms *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i].name);
	free(s->v);
}

/* The symbol whose name starts with PREFIX, or NULL. */
static const struct nm_sym *nm_find(const struct nm_syms *s, const char *prefix)
{
	for (size_t i = 0; i < s->n; i++)
		if (strncmp(s->v[i].name, prefix, strlen(prefix)) == 0)
			return &s->v[i];
	return NULL;
}

/* ---- the oracle: addr2line -f -i -C -a ---- */

struct oracle_frame {
	char *function; /* NULL for "??" */
	char *file;     /* NULL for "??" */
	int line;       /* 0 for "?" */
};

struct oracle_addr {
	struct oracle_frame *f;
	size_t n;
};

static void oracle_parse_pos(const char *text, struct oracle_frame *f)
{
	char *s = strdup(text), *colon, *disc;

	f->file = NULL;
	f->line = 0;
	if (!s)
		return;
	disc = strstr(s, " (discriminator");
	if (disc)
		*disc = 0;
	colon = strrchr(s, ':');
	if (colon) {
		*colon = 0;
		f->line = atoi(colon + 1);
	}
	if (strcmp(s, "??") != 0)
		f->file = strdup(s);
	free(s);
}

/* Runs addr2line on ADDRS[N] of OBJ; fills OUT[N]. */
static int oracle_run(const char *obj, const uint64_t *addrs, size_t n, struct oracle_addr *out)
{
	char *cmd = NULL, *line = NULL, *fn = NULL;
	size_t len = 0, cap = 0, cur = 0;
	bool started = false;
	FILE *m = open_memstream(&cmd, &len), *p;

	if (!m)
		return -errno;
	fprintf(m, "addr2line -f -i -C -a -e '%s'", obj);
	for (size_t i = 0; i < n; i++)
		fprintf(m, " 0x%llx", (unsigned long long)addrs[i]);
	fclose(m);
	p = popen(cmd, "r");
	free(cmd);
	if (!p)
		return -errno;
	memset(out, 0, n * sizeof(*out));
	while (getline(&line, &cap, p) > 0) {
		line[strcspn(line, "\n")] = 0;
		if (strncmp(line, "0x", 2) == 0 && !fn) {
			if (started)
				cur++;
			started = true;
			continue;
		}
		if (!started || cur >= n)
			continue;
		if (!fn) {
			fn = strdup(line);
			continue;
		}
		struct oracle_addr *a = &out[cur];
		struct oracle_frame *v = realloc(a->f, (a->n + 1) * sizeof(*v));

		if (v) {
			a->f = v;
			v[a->n].function = strcmp(fn, "??") == 0 ? NULL : strdup(fn);
			oracle_parse_pos(line, &v[a->n]);
			a->n++;
		}
		free(fn);
		fn = NULL;
	}
	free(fn);
	free(line);
	return pclose(p) == 0 && (n == 0 || cur == n - 1) ? 0 : -EIO;
}

static void oracle_free(struct oracle_addr *o, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < o[i].n; j++) {
			free(o[i].f[j].function);
			free(o[i].f[j].file);
		}
		free(o[i].f);
	}
	free(o);
}

static const char *base_name(const char *path)
{
	const char *slash;

	if (!path)
		return NULL;
	slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void print_frames(const char *who, const struct sym_frame *f, size_t n)
{
	fprintf(stderr, "  %s:\n", who);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "    %s+%llu %s:%d%s\n", f[i].function ? f[i].function : "??",
			(unsigned long long)f[i].offset, f[i].file ? f[i].file : "??", f[i].line,
			f[i].inlined ? " (inlined)" : "");
}

static void print_oracle(const struct oracle_addr *o)
{
	fprintf(stderr, "  addr2line:\n");
	for (size_t i = 0; i < o->n; i++)
		fprintf(stderr, "    %s %s:%d\n", o->f[i].function ? o->f[i].function : "??",
			o->f[i].file ? o->f[i].file : "??", o->f[i].line);
}

/* Whether FRAMES say what addr2line said: names, file basenames, lines,
 * order, and every frame but the last inlined.  FROM skips the first
 * frames' function names. */
static bool frames_match_from(const struct sym_frame *f, size_t n, const struct oracle_addr *o,
			      size_t from)
{
	if (n != o->n)
		return false;
	for (size_t i = 0; i < n; i++) {
		if ((i >= from && !str_eq(f[i].function, o->f[i].function)) ||
		    !str_eq(base_name(f[i].file), base_name(o->f[i].file)) ||
		    f[i].line != o->f[i].line || f[i].inlined != (i + 1 < n))
			return false;
	}
	return true;
}

/*
 * binutils 2.40's addr2line names the innermost frame after the physical
 * function at the first address of a piece of an inlined instance whose
 * DW_AT_ranges start with an empty range (gcc 12 emits those), e.g.
 *   compute :7 / outer_step :14 / compute :26
 * while the DWARF (llvm-dwarfdump --lookup, eu-addr2line -i) says
 * inner_step there.  Everything but that one name must still agree.
 */
static bool binutils_quirk(const struct sym_frame *f, size_t n, const struct oracle_addr *o)
{
	return n > 1 && o->n == n && str_eq(o->f[0].function, o->f[n - 1].function) &&
	       f[0].function && !str_eq(f[0].function, o->f[0].function) &&
	       frames_match_from(f, n, o, 1);
}

/*
 * Resolves every address of SYM in M (as return addresses when RET: then
 * the oracle is asked about ADDR - 1) and compares with addr2line on
 * ORACLE_OBJ.  Returns the longest chain seen, -1 on a setup failure.
 */
static int compare_range(struct sym_module *m, const char *label, const char *oracle_obj,
			 const struct nm_sym *sym, bool ret)
{
	size_t n = sym->size;
	uint64_t *addrs = calloc(n, sizeof(*addrs));
	struct oracle_addr *o = calloc(n, sizeof(*o));
	int longest = 0, mismatches = 0, quirks = 0;

	if (!addrs || !o || !n) {
		free(addrs);
		free(o);
		EXPECT(0, "%s: empty range or no memory for %s", label, sym->name);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		addrs[i] = sym->addr + i; /* ret: ADDR - 1 */
	if (oracle_run(oracle_obj, addrs, n, o) != 0) {
		EXPECT(0, "%s: addr2line failed on %s", label, oracle_obj);
		oracle_free(o, n);
		free(addrs);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t addr = ret ? addrs[i] + 1 : addrs[i];
		struct sym_frame *f;
		size_t nf;
		int err = sym_module_resolve(m, addr, ret, &f, &nf);

		if (err) {
			EXPECT(0, "%s: resolve 0x%llx: %s", label, (unsigned long long)addr,
			       strerror(-err));
			continue;
		}
		if (binutils_quirk(f, nf, &o[i])) {
			quirks++;
		} else if (!frames_match_from(f, nf, &o[i], 0)) {
			if (mismatches++ < 3) {
				EXPECT(0, "%s: frames of 0x%llx%s differ from addr2line", label,
				       (unsigned long long)addr, ret ? " (return address)" : "");
				print_frames("symbolizer", f, nf);
				print_oracle(&o[i]);
			} else {
				check_failures++;
			}
		}
		EXPECT(nf && f[nf - 1].offset == addr - sym->addr,
		       "%s: offset of 0x%llx is %llu, want %llu", label, (unsigned long long)addr,
		       nf ? (unsigned long long)f[nf - 1].offset : 0ULL,
		       (unsigned long long)(addr - sym->addr));
		if ((int)nf > longest)
			longest = (int)nf;
		sym_frames_free(f, nf);
	}
	/* The quirk is rare: a few addresses per inline piece, never most. */
	EXPECT(quirks * 4 < (int)n, "%s: %d of %zu addresses of %s differ in the first name only",
	       label, quirks, n, sym->name);
	oracle_free(o, n);
	free(addrs);
	return longest;
}

/* Resolves ADDR of M and checks there is one frame named WANT (NULL: no
 * name) with no source position. */
static void check_symbol_only(struct sym_module *m, const char *label, uint64_t addr,
			      const char *want)
{
	struct sym_frame *f;
	size_t n;
	int err = sym_module_resolve(m, addr, false, &f, &n);

	EXPECT(err == 0, "%s: resolve: %s", label, strerror(-err));
	if (err)
		return;
	EXPECT(n == 1 && str_eq(f[0].function, want) && !f[0].file && !f[0].inlined,
	       "%s: 0x%llx should be just '%s'", label, (unsigned long long)addr,
	       want ? want : "(null)");
	if (n != 1 || !str_eq(f[0].function, want))
		print_frames("symbolizer", f, n);
	sym_frames_free(f, n);
}

/*
 * The raw names beside the demangled ones (what valgrind's suppressions
 * match): in COMPUTE, an address with the 3-deep inline chain names the
 * inlined calls by DW_AT_name and the physical function by its mangled
 * symbol; main has no raw name other than the one shown.
 */
static void check_raw_symbols(struct sym_module *m, const struct nm_sym *compute, const struct nm_sym *main_sym)
{
	bool seen = false;

	for (uint64_t a = compute->addr; a < compute->addr + compute->size && !seen; a++) {
		struct sym_frame *f;
		size_t n;

		if (sym_module_resolve(m, a, false, &f, &n) != 0) {
			EXPECT(0, "resolve 0x%llx", (unsigned long long)a);
			return;
		}
		if (n >= 3) {
			seen = true;
			/* static inline: no linkage name, so the DW_AT_name is
			 * both the name shown and the raw one (no copy) */
			EXPECT(str_eq(f[0].function, "inner_step") && !f[0].symbol &&
				       str_eq(f[1].function, "outer_step") && !f[1].symbol,
			       "inlined calls: '%s' (raw '%s'), '%s' (raw '%s')", f[0].function,
			       f[0].symbol ? f[0].symbol : "(null)", f[1].function, f[1].symbol ? f[1].symbol : "(null)");
			EXPECT(str_eq(f[n - 1].symbol, "_ZN7LeakLib7computeEPVii") &&
				       str_eq(f[n - 1].function, "LeakLib::compute(int volatile*, int)"),
			       "compute's raw name '%s', function '%s'", f[n - 1].symbol ? f[n - 1].symbol : "(null)",
			       f[n - 1].function ? f[n - 1].function : "(null)");
		}
		sym_frames_free(f, n);
	}
	EXPECT(seen, "no address of compute with its inline chain");
	if (main_sym) {
		struct sym_frame *f;
		size_t n;

		if (sym_module_resolve(m, main_sym->addr, false, &f, &n) == 0) {
			EXPECT(n >= 1 && str_eq(f[n - 1].function, "main") && !f[n - 1].symbol,
			       "main has no raw name of its own: '%s'",
			       n && f[n - 1].symbol ? f[n - 1].symbol : "(null)");
			sym_frames_free(f, n);
		}
	}
}

/* Open fds of this process, to see that modules' fds are closed. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static struct sym_module *must_module(struct symbolizer *s, const char *path, int fd)
{
	struct sym_module *m = NULL;
	int err = symbolizer_module(s, path, fd, &m);

	EXPECT(err == 0 && m, "register %s: %s", path, strerror(-err));
	return err ? NULL : m;
}

static int build_fixtures(void)
{
	char *src = path_in("leak.cpp");
	FILE *f = fopen(src, "w");
	int rc;

	if (!f || fputs(fixture_src, f) < 0 || fclose(f) != 0) {
		perror(src);
		free(src);
		return -1;
	}
	free(src);
	rc = run("cd '%s' && g++ -O2 -g -rdynamic -Wl,--build-id -o leak leak.cpp", tmpdir);
	/* Stripped, with a debuglink to the debug file beside it. */
	rc = rc ?: run("cd '%s' && mkdir dl && objcopy --only-keep-debug leak dl/leak.debug && "
		       "objcopy --strip-all --add-gnu-debuglink=dl/leak.debug leak dl/leak",
		       tmpdir);
	/* Stripped, no debug info anywhere. */
	rc = rc ?: run("cd '%s' && mkdir bare && strip --strip-all -o bare/leak leak", tmpdir);
	/* The same debuglinked binary alone: its debug file is only in a
	 * --debug-dir, by build id (bid/) or by name (named/). */
	rc = rc ?: run("cd '%s' && mkdir bid named dbg2 && cp dl/leak bid/leak && "
		       "cp dl/leak named/leak && cp dl/leak.debug dbg2/leak.debug", tmpdir);
	/* MiniDebugInfo: .gnu_debugdata with the function symbols not in
	 * .dynsym, the way Fedora's find-debuginfo.sh makes it. */
	rc = rc ?: run("cd '%s' && mkdir mini && export LC_ALL=C && "
		       "objcopy --only-keep-debug leak mini/debuginfo && "
		       "nm -D leak --format=posix --defined-only | awk '{print $1}' | sort > mini/dyn && "
		       "nm mini/debuginfo --format=sysv --defined-only | "
		       "awk -F '|' '{ if ($4 ~ \"FUNC\") print $1 }' | sed 's/ *$//' | sort -u > mini/funcs && "
		       "comm -13 mini/dyn mini/funcs > mini/keep && "
		       "objcopy -S --remove-section .comment --keep-symbols=mini/keep "
		       "mini/debuginfo mini/mini && xz mini/mini && "
		       "strip --strip-all -R .comment -o mini/leak leak && "
		       "objcopy --add-section .gnu_debugdata=mini/mini.xz mini/leak",
		       tmpdir);
	rc = rc ?: run("cd '%s' && mkdir gone && cp leak gone/leak", tmpdir);
	return rc ? -1 : 0;
}

/* The fixture's functions compared with addr2line, address by address. */
static const char *const fixture_funcs[] = { "LeakLib::compute(", "LeakLib::slowMemoryLeak(", "lonely(", "main" };

/* Every address of the fixture's functions in M against addr2line. */
static void compare_fixture(struct sym_module *m, const char *label, const char *full,
			    const struct nm_syms *syms, bool with_returns)
{
	int longest = 0;

	for (size_t i = 0; i < sizeof(fixture_funcs) / sizeof(fixture_funcs[0]); i++) {
		const struct nm_sym *sym = nm_find(syms, fixture_funcs[i]);
		int l;

		EXPECT(sym, "%s: no symbol %s in nm output", label, fixture_funcs[i]);
		if (!sym)
			continue;
		l = compare_range(m, label, full, sym, false);
		if (l > longest)
			longest = l;
		if (with_returns)
			compare_range(m, label, full, sym, true);
	}
	/* inner_step inlined into outer_step inlined into compute. */
	EXPECT(longest >= 3, "%s: no address with a 3-deep inline chain (longest %d)", label,
	       longest);
}

static void test_fixture(void)
{
	char *full = path_in("leak"), *dl = path_in("dl/leak"), *bare = path_in("bare/leak");
	char *bid = path_in("bid/leak"), *named = path_in("named/leak"), *mini = path_in("mini/leak");
	char *gone = path_in("gone/leak"), *dbg = path_in("dbg"), *dbg2 = path_in("dbg2");
	char *src = path_in("leak.cpp");
	struct symbolizer *s = NULL, *sb = NULL, *sn = NULL;
	struct sym_module *m, *m2;
	struct nm_syms syms = { 0 };
	const struct nm_sym *compute, *lonely;
	const char *id;
	int err, fd, fds = count_fds();

	if (nm_read(full, false, &syms) != 0) {
		EXPECT(0, "nm %s failed", full);
		goto out;
	}
	compute = nm_find(&syms, "LeakLib::compute(");
	lonely = nm_find(&syms, "lonely(");
	EXPECT(compute && lonely, "fixture lacks compute or lonely symbols");
	if (!compute || !lonely)
		goto out;

	err = symbolizer_new(NULL, &s);
	EXPECT(err == 0, "symbolizer_new: %s", strerror(-err));
	if (err)
		goto out;

	/* The unstripped binary, with caller (return address) lookups. */
	m = must_module(s, full, -1);
	if (!m)
		goto out;
	compare_fixture(m, "full", full, &syms, true);
	check_raw_symbols(m, compute, nm_find(&syms, "main"));
	/* Cached results are the same (second pass hits the cache). */
	compare_fixture(m, "full (cached)", full, &syms, false);

	id = sym_module_build_id(m);
	EXPECT(id && strlen(id) >= 16 && strspn(id, "0123456789abcdef") == strlen(id),
	       "build id of %s: '%s'", full, id ? id : "(null)");
	EXPECT(str_eq(sym_module_path(m), full), "module path");
	EXPECT(must_module(s, full, -1) == m, "registering %s twice gives two modules", full);
	fd = open(full, O_RDONLY);
	EXPECT(fd >= 0 && must_module(s, full, fd) == m, "registering by fd gives another module");
	if (fd >= 0)
		close(fd); /* still ours: the symbolizer dups it */

	/* A debuglink to a file beside the stripped binary. */
	m2 = must_module(s, dl, -1);
	EXPECT(m2 && m2 != m, "stripped copy should be its own module");
	EXPECT(m2 && str_eq(sym_module_build_id(m2), id), "stripped copy build id differs");
	if (m2)
		compare_fixture(m2, "debuglink", full, &syms, false);

	/* Without --debug-dir the lone copies have symbols only. */
	m2 = must_module(s, bid, -1);
	if (m2)
		check_symbol_only(m2, "bid without --debug-dir", compute->addr, compute->name);

	/* Build-id layout under a --debug-dir. */
	if (id && run("mkdir -p '%s/.build-id/%.2s' && cp '%s/dl/leak.debug' '%s/.build-id/%.2s/%s.debug'",
		      dbg, id, tmpdir, dbg, id, id + 2) == 0) {
		const char *dirs[] = { dbg, NULL };

		err = symbolizer_new(dirs, &sb);
		EXPECT(err == 0, "symbolizer_new(dbg): %s", strerror(-err));
		m2 = sb ? must_module(sb, bid, -1) : NULL;
		if (m2)
			compare_fixture(m2, "--debug-dir build-id", full, &syms, false);
	}

	/* Debuglink name directly in a --debug-dir, given relative. */
	if (chdir(tmpdir) == 0) {
		const char *dirs[] = { "dbg2", NULL };

		err = symbolizer_new(dirs, &sn);
		EXPECT(err == 0, "symbolizer_new(dbg2): %s", strerror(-err));
		m2 = sn ? must_module(sn, named, -1) : NULL;
		if (m2)
			compare_fixture(m2, "--debug-dir debuglink", full, &syms, false);
		if (chdir("/") != 0)
			perror("chdir");
	}

	/* No debug info, no .symtab: .dynsym (-rdynamic) names compute;
	 * the static lonely() has no symbol at all. */
	m2 = must_module(s, bare, -1);
	if (m2) {
		check_symbol_only(m2, "bare", compute->addr + 1, compute->name);
		check_symbol_only(m2, "bare", lonely->addr, NULL);
	}

	/* MiniDebugInfo names the static function too. */
	m2 = must_module(s, mini, -1);
	if (m2) {
		check_symbol_only(m2, "minidebuginfo", lonely->addr + 1, lonely->name);
		check_symbol_only(m2, "minidebuginfo", compute->addr, compute->name);
	}

	/* The bytes come from the fd even when the path is gone. */
	fd = open(gone, O_RDONLY);
	EXPECT(fd >= 0 && unlink(gone) == 0, "open+unlink %s", gone);
	if (fd >= 0) {
		m2 = must_module(s, gone, fd);
		close(fd);
		if (m2)
			compare_fixture(m2, "deleted", full, &syms, false);
	}

	/* Errors. */
	EXPECT(symbolizer_module(s, src, -1, &m2) == -ENOEXEC && !m2, "non-ELF should be -ENOEXEC");
	EXPECT(symbolizer_module(s, gone, -1, &m2) == -ENOENT && !m2, "missing should be -ENOENT");
	{
		const char *bad[] = { "/a:b", NULL };
		struct symbolizer *x = NULL;

		EXPECT(symbolizer_new(bad, &x) == -EINVAL && !x,
		       "':' in --debug-dir should be -EINVAL");
	}
out:
	symbolizer_free(s);
	symbolizer_free(sb);
	symbolizer_free(sn);
	EXPECT(count_fds() == fds, "fds leaked: %d open before, %d after", fds, count_fds());
	nm_free(&syms);
	free(full), free(dl), free(bare), free(bid), free(named), free(mini);
	free(gone), free(dbg), free(dbg2), free(src);
}

static struct symbolizer *must_symbolizer(void)
{
	struct symbolizer *s = NULL;
	int err = symbolizer_new(NULL, &s);

	EXPECT(err == 0, "symbolizer_new: %s", strerror(-err));
	return s;
}

/* PATH opened, handed to symbolizer_prepare (ADDR: to
 * symbolizer_prepare_addr, for that address), closed again: the
 * symbolizer keeps its own descriptor.  Returns what the prepare did, or
 * -errno from open(). */
static int prepare_path(struct symbolizer *s, const char *path, bool addr, uint64_t at)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = addr ? symbolizer_prepare_addr(s, path, fd, at, false) : symbolizer_prepare(s, path, fd);
	close(fd);
	return err;
}

/*
 * symbolizer_prepare: objects opened ahead in the symbolizer's thread
 * name frames as the ones opened on demand do (addr2line the oracle),
 * whether the thread finished (the prepared module is the one a report
 * then asks for) or is still at work when the owner asks (it waits);
 * its fd is dup'ed (the caller closes its own at once), each file is
 * prepared once, a queue not taken yet is dropped, and no fd is left.
 */
static void test_prepare(void)
{
	char *full = path_in("leak"), *dl = path_in("dl/leak"), *bare = path_in("bare/leak");
	char *mini = path_in("mini/leak");
	struct nm_syms syms = { 0 };
	struct symbolizer *s = NULL;
	struct sym_module *m, *again;
	int fd, err, round, fds = count_fds();

	if (nm_read(full, false, &syms) != 0) {
		EXPECT(0, "nm %s failed", full);
		goto out;
	}
	for (round = 0; round < 2; round++) {
		s = must_symbolizer();
		if (!s)
			goto out;
		fd = open(dl, O_RDONLY | O_CLOEXEC);
		EXPECT(fd >= 0, "open %s", dl);
		if (fd < 0)
			goto out;
		err = symbolizer_prepare(s, dl, fd);
		EXPECT(err == 0, "prepare %s: %s", dl, strerror(-err));
		EXPECT(symbolizer_prepare(s, dl, fd) == 0, "preparing %s twice fails", dl);
		close(fd); /* the symbolizer has its own */
		if (round == 1)
			usleep(300000); /* time for the thread to finish (either way is right) */
		m = must_module(s, dl, -1);
		again = must_module(s, dl, -1);
		EXPECT(m && m == again, "round %d: the prepared %s is two modules", round, dl);
		if (m)
			compare_fixture(m, round ? "prepared, thread done" : "prepared, asked at once", full, &syms,
					true);
		/* a queue the owner takes back from: dropped, fds closed */
		EXPECT(prepare_path(s, bare, false, 0) == 0, "prepare %s", bare);
		EXPECT(prepare_path(s, mini, false, 0) == 0, "prepare %s", mini);
		if (round == 0) {
			m = must_module(s, mini, -1);
			if (m)
				check_symbol_only(m, "minidebuginfo, prepared", nm_find(&syms, "lonely(")->addr + 1,
						  nm_find(&syms, "lonely(")->name);
		}
		symbolizer_free(s);
		s = NULL;
		EXPECT(count_fds() == fds, "round %d: fds leaked: %d open before, %d after", round, fds,
		       count_fds());
	}
	/* addresses named ahead into the module's cache, and a non-ELF file
	 * handed too: the names the report then gets are addr2line's */
	s = must_symbolizer();
	if (!s)
		goto out;
	fd = open(dl, O_RDONLY | O_CLOEXEC);
	EXPECT(fd >= 0, "open %s", dl);
	if (fd >= 0) {
		for (size_t k = 0; k < sizeof(fixture_funcs) / sizeof(fixture_funcs[0]); k++) {
			const struct nm_sym *sym = nm_find(&syms, fixture_funcs[k]);

			for (uint64_t a = 0; sym && a < sym->size; a++) {
				EXPECT(!symbolizer_prepare_addr(s, dl, fd, sym->addr + a, false), "prepare_addr");
				EXPECT(!symbolizer_prepare_addr(s, dl, fd, sym->addr + a + 1, true), "prepare_addr");
			}
		}
		close(fd);
	}
	{
		char *src = path_in("leak.cpp");

		EXPECT(prepare_path(s, src, true, 0x1000) == 0,
		       "a non-ELF file is handed without an error (the report says it)");
		usleep(300000); /* time for the thread to name them (either way is right) */
		EXPECT(symbolizer_module(s, src, -1, &m) == -ENOEXEC, "non-ELF prepared should still be -ENOEXEC");
		free(src);
	}
	m = must_module(s, dl, -1);
	if (m)
		compare_fixture(m, "named ahead", full, &syms, true);
	symbolizer_free(s);
	s = NULL;
	EXPECT(count_fds() == fds, "named ahead: fds leaked: %d open before, %d after", fds, count_fds());

	/* an fd that is none: nothing queued */
	err = symbolizer_new(NULL, &s);
	EXPECT(!err && symbolizer_prepare(s, dl, -1) == -EBADF, "prepare of fd -1 should be -EBADF");
out:
	symbolizer_free(s);
	EXPECT(count_fds() == fds, "fds leaked: %d open before, %d after", fds, count_fds());
	nm_free(&syms);
	free(full), free(dl), free(bare), free(mini);
}

/* malloc in the distro libc, which has .dynsym only. */
static void test_libc(void)
{
	struct nm_syms syms = { 0 };
	const struct nm_sym *malloc_sym;
	struct symbolizer *s = NULL;
	struct sym_module *m;
	struct sym_frame *f = NULL;
	size_t n = 0;
	bool named = false;
	int err;

	if (access(LIBC_PATH, R_OK) != 0) {
		fprintf(stderr, "skip libc: no %s\n", LIBC_PATH);
		return;
	}
	malloc_sym = NULL;
	if (nm_read(LIBC_PATH, true, &syms) == 0)
		for (size_t i = 0; i < syms.n; i++)
			if (strcmp(syms.v[i].name, "malloc") == 0)
				malloc_sym = &syms.v[i];
	EXPECT(malloc_sym, "no malloc in nm -D %s", LIBC_PATH);
	if (!malloc_sym)
		goto out;
	err = symbolizer_new(NULL, &s);
	m = err ? NULL : must_module(s, LIBC_PATH, -1);
	if (!m)
		goto out;
	err = sym_module_resolve(m, malloc_sym->addr + 4, false, &f, &n);
	EXPECT(err == 0 && n >= 1, "resolve malloc: %s", strerror(-err));
	if (err || !n)
		goto out;
	/* Any dynsym name at malloc's address will do (__libc_malloc...). */
	for (size_t i = 0; i < syms.n; i++)
		if (syms.v[i].addr == malloc_sym->addr && str_eq(f[n - 1].function, syms.v[i].name))
			named = true;
	EXPECT(named && f[n - 1].offset == 4, "libc malloc+4 resolved to %s+%llu",
	       f[n - 1].function ? f[n - 1].function : "??", (unsigned long long)f[n - 1].offset);
	EXPECT(sym_module_build_id(m), "libc has no build id?");
out:
	sym_frames_free(f, n);
	symbolizer_free(s);
	nm_free(&syms);
}

int main(void)
{
	char tmpl[] = "/tmp/dwleak-symtest-XXXXXX";

	/* A debuginfod lookup would make the test slow and flaky. */
	unsetenv("DEBUGINFOD_URLS");
	tmpdir = mkdtemp(tmpl);
	if (!tmpdir) {
		perror("mkdtemp");
		return 2;
	}
	check_tmpdir = tmpdir;
	if (build_fixtures() != 0) {
		fprintf(stderr, "FAIL: could not build fixtures in %s (need g++, binutils, xz)\n",
			tmpdir);
		return 1;
	}
	test_fixture();
	test_prepare();
	test_libc();
	if (check_status())
		return 1;
	run("rm -rf '%s'", tmpdir);
	printf("test_symbolize: ok\n");
	return 0;
}
