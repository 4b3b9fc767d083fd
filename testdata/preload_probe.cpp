// What a program observes of its allocator, for tests/preload_transparency.sh
// and the preload path's traced tests (issue 16): run with and without
// libdwleak-preload.so, idle or traced, it must print the same lines.
// Nothing printed depends on addresses or timing.
//
//   preload_probe [--out FILE] CHECK...      CHECK: errno usable realloc
//       align fork signal dlopen libc cxx init threads dlerror, or all;
//   preload_probe seccomp errno|kill [N]     install a seccomp filter that
//       denies syscalls 335 and 336 (uretprobe, uprobe) with ENOSYS or by
//       killing the process, then leak N (default 1000) blocks of 48 B from
//       site_seccomp_leak and free as many; prints whether this process got
//       an [uprobes-trampoline] mapping (the sites were entered by the
//       uprobe system call, not trapped);
//   preload_probe forktree N                 threads allocating (for 0.3 s
//       first, so that traced sites are hot) while the main thread forks N
//       children, each of which leaks 3 blocks of 64 B from site_child_leak
//       and exits 0; the parent leaks 5 of 32 B from site_parent_leak, and
//       says how many children found their sites stale (the preload
//       library's control block, when there is one);
//   preload_probe --go-file PATH ...         wait for PATH first (dwleak -p);
//   preload_probe --seccomp errno|kill ...   install that filter first.
// Exit status 0 when every check held (each prints "NAME: ok ..." or
// "NAME: FAIL ...").
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>
#include <string>

#define NOINLINE __attribute__((noinline, noipa))

static FILE *out = stdout;
static int failures;

