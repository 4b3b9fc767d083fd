/* Unit tests for the table cache and what it stands on: build ids, the
 * serialized table format and its validation, and the cache's keying (by
 * content), corruption handling and atomic rewrites, against the real
 * compiler.  The attacks on it are in test_table_hardening.c. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_id.h"
#include "check.h"
#include "table_check.h"
#include "table.h"
#include "table_cache.h"
#include "table_serialize.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

static char tmpdir[] = "/tmp/dwleak-test-cache-XXXXXX";

static void cleanup(void)
{
	check_rm_tree(tmpdir);
}

static char *path_in_tmp(const char *name)
{
	char *p;

	CHECK(asprintf(&p, "%s/%s", tmpdir, name) > 0);
	return p;
}

static int open_ro(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	return fd;
}

/* ---- build ids ---- */

static void test_build_id(const struct unwind_table *libc)
{
	uint8_t id[TABLE_BUILD_ID_MAX], id2[TABLE_BUILD_ID_MAX], small[4];
	struct stat st;
	void *img;
	int fd, n, m;

	fd = open_ro(LIBC);
	n = elf_build_id_fd(fd, id, sizeof(id));
	CHECK(n == 20, "libc build id length %d", n);
	CHECK(libc->build_id_len == (uint32_t)n && memcmp(libc->build_id, id, n) == 0,
	      "compiler and elf_build_id_fd disagree");
	CHECK(elf_build_id_fd(fd, small, sizeof(small)) == -ENOBUFS);

	/* The image is mapped read-only: a write by libelf would fault. */
	CHECK(fstat(fd, &st) == 0);
	img = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	CHECK(img != MAP_FAILED);
	CHECK(elf_build_id_mem(img, st.st_size, id2, sizeof(id2)) == n);
	CHECK(memcmp(id, id2, n) == 0);
	for (size_t cut = 0; cut < 4096; cut += 7) {
		m = elf_build_id_mem(img, cut, id2, sizeof(id2));
		CHECK(m <= 0 || (m == n && memcmp(id, id2, n) == 0), "cut %zu: %d", cut, m);
	}
	CHECK(elf_build_id_mem("not an elf", 10, id2, sizeof(id2)) == -ENOEXEC);
	CHECK(elf_build_id_mem(img, 0, id2, sizeof(id2)) == -ENOEXEC);
	munmap(img, st.st_size);
	close(fd);

	fd = open_ro("/");
	CHECK(elf_build_id_fd(fd, id, sizeof(id)) == -EISDIR);
	close(fd);
	CHECK(elf_build_id_fd(-1, id, sizeof(id)) == -EBADF);
}

/* ---- serialization ---- */

/* A small table by hand, so every byte of its encoding can be mutated. */
static struct unwind_table *small_table(void)
{
	struct unwind_table *t = calloc(1, sizeof(*t));

	CHECK(t);
	t->first_page = 5;
	t->npages = 3;
	t->nrows = 4;
	t->nrules = 3;
	t->pages = calloc(3, sizeof(*t->pages));
	t->rows = calloc(4, sizeof(*t->rows));
	t->rules = calloc(3, sizeof(*t->rules));
	CHECK(t->pages && t->rows && t->rules);
	t->pages[0] = (struct unwind_page){ 0, 3 };
	t->pages[2] = (struct unwind_page){ 3, 1 };
	t->rows[0] = (struct unwind_row){ 0, 1 };
	t->rows[1] = (struct unwind_row){ 0x10, 2 };
	t->rows[2] = (struct unwind_row){ 0x400, 0 };
	t->rows[3] = (struct unwind_row){ 0, 1 };
	t->rules[1] = (struct unwind_rule){ .cfa_off = 8, .cfa_type = UNWIND_CFA_RSP };
	t->rules[2] = (struct unwind_rule){ .cfa_off = 16, .rbp_off = -16, .cfa_type = UNWIND_CFA_RBP, .rbp_type = UNWIND_RBP_CFA };
	t->nfdes = t->nfdes_eh = 2;
	t->covered_bytes = 0x500;
	t->supported_bytes = 0x400;
	t->build_id_len = 3;
	memcpy(t->build_id, "\x01\x02\x03", 3);
	return t;
}

