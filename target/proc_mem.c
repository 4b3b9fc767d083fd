/* The leak check's view of a process's memory: the roots it plans from
 * /proc/PID/maps, the pages pagemap says hold data, read with
 * process_vm_readv (many pages a call) or /proc/PID/mem (pages the target
 * shares), and the residency and RSS accounts built from the same
 * pagemap. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "constants.h"
#include "proc_mem.h"

/* pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst) */
#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)
#define PM_EXCLUSIVE (1ull << 56) /* mapped by this process only (Linux 4.2+) */
#define PM_PFN_MASK ((1ull << 55) - 1)

/* The PAGEMAP_SCAN ioctl (Linux 6.7, include/uapi/linux/fs.h), declared
 * here because the build's headers may be older than the kernel it runs
 * on; the layouts are the kernel ABI. */
struct pm_region {
	uint64_t start, end, categories;
};
struct pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PM_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PM_IS_PRESENT (1ull << 3)
#define PM_IS_SWAPPED (1ull << 4)
#define PM_IS_PFNZERO (1ull << 5)

/* Sizes of the reader's batches: process_vm_readv takes at most IOV_MAX
 * (1024) remote pieces a call; pagemap is read 64K entries (256 MiB of
 * address space) at a time; PAGEMAP_SCAN returns 1024 runs a call.  A
 * batch reads 256 KiB: it stays in L2 for the callback right after, and
 * measured faster than 1 MiB (1 GiB in ~215 ms against ~235 ms). */
#define IOV_BATCH 1024
#define PM_WINDOW 65536
#define SCAN_VEC 1024
#define DEFAULT_BUFFER (256u << 10)

static const char *const kind_names[] = {
#define KIND_NAME(e, name) [e] = name,
	PROC_MAP_KIND_LIST(KIND_NAME)
#undef KIND_NAME
};

static const char *const part_names[] = {
#define PART_NAME(e, name) [e] = name,
	PROC_RSS_PART_LIST(PART_NAME)
#undef PART_NAME
};

const char *proc_map_kind_name(enum proc_map_kind kind)
{
	return (unsigned)kind < PROC_MAP_KIND_COUNT ? kind_names[kind] : NULL;
}

const char *proc_rss_part_name(enum proc_rss_part part)
{
	return (unsigned)part < PROC_RSS_PART_COUNT ? part_names[part] : NULL;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static bool starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* ---------------------------------------------------------------------
 * Mappings and the plan
 * ------------------------------------------------------------------ */

/* A /dev/ path maps a device unless map_files says it is something else
 * (a tmpfs file under /dev/shm).  memcheck skips device mappings too,
 * "as this may cause hangs", and keeps /dev/zero (scan_memory_root_set). */
static bool is_device(int pid, const struct proc_map *m)
{
	char *p = proc_map_files_path(pid, m);
	struct stat sb;
	bool dev = true; /* when in doubt, do not read it */

	if (p && stat(p, &sb) == 0)
		dev = S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode);
	free(p);
	return dev;
}

enum proc_map_kind proc_map_kind_of(int pid, const struct proc_map *m)
{
	const char *p = m->path;

	if (!p[0] || starts_with(p, "[anon:") || starts_with(p, "[anon_shmem:"))
		return PROC_MAP_ANON;
	if (!strcmp(p, "[heap]"))
		return PROC_MAP_HEAP;
	if (!strcmp(p, "[stack]"))
		return PROC_MAP_STACK;
	if (p[0] == '[')
		return PROC_MAP_KERNEL;
	if (starts_with(p, "/dev/zero") && (p[9] == 0 || p[9] == ' '))
		return PROC_MAP_FILE;
	if (starts_with(p, "/dev/") && is_device(pid, m))
		return PROC_MAP_DEVICE;
	return PROC_MAP_FILE;
}

/* Thread TID's sp from /proc/PID/task/TID/syscall: "NR ARG... SP PC" in a
 * syscall, "-1 SP PC" outside one, "running" when it runs. */
static int thread_sp(int pid, int tid, uint64_t *sp)
{
	char path[64], buf[256], *tok, *save, *prev = NULL, *last = NULL;
	ssize_t got;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got <= 0)
		return got < 0 ? -errno : -EIO;
	buf[got] = 0;
	if (!strncmp(buf, "running", 7))
		return -EBUSY;
	for (tok = strtok_r(buf, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
		prev = last;
		last = tok;
	}
	if (!prev)
		return -EIO;
	*sp = strtoull(prev, NULL, 16);
	return 0;
}

int proc_mem_threads(int pid, struct proc_mem_thread **threads, int **tids, size_t *n)
{
	struct proc_mem_thread *t = NULL, *grown_t;
	int *id = NULL, *grown_id;
	size_t cnt = 0, cap = 0;
	char path[64];
	struct dirent *d;
	int err = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? -ESRCH : -errno;
	while (!err && (d = readdir(dir))) {
		int tid = atoi(d->d_name);
		uint64_t sp = 0;

		if (tid <= 0)
			continue;
		err = thread_sp(pid, tid, &sp);
		if (err == -ESRCH) { /* it exited meanwhile */
			err = 0;
			continue;
		}
		if (!err && cnt == cap) {
			cap = cap ? cap * 2 : 16;
			grown_t = realloc(t, cap * sizeof(*t));
			if (grown_t)
				t = grown_t;
			grown_id = realloc(id, cap * sizeof(*id));
			if (grown_id)
				id = grown_id;
			if (!grown_t || !grown_id)
				err = -ENOMEM;
		}
		if (!err) {
			t[cnt] = (struct proc_mem_thread){ .sp = sp };
			id[cnt++] = tid;
		}
	}
	closedir(dir);
	if (err) {
		free(t);
		free(id);
		return err;
	}
	*threads = t;
	*n = cnt;
	if (tids)
		*tids = id;
	else
		free(id);
	return 0;
}

