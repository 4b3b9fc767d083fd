/* Measures what the table cache buys at startup: for each object, a cold
 * compile (table_compile_fd) against a warm read from the cache
 * (table_cache_get hit), with the table's size in rows and walker bytes.
 * Usage: bench_tables [OBJECT...]   (default: the libraries below) */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "table.h"
#include "table_cache.h"

#define RUNS 10

static const char *const default_objects[] = {
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	"/usr/bin/python3.11",
	"/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4",
	"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
	"/usr/bin/perl",
};

/* The objects summed on the "startup" line: what a Python service maps. */
static const char *const startup_objects[] = {
	"/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	"/usr/bin/python3.11",
};

struct result {
	double cold_best, cold_median; /* ms */
	double warm_best, warm_median; /* ms */
	uint32_t rows;
	uint64_t walker_bytes;
	uint64_t entry_bytes; /* compressed cache entry on disk */
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void best_median(double *v, int n, double *best, double *median)
{
	qsort(v, n, sizeof(*v), cmp_double);
	*best = v[0];
	*median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t dir_bytes(const char *dir)
{
	struct dirent *de;
	struct stat st;
	uint64_t sum = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL)
		if (fstatat(dirfd(d), de->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
			sum += st.st_size;
	closedir(d);
	return sum;
}

static int bench_cold(int fd, struct result *r)
{
	struct unwind_table *t;
	double v[RUNS], t0;
	int ret;

	for (int i = 0; i < RUNS; i++) {
		t0 = now_ms();
		ret = table_compile_fd(fd, NULL, &t);
		v[i] = now_ms() - t0;
		if (ret)
			return ret;
		r->rows = t->nrows;
		r->walker_bytes = table_walker_bytes(t);
		table_free(t);
	}
	best_median(v, RUNS, &r->cold_best, &r->cold_median);
	return 0;
}

static int bench_warm(struct table_cache *c, int fd, const char *path, struct result *r)
{
	uint64_t before = dir_bytes(table_cache_dir(c));
	struct unwind_table *t;
	double v[RUNS], t0;
	bool hit;
	int ret;

	ret = table_cache_get(c, fd, path, NULL, &t, &hit); /* fills the entry */
	if (ret)
		return ret;
	table_free(t);
	r->entry_bytes = dir_bytes(table_cache_dir(c)) - before;
	for (int i = 0; i < RUNS; i++) {
		t0 = now_ms();
		ret = table_cache_get(c, fd, path, NULL, &t, &hit);
		v[i] = now_ms() - t0;
		if (ret)
			return ret;
		table_free(t);
		if (!hit)
			return -ESTALE;
	}
	best_median(v, RUNS, &r->warm_best, &r->warm_median);
	return 0;
}

static bool is_startup_object(const char *path)
{
	for (size_t i = 0; i < sizeof(startup_objects) / sizeof(startup_objects[0]); i++)
		if (strcmp(path, startup_objects[i]) == 0)
			return true;
	return false;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

int main(int argc, char **argv)
{
	const char *const *objs = argc > 1 ? (const char *const *)argv + 1 : default_objects;
	size_t nobjs = argc > 1 ? (size_t)argc - 1 : sizeof(default_objects) / sizeof(default_objects[0]);
	char dir[] = "/tmp/dwleak-bench-XXXXXX";
	double startup_cold = 0, startup_warm = 0;
	int nstartup = 0, ret, fd;
	struct table_cache *c;

	unsetenv(TABLE_CACHE_ENV_DISABLE);
	if (!mkdtemp(dir) || table_cache_open(dir, &c) != 0) {
		fprintf(stderr, "bench_tables: cannot set up a cache in %s\n", dir);
		return 1;
	}
	printf("%d runs each; times in ms (cold = table_compile_fd, warm = table_cache_get hit)\n\n",
	       RUNS);
	printf("%-44s %8s %8s %8s %8s %9s %10s %6s %9s\n", "object", "cold-min", "cold-med",
	       "warm-min", "warm-med", "rows", "bytes", "B/row", "entry");
	for (size_t i = 0; i < nobjs; i++) {
		struct result r = { 0 };

		fd = open(objs[i], O_RDONLY | O_CLOEXEC);
		ret = fd < 0 ? -errno : bench_cold(fd, &r);
		if (!ret)
			ret = bench_warm(c, fd, objs[i], &r);
		if (fd >= 0)
			close(fd);
		if (ret) {
			printf("%-44s skipped: %s\n", objs[i], strerror(-ret));
			continue;
		}
		printf("%-44s %8.2f %8.2f %8.3f %8.3f %9u %10ju %6.2f %9ju\n", objs[i], r.cold_best,
		       r.cold_median, r.warm_best, r.warm_median, r.rows, (uintmax_t)r.walker_bytes,
		       r.rows ? (double)r.walker_bytes / r.rows : 0.0, (uintmax_t)r.entry_bytes);
		if (is_startup_object(objs[i])) {
			startup_cold += r.cold_median;
			startup_warm += r.warm_median;
			nstartup++;
		}
	}
	if (nstartup)
		printf("\nlibc + libstdc++ + python3.11 (%d found), medians: "
		       "cold %.2f ms, warm %.3f ms (%.0fx)\n", nstartup, startup_cold, startup_warm,
		       startup_warm > 0 ? startup_cold / startup_warm : 0.0);
	table_cache_close(c);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