static void check_round_trip(const struct unwind_table *t)
{
	struct unwind_table *back = NULL;
	void *buf, *buf2;
	size_t len, len2;

	CHECK(table_serialize(t, &buf, &len) == 0);
	CHECK(table_deserialize(buf, len, &back) == 0);
	CHECK(tables_equal(t, back), "round trip changed the table");
	CHECK(table_serialize(back, &buf2, &len2) == 0);
	CHECK(len == len2 && memcmp(buf, buf2, len) == 0, "encoding not canonical");
	free(buf);
	free(buf2);
	table_free(back);
}

/* Decoding a mutated buffer either fails with -EBADMSG or yields a table
 * that encodes back to exactly those bytes: nothing is silently dropped. */
static void check_mutation(const uint8_t *buf, size_t len)
{
	struct unwind_table *t = NULL;
	void *again;
	size_t again_len;
	int ret = table_deserialize(buf, len, &t);

	if (ret) {
		CHECK(ret == -EBADMSG, "ret %d", ret);
		return;
	}
	CHECK(table_serialize(t, &again, &again_len) == 0);
	CHECK(again_len == len && memcmp(again, buf, len) == 0, "accepted bytes not canonical");
	free(again);
	table_free(t);
}

static void expect_bad(struct unwind_table *t, const char *what)
{
	struct unwind_table *back = NULL;
	void *buf;
	size_t len;

	CHECK(table_serialize(t, &buf, &len) == 0);
	CHECK(table_deserialize(buf, len, &back) == -EBADMSG, "accepted %s", what);
	free(buf);
	table_free(t);
}

static void test_serialize_invalid(void)
{
	struct unwind_table *t;

	t = small_table();
	t->rows[1].rule = 3;
	expect_bad(t, "rule index out of range");
	t = small_table();
	t->rows[1].pc_low = 0x500;
	expect_bad(t, "unsorted rows");
	t = small_table();
	t->rows[1].pc_low = 0;
	expect_bad(t, "duplicate pc_low");
	t = small_table();
	t->pages[2].nrows = 2;
	expect_bad(t, "page past the rows");
	t = small_table();
	t->pages[2].first_row = 2;
	expect_bad(t, "overlapping pages");
	t = small_table();
	t->pages[0].nrows = 2;
	expect_bad(t, "rows owned by no page");
	t = small_table();
	t->rules[0].cfa_type = UNWIND_CFA_UNSUPPORTED + 1;
	expect_bad(t, "cfa_type out of range");
	t = small_table();
	t->rules[0].rbp_type = UNWIND_RBP_UNSUPPORTED + 1;
	expect_bad(t, "rbp_type out of range");
	t = small_table();
	t->rules[0].flags = UNWIND_RULE_RA_SIGNED;
	expect_bad(t, "a signed return address in an x86_64 table");
	t = small_table();
	t->arch = UNWIND_ARCH_AARCH64;
	t->rules[0].flags = 2;
	expect_bad(t, "an unknown rule flag");
	t = small_table();
	t->arch = 2;
	expect_bad(t, "an unknown architecture");
	t = small_table();
	t->first_page = UINT64_MAX >> UNWIND_PAGE_SHIFT;
	expect_bad(t, "pages past the address space");

	t = small_table();
	t->build_id_len = TABLE_BUILD_ID_MAX + 1;
	CHECK(table_serialize(t, &(void *){ NULL }, &(size_t){ 0 }) == -EINVAL);
	table_free(t);
}