/* Whether mapping I is thread T's stack and nothing else: [stack], or an
 * anonymous private writable mapping (not [heap]) holding both T's sp and
 * its TLS pointer, as a pthread stack does with the thread descriptor at
 * its top.  Only then is the memory below the sp dead. */
static bool is_stack_of(const struct proc_map *maps, const enum proc_map_kind *kinds, size_t i,
			const struct proc_mem_thread *t)
{
	const struct proc_map *m = &maps[i];

	if (kinds[i] == PROC_MAP_STACK)
		return true;
	return kinds[i] == PROC_MAP_ANON && !m->shared && m->writable && t->tls >= m->start && t->tls < m->end;
}

static int range_by_addr(const void *x, const void *y)
{
	const struct proc_mem_range *a = x, *b = y;

	return a->addr < b->addr ? -1 : a->addr > b->addr;
}

void proc_mem_ranges_normalize(struct proc_mem_range *v, size_t *n)
{
	size_t i, k = 0;

	if (!*n)
		return;
	qsort(v, *n, sizeof(*v), range_by_addr);
	for (i = 1; i < *n; i++) {
		if (v[i].addr <= v[k].addr + v[k].size) {
			if (v[i].addr + v[i].size > v[k].addr + v[k].size)
				v[k].size = v[i].addr + v[i].size - v[k].addr;
		} else {
			v[++k] = v[i];
		}
	}
	*n = k + 1;
}

int proc_mem_ranges_subtract(const struct proc_mem_range *a, size_t na, const struct proc_mem_range *b, size_t nb,
			     struct proc_mem_range **out, size_t *nout)
{
	struct proc_mem_range *v = malloc((na + nb + 1) * sizeof(*v)); /* each of B splits one at most */
	size_t i, j = 0, k = 0, m;

	if (!v)
		return -ENOMEM;
	for (i = 0; i < na; i++) {
		uint64_t s = a[i].addr, e = a[i].addr + a[i].size;

		while (j < nb && b[j].addr + b[j].size <= s)
			j++;
		for (m = j; m < nb && b[m].addr < e && s < e; m++) {
			if (b[m].addr > s)
				v[k++] = (struct proc_mem_range){ s, b[m].addr - s };
			if (b[m].addr + b[m].size > s)
				s = b[m].addr + b[m].size;
		}
		if (s < e)
			v[k++] = (struct proc_mem_range){ s, e - s };
	}
	*out = v;
	*nout = k;
	return 0;
}

void proc_mem_plan_free(struct proc_mem_plan *plan)
{
	if (!plan)
		return;
	proc_maps_free(plan->maps, plan->nmaps);
	free(plan->kinds);
	free(plan->regions);
	memset(plan, 0, sizeof(*plan));
}

/* The lowest live address of each stack mapping into LIVE (UINT64_MAX:
 * not a stack): its threads' lowest sp - PROC_MEM_RED_ZONE, lowered to
 * the start of any range to keep below it. */
static void stack_bottoms(struct proc_mem_plan *plan, const struct proc_mem_thread *threads, size_t nthreads,
			  const struct proc_mem_range *keep, size_t nkeep, uint64_t *live)
{
	uint64_t cut_lo = UINT64_MAX, cut_hi = 0; /* the cut parts lie in [cut_lo, cut_hi) */
	size_t i;

	for (i = 0; i < plan->nmaps; i++)
		live[i] = UINT64_MAX;
	for (i = 0; i < nthreads; i++) {
		ssize_t m = proc_maps_find(plan->maps, plan->nmaps, threads[i].sp);
		uint64_t sp = threads[i].sp;

		if (m < 0 || !is_stack_of(plan->maps, plan->kinds, (size_t)m, &threads[i])) {
			plan->sp_not_on_stack++;
			continue;
		}
		if (threads[i].no_red_zone)
			live[m] = min_u64(live[m], sp & ~7ull);
		else
			live[m] = min_u64(live[m], sp > PROC_MEM_RED_ZONE ? (sp - PROC_MEM_RED_ZONE) & ~7ull : 0);
		cut_lo = min_u64(cut_lo, plan->maps[m].start);
		cut_hi = max_u64(cut_hi, live[m]);
	}
	/* a million tracked blocks, nearly all in the heap: one compare each */
	for (i = 0; i < nkeep; i++) {
		ssize_t m;

		if (keep[i].addr < cut_lo || keep[i].addr >= cut_hi)
			continue;
		m = proc_maps_find(plan->maps, plan->nmaps, keep[i].addr);
		if (m >= 0 && live[m] != UINT64_MAX && keep[i].addr < live[m]) {
			live[m] = keep[i].addr & ~7ull;
			plan->stack_kept++;
		}
	}
}

/* Adds region [START, END) of mapping MAP to PLAN, less the parts of
 * SKIP[*K..NSKIP) (sorted, not overlapping; *K moves past the ranges that
 * end before END), which are counted in skipped_allocator. */
static void region_add(struct proc_mem_plan *plan, uint64_t start, uint64_t end, size_t map, enum proc_mem_root why,
		       const struct proc_mem_range *skip, size_t nskip, size_t *k)
{
	size_t j;

	while (*k < nskip && skip[*k].addr + skip[*k].size <= start)
		(*k)++;
	for (j = *k; j < nskip && skip[j].addr < end && start < end; j++) {
		uint64_t s = max_u64(skip[j].addr, start), e = min_u64(skip[j].addr + skip[j].size, end);

		if (s > start)
			plan->regions[plan->nregions++] =
				(struct proc_mem_region){ .start = start, .end = s, .map = map, .why = why };
		plan->skipped_allocator += e - s;
		start = e;
	}
	if (start < end)
		plan->regions[plan->nregions++] =
			(struct proc_mem_region){ .start = start, .end = end, .map = map, .why = why };
}

