/* Situations where a preload library's allocator runs under locks glibc
 * holds, each of which must end (tests/preload_no_hang.sh runs them under
 * a timeout, with and without libdwleak-preload.so; they print the same
 * lines either way).  Linked with libi18n_ctor.so, whose constructor
 * allocates inside newlocale(), or inside bindtextdomain() with
 * NO_HANG_CTOR=gettext.
 *
 *   no_hang locale              after the newlocale() constructor:
 *                               setlocale(), twice, and newlocale() and
 *                               uselocale()
 *   no_hang gettext             after the bindtextdomain() constructor
 *                               (NO_HANG_CTOR=gettext): what a translated
 *                               program's main does (setlocale(),
 *                               bindtextdomain(), textdomain()), then
 *                               gettext() and setlocale() again
 *   no_hang sig-dlopen LIB N    dlopen()s and dlclose()s LIB (libsig_ctor.so,
 *                               whose constructor raises SIGUSR1) N times;
 *                               the handler, running inside dlopen, mallocs,
 *                               frees, and calls operator new and delete
 *                               when the process has them (the preload
 *                               library's wrappers, found before the first
 *                               dlopen; a C program has none of its own)
 *   no_hang fork-threads N [LIB]  with LIB (a C++ library) dlopen'ed first
 *                               and 4 threads allocating and walking the
 *                               loaded objects (dl_iterate_phdr, which takes
 *                               the loader's list lock), forks N children
 *                               that allocate at once (operator new too,
 *                               when found) and exit 0
 * Exit status 0 when each check held. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libintl.h>
#include <link.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern locale_t i18n_ctor_locale;
extern const char *i18n_ctor_binding;

typedef void *(*new_fn)(size_t);
typedef void (*delete_fn)(void *);

/* The C++ operators as the global scope has them (NULL in a C program
 * without the preload library). */
static new_fn op_new;
static delete_fn op_delete;

static void find_operators(void)
{
	op_new = (new_fn)dlsym(RTLD_DEFAULT, "_Znwm");
	op_delete = (delete_fn)dlsym(RTLD_DEFAULT, "_ZdlPv");
	if (!op_new || !op_delete)
		op_new = NULL, op_delete = NULL;
	dlerror();
}

/* Allocates and frees with the C functions and, when there, operator new. */
static int churn(size_t n)
{
	char *a = malloc(n), *b = calloc(2, n), *c;
	void *d = NULL;
	int good = a && b;

	c = realloc(a, 2 * n);
	good = good && c && !posix_memalign(&d, 64, n);
	free(c);
	free(b);
	free(d);
	if (op_new) {
		void *p = op_new(n);

		good = good && p;
		op_delete(p);
	}
	return good;
}

static int run_locale(void)
{
	const char *all, *c;
	locale_t l;

	printf("locale: constructor's newlocale %s\n", i18n_ctor_locale ? "succeeded" : "failed");
	all = setlocale(LC_ALL, "");
	printf("locale: setlocale(LC_ALL, \"\") returned %s\n", all ? "a name" : "NULL");
	c = setlocale(LC_ALL, "C");
	printf("locale: setlocale(LC_ALL, \"C\") = %s\n", c ? c : "(null)");
	l = newlocale(LC_CTYPE_MASK, "POSIX", (locale_t)0);
	if (l) {
		uselocale(l);
		uselocale(LC_GLOBAL_LOCALE);
		freelocale(l);
	}
	printf("locale: newlocale again %s\n", l ? "succeeded" : "failed");
	if (i18n_ctor_locale)
		freelocale(i18n_ctor_locale);
	return !(i18n_ctor_locale && c && l);
}

static int run_gettext(void)
{
	const char *domain, *msg, *c;

	printf("gettext: constructor's bindtextdomain %s\n", i18n_ctor_binding ? "succeeded" : "failed");
	/* what every translated program's main does first */
	setlocale(LC_ALL, "");
	bindtextdomain("dwleak-no-hang-main", "/nonexistent/locale");
	domain = textdomain("dwleak-no-hang-main");
	printf("gettext: textdomain = %s\n", domain ? domain : "(null)");
	msg = gettext("untranslated");
	printf("gettext: gettext = %s\n", msg);
	c = setlocale(LC_ALL, "C");
	printf("gettext: setlocale(LC_ALL, \"C\") = %s\n", c ? c : "(null)");
	return !(i18n_ctor_binding && domain && c);
}

static volatile sig_atomic_t handled, handled_ok;

static void on_usr1(int sig)
{
	(void)sig;
	handled++;
	handled_ok += churn(40);
}

static int run_sig_dlopen(const char *lib, long n)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	long i, loaded = 0;

	find_operators();
	sigaction(SIGUSR1, &sa, NULL);
	for (i = 0; i < n; i++) {
		void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

		if (!h) {
			fprintf(stderr, "sig-dlopen: %s\n", dlerror());
			break;
		}
		loaded++;
		dlclose(h);
	}
	printf("sig-dlopen: %ld of %ld dlopens, %d handler runs inside them, %d allocated\n", loaded, n,
	       (int)handled, (int)handled_ok);
	return !(loaded == n && handled == n && handled_ok == n);
}

static volatile int stop;

static int ignore_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info, (void)size, (void)arg;
	return 0;
}

static void *alloc_and_walk(void *arg)
{
	(void)arg;
	while (!stop) {
		free(malloc(32));
		dl_iterate_phdr(ignore_object, NULL);
	}
	return NULL;
}

static int run_fork_threads(long n, const char *lib)
{
	pthread_t t[4];
	long i, good = 0;

	if (lib && !dlopen(lib, RTLD_NOW | RTLD_LOCAL)) {
		fprintf(stderr, "fork-threads: %s\n", dlerror());
		return 1;
	}
	find_operators();
	for (i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, alloc_and_walk, NULL);
	for (i = 0; i < n; i++) {
		int status;
		pid_t c = fork();

		if (c == 0)
			_exit(churn(24) ? 0 : 1);
		if (c > 0 && waitpid(c, &status, 0) == c && WIFEXITED(status) && !WEXITSTATUS(status))
			good++;
	}
	stop = 1;
	for (i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("fork-threads: %ld of %ld children of a threaded parent allocated and exited 0\n", good, n);
	return good != n;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "locale"))
		return run_locale();
	if (argc == 2 && !strcmp(argv[1], "gettext"))
		return run_gettext();
	if (argc == 4 && !strcmp(argv[1], "sig-dlopen"))
		return run_sig_dlopen(argv[2], atol(argv[3]));
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "fork-threads"))
		return run_fork_threads(atol(argv[2]), argc == 4 ? argv[3] : NULL);
	fprintf(stderr, "usage: no_hang locale | gettext | sig-dlopen LIB N | fork-threads N [LIB]\n");
	return 2;
}
