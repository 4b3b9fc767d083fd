/* Unit tests for issue 13's attacks on the tables layer, each reproduced
 * against the library: a doctored copy of libc with libc's build id, cache
 * directories and entries that someone else chose, a file truncated while it
 * is compiled, and sizes a hostile file declares.  Each must leave root with
 * correct tables, a bounded footprint and no hang; hangs are caught by
 * running the risky call in a child with a deadline. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>
#include <zlib.h>
#include <zstd.h>

#include "build_id.h"
#include "check.h"
#include "table_check.h"
#include "elf_image.h"
#include "table.h"
#include "table_cache.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define NOBODY 65534
#define CHILD_DEADLINE_S 20 /* a get or compile takes milliseconds; this is a hang */
#define HUGE_ENTRY_BYTES (1ull << 30)
#define RSS_GROWTH_MAX_KB (192 * 1024) /* what a refused bomb may add to our peak */
#define RACE_COMPILES 200

static char tmpdir[] = "/tmp/dwleak-test-harden-XXXXXX";

static void cleanup(void)
{
	if (!check_failures)
		check_rm_tree(tmpdir);
}

static char *tmp_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *tmp_path(const char *fmt, ...)
{
	char *name, *path;
	va_list ap;

	va_start(ap, fmt);
	CHECK(vasprintf(&name, fmt, ap) > 0);
	va_end(ap);
	CHECK(asprintf(&path, "%s/%s", tmpdir, name) > 0);
	free(name);
	return path;
}

static long peak_rss_kb(void)
{
	struct rusage ru;

	CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
	return ru.ru_maxrss;
}

/* Runs FN(ARG) in a child and returns its exit status; a child still
 * running after CHILD_DEADLINE_S is killed and reported as a hang. */
static int in_child(const char *what, int (*fn)(void *), void *arg)
{
	struct timespec pause = { 0, 10 * 1000 * 1000 };
	int status, waited;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		status = fn(arg);
		fflush(NULL);
		_exit(status);
	}
	for (waited = 0; waited < CHILD_DEADLINE_S * 100; waited++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			goto done;
		nanosleep(&pause, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	CHECK(0, "%s: hung (killed after %d s)", what, CHILD_DEADLINE_S);
done:
	CHECK(WIFEXITED(status), "%s: child died of signal %d", what,
	      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return WEXITSTATUS(status);
}

static struct unwind_table *compile_path(const char *path)
{
	struct unwind_table *t = NULL;
	int ret = table_compile_path(path, NULL, &t);

	CHECK(ret == 0, "compiling %s: %d %s", path, ret, table_last_error());
	return t;
}

/* Gets PATH through cache C; returns the table and sets *HIT. */
static struct unwind_table *cache_get(struct table_cache *c, const char *path, bool *hit)
{
	struct unwind_table *t = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret;

	CHECK(fd >= 0, "%s", path);
	ret = table_cache_get(c, fd, path, NULL, &t, hit);
	CHECK(ret == 0, "get %s: %d %s", path, ret, table_last_error());
	close(fd);
	return t;
}

static struct table_cache *cache_open(const char *dir)
{
	struct table_cache *c = NULL;
	int ret = table_cache_open(dir, &c);

	CHECK(ret == 0 && c, "open cache %s: %d %s", dir, ret, table_cache_why());
	return c;
}

/* The path of the only entry in directory DIR. */
static char *only_entry(const char *dir)
{
	char *cmd, *found = NULL, line[4096];
	FILE *f;

	CHECK(asprintf(&cmd, "ls -A '%s'", dir) > 0);
	f = popen(cmd, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		CHECK(!found, "more than one entry in %s (%s)", dir, line);
		CHECK(asprintf(&found, "%s/%s", dir, line) > 0);
	}
	pclose(f);
	free(cmd);
	CHECK(found, "no entry in %s", dir);
	return found;
}

static int count_entries(const char *dir)
{
	char *cmd, line[4096];
	int n = 0;
	FILE *f;

	CHECK(asprintf(&cmd, "ls -A '%s' 2>/dev/null", dir) > 0);
	f = popen(cmd, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f))
		n++;
	pclose(f);
	free(cmd);
	return n;
}

/* ---- a copy of libc with libc's build id and CFI of someone's choosing ---- */

/* The file offset of LIBC's .eh_frame, found with libelf (an independent
 * reader). */
static size_t eh_frame_offset(void)
{
	int fd = open(LIBC, O_RDONLY | O_CLOEXEC);
	size_t shstrndx, off = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	CHECK(elf && elf_getshdrstrndx(elf, &shstrndx) == 0);
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		const char *name = gelf_getshdr(scn, &shdr) ? elf_strptr(elf, shstrndx, shdr.sh_name)
							    : NULL;

		if (name && strcmp(name, ".eh_frame") == 0)
			off = shdr.sh_offset;
	}
	elf_end(elf);
	close(fd);
	CHECK(off, "no .eh_frame in %s", LIBC);
	return off;
}