int proc_mem_plan_from_maps(struct proc_map *maps, enum proc_map_kind *kinds, size_t n,
			    const struct proc_mem_thread *threads, size_t nthreads, const struct proc_mem_range *keep,
			    size_t nkeep, const struct proc_mem_range *skip, size_t nskip, struct proc_mem_plan *plan)
{
	uint64_t *live = malloc((n ? n : 1) * sizeof(*live));
	size_t i, k = 0;

	memset(plan, 0, sizeof(*plan));
	plan->maps = maps;
	plan->kinds = kinds;
	plan->nmaps = n;
	/* each skipped range cuts at most one region in two */
	plan->regions = malloc((n + nskip + 1) * sizeof(*plan->regions));
	if (!live || !plan->regions) {
		free(live);
		proc_mem_plan_free(plan);
		return -ENOMEM;
	}
	stack_bottoms(plan, threads, nthreads, keep, nkeep, live);
	for (i = 0; i < n; i++) {
		const struct proc_map *m = &maps[i];
		uint64_t size = m->end - m->start, start = m->start;
		enum proc_mem_root why;

		if (kinds[i] == PROC_MAP_KERNEL) {
			plan->skipped_kernel += size;
			continue;
		}
		if (kinds[i] == PROC_MAP_DEVICE) {
			plan->skipped_device += size;
			continue;
		}
		if (!m->readable)
			continue;
		if (m->writable)
			why = PROC_MEM_ROOT_WRITABLE;
		else if (kinds[i] != PROC_MAP_FILE)
			why = PROC_MEM_ROOT_ANON_READONLY;
		else {
			plan->skipped_readonly += size;
			continue;
		}
		if (live[i] != UINT64_MAX) {
			start = min_u64(max_u64(m->start, live[i]), m->end);
			plan->stack_dead += start - m->start;
			why = PROC_MEM_ROOT_STACK;
		}
		if (start < m->end)
			region_add(plan, start, m->end, i, why, skip, nskip, &k);
	}
	free(live);
	return 0;
}

static int open_proc(int pid, const char *what)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

/*
 * The stacks of threads that ended, which glibc keeps mapped to give to
 * the next thread it creates (its stack cache): their frames and thread
 * variables are dead memory, as a live thread's below its stack pointer
 * is (memcheck does not scan them either), but each still holds its
 * thread's control block at its top, which may point into the heap
 * (its dtv).  A mapping is one when it is anonymous, private and
 * writable, holds no live thread's stack pointer, and has in its last
 * page a control block (tcbhead_t: its first word and its self pointer,
 * the third, are its own address; glibc puts struct pthread there, the
 * thread pointer of x86-64) that is no live thread's.  Each is returned
 * as a thread of its own whose stack is live from that block up: the
 * live THREADS[0..NTHREADS) followed by them, in a malloc'd *ALL of
 * *NALL.  Returns 0 or -ENOMEM (an unreadable mapping is no stack).
 */
static int dead_stacks_find(int pid, const struct proc_map *maps, const enum proc_map_kind *kinds, size_t n,
			    const struct proc_mem_thread *threads, size_t nthreads, struct proc_mem_thread **all,
			    size_t *nall)
{
	const size_t page = DWLEAK_PAGE_SIZE, min_stack = 16384;
	unsigned char *buf = malloc(page);
	struct proc_mem_thread *v = malloc((nthreads + n + 1) * sizeof(*v));
	size_t i, j, k = nthreads;
	int fd = -1;

	*all = NULL;
	*nall = 0;
	if (!buf || !v) {
		free(buf);
		free(v);
		return -ENOMEM;
	}
	if (nthreads)
		memcpy(v, threads, nthreads * sizeof(*v));
	for (i = 0; i < n; i++) {
		const struct proc_map *m = &maps[i];
		bool live = false;

		if (kinds[i] != PROC_MAP_ANON || m->shared || !m->writable || !m->readable ||
		    m->end - m->start < min_stack)
			continue;
		for (j = 0; j < nthreads && !live; j++)
			live = (threads[j].sp >= m->start && threads[j].sp < m->end) ||
			       (threads[j].tls >= m->start && threads[j].tls < m->end);
		if (live)
			continue;
		if (fd < 0 && (fd = open_proc(pid, "mem")) < 0)
			break;
		if (pread(fd, buf, page, (off_t)(m->end - page)) != (ssize_t)page)
			continue;
		for (j = 0; j + 24 <= page; j += 64) {
			uint64_t at = m->end - page + j, tcb, self;

			memcpy(&tcb, buf + j, 8);
			memcpy(&self, buf + j + 16, 8);
			if (tcb == at && self == at) {
				v[k++] = (struct proc_mem_thread){ .sp = at, .tls = at, .no_red_zone = true };
				break;
			}
		}
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	*all = v;
	*nall = k;
	return 0;
}

int proc_mem_plan_build(int pid, const struct proc_mem_thread *threads, size_t nthreads,
			const struct proc_mem_range *keep, size_t nkeep, const struct proc_mem_range *skip, size_t nskip,
			struct proc_mem_plan *plan)
{
	struct proc_mem_thread *all;
	enum proc_map_kind *kinds;
	struct proc_map *maps;
	size_t n, nall, i;
	int err;

	memset(plan, 0, sizeof(*plan));
	err = proc_maps_read(pid, false, &maps, &n);
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	kinds = malloc((n ? n : 1) * sizeof(*kinds));
	if (!kinds) {
		proc_maps_free(maps, n);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++)
		kinds[i] = proc_map_kind_of(pid, &maps[i]);
	err = dead_stacks_find(pid, maps, kinds, n, threads, nthreads, &all, &nall);
	if (err) {
		proc_maps_free(maps, n);
		free(kinds);
		return err;
	}
	err = proc_mem_plan_from_maps(maps, kinds, n, all, nall, keep, nkeep, skip, nskip, plan);
	plan->dead_thread_stacks = nall - nthreads;
	free(all);
	return err;
}

/* ---------------------------------------------------------------------
 * pagemap
 * ------------------------------------------------------------------ */


/* The pagemap entries of the N pages from page number FIRST into E;
 * entries past the end of what the kernel returns are zero (not present).
 * Returns 0 or a negative errno. */
static int pagemap_read(int fd, uint64_t first, size_t n, uint64_t *e)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, e + got, (n - got) * 8, (off_t)((first + got) * 8));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r / 8;
	}
	memset(e + got, 0, (n - got) * 8);
	return 0;
}