static void say(const char *check, bool good, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(const char *check, bool good, const char *fmt, ...)
{
	va_list ap;

	fprintf(out, "%s: %s ", check, good ? "ok" : "FAIL");
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fputc('\n', out);
	fflush(out);
	failures += !good;
}

// A pointer and sizes the compiler cannot see through (no call folded
// away, no warning about sizes it knows fail).
static void *volatile sink;
static volatile size_t huge = SIZE_MAX / 2, quarter = SIZE_MAX / 4, all_ones = SIZE_MAX;

// syscall() and prctl(), which the library defines itself (it sees a
// seccomp filter go in through them): glibc's results and errno, the sixth
// argument (on the stack for syscall) passed on.
static void check_syscall()
{
	char name[16] = "", want[16] = "";
	void *m;
	long r;

	say("syscall", syscall(SYS_getpid) == getpid(), "syscall(SYS_getpid) is getpid()");
	errno = 0;
	r = syscall(SYS_close, -1);
	say("syscall", r == -1 && errno == EBADF, "syscall(SYS_close, -1): -1, EBADF");
	m = (void *)syscall(SYS_mmap, nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 1);
	say("syscall", m == (void *)-1 && errno == EINVAL, "syscall(SYS_mmap, ..., offset 1, the sixth argument): -1, EINVAL");
	m = (void *)syscall(SYS_mmap, nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	say("syscall", m != (void *)-1 && !((char *)m)[8191] && !munmap(m, 8192), "syscall(SYS_mmap) of 6 arguments maps");
	errno = EDOM;
	say("syscall", !prctl(PR_GET_NAME, name, 0, 0, 0) && errno == EDOM && name[0], "prctl(PR_GET_NAME) succeeds, errno kept");
	say("syscall", !prctl(PR_SET_NAME, "probe-name", 0, 0, 0) && !prctl(PR_GET_NAME, want, 0, 0, 0) &&
			       !strcmp(want, "probe-name") && !prctl(PR_SET_NAME, name, 0, 0, 0), "prctl(PR_SET_NAME) sets it");
	errno = 0;
	say("syscall", prctl(-1, 0, 0, 0, 0) == -1 && errno == EINVAL, "prctl(-1): -1, EINVAL");
}

// errno: kept by calls that succeed, set as the allocator sets it when
// they fail; posix_memalign returns its error and leaves errno alone.
static void check_errno()
{
	void *p, *q, *x = nullptr;
	int r;

	errno = EDOM;
	p = malloc(16);
	say("errno", errno == EDOM, "malloc(16) leaves errno");
	free(p);
	say("errno", errno == EDOM, "free leaves errno");
	free(nullptr);
	say("errno", errno == EDOM, "free(NULL) leaves errno");
	errno = 0;
	sink = malloc(huge);
	say("errno", !sink && errno == ENOMEM, "malloc(SIZE_MAX/2): NULL, ENOMEM");
	errno = 0;
	sink = calloc(huge, 4);
	say("errno", !sink && errno == ENOMEM, "calloc overflow: NULL, ENOMEM");
	errno = 0;
	sink = reallocarray(nullptr, all_ones, 2);
	say("errno", !sink && errno == ENOMEM, "reallocarray overflow: NULL, ENOMEM");
	p = malloc(8);
	memcpy(p, "abcdefg", 8);
	sink = p;
	errno = 0;
	q = realloc(p, huge);
	p = sink; /* still the block: realloc failed */
	say("errno", !q && errno == ENOMEM && !memcmp(p, "abcdefg", 8), "failed realloc: NULL, ENOMEM, block kept");
	free(p);
	errno = EDOM;
	r = posix_memalign(&x, 3, 16);
	say("errno", r == EINVAL && errno == EDOM && !x, "posix_memalign(align 3): EINVAL returned, errno kept");
	errno = 0;
	sink = aligned_alloc(3, 16);
	fprintf(out, "errno: aligned_alloc(3, 16) %s, errno %d\n", sink ? "non-NULL" : "NULL", errno);
	free(sink);
	errno = 0;
	sink = memalign(3, 16);
	fprintf(out, "errno: memalign(3, 16) %s, errno %d\n", sink ? "non-NULL" : "NULL", errno);
	free(sink);
}

// malloc_usable_size: the allocator's own answer (the library adds no
// header and moves no pointer).
static void check_usable()
{
	static const size_t sizes[] = { 1, 24, 100, 1000, 100000 };
	std::string line;

	for (size_t n : sizes) {
		void *p = malloc(n);
		line += " " + std::to_string(n) + ":" + std::to_string(malloc_usable_size(p));
		free(p);
	}
	fprintf(out, "usable:%s\n", line.c_str());
}

static void check_realloc()
{
	char *p = (char *)realloc(nullptr, 10), *q;

	say("realloc", p != nullptr, "realloc(NULL, 10) allocates");
	memcpy(p, "0123456789", 10);
	q = (char *)realloc(p, 100000);
	say("realloc", q && !memcmp(q, "0123456789", 10), "grow keeps the bytes");
	p = (char *)realloc(q, 5);
	say("realloc", p && !memcmp(p, "01234", 5), "shrink keeps the bytes");
	q = (char *)realloc(p, 0);
	fprintf(out, "realloc: realloc(p, 0) returns %s\n", q ? "a block" : "NULL");
	free(q);
}

static void check_align()
{
	void *p = nullptr;
	bool good = true;

	for (size_t a = 16; a <= 65536; a *= 4) {
		good &= !posix_memalign(&p, a, 100) && (uintptr_t)p % a == 0;
		free(p);
		p = aligned_alloc(a, a * 2);
		good &= p && (uintptr_t)p % a == 0;
		free(p);
		p = memalign(a, 7);
		good &= p && (uintptr_t)p % a == 0;
		free(p);
	}
	p = valloc(10);
	good &= p && (uintptr_t)p % 4096 == 0;
	free(p);
	p = pvalloc(10);
	good &= p && (uintptr_t)p % 4096 == 0 && malloc_usable_size(p) >= 4096;
	free(p);
	say("align", good, "posix_memalign, aligned_alloc, memalign, valloc, pvalloc aligned");
}

static volatile bool churn_stop;

static void *churn(void *)
{
	while (!churn_stop) {
		void *a[16];
		for (int i = 0; i < 16; i++)
			a[i] = malloc(16 + i * 32);
		for (int i = 0; i < 16; i++)
			free(a[i]);
	}
	return nullptr;
}

// fork from a threaded program: the children allocate and exit cleanly.
static void check_fork()
{
	pthread_t t[3];
	int good = 0;

	for (auto &x : t)
		pthread_create(&x, nullptr, churn, nullptr);
	for (int i = 0; i < 20; i++) {
		pid_t c = fork();
		if (c == 0) {
			char *p = (char *)malloc(1000);
			memset(p, 7, 1000);
			p = (char *)realloc(p, 5000);
			_exit(p[999] == 7 ? 0 : 3);
		}
		int st = 0;
		waitpid(c, &st, 0);
		good += WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	churn_stop = true;
	for (auto &x : t)
		pthread_join(x, nullptr);
	churn_stop = false;
	say("fork", good == 20, "%d of 20 children of a threaded program exited 0", good);
}

static volatile int handled;

static void on_usr1(int)
{
	void *a[100];

	for (int i = 0; i < 100; i++)
		a[i] = malloc(24 + i);
	for (int i = 0; i < 100; i++)
		free(a[i]);
	handled++;
}

static void check_signal()
{
	signal(SIGUSR1, on_usr1);
	for (int i = 0; i < 10; i++)
		raise(SIGUSR1);
	say("signal", handled == 10, "a handler allocated and freed, 10 times");
}

static void check_dlopen()
{
	char *exe = realpath("/proc/self/exe", nullptr), *slash = exe ? strrchr(exe, '/') : nullptr;
	std::string lib = slash ? std::string(exe, slash) + "/libdlleak.so" : "libdlleak.so";
	void *h = dlopen(lib.c_str(), RTLD_NOW), *(*leak)(long);

	free(exe);
	leak = h ? (void *(*)(long))dlsym(h, "dlleak_leak_one") : nullptr;
	void *p = leak ? leak(3) : nullptr;
	say("dlopen", p && ((char *)p)[23] == 3, "a dlopen'ed library's allocation");
	free(p);
	if (h)
		dlclose(h);
}

#ifdef LIBC_IMPORT
// preload_probe_libc: imports __libc_malloc, so dwleak must trace it with
// uprobes (a call of it would pass the preload library by).
extern "C" void *__libc_malloc(size_t) __attribute__((weak));
static void *(*libc_malloc)(size_t) = __libc_malloc;
#else
// found at run time: dwleak cannot know, and a block from it is simply
// one the library never saw (its free is an untracked one)
static void *(*libc_malloc)(size_t);
#endif

// glibc's __libc_malloc, or jemalloc's, tcmalloc's, mimalloc's.
static void check_libc()
{
	if (!libc_malloc)
		libc_malloc = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "__libc_malloc");
	if (!libc_malloc) {
		fprintf(out, "libc: no __libc_malloc in this process\n");
		return;
	}
	char *p = (char *)libc_malloc(32);
	memset(p, 1, 32);
	free(p);
	say("libc", p != nullptr, "__libc_malloc'ed block freed with free");
}

struct alignas(256) Wide {
	char c[300];
};

static void check_cxx()
{
	int *a = new int[10];
	delete[] a;
	Wide *w = new Wide;
	say("cxx", (uintptr_t)w % 256 == 0, "aligned new");
	delete w;
	w = new Wide[3];
	delete[] w;
	void *n = ::operator new(quarter, std::nothrow);
	say("cxx", n == nullptr, "nothrow new of SIZE_MAX/4 returns nullptr");
	bool threw = false;
	try {
		sink = ::operator new(quarter);
	} catch (const std::bad_alloc &) {
		threw = true;
	}
	say("cxx", threw, "new of SIZE_MAX/4 throws std::bad_alloc through the wrappers");
	std::string s(1000, 'x');
	s += s;
	say("cxx", s.size() == 2000, "std::string grows");
	::operator delete(::operator new(48), (size_t)48);
}

// Allocated before main, by a constructor that runs before the program's
// own (priority 101): freed in main.
static void *early;

__attribute__((constructor(101))) static void early_alloc()
{
	early = malloc(77);
	memset(early, 5, 77);
}

static void check_init()
{
	say("init", early && ((char *)early)[76] == 5, "a block malloc'ed by a constructor, freed in main");
	free(early);
}

static void *worker(void *arg)
{
	uintptr_t seed = (uintptr_t)arg, bad = 0;
	void *held[64] = {};

	for (int i = 0; i < 20000; i++) {
		seed = seed * 6364136223846793005ull + 1;
		unsigned k = (unsigned)(seed >> 33) % 64;
		if (held[k]) {
			bad += ((unsigned char *)held[k])[0] != (k & 0xff);
			free(held[k]);
			held[k] = nullptr;
		} else {
			size_t n = 1 + (seed >> 40) % 3000;
			held[k] = (seed >> 20) & 1 ? malloc(n) : calloc(1, n);
			((unsigned char *)held[k])[0] = (unsigned char)(k & 0xff);
		}
	}
	for (void *p : held)
		free(p);
	return (void *)bad;
}

static void check_threads()
{
	pthread_t t[8];
	uintptr_t bad = 0;
	void *r;

	for (int i = 0; i < 8; i++)
		pthread_create(&t[i], nullptr, worker, (void *)(uintptr_t)(i + 1));
	for (auto &x : t) {
		pthread_join(x, &r);
		bad += (uintptr_t)r;
	}
	say("threads", bad == 0, "8 threads, 160000 calls, every block intact");
}

// dlerror: the library's own lookups leave no error behind.
static void check_dlerror()
{
	const char *e = dlerror();
	say("dlerror", e == nullptr, "dlerror() at start: %s", e ? e : "(none)");
}

NOINLINE static void *site_seccomp_leak()
{
	void *p = malloc(48);
	sink = p;
	return p;
}

static bool has_trampoline()
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		found |= strstr(line, "[uprobes-trampoline]") != nullptr;
	if (f)
		fclose(f);
	return found;
}

// Denies syscalls 335 and 336 with ENOSYS (errno) or by killing (kill).
static int seccomp_deny_uprobe_syscalls(const char *mode)
{
	unsigned act = !strcmp(mode, "kill") ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | ENOSYS;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 335, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 336, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, act),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp");
		return 2;
	}
	return 0;
}