/* Copies libc to PATH with every frame's CFA moved by 8: the first CIE's
 * "def_cfa rsp+8" becomes rsp+16.  The build id is untouched. */
static void doctored_libc(const char *path, mode_t mode)
{
	static const uint8_t def_cfa_rsp8[] = { 0x0c, 0x07, 0x08 };
	size_t len, off = eh_frame_offset(), cie_len;
	uint8_t *buf = check_slurp(LIBC, &len), *hit;

	cie_len = (size_t)buf[off] | (size_t)buf[off + 1] << 8 | (size_t)buf[off + 2] << 16 |
		  (size_t)buf[off + 3] << 24;
	CHECK(off + 4 + cie_len <= len);
	hit = memmem(buf + off, cie_len + 4, def_cfa_rsp8, sizeof(def_cfa_rsp8));
	CHECK(hit, "no def_cfa rsp+8 in libc's first CIE");
	hit[2] = 0x10;
	check_spit(path, buf, len, mode);
	free(buf);
}

/*
 * The cache-poisoning attack: a copy of libc whose CFI someone chose but
 * whose build id is libc's is compiled through root's cache, then the real
 * libc is.  The copy's table must never be what libc gets; a copy another
 * user owns must not even be stored.
 */
static void test_poisoned_copy(const struct unwind_table *libc)
{
	char *dir = tmp_path("poison-cache"), *copy = tmp_path("libc-copy.so");
	struct table_cache_stats st;
	struct unwind_table *t, *doctored;
	struct table_cache *c = cache_open(dir);
	bool hit;

	/* A copy that root owns (say, an old file root itself copied). */
	doctored_libc(copy, 0644);
	doctored = compile_path(copy);
	CHECK(!tables_equal(doctored, libc), "doctoring did not change the table");
	CHECK(doctored->build_id_len == libc->build_id_len &&
	      memcmp(doctored->build_id, libc->build_id, libc->build_id_len) == 0);
	t = cache_get(c, copy, &hit);
	CHECK(!hit && tables_equal(t, doctored));
	table_free(t);
	t = cache_get(c, LIBC, &hit);
	CHECK(!hit, "libc was served the doctored copy's entry");
	CHECK(tables_equal(t, libc), "libc's table is not libc's");
	table_free(t);
	t = cache_get(c, LIBC, &hit);
	CHECK(hit && tables_equal(t, libc), "libc's own entry was not used");
	table_free(t);
	t = cache_get(c, copy, &hit);
	CHECK(!hit && tables_equal(t, doctored), "the copy was served libc's entry");
	table_free(t);
	table_cache_close(c);

	/* A copy another user owns, or that others can write: compiled and
	 * used, never stored, so nothing of theirs is read back later. */
	for (int variant = 0; variant < 2; variant++) {
		unlink(copy);
		doctored_libc(copy, variant ? 0666 : 0644);
		if (variant == 0) {
			if (geteuid() != 0)
				continue;
			CHECK(chown(copy, NOBODY, NOBODY) == 0);
		} else {
			CHECK(chmod(copy, 0666) == 0);
		}
		c = cache_open(dir);
		table_free(cache_get(c, LIBC, &hit)); /* libc's entry, whoever had it */
		t = cache_get(c, copy, &hit);
		CHECK(!hit && tables_equal(t, doctored));
		table_free(t);
		table_cache_stats(c, &st);
		CHECK(st.untrusted == 1 && st.store_errors == 0, "untrusted %ju",
		      (uintmax_t)st.untrusted);
		t = cache_get(c, LIBC, &hit);
		CHECK(hit && tables_equal(t, libc), "libc's entry was replaced by the copy's");
		table_free(t);
		table_cache_close(c);
	}
	table_free(doctored);
	free(copy);
	free(dir);
}