/* The page frame of the zero page, as pagemap shows it to us (only with
 * CAP_SYS_ADMIN; 0 otherwise, and then zero pages are read like others):
 * a page of our own that was only read maps it. */
static uint64_t zero_pfn(void)
{
	volatile char *p = mmap(NULL, DWLEAK_PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t e = 0;
	int fd;

	if (p == MAP_FAILED)
		return 0;
	(void)p[0];
	fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (pagemap_read(fd, (uint64_t)(uintptr_t)p >> DWLEAK_PAGE_SHIFT, 1, &e))
			e = 0;
		close(fd);
	}
	munmap((void *)p, DWLEAK_PAGE_SIZE);
	return e & PM_PRESENT ? e & PM_PFN_MASK : 0;
}

/* Rss and Swap in bytes of each of MAPS[0..N) from /proc/PID/smaps, matched
 * by start address, into RSS[] and SWAP[] (zeroed first); KNOWN[i] (KNOWN
 * may be NULL) tells whether smaps listed mapping i.  A mapping smaps has
 * and MAPS has not (it came between the two reads) adds its Rss to
 * *UNMATCHED_RSS; *TOTAL_SWAP (both may be NULL) sums every Swap. */
static int smaps_read(int pid, const struct proc_map *maps, size_t n, uint64_t *rss, uint64_t *swap, bool *known,
		      uint64_t *unmatched_rss, uint64_t *total_swap)
{
	char path[64], *line = NULL;
	size_t linecap = 0;
	ssize_t cur = -1;
	bool matched = false;
	FILE *f;

	memset(rss, 0, n * sizeof(*rss));
	memset(swap, 0, n * sizeof(*swap));
	if (known)
		memset(known, 0, n * sizeof(*known));
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (getline(&line, &linecap, f) > 0) {
		unsigned long long start, end, kb;

		if (sscanf(line, "%llx-%llx ", &start, &end) == 2) {
			cur = proc_maps_find(maps, n, start);
			matched = cur >= 0 && maps[cur].start == start;
			if (matched && known)
				known[cur] = true;
		} else if (sscanf(line, "Rss: %llu kB", &kb) == 1) {
			if (matched)
				rss[cur] += kb * 1024;
			else if (unmatched_rss)
				*unmatched_rss += kb * 1024;
		} else if (sscanf(line, "Swap: %llu kB", &kb) == 1) {
			if (matched)
				swap[cur] += kb * 1024;
			if (total_swap)
				*total_swap += kb * 1024;
		}
	}
	free(line);
	fclose(f);
	return 0;
}

/* What pagemap entry E says about its page. */
enum page_state {
	PAGE_UNTOUCHED, /* never touched, or the zero page: all zeros */
	PAGE_EXCLUSIVE, /* in RAM, mapped by this process only */
	PAGE_SHARED,	/* in RAM, mapped by others too (fork, KSM, page cache) */
	PAGE_SWAPPED,
};

static enum page_state page_state(uint64_t e, uint64_t zero)
{
	if (e & PM_PRESENT) {
		if (zero && (e & PM_PFN_MASK) == zero)
			return PAGE_UNTOUCHED;
		return e & PM_EXCLUSIVE ? PAGE_EXCLUSIVE : PAGE_SHARED;
	}
	return e & PM_SWAPPED ? PAGE_SWAPPED : PAGE_UNTOUCHED;
}

/* ---------------------------------------------------------------------
 * Reading
 *
 * The caller's thread finds the data pages (pagemap) and packs them into
 * batches, reads each (process_vm_readv, or /proc/PID/mem) and hands it
 * to the callback.  With reader_thread a worker thread reads the batches
 * while the caller's thread scans the previous one, so that where a core
 * is free the target's pause is the longer of copy and scan, not their
 * sum; on the 2-vCPU VMs this was measured on, two busy threads run no
 * faster than one and the worker made the pause 5-10% longer, so it is
 * not the default.  Batches are delivered in order either way.
 * ------------------------------------------------------------------ */

/* Batches in flight: one being filled, one being read, one being scanned,
 * one spare so that none waits on another's turn. */
#define NBATCH 4

/* Bytes of a batch's buffer that were read: [addr, addr + len) at off. */
struct piece {
	uint64_t addr;
	size_t off;
	size_t len;
};

/* One read: remote ranges REMOTE[0..nremote) into buf[0..used), all
 * through process_vm_readv or all through /proc/PID/mem (VIA_MEM); the
 * worker fills the pieces, what failed, its time and calls. */
struct batch {
	unsigned char *buf;
	size_t used;
	struct iovec remote[IOV_BATCH];
	size_t nremote;
	bool via_mem;
	struct piece *pieces;
	size_t npieces;
	uint64_t unreadable;
	uint64_t read_ns;
	uint64_t calls;
	int err;
	bool submitted; /* handed to the worker */
	bool done;	/* read: ready to deliver */
};

struct reader {
	int pid;
	int pagemap_fd;
	int mem_fd;
	uint64_t zero;
	proc_mem_chunk_fn fn;
	void *ctx;
	struct proc_mem_read_stats *st;
	size_t cap;	   /* bytes a batch holds */
	size_t piece_cap;  /* pieces a batch may make: one per page at worst */
	struct batch batches[NBATCH];
	size_t fill;	   /* the batch being filled */
	size_t next;	   /* the oldest batch not yet delivered */
	size_t inflight;   /* batches submitted and not yet delivered */
	/* the worker, when there is one */
	bool threaded;
	bool stop;
	pthread_t worker;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t *pm; /* PM_WINDOW pagemap entries */
	struct pm_region *vec;
	/* without PAGEMAP_SCAN: what smaps says each mapping holds, so that
	 * a mapping with nothing in RAM or swap costs no pagemap at all */
	uint64_t *rss, *swap;
	bool *known;
};