static void test_serialize(const struct unwind_table *libc)
{
	struct unwind_table *t = small_table(), *back;
	uint8_t *buf, *copy;
	size_t len;

	check_round_trip(t);
	check_round_trip(libc);
	/* an aarch64 table keeps its machine and its signed return addresses */
	t->arch = UNWIND_ARCH_AARCH64;
	t->rules[0].flags = UNWIND_RULE_RA_SIGNED;
	check_round_trip(t);
	t->arch = UNWIND_ARCH_X86_64;
	t->rules[0].flags = 0;

	CHECK(table_serialize(t, (void **)&buf, &len) == 0);
	copy = malloc(len + 1);
	CHECK(copy);
	for (size_t cut = 0; cut < len; cut++) {
		memcpy(copy, buf, cut); /* a fresh, exactly sized allocation for ASan */
		CHECK(table_deserialize(copy, cut, &back) == -EBADMSG, "truncated at %zu", cut);
	}
	memcpy(copy, buf, len);
	copy[len] = 0;
	CHECK(table_deserialize(copy, len + 1, &back) == -EBADMSG, "trailing byte");
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			memcpy(copy, buf, len);
			copy[i] ^= (uint8_t)(1 << bit);
			check_mutation(copy, len);
		}
		memcpy(copy, buf, len);
		copy[i] = 0xff;
		check_mutation(copy, len);
	}
	free(copy);
	free(buf);
	table_free(t);

	CHECK(table_serialize(libc, (void **)&buf, &len) == 0);
	for (size_t cut = 0; cut < len; cut += len / 97 + 1)
		CHECK(table_deserialize(buf, cut, &back) == -EBADMSG, "libc cut at %zu", cut);
	free(buf);
	test_serialize_invalid();
}

/* ---- the cache ---- */

static struct table_cache *open_cache(void)
{
	struct table_cache *c = NULL;

	CHECK(table_cache_open(NULL, &c) == 0);
	return c;
}

/* Gets PATH's table through C, checks HIT and that it equals FRESH. */
static void get_expect(struct table_cache *c, const char *path, const struct table_opts *opts,
		       const struct unwind_table *fresh, bool want_hit, const char *what)
{
	struct unwind_table *t = NULL;
	bool hit = !want_hit;
	int fd = open_ro(path);

	CHECK(table_cache_get(c, fd, path, opts, &t, &hit) == 0, "%s", what);
	CHECK(hit == want_hit, "%s: hit=%d", what, hit);
	CHECK(tables_equal(t, fresh), "%s: table differs from a fresh compile", what);
	table_free(t);
	close(fd);
}

/* The path of the only entry file in the cache directory. */
static char *only_entry(const struct table_cache *c)
{
	struct dirent *de;
	char *found = NULL;
	DIR *d = opendir(table_cache_dir(c));

	CHECK(d, "opendir %s", table_cache_dir(c));
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		CHECK(!found, "more than one entry (%s)", de->d_name);
		CHECK(asprintf(&found, "%s/%s", table_cache_dir(c), de->d_name) > 0);
	}
	closedir(d);
	CHECK(found, "no entry written");
	return found;
}

/* Damages the entry in one way, expects a rebuild, then a hit again. */
static void corrupt_and_check(struct table_cache *c, const struct unwind_table *fresh,
			      const uint8_t *good, size_t len, const uint8_t *bad, size_t bad_len,
			      const char *what)
{
	char *entry = only_entry(c);
	size_t now_len;
	uint8_t *now;

	check_spit(entry, bad, bad_len, 0600);
	get_expect(c, LIBC, NULL, fresh, false, what);
	now = check_slurp(entry, &now_len);
	CHECK(now_len == len && memcmp(now, good, len) == 0, "%s: entry not rewritten", what);
	get_expect(c, LIBC, NULL, fresh, true, what);
	free(now);
	free(entry);
}