/* ---- cache entries someone else put there ---- */

struct get_args {
	const char *dir;
	const struct unwind_table *want;
};

/* In a child: a get of libc must miss and still give libc's table. */
static int child_get_misses(void *arg)
{
	const struct get_args *a = arg;
	struct table_cache *c = cache_open(a->dir);
	struct unwind_table *t;
	bool hit;

	t = cache_get(c, LIBC, &hit);
	if (hit || !tables_equal(t, a->want))
		return 3;
	table_free(t);
	table_cache_close(c);
	return 0;
}

/* Puts the entry a fresh get of libc writes under DIR; returns its path. */
static char *fresh_entry(const char *dir, const struct unwind_table *libc)
{
	struct table_cache *c = cache_open(dir);
	struct unwind_table *t;
	bool hit;

	t = cache_get(c, LIBC, &hit);
	CHECK(tables_equal(t, libc));
	table_free(t);
	table_cache_close(c);
	return only_entry(dir);
}

/* Replaces ENTRY by what PLANT makes, and checks a get misses, does not
 * hang, gives libc's table, and leaves a real entry behind. */
static void expect_miss_after(const char *what, const char *dir, const char *entry,
			      const struct unwind_table *libc)
{
	struct get_args a = { dir, libc };
	struct stat st;
	int status;

	status = in_child(what, child_get_misses, &a);
	CHECK(status == 0, "%s: get status %d (3: a hit or a wrong table)", what, status);
	CHECK(lstat(entry, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
		      !(st.st_mode & 077),
	      "%s: the entry was not rewritten as a private regular file", what);
}

/* A zstd frame of BYTES zeros, with the content size in its header. */
static uint8_t *zero_bomb(uint64_t bytes, size_t *len)
{
	size_t chunk = 1 << 20, cap = 1 << 20, pos = 0;
	ZSTD_CCtx *cctx = ZSTD_createCCtx();
	uint8_t *zeros = calloc(1, chunk), *out = malloc(cap);
	ZSTD_outBuffer ob;
	ZSTD_inBuffer ib;
	size_t left;

	CHECK(cctx && zeros && out);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
	ZSTD_CCtx_setPledgedSrcSize(cctx, bytes);
	for (uint64_t done = 0; done < bytes; done += chunk) {
		ib = (ZSTD_inBuffer){ zeros, chunk, 0 };
		while (ib.pos < ib.size) {
			ob = (ZSTD_outBuffer){ out, cap, pos };
			CHECK(!ZSTD_isError(ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_continue)));
			pos = ob.pos;
			CHECK(pos < cap - 65536, "bomb frame too large");
		}
	}
	do {
		ob = (ZSTD_outBuffer){ out, cap, pos };
		ib = (ZSTD_inBuffer){ NULL, 0, 0 };
		left = ZSTD_compressStream2(cctx, &ob, &ib, ZSTD_e_end);
		CHECK(!ZSTD_isError(left));
		pos = ob.pos;
	} while (left);
	ZSTD_freeCCtx(cctx);
	free(zeros);
	*len = pos;
	return out;
}

/* An entry with GOOD's header and key whose payload claims BYTES and
 * really decompresses to BYTES zeros (34 KB for 1 GiB). */
static void plant_bomb(const char *entry, const uint8_t *good, size_t good_len, uint64_t bytes)
{
	uint32_t key_len;
	size_t zlen, len;
	uint8_t *frame = zero_bomb(bytes, &zlen), *buf;

	memcpy(&key_len, good + 12, 4);
	CHECK(40 + key_len <= good_len);
	len = 40 + key_len + zlen;
	buf = malloc(len);
	CHECK(buf);
	memcpy(buf, good, 40 + key_len);
	memcpy(buf + 16, &bytes, 8);
	memcpy(buf + 24, &(uint64_t){ zlen }, 8);
	memcpy(buf + 40 + key_len, frame, zlen);
	unlink(entry);
	check_spit(entry, buf, len, 0600);
	printf("  bomb entry: %zu bytes claiming %llu\n", len, (unsigned long long)bytes);
	free(buf);
	free(frame);
}