/* Whether the plan's mapping MAP holds no page at all by smaps (read once,
 * when pagemap must be read whole: before Linux 6.7). */
static int mapping_empty(struct reader *r, const struct proc_mem_plan *plan, size_t map, bool *empty)
{
	if (!r->rss) {
		size_t n = plan->nmaps ? plan->nmaps : 1;
		uint64_t t0 = now_ns();
		int err;

		r->rss = malloc(n * sizeof(*r->rss));
		r->swap = malloc(n * sizeof(*r->swap));
		r->known = malloc(n * sizeof(*r->known));
		if (!r->rss || !r->swap || !r->known)
			return -ENOMEM;
		err = smaps_read(r->pid, plan->maps, plan->nmaps, r->rss, r->swap, r->known, NULL, NULL);
		r->st->pagemap_ns += now_ns() - t0;
		if (err)
			return err;
	}
	*empty = r->known[map] && !r->rss[map] && !r->swap[map];
	return 0;
}

/* -- reading one batch (the worker, or the caller without one) ------- */

static void piece_add(const struct reader *r, struct batch *b, uint64_t addr, size_t off, size_t len)
{
	struct piece *last = b->npieces ? &b->pieces[b->npieces - 1] : NULL;

	if (last && last->addr + last->len == addr && last->off + last->len == off)
		last->len += len;
	else if (b->npieces < r->piece_cap)
		b->pieces[b->npieces++] = (struct piece){ .addr = addr, .off = off, .len = len };
}

/* Reads [ADDR, ADDR + LEN) into buf + OFF through /proc/PID/mem, which
 * copies page by page without pinning (a page the target shares stays
 * shared); a page that fails is counted and skipped.  Returns 0 or
 * -ESRCH. */
static int read_mem(const struct reader *r, struct batch *b, uint64_t addr, size_t off, size_t len)
{
	while (len) {
		ssize_t got = pread(r->mem_fd, b->buf + off, len, (off_t)addr);

		b->calls++;
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			/* the first page cannot be read: skip it */
			size_t skip = (size_t)min_u64(len, DWLEAK_PAGE_SIZE - (addr & (DWLEAK_PAGE_SIZE - 1)));

			if (got < 0 && errno == ESRCH)
				return -ESRCH;
			b->unreadable += skip;
			addr += skip;
			off += skip;
			len -= skip;
			continue;
		}
		piece_add(r, b, addr, off, (size_t)got);
		addr += (uint64_t)got;
		off += (size_t)got;
		len -= (size_t)got;
	}
	return 0;
}

static void batch_read(const struct reader *r, struct batch *b)
{
	struct iovec local = { .iov_base = b->buf, .iov_len = b->used };
	uint64_t t0 = now_ns();
	size_t i, off = 0, got = 0;

	if (!b->via_mem) {
		ssize_t n = process_vm_readv(r->pid, &local, 1, b->remote, (unsigned long)b->nremote, 0);

		b->calls++;
		if (n < 0 && (errno == ESRCH || errno == EPERM || errno == ENOMEM))
			b->err = -errno;
		got = n > 0 ? (size_t)n : 0; /* EFAULT: the first page failed */
	}
	for (i = 0; i < b->nremote && !b->err; i++) {
		uint64_t addr = (uint64_t)(uintptr_t)b->remote[i].iov_base;
		size_t len = b->remote[i].iov_len, have = got > off ? (size_t)min_u64(len, got - off) : 0;

		if (have)
			piece_add(r, b, addr, off, have);
		if (have < len) /* cut short by a page that failed: page by page */
			b->err = read_mem(r, b, addr + have, off + have, len - have);
		off += len;
	}
	b->read_ns = now_ns() - t0;
}