static void test_cache_corruption(struct table_cache *c, const struct unwind_table *fresh)
{
	char *entry = only_entry(c);
	size_t len, cuts[] = { 0, 1, 7, 8, 39, 40, 41, 100 };
	uint8_t *good = check_slurp(entry, &len), *bad = malloc(len);
	char what[64];

	CHECK(bad);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		snprintf(what, sizeof(what), "truncated at %zu", cuts[i]);
		corrupt_and_check(c, fresh, good, len, good, cuts[i], what);
	}
	corrupt_and_check(c, fresh, good, len, good, len / 2, "truncated at half");
	corrupt_and_check(c, fresh, good, len, good, len - 1, "last byte cut");
	for (size_t off = len - 1; off > len / 2; off -= len / 7) {
		memcpy(bad, good, len);
		bad[off] ^= 0x40;
		snprintf(what, sizeof(what), "flipped byte at %zu", off);
		corrupt_and_check(c, fresh, good, len, bad, len, what);
	}
	memcpy(bad, good, len);
	bad[0] ^= 1;
	corrupt_and_check(c, fresh, good, len, bad, len, "wrong magic");
	memcpy(bad, good, len);
	bad[8] ^= 1;
	corrupt_and_check(c, fresh, good, len, bad, len, "other version");
	memcpy(bad, good, len);
	bad[45] ^= 1; /* inside the key text */
	corrupt_and_check(c, fresh, good, len, bad, len, "other key");
	free(bad);
	free(good);
	free(entry);
}

static void test_cache_build_id(const struct unwind_table *fresh)
{
	struct table_cache_stats st;
	struct table_cache *c = open_cache();

	CHECK(strstr(table_cache_dir(c), tmpdir) == table_cache_dir(c));
	get_expect(c, LIBC, NULL, fresh, false, "first get");
	get_expect(c, LIBC, NULL, fresh, true, "second get");
	test_cache_corruption(c, fresh);
	table_cache_stats(c, &st);
	CHECK(st.store_errors == 0 && st.hits >= 2 && st.corrupt > 0);
	table_cache_close(c);

	/* A new cache on the same directory finds the entry. */
	c = open_cache();
	get_expect(c, LIBC, NULL, fresh, true, "reopened");
	table_cache_close(c);
}

#define NOBID_CODE                              \
	"int f(int x) { return x * 3; }\n"      \
	"int g(int x) { return f(x) + f(x + 1); }\n"

/* A tiny shared object of CODE without NT_GNU_BUILD_ID, built now. */
static char *build_nobid_object(const char *code)
{
	char *src = path_in_tmp("nobid.c"), *obj = path_in_tmp("nobid.so"), *cmd;

	check_spit(src, (const uint8_t *)code, strlen(code), 0600);
	CHECK(asprintf(&cmd, "cc -shared -fPIC -O1 -Wl,--build-id=none -o %s %s", obj, src) > 0);
	CHECK(system(cmd) == 0, "%s", cmd);
	free(cmd);
	free(src);
	return obj;
}

static void touch_forward(const char *path)
{
	struct stat st;
	struct timespec times[2];

	CHECK(stat(path, &st) == 0);
	times[0] = st.st_atim;
	times[1] = st.st_mtim;
	times[1].tv_sec += 10;
	CHECK(utimensat(AT_FDCWD, path, times, 0) == 0);
}