static void test_entry_attacks(const struct unwind_table *libc)
{
	char *dir = tmp_path("entry-cache"), *elsewhere = tmp_path("elsewhere"), *fifo, *copy;
	char *entry = fresh_entry(dir, libc);
	struct table_cache_stats st;
	struct table_cache *c;
	struct unwind_table *t;
	size_t good_len;
	uint8_t *good = check_slurp(entry, &good_len);
	long before;
	bool hit;

	CHECK(mkdir(elsewhere, 0700) == 0);
	copy = tmp_path("elsewhere/good.tbl");
	fifo = tmp_path("elsewhere/fifo");
	check_spit(copy, good, good_len, 0600);
	CHECK(mkfifo(fifo, 0600) == 0);

	/* A link to a perfectly good entry: not followed. */
	unlink(entry);
	CHECK(symlink(copy, entry) == 0);
	c = cache_open(dir);
	t = cache_get(c, LIBC, &hit);
	CHECK(!hit && tables_equal(t, libc), "an entry link was followed");
	table_free(t);
	table_cache_stats(c, &st);
	CHECK(st.unsafe == 1, "unsafe %ju", (uintmax_t)st.unsafe);
	table_cache_close(c);

	unlink(entry);
	CHECK(symlink("/dev/zero", entry) == 0);
	expect_miss_after("entry -> /dev/zero", dir, entry, libc);
	unlink(entry);
	CHECK(symlink(fifo, entry) == 0);
	expect_miss_after("entry -> FIFO", dir, entry, libc);
	unlink(entry);
	CHECK(mkfifo(entry, 0600) == 0);
	expect_miss_after("FIFO entry", dir, entry, libc);

	/* Good bytes in a file someone else owns or may write: not read. */
	if (geteuid() == 0) {
		unlink(entry);
		check_spit(entry, good, good_len, 0600);
		CHECK(chown(entry, NOBODY, NOBODY) == 0);
		expect_miss_after("entry owned by another user", dir, entry, libc);
	}
	unlink(entry);
	check_spit(entry, good, good_len, 0600);
	CHECK(chmod(entry, 0666) == 0);
	expect_miss_after("world-writable entry", dir, entry, libc);

	/* 34 KB that decompress to 1 GiB: refused before memory is committed. */
	plant_bomb(entry, good, good_len, HUGE_ENTRY_BYTES);
	before = peak_rss_kb();
	c = cache_open(dir);
	t = cache_get(c, LIBC, &hit);
	CHECK(!hit && tables_equal(t, libc));
	table_free(t);
	table_cache_stats(c, &st);
	CHECK(st.corrupt == 1, "corrupt %ju", (uintmax_t)st.corrupt);
	table_cache_close(c);
	CHECK(peak_rss_kb() - before < RSS_GROWTH_MAX_KB, "peak RSS grew by %ld KiB",
	      peak_rss_kb() - before);

	free(good);
	free(entry);
	free(fifo);
	free(copy);
	free(elsewhere);
	free(dir);
}

/* ---- cache directories ---- */

/* Opening DIR must fail with ERR and a reason naming the culprit SHOWN. */
static void expect_refused(const char *dir, int err, const char *shown, const char *what)
{
	struct table_cache *c = (struct table_cache *)1;
	int ret = table_cache_open(dir, &c);

	CHECK(ret == err, "%s: open returned %d, want %d (%s)", what, ret, err, table_cache_why());
	CHECK(c == NULL, "%s: *out not cleared", what);
	CHECK(strstr(table_cache_why(), shown), "%s: reason '%s' does not name %s", what,
	      table_cache_why(), shown);
	printf("  %s: %s\n", what, table_cache_why());
}

static void mkdir_mode(const char *path, mode_t mode)
{
	CHECK(mkdir(path, mode) == 0, "mkdir %s", path);
	CHECK(chmod(path, mode) == 0);
}