static void *worker_main(void *arg)
{
	struct reader *r = arg;
	size_t k = 0; /* batches are read in the order they were submitted */

	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct batch *b = &r->batches[k];

		while (!r->stop && !(b->submitted && !b->done))
			pthread_cond_wait(&r->cond, &r->lock);
		if (r->stop)
			break;
		pthread_mutex_unlock(&r->lock);
		batch_read(r, b);
		pthread_mutex_lock(&r->lock);
		b->done = true;
		pthread_cond_broadcast(&r->cond);
		k = (k + 1) % NBATCH;
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* -- the caller's side: filling, submitting, delivering ---------------- */

/* Hands the oldest submitted batch to the callback once it is read (or
 * only waits for it, with DISCARD: after a failure). */
static int deliver_next(struct reader *r, bool discard)
{
	struct batch *b = &r->batches[r->next];
	uint64_t t0;
	size_t i;
	int ret = 0;

	if (r->threaded) {
		pthread_mutex_lock(&r->lock);
		while (!b->done)
			pthread_cond_wait(&r->cond, &r->lock);
		pthread_mutex_unlock(&r->lock);
	}
	r->st->read_ns += b->read_ns;
	r->st->read_calls += b->calls;
	r->st->unreadable_bytes += b->unreadable;
	t0 = now_ns();
	for (i = 0; i < b->npieces && !discard && !ret; i++) {
		ret = r->fn(r->ctx, b->pieces[i].addr, b->buf + b->pieces[i].off, b->pieces[i].len);
		r->st->scanned_bytes += b->pieces[i].len;
	}
	r->st->callback_ns += now_ns() - t0;
	ret = b->err ? b->err : ret;
	if (r->threaded)
		pthread_mutex_lock(&r->lock);
	b->submitted = b->done = false;
	b->used = b->nremote = b->npieces = 0;
	b->unreadable = b->read_ns = b->calls = 0;
	b->err = 0;
	if (r->threaded)
		pthread_mutex_unlock(&r->lock);
	r->next = (r->next + 1) % NBATCH;
	r->inflight--;
	return ret;
}

/* Submits the batch being filled (if it holds anything) and readies the
 * next, delivering the oldest first when all are in flight. */
static int batch_submit(struct reader *r)
{
	struct batch *b = &r->batches[r->fill];
	int ret;

	if (!b->nremote)
		return 0;
	if (r->threaded) {
		pthread_mutex_lock(&r->lock);
		b->submitted = true;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
	} else {
		batch_read(r, b);
		b->submitted = b->done = true;
	}
	r->inflight++;
	r->fill = (r->fill + 1) % NBATCH;
	if (r->inflight == NBATCH) {
		ret = deliver_next(r, false);
		if (ret)
			return ret;
	}
	return 0;
}

/* Queues [ADDR, ADDR + LEN) of pages in STATE for reading. */
static int read_run(struct reader *r, uint64_t addr, uint64_t len, enum page_state state)
{
	bool via_mem = state != PAGE_EXCLUSIVE;
	int ret;

	if (state == PAGE_SWAPPED)
		r->st->swapped_bytes += len;
	if (via_mem)
		r->st->shared_bytes += len;
	else
		r->st->exclusive_bytes += len;
	while (len) {
		struct batch *b = &r->batches[r->fill];
		struct iovec *last = b->nremote ? &b->remote[b->nremote - 1] : NULL;
		bool extend = last && (uint64_t)(uintptr_t)last->iov_base + last->iov_len == addr;
		size_t piece;

		if (b->nremote && (b->via_mem != via_mem || b->used == r->cap || (!extend && b->nremote == IOV_BATCH))) {
			ret = batch_submit(r);
			if (ret)
				return ret;
			continue;
		}
		b->via_mem = via_mem;
		piece = (size_t)min_u64(len, r->cap - b->used);
		if (extend)
			last->iov_len += piece;
		else
			b->remote[b->nremote++] = (struct iovec){ .iov_base = (void *)(uintptr_t)addr, .iov_len = piece };
		b->used += piece;
		addr += piece;
		len -= piece;
	}
	return 0;
}

/* Reads the data pages of [START, END) (inside one region), whose pages
 * hold data by pagemap: runs of pages in one state, cut to the range. */
static int read_pages(struct reader *r, uint64_t start, uint64_t end)
{
	uint64_t page = start >> DWLEAK_PAGE_SHIFT, last = (end - 1) >> DWLEAK_PAGE_SHIFT;

	while (page <= last) {
		size_t n = (size_t)min_u64(last - page + 1, PM_WINDOW), i = 0;
		uint64_t t0 = now_ns();
		int ret = pagemap_read(r->pagemap_fd, page, n, r->pm);

		r->st->pagemap_ns += now_ns() - t0;
		if (ret)
			return ret;
		while (i < n) {
			enum page_state s = page_state(r->pm[i], r->zero);
			size_t j = i + 1;
			uint64_t a, b;

			while (j < n && page_state(r->pm[j], r->zero) == s)
				j++;
			a = max_u64((page + i) << DWLEAK_PAGE_SHIFT, start);
			b = min_u64((page + j) << DWLEAK_PAGE_SHIFT, end);
			if (s != PAGE_UNTOUCHED) {
				ret = read_run(r, a, b - a, s);
				if (ret)
					return ret;
			}
			i = j;
		}
		page += n;
	}
	return 0;
}

/* Finds the data pages of [START, END) with PAGEMAP_SCAN, which walks
 * only the page tables there are: a sparse terabyte reservation (ASan's
 * shadow, a JVM heap, jemalloc's retained space) costs what it holds,
 * where reading pagemap whole costs 2 MiB of entries per GiB.  Returns
 * 0, a negative errno, or 1 when the kernel has no PAGEMAP_SCAN. */
static int scan_region(struct reader *r, uint64_t start, uint64_t end)
{
	struct pm_scan_arg arg = {
		.size = sizeof(arg),
		.start = DWLEAK_PAGE_DOWN(start),
		.end = DWLEAK_PAGE_DOWN(end + DWLEAK_PAGE_SIZE - 1),
		.vec = (uint64_t)(uintptr_t)r->vec,
		.vec_len = SCAN_VEC,
		.category_anyof_mask = PM_IS_PRESENT | PM_IS_SWAPPED,
		.return_mask = PM_IS_PRESENT | PM_IS_SWAPPED | PM_IS_PFNZERO,
	};

	while (arg.start < arg.end) {
		uint64_t t0 = now_ns();
		long got = ioctl(r->pagemap_fd, PM_SCAN, &arg), i;

		r->st->pagemap_ns += now_ns() - t0;
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && !r->st->pagemap_scan && (errno == ENOTTY || errno == EINVAL || errno == EOPNOTSUPP))
			return 1; /* the first call: not in this kernel */
		if (got < 0)
			return -errno;
		r->st->pagemap_scan = true;
		for (i = 0; i < got; i++) {
			const struct pm_region *v = &r->vec[i];
			uint64_t a = max_u64(v->start, start), b = min_u64(v->end, end);
			int ret;

			if ((v->categories & PM_IS_PFNZERO) || a >= b)
				continue;
			/* pagemap itself tells pages only this process maps */
			ret = read_pages(r, a, b);
			if (ret)
				return ret;
		}
		if (arg.walk_end <= arg.start)
			break;
		arg.start = arg.walk_end;
	}
	return 0;
}