static void test_cache_no_build_id(void)
{
	char *obj = build_nobid_object(NOBID_CODE), *copy = path_in_tmp("copy.so"), *rebuilt;
	struct unwind_table *fresh = NULL, *t = NULL, *other = NULL;
	struct table_cache *c = open_cache();
	uint8_t id[TABLE_BUILD_ID_MAX], *bytes;
	size_t len;
	bool hit;
	int fd;

	fd = open_ro(obj);
	CHECK(elf_build_id_fd(fd, id, sizeof(id)) == 0, "object has a build id");
	close(fd);
	CHECK(table_compile_path(obj, NULL, &fresh) == 0);
	CHECK(fresh->build_id_len == 0);

	get_expect(c, obj, NULL, fresh, false, "no build id: first");
	get_expect(c, obj, NULL, fresh, true, "no build id: second");
	/* Entries are keyed by content: a new mtime changes nothing... */
	touch_forward(obj);
	get_expect(c, obj, NULL, fresh, true, "no build id: touched");
	/* ... new code at the same path is another table. */
	rebuilt = build_nobid_object("int f(int x) { return x * 5; }\n");
	CHECK(strcmp(rebuilt, obj) == 0);
	CHECK(table_compile_path(obj, NULL, &other) == 0);
	get_expect(c, obj, NULL, other, false, "no build id: rebuilt");
	get_expect(c, obj, NULL, other, true, "no build id: rebuilt, second");
	table_free(other);
	free(rebuilt);
	rebuilt = build_nobid_object(NOBID_CODE);
	get_expect(c, obj, NULL, fresh, false, "no build id: rebuilt back");
	free(rebuilt);

	bytes = check_slurp(obj, &len);
	check_spit(copy, bytes, len, 0600);
	get_expect(c, copy, NULL, fresh, false, "no build id: other path");

	/* Only an fd: keyed by device and inode. */
	fd = open_ro(obj);
	CHECK(table_cache_get(c, fd, NULL, NULL, &t, &hit) == 0 && !hit);
	CHECK(tables_equal(t, fresh));
	table_free(t);
	CHECK(table_cache_get(c, fd, NULL, NULL, &t, &hit) == 0 && hit, "fd-only second get");
	table_free(t);
	close(fd);

	free(bytes);
	free(copy);
	free(obj);
	table_free(fresh);
	table_cache_close(c);
}

/* A debug file is part of the key: with it or without, another entry. */
static void test_cache_debug_path(const struct unwind_table *libc_fresh)
{
	struct table_opts opts = { .debug_path = LIBC };
	struct unwind_table *fresh = NULL;
	struct table_cache *c = open_cache();

	CHECK(table_compile_path(LIBC, &opts, &fresh) == 0);
	get_expect(c, LIBC, &opts, fresh, false, "with debug file: first");
	get_expect(c, LIBC, &opts, fresh, true, "with debug file: second");
	get_expect(c, LIBC, NULL, libc_fresh, true, "without debug file");
	table_free(fresh);
	table_cache_close(c);
}

static void test_cache_unusable(const struct unwind_table *fresh)
{
	char *file = path_in_tmp("plain-file"), *dir = path_in_tmp("plain-file/dwleak");
	struct table_cache_stats st;
	struct table_cache *c = NULL;

	/* A directory under a regular file can never be created, even by
	 * root: the cache is refused, with a reason, and the caller runs
	 * without one (a NULL cache). */
	check_spit(file, (const uint8_t *)"x", 1, 0600);
	CHECK(table_cache_open(dir, &c) == -ENOTDIR && c == NULL);
	CHECK(strstr(table_cache_why(), "not a directory"), "%s", table_cache_why());
	CHECK(table_cache_open("", &c) == -EINVAL && c == NULL);

	setenv(TABLE_CACHE_ENV_DISABLE, "1", 1);
	c = open_cache();
	get_expect(c, LIBC, NULL, fresh, false, "disabled: first");
	get_expect(c, LIBC, NULL, fresh, false, "disabled: second");
	table_cache_stats(c, &st);
	CHECK(st.hits == 0 && st.misses == 0 && st.store_errors == 0);
	table_cache_close(c);
	unsetenv(TABLE_CACHE_ENV_DISABLE);

	get_expect(NULL, LIBC, NULL, fresh, false, "NULL cache");
	free(dir);
	free(file);
}

int main(void)
{
	struct unwind_table *libc = NULL;
	char *cache_home;
	int ret;

	CHECK(mkdtemp(tmpdir));
	atexit(cleanup);
	cache_home = path_in_tmp("cache");
	setenv("XDG_CACHE_HOME", cache_home, 1);
	unsetenv(TABLE_CACHE_ENV_DISABLE);

	ret = table_compile_path(LIBC, NULL, &libc);
	CHECK(ret == 0, "compiling %s: %d %s", LIBC, ret, table_last_error());
	test_build_id(libc);
	test_serialize(libc);
	test_cache_build_id(libc);
	test_cache_no_build_id();
	test_cache_debug_path(libc);
	test_cache_unusable(libc);

	table_free(libc);
	free(cache_home);
	printf("test_table_cache: ok\n");
	return 0;
}