static void test_cache_dirs(const struct unwind_table *libc)
{
	char *p, *q, *r;
	struct table_cache *c;
	struct stat st;

	/* Created as needed, 0700 all the way. */
	p = tmp_path("new/a/b");
	c = cache_open(p);
	table_cache_close(c);
	q = tmp_path("new/a");
	CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0700);
	CHECK(stat(q, &st) == 0 && (st.st_mode & 07777) == 0700);
	free(p), free(q);

	/* World- or group-writable cache directories. */
	p = tmp_path("ww");
	mkdir_mode(p, 0777);
	expect_refused(p, -EPERM, p, "world-writable cache dir");
	CHECK(count_entries(p) == 0);
	CHECK(chmod(p, 0770) == 0);
	expect_refused(p, -EPERM, p, "group-writable cache dir");
	free(p);

	/* Writable by others on the way: refused unless sticky. */
	p = tmp_path("open-parent");
	mkdir_mode(p, 0777);
	q = tmp_path("open-parent/cache");
	expect_refused(q, -EPERM, p, "cache dir in a world-writable parent");
	CHECK(chmod(p, 01777) == 0);
	c = cache_open(q); /* sticky, like /tmp */
	table_cache_close(c);
	free(p), free(q);

	/* The cache directory is a link: never followed, nothing written. */
	p = tmp_path("real");
	mkdir_mode(p, 0700);
	q = tmp_path("link");
	CHECK(symlink(p, q) == 0);
	expect_refused(q, -ELOOP, q, "cache dir is a symlink");
	/* A link on the way that root made is followed... */
	r = tmp_path("link/cache");
	c = cache_open(r);
	CHECK(strcmp(table_cache_dir(c), r) == 0);
	table_free(cache_get(c, LIBC, &(bool){ false }));
	table_cache_close(c);
	free(r);
	r = tmp_path("real/cache");
	CHECK(count_entries(r) == 1, "the entry did not land behind the link");
	free(r);
	/* ... one someone else made is not. */
	if (geteuid() == 0) {
		CHECK(lchown(q, NOBODY, NOBODY) == 0);
		r = tmp_path("link/cache");
		expect_refused(r, -ELOOP, q, "another user's symlink on the way");
		free(r);
	}
	free(p), free(q);

	if (geteuid() == 0) {
		/* Another user's directory, as the cache or on the way. */
		p = tmp_path("theirs");
		mkdir_mode(p, 0700);
		CHECK(chown(p, NOBODY, NOBODY) == 0);
		expect_refused(p, -EPERM, p, "cache dir owned by another user");
		q = tmp_path("theirs/cache");
		CHECK(mkdir(q, 0700) == 0);
		expect_refused(q, -EPERM, p, "cache dir under another user's directory");
		free(p), free(q);
	}

	p = tmp_path("plain-file");
	check_spit(p, (const uint8_t *)"x", 1, 0600);
	q = tmp_path("plain-file/dwleak");
	expect_refused(q, -ENOTDIR, p, "cache dir under a regular file");
	free(p), free(q);
	p = tmp_path("real/../real");
	expect_refused(p, -EINVAL, "..", "a path with ..");
	free(p);
	(void)libc;
}

/* ---- a file truncated while it is compiled ---- */