static int reader_open(struct reader *r, int pid, const struct proc_mem_read_opts *opts)
{
	size_t i;

	r->pid = pid;
	r->pagemap_fd = r->mem_fd = -1;
	r->cap = opts && opts->buffer_bytes ? opts->buffer_bytes : DEFAULT_BUFFER;
	r->piece_cap = IOV_BATCH + r->cap / DWLEAK_PAGE_SIZE + 2;
	r->pm = malloc(PM_WINDOW * sizeof(*r->pm));
	r->vec = malloc(SCAN_VEC * sizeof(*r->vec));
	if (!r->pm || !r->vec)
		return -ENOMEM;
	for (i = 0; i < NBATCH; i++) {
		r->batches[i].buf = malloc(r->cap);
		r->batches[i].pieces = malloc(r->piece_cap * sizeof(struct piece));
		if (!r->batches[i].buf || !r->batches[i].pieces)
			return -ENOMEM;
	}
	r->pagemap_fd = open_proc(pid, "pagemap");
	r->mem_fd = open_proc(pid, "mem");
	if (r->pagemap_fd < 0 || r->mem_fd < 0) {
		int err = r->pagemap_fd < 0 ? r->pagemap_fd : r->mem_fd;

		return err == -ENOENT ? -ESRCH : err;
	}
	r->zero = zero_pfn();
	if (!opts || !opts->reader_thread)
		return 0;
	/* without a thread (none to be had) the reads simply do not overlap */
	if (pthread_mutex_init(&r->lock, NULL))
		return 0;
	if (pthread_cond_init(&r->cond, NULL)) {
		pthread_mutex_destroy(&r->lock);
		return 0;
	}
	if (pthread_create(&r->worker, NULL, worker_main, r)) {
		pthread_cond_destroy(&r->cond);
		pthread_mutex_destroy(&r->lock);
		return 0;
	}
	r->threaded = true;
	return 0;
}

static void reader_close(struct reader *r)
{
	size_t i;

	if (r->threaded) {
		pthread_mutex_lock(&r->lock);
		r->stop = true;
		pthread_cond_broadcast(&r->cond);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->worker, NULL);
		pthread_cond_destroy(&r->cond);
		pthread_mutex_destroy(&r->lock);
	}
	if (r->pagemap_fd >= 0)
		close(r->pagemap_fd);
	if (r->mem_fd >= 0)
		close(r->mem_fd);
	for (i = 0; i < NBATCH; i++) {
		free(r->batches[i].buf);
		free(r->batches[i].pieces);
	}
	free(r->pm);
	free(r->vec);
	free(r->rss);
	free(r->swap);
	free(r->known);
}

int proc_mem_read(int pid, const struct proc_mem_plan *plan, const struct proc_mem_read_opts *opts,
		  proc_mem_chunk_fn fn, void *ctx, struct proc_mem_read_stats *st)
{
	struct proc_mem_read_stats local_st;
	struct reader *r = calloc(1, sizeof(*r));
	bool use_scan = !(opts && opts->no_pagemap_scan);
	uint64_t t0 = now_ns(), regions = 0;
	size_t i;
	int ret;

	if (!st)
		st = &local_st;
	memset(st, 0, sizeof(*st));
	if (!r)
		return -ENOMEM;
	r->fn = fn;
	r->ctx = ctx;
	r->st = st;
	ret = reader_open(r, pid, opts);
	for (i = 0; i < plan->nregions && !ret; i++) {
		const struct proc_mem_region *g = &plan->regions[i];

		regions += g->end - g->start;
		ret = use_scan ? scan_region(r, g->start, g->end) : 1;
		if (ret == 1) {
			bool empty;

			use_scan = false;
			ret = mapping_empty(r, plan, g->map, &empty);
			if (!ret && !empty)
				ret = read_pages(r, g->start, g->end);
		}
	}
	if (!ret)
		ret = batch_submit(r);
	/* deliver what is in flight; after a failure only wait for it */
	while (r->inflight) {
		int ret2 = deliver_next(r, ret != 0);

		ret = ret ? ret : ret2;
	}
	st->untouched_bytes = regions - min_u64(regions, st->scanned_bytes + st->unreadable_bytes);
	reader_close(r);
	free(r);
	st->total_ns = now_ns() - t0;
	return ret;
}

/* ---------------------------------------------------------------------
 * Residency
 * ------------------------------------------------------------------ */

struct sorted_range {
	uint64_t addr;
	uint64_t end;
	size_t idx;
};