static int run_seccomp(const char *mode, long n)
{
	if (seccomp_deny_uprobe_syscalls(mode))
		return 2;
	for (long i = 0; i < n; i++) {
		site_seccomp_leak();
		free(malloc(48));
	}
	fprintf(out, "seccomp: %s filter, %ld blocks leaked, trampoline %s\n", mode, n,
		has_trampoline() ? "mapped" : "not mapped");
	return 0;
}

NOINLINE static void *site_child_leak()
{
	void *p = malloc(64);
	sink = p;
	return p;
}

NOINLINE static void *site_parent_leak()
{
	void *p = malloc(32);
	sink = p;
	return p;
}

// The preload library's control block (bpf/abi/preload.h), if loaded.
struct preload_control {
	uint64_t magic;
	uint32_t version, generation;
	uint64_t sample_bytes, set_full, nested;
	uint32_t disabled, pad;
};

static int run_forktree(long n)
{
	const preload_control *ctl = (const preload_control *)dlsym(RTLD_DEFAULT, "dwleak_preload_control");
	pthread_t t[3];
	int good = 0, stale = 0, fds[2];

	if (pipe(fds))
		return 2;
	for (auto &x : t)
		pthread_create(&x, nullptr, churn, nullptr);
	usleep(300000);
	for (long i = 0; i < n; i++) {
		pid_t c = fork();
		if (c == 0) {
			for (int k = 0; k < 3; k++)
				site_child_leak();
			char s = ctl && ctl->disabled ? 's' : 'n';
			_exit(write(fds[1], &s, 1) == 1 ? 0 : 4);
		}
		int st = 0;
		char s = 0;
		waitpid(c, &st, 0);
		good += WIFEXITED(st) && WEXITSTATUS(st) == 0;
		stale += read(fds[0], &s, 1) == 1 && s == 's';
	}
	churn_stop = true;
	for (auto &x : t)
		pthread_join(x, nullptr);
	for (int k = 0; k < 5; k++)
		site_parent_leak();
	say("forktree", good == n, "%d of %ld children exited 0", good, n);
	fprintf(out, "forktree: %d children found their sites stale\n", stale);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	int i = 1;

	while (i < argc - 1 && (!strcmp(argv[i], "--out") || !strcmp(argv[i], "--go-file") ||
				!strcmp(argv[i], "--seccomp"))) {
		if (!strcmp(argv[i], "--out") && !(out = fopen(argv[i + 1], "w")))
			return 2;
		while (!strcmp(argv[i], "--go-file") && access(argv[i + 1], F_OK))
			usleep(10000);
		if (!strcmp(argv[i], "--seccomp") && seccomp_deny_uprobe_syscalls(argv[i + 1]))
			return 2;
		i += 2;
	}
	if (i < argc && !strcmp(argv[i], "seccomp"))
		return i + 1 < argc ? run_seccomp(argv[i + 1], i + 2 < argc ? atol(argv[i + 2]) : 1000) : 2;
	if (i < argc && !strcmp(argv[i], "forktree"))
		return run_forktree(i + 1 < argc ? atol(argv[i + 1]) : 10);
	for (; i < argc; i++) {
		bool all = !strcmp(argv[i], "all");
		if (all || !strcmp(argv[i], "dlerror"))
			check_dlerror();
		if (all || !strcmp(argv[i], "errno"))
			check_errno();
		if (all || !strcmp(argv[i], "usable"))
			check_usable();
		if (all || !strcmp(argv[i], "realloc"))
			check_realloc();
		if (all || !strcmp(argv[i], "align"))
			check_align();
		if (all || !strcmp(argv[i], "fork"))
			check_fork();
		if (all || !strcmp(argv[i], "signal"))
			check_signal();
		if (all || !strcmp(argv[i], "dlopen"))
			check_dlopen();
		if (all || !strcmp(argv[i], "libc"))
			check_libc();
		if (all || !strcmp(argv[i], "cxx"))
			check_cxx();
		if (all || !strcmp(argv[i], "init"))
			check_init();
		if (all || !strcmp(argv[i], "threads"))
			check_threads();
		if (all || !strcmp(argv[i], "syscall"))
			check_syscall();
	}
	return failures ? 1 : 0;
}