static int child_compile_race(void *arg)
{
	const char *victim = arg;
	struct table_cache *c = cache_open(tmp_path("race-cache"));
	struct unwind_table *t;
	int ok = 0, fd, ret;

	for (int i = 0; i < RACE_COMPILES; i++) {
		fd = open(victim, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return 4;
		ret = i % 2 ? table_compile_fd(fd, NULL, &t) : table_cache_get(c, fd, victim, NULL, &t, NULL);
		close(fd);
		if (ret == 0)
			ok++;
		else if (ret != -EIO && ret != -ENOEXEC && ret != -ENODATA && ret != -EFBIG)
			return 5;
		table_free(t);
	}
	table_cache_close(c);
	printf("  %d of %d compiles of a file being truncated succeeded\n", ok, RACE_COMPILES);
	return 0;
}

static void test_truncate_race(void)
{
	char *victim = tmp_path("victim.so");
	size_t len;
	uint8_t *image = check_slurp(LIBC, &len);
	pid_t writer;
	int fd, status;

	check_spit(victim, image, len, 0644);
	fd = open(victim, O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	writer = fork();
	CHECK(writer >= 0);
	if (writer == 0)
		check_truncate_forever(fd, image, len, 500);
	status = in_child("compiling a file being truncated", child_compile_race, victim);
	kill(writer, SIGKILL);
	waitpid(writer, NULL, 0);
	CHECK(status == 0, "compile race: status %d", status);
	close(fd);
	free(image);
	free(victim);
}

/* ---- sizes a file declares ---- */

/* A shared object with a big .debug_frame, zlib-compressed in the file. */
static char *build_compressed_debug_frame(void)
{
	char *src = tmp_path("many.c"), *obj = tmp_path("many.so"), *cmd;
	FILE *f = fopen(src, "w");

	CHECK(f);
	for (int i = 0; i < 2000; i++)
		fprintf(f, "int f%d(int x) { return x * %d + 1; }\n", i, i);
	fclose(f);
	CHECK(asprintf(&cmd, "cc -shared -fPIC -O1 -g -fno-asynchronous-unwind-tables -o %s %s && "
			     "objcopy --compress-debug-sections=zlib %s", obj, src, obj) > 0);
	CHECK(system(cmd) == 0, "%s", cmd);
	free(cmd);
	free(src);
	return obj;
}

static void test_compressed_claims(void)
{
	char *obj = build_compressed_debug_frame();
	struct elf_section df, out;
	struct unwind_table *t = NULL;
	struct elf_image img;
	struct timespec t0, t1;
	const char *why;
	uint64_t real, claim;
	size_t len, off;
	uint8_t *buf = check_slurp(obj, &len);
	long before;
	int ret;

	CHECK(elf_image_open_mem(&img, buf, len, &why) == 0);
	CHECK(elf_image_section(&img, ".debug_frame", UINT64_MAX, &df) == 0);
	CHECK(elf_section_compressed(&df), "objcopy did not compress .debug_frame");
	off = (size_t)(df.data - buf);
	real = elf_section_claimed_size(&df);
	CHECK(elf_section_inflate(&df, UINT64_MAX, &out) == 0 && out.size == real);
	elf_section_release(&out);
	/* One byte more than zlib can expand these bytes to. */
	claim = (df.size - sizeof(Elf64_Chdr)) * ELF_ZLIB_MAX_RATIO + 1;
	memcpy(buf + off + 8, &claim, 8);
	CHECK(elf_section_inflate(&df, UINT64_MAX, &out) == -EFBIG, "ratio bound");
	claim = 1ull << 30;
	memcpy(buf + off + 8, &claim, 8);
	CHECK(elf_section_inflate(&df, UINT64_MAX, &out) == -EFBIG, "ratio bound, 1 GiB");
	elf_image_close(&img);

	/* The whole compile: refused at once, nothing committed. */
	before = peak_rss_kb();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = table_compile_mem(buf, len, NULL, &t);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(ret == -EFBIG, "1 GiB claim: %d %s", ret, table_last_error());
	printf("  1 GiB claim: %s\n", table_last_error());
	CHECK(t1.tv_sec - t0.tv_sec < 2);
	CHECK(peak_rss_kb() - before < RSS_GROWTH_MAX_KB);

	/* Within bounds but a lie: decompressing tells. */
	claim = real + 1;
	memcpy(buf + off + 8, &claim, 8);
	CHECK(table_compile_mem(buf, len, NULL, &t) == -ENOEXEC, "%s", table_last_error());
	free(buf);
	free(obj);
}

/* ---- inputs that are not regular files ---- */

static int child_compile_fifo(void *arg)
{
	struct unwind_table *t;
	struct table_opts opts = { .debug_path = arg };

	if (table_compile_path(arg, NULL, &t) != -ENOEXEC)
		return 3;
	/* A FIFO where a debug file was found. */
	if (table_compile_path(LIBC, &opts, &t) != -ENOEXEC)
		return 4;
	return 0;
}

static void test_not_regular(void)
{
	char *fifo = tmp_path("input-fifo");
	struct unwind_table *t;

	CHECK(mkfifo(fifo, 0600) == 0);
	CHECK(in_child("compiling a FIFO", child_compile_fifo, fifo) == 0);
	CHECK(table_compile_path(tmpdir, NULL, &t) == -EISDIR);
	CHECK(table_compile_path("/dev/null", NULL, &t) == -ENOEXEC);
	free(fifo);
}

/* ---- an object without section headers ---- */

/* The kernel and the dynamic linker read program headers only, so a
 * program whose section headers are stripped (e_shoff = e_shnum = 0) runs:
 * its .eh_frame is found as its own unwinder finds it, through
 * PT_GNU_EH_FRAME, and gives the same table; without that segment too the
 * error says what is missing, and a header pointing anywhere is harmless. */
static void test_no_section_headers(const struct unwind_table *libc)
{
	struct unwind_table *t = NULL;
	size_t len, i;
	uint8_t *buf = check_slurp(LIBC, &len);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)buf;
	Elf64_Phdr *ph = (Elf64_Phdr *)(buf + eh->e_phoff), *gnu_eh = NULL;
	uint8_t *hdr;
	int32_t rel;

	eh->e_shoff = 0;
	eh->e_shnum = 0;
	eh->e_shstrndx = 0;
	CHECK(table_compile_mem(buf, len, NULL, &t) == 0, "%s", table_last_error());
	EXPECT(tables_equal(t, libc), "libc without section headers: %u rows, with them %u",
	       t->nrows, libc->nrows);
	table_free(t);

	for (i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_GNU_EH_FRAME)
			gnu_eh = &ph[i];
	CHECK(gnu_eh, "libc has no PT_GNU_EH_FRAME");
	/* eh_frame_ptr (pcrel sdata4, at byte 4) sent past every segment */
	hdr = buf + gnu_eh->p_offset;
	CHECK(hdr[1] == 0x1b, "libc's eh_frame_ptr encoding is 0x%x", hdr[1]);
	memcpy(&rel, hdr + 4, 4);
	rel = INT32_MAX;
	memcpy(hdr + 4, &rel, 4);
	t = NULL;
	EXPECT(table_compile_mem(buf, len, NULL, &t) == -ENODATA, "eh_frame_ptr out of bounds: %s",
	       table_last_error());
	table_free(t);

	gnu_eh->p_type = PT_NULL;
	t = NULL;
	EXPECT(table_compile_mem(buf, len, NULL, &t) == -ENODATA &&
		       strstr(table_last_error(), "no section headers and no PT_GNU_EH_FRAME"),
	       "no section headers and no PT_GNU_EH_FRAME: %s", table_last_error());
	table_free(t);
	free(buf);
}

/* ---- the build id reader that replaced libelf's ---- */

static int libelf_build_id(const char *path, uint8_t *out, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	Elf *elf;

	if (fd < 0)
		return -1;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	while (elf && ret == 0 && (scn = elf_nextscn(elf, scn)) != NULL) {
		Elf_Data *d = gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_NOTE
				      ? elf_getdata(scn, NULL) : NULL;
		size_t off = 0, next, name_off, desc_off;
		GElf_Nhdr n;

		while (d && (next = gelf_getnote(d, off, &n, &name_off, &desc_off)) > 0) {
			if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 &&
			    !memcmp((char *)d->d_buf + name_off, "GNU", 4) && n.n_descsz <= cap) {
				memcpy(out, (char *)d->d_buf + desc_off, n.n_descsz);
				ret = (int)n.n_descsz;
				break;
			}
			off = next;
		}
	}
	elf_end(elf);
	close(fd);
	return ret;
}