static int by_addr(const void *a, const void *b)
{
	const struct sorted_range *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Pagemap entries of a window of pages, read as the sorted ranges need
 * them: one read covers the ranges that follow closely. */
struct pm_window {
	int fd;
	uint64_t zero;
	uint64_t first; /* page number of e[0] */
	size_t n;
	uint64_t *e;
};

static void add_state(struct proc_mem_residency *res, enum page_state s, uint64_t bytes)
{
	if (s == PAGE_EXCLUSIVE || s == PAGE_SHARED)
		res->resident += bytes;
	else if (s == PAGE_SWAPPED)
		res->swapped += bytes;
	else
		res->untouched += bytes;
}

static int residency_of(struct pm_window *w, const struct sorted_range *r, const struct sorted_range *rest,
			size_t nrest, struct proc_mem_residency *res)
{
	uint64_t a = r->addr;

	while (a < r->end) {
		uint64_t page = a >> DWLEAK_PAGE_SHIFT, b = min_u64((page + 1) << DWLEAK_PAGE_SHIFT, r->end);

		if (page < w->first || page >= w->first + w->n) {
			/* a new window from this page, over the ranges that follow
			 * within PM_WINDOW pages */
			uint64_t last = (r->end - 1) >> DWLEAK_PAGE_SHIFT;
			size_t k;
			int err;

			for (k = 0; k < nrest && ((rest[k].end - 1) >> DWLEAK_PAGE_SHIFT) < page + PM_WINDOW; k++)
				last = max_u64(last, (rest[k].end - 1) >> DWLEAK_PAGE_SHIFT);
			w->first = page;
			w->n = (size_t)min_u64(last - page + 1, PM_WINDOW);
			err = pagemap_read(w->fd, w->first, w->n, w->e);
			if (err)
				return err;
		}
		add_state(res, page_state(w->e[page - w->first], w->zero), b - a);
		a = b;
	}
	return 0;
}

int proc_mem_residency(int pid, const struct proc_mem_range *ranges, size_t n, struct proc_mem_residency *each,
		       struct proc_mem_residency *total)
{
	struct sorted_range *s = malloc((n ? n : 1) * sizeof(*s));
	struct pm_window w = { .fd = -1, .e = malloc(PM_WINDOW * sizeof(uint64_t)) };
	struct proc_mem_residency sum = { 0 };
	size_t i;
	int err = -ENOMEM;

	if (!s || !w.e)
		goto out;
	w.fd = open_proc(pid, "pagemap");
	if (w.fd < 0) {
		err = w.fd == -ENOENT ? -ESRCH : w.fd;
		goto out;
	}
	w.zero = zero_pfn();
	for (i = 0; i < n; i++)
		s[i] = (struct sorted_range){ .addr = ranges[i].addr, .end = ranges[i].addr + ranges[i].size, .idx = i };
	qsort(s, n, sizeof(*s), by_addr);
	err = 0;
	for (i = 0; i < n && !err; i++) {
		struct proc_mem_residency res = { 0 };

		err = residency_of(&w, &s[i], s + i + 1, n - i - 1, &res);
		if (each)
			each[s[i].idx] = res;
		sum.resident += res.resident;
		sum.swapped += res.swapped;
		sum.untouched += res.untouched;
	}
	if (total)
		*total = sum;
out:
	if (w.fd >= 0)
		close(w.fd);
	free(w.e);
	free(s);
	return err;
}

/* ---------------------------------------------------------------------
 * RSS explained
 * ------------------------------------------------------------------ */

/* Which part of RSS mapping I's memory outside tracked blocks is
 * (HOLDS_SP: a thread's sp is in it). */
static enum proc_rss_part part_of(const struct proc_map *maps, const enum proc_map_kind *kinds, size_t i,
				  bool holds_sp)
{
	const struct proc_map *m = &maps[i];

	switch (kinds[i]) {
	case PROC_MAP_STACK:
		return PROC_RSS_STACKS;
	case PROC_MAP_HEAP:
		return PROC_RSS_HEAP_UNTRACKED;
	case PROC_MAP_FILE:
		return m->exec ? PROC_RSS_CODE : PROC_RSS_DATA;
	case PROC_MAP_ANON:
		if (holds_sp && !m->shared)
			return PROC_RSS_STACKS;
		if (m->shared || !m->writable)
			return PROC_RSS_OTHER;
		/* the bss: anonymous, right after the file's writable data */
		if (i > 0 && maps[i - 1].end == m->start && kinds[i - 1] == PROC_MAP_FILE && maps[i - 1].writable)
			return PROC_RSS_DATA;
		return PROC_RSS_HEAP_UNTRACKED;
	case PROC_MAP_DEVICE:
	case PROC_MAP_KERNEL:
	case PROC_MAP_KIND_COUNT:
		break;
	}
	return PROC_RSS_OTHER;
}

int proc_rss_explain(int pid, const struct proc_mem_range *tracked, size_t n, const struct proc_mem_thread *threads,
		     size_t nthreads, struct proc_rss_explained *out)
{
	struct proc_mem_residency *each = malloc((n ? n : 1) * sizeof(*each));
	uint64_t *rss = NULL, *swap = NULL, *in_blocks = NULL, unmatched = 0;
	enum proc_map_kind *kinds = NULL;
	bool *holds_sp = NULL;
	struct proc_map *maps = NULL;
	size_t nmaps = 0, i;
	int err;

	memset(out, 0, sizeof(*out));
	if (!each)
		return -ENOMEM;
	err = proc_maps_read(pid, false, &maps, &nmaps);
	if (err) {
		err = err == -ENOENT ? -ESRCH : err;
		goto out;
	}
	err = -ENOMEM;
	rss = calloc(nmaps ? nmaps : 1, sizeof(*rss));
	swap = calloc(nmaps ? nmaps : 1, sizeof(*swap));
	in_blocks = calloc(nmaps ? nmaps : 1, sizeof(*in_blocks));
	kinds = malloc((nmaps ? nmaps : 1) * sizeof(*kinds));
	holds_sp = calloc(nmaps ? nmaps : 1, sizeof(*holds_sp));
	if (!rss || !swap || !in_blocks || !kinds || !holds_sp)
		goto out;
	for (i = 0; i < nmaps; i++)
		kinds[i] = proc_map_kind_of(pid, &maps[i]);
	for (i = 0; i < nthreads; i++) {
		ssize_t m = proc_maps_find(maps, nmaps, threads[i].sp);

		if (m >= 0)
			holds_sp[m] = true;
	}
	err = smaps_read(pid, maps, nmaps, rss, swap, NULL, &unmatched, &out->swap);
	if (!err)
		err = proc_mem_residency(pid, tracked, n, each, &out->tracked);
	if (err)
		goto out;
	for (i = 0; i < n; i++) {
		ssize_t m = proc_maps_find(maps, nmaps, tracked[i].addr);

		out->tracked_bytes += tracked[i].size;
		if (m >= 0)
			in_blocks[m] += each[i].resident;
	}
	for (i = 0; i < nmaps; i++) {
		/* pagemap and smaps are read apart; never let the blocks claim
		 * more than the mapping holds, so the parts sum to rss */
		uint64_t t = min_u64(in_blocks[i], rss[i]);

		out->rss += rss[i];
		out->bytes[PROC_RSS_TRACKED] += t;
		out->bytes[part_of(maps, kinds, i, holds_sp[i])] += rss[i] - t;
	}
	out->rss += unmatched;
	out->bytes[PROC_RSS_OTHER] += unmatched;
	for (i = 0; i < PROC_RSS_PART_COUNT; i++)
		out->share[i] = out->rss ? (double)out->bytes[i] / (double)out->rss : 0;
out:
	proc_maps_free(maps, nmaps);
	free(each);
	free(rss);
	free(swap);
	free(in_blocks);
	free(kinds);
	free(holds_sp);
	return err;
}