static void test_build_id_parity(void)
{
	uint8_t ours[TABLE_BUILD_ID_MAX], theirs[TABLE_BUILD_ID_MAX];
	FILE *f = popen("ls /usr/lib/x86_64-linux-gnu/*.so* /usr/bin/* 2>/dev/null | head -400", "r");
	char line[4096];
	int n = 0, fd, a, b;

	elf_version(EV_CURRENT);
	CHECK(f);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		fd = open(line, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		a = elf_build_id_fd(fd, ours, sizeof(ours));
		close(fd);
		if (a < 0)
			continue;
		b = libelf_build_id(line, theirs, sizeof(theirs));
		EXPECT(a == b && memcmp(ours, theirs, a > 0 ? a : 0) == 0, "%s: %d vs libelf %d",
		       line, a, b);
		n++;
	}
	pclose(f);
	CHECK(n > 100, "only %d ELF files compared", n);
	printf("  build ids of %d files agree with libelf\n", n);
}

int main(void)
{
	struct unwind_table *libc;

	CHECK(mkdtemp(tmpdir));
	check_tmpdir = tmpdir;
	atexit(cleanup);
	unsetenv(TABLE_CACHE_ENV_DISABLE);
	libc = compile_path(LIBC);

	printf("poisoned copy\n");
	test_poisoned_copy(libc);
	printf("entry attacks\n");
	test_entry_attacks(libc);
	printf("cache directories\n");
	test_cache_dirs(libc);
	printf("truncation race\n");
	test_truncate_race();
	printf("compressed claims\n");
	test_compressed_claims();
	printf("not regular files\n");
	test_not_regular();
	printf("no section headers\n");
	test_no_section_headers(libc);
	printf("build ids\n");
	test_build_id_parity();

	table_free(libc);
	if (check_status())
		return 1;
	printf("test_table_hardening: ok\n");
	return 0;
}
