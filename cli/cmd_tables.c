/* `dwleak tables [--verify] FILE...`: prints an object's compiled unwind
 * rows the way `readelf --debug-dump=frames-interp` prints CFI, or checks
 * every row against libdw and prints one parseable summary line per file. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd_tables.h"
#include "options.h"
#include "debug_file.h"
#include "symbolize.h"
#include "table.h"
#include "table_cache.h"
#include "table_verify.h"

#define EXIT_MISMATCH 1
#define RULE_TEXT_MAX 128
#define MISMATCHES_SHOWN 50 /* per object; the summary line counts them all */

/* Settings of one `dwleak tables` run; zero is the default for each. */
struct tables_env {
	bool verify;		/* --verify: compare with libdw instead of printing rows */
	bool no_cache;		/* --no-cache: always compile, never read or write the cache */
	const char *debug_file; /* --debug-file: separate debug file of the one FILE */
	const char **debug_dirs; /* --debug-dir (repeatable), NULL-terminated */
	size_t ndebug_dirs;
	struct table_cache *cache; /* NULL when disabled or unavailable */
};

enum tables_opt_key {
	OPT_VERIFY = 0x100,
	OPT_DEBUG_FILE,
	OPT_DEBUG_DIR,
	OPT_NO_CACHE,
};

static const struct option tables_options[] = {
	{ "verify", no_argument, NULL, OPT_VERIFY },
	{ "debug-file", required_argument, NULL, OPT_DEBUG_FILE },
	{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
	{ "no-cache", no_argument, NULL, OPT_NO_CACHE },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static const char tables_usage[] =
	"Usage: dwleak tables [--verify] [--debug-file PATH] [--debug-dir DIR] [--no-cache] FILE...\n"
	"\n"
	"Compiles the DWARF call-frame information (.eh_frame, and .debug_frame from the\n"
	"object or its separate debug file) of each ELF FILE into the compact unwind\n"
	"table dwleak's in-kernel stack walker uses, and prints it: a header, then one\n"
	"line per row with its address range, how to find the CFA (the caller's rsp)\n"
	"and where the caller's rbp was saved.  A debug aid: dwleak compiles the tables\n"
	"it needs by itself while it traces.\n"
	"\n"
	"  --verify            check every row against libdw's own reading of the CFI\n"
	"                      instead of printing rows; prints each disagreement and,\n"
	"                      per file, a summary line (see below)\n"
	"  --debug-file PATH   take .debug_frame from PATH too (one FILE only); by default\n"
	"                      the debug file is looked up by build id and .gnu_debuglink\n"
	"                      next to FILE, in .debug/ and under /usr/lib/debug\n"
	"  --debug-dir DIR     also look for debug files under DIR (repeatable)\n"
	"  --no-cache          compile every table afresh; do not read or write the cache\n"
	"                      ($XDG_CACHE_HOME/dwleak or ~/.cache/dwleak, used only when it\n"
	"                      is a directory of yours that nobody else can write; tables\n"
	"                      of files other users own or can write are never stored)\n"
	"  -h, --help          show this help\n"
	"\n"
	"How to read a row:\n"
	"  0x26000-0x26006 cfa=rsp+16 rbp=same\n"
	"                           an address range, then how to unwind from it:\n"
	"  cfa=rsp+N, cfa=rbp+N     the CFA is that register plus N\n"
	"  cfa=plt11+N, plt10+N     .plt stubs: rsp+N, +8 past the push in each stub\n"
	"  cfa=deref_rbp...         a realigned stack: the CFA loaded from rbp+N\n"
	"  rbp=[cfa-16], rbp=same   the caller's rbp saved at CFA-16, or unchanged\n"
	"  end, signal, unsupported\n"
	"                           the outermost frame, a signal trampoline, or a rule\n"
	"                           the walker cannot follow (it stops there, counted)\n"
	"An aarch64 FILE's rows name that machine's registers (its tables are compiled\n"
	"and verified on any host; this dwleak traces x86_64 processes):\n"
	"  0x27384-0x2738c cfa=sp+16 x29=[cfa-16] ra=[cfa-8]\n"
	"  cfa=sp+N, cfa=x29+N      the CFA is sp or the frame pointer plus N\n"
	"  x29=[cfa-16], x29=same   the caller's frame pointer saved, or unchanged\n"
	"  ra=[cfa-8], ra=x30       the return address saved, or still in the link\n"
	"                           register (a leaf, or before the prologue stores it)\n"
	"  signed                   it carries a pointer authentication code\n"
	"\n"
	"The --verify summary line of each FILE reads\n"
	"  verify FILE: fdes=N rows=N bytes=N bytes_per_row=X.XX coverage=P% mismatches=N\n"
	"where coverage is the share of the code with CFI that the walker can unwind.\n"
	"\n"
	"Examples:\n"
	"  dwleak tables /lib/x86_64-linux-gnu/libc.so.6 | less\n"
	"                           libc's table, row by row\n"
	"  dwleak tables --verify /usr/bin/python3 /lib/x86_64-linux-gnu/libstdc++.so.6\n"
	"                           every row of two objects against libdw\n"
	"  dwleak tables --verify --debug-file prog.debug prog\n"
	"                           with .debug_frame from a separate debug file\n"
	"\n"
	"Exit status: 0 success, 1 --verify found a mismatch, 2 a usage error or a FILE\n"
	"that could not be read (the other FILEs are still processed).\n";

/* What the user can do about each compile or open failure. */
static const char *error_advice(int err)
{
	switch (err) {
	case -ENOENT:
		return "check the path";
	case -EACCES:
	case -EPERM:
		return "check its permissions, or run as a user who can read it";
	case -EISDIR:
		return "give an ELF file, not a directory";
	case -EINVAL:
		return "give a regular ELF file";
	case -EFBIG:
		return "its call-frame information is implausibly large: the file is damaged or hostile";
	case -EIO:
		return "the file changed or could not be read; retry";
	case -ENOEXEC:
		return "give an x86_64 or aarch64 ELF executable or shared library (is it truncated?)";
	case -ENODATA:
		return "if a separate debug file has .debug_frame, install it or pass --debug-file PATH";
	case -ENOMEM:
		return "free some memory and retry";
	default:
		return "check that it is a readable x86_64 ELF object";
	}
}

static void report_error(const char *path, int err, const char *why)
{
	fprintf(stderr, "dwleak: cannot read %s: %s; %s\n", path, why, error_advice(err));
}

static void build_id_print(const struct unwind_table *t)
{
	uint32_t i;

	if (!t->build_id_len) {
		printf("  build-id: none\n");
		return;
	}
	printf("  build-id: ");
	for (i = 0; i < t->build_id_len; i++)
		printf("%02x", t->build_id[i]);
	printf("\n");
}

static double percent(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static double per_row(uint64_t bytes, uint32_t rows)
{
	return rows ? (double)bytes / rows : 0.0;
}

static void header_print(const char *path, const char *debug_path, const struct unwind_table *t)
{
	uint64_t bytes = table_walker_bytes(t);

	printf("%s:\n", path);
	build_id_print(t);
	printf("  debug file: %s\n", debug_path ? debug_path : "none");
	printf("  fdes: %" PRIu32 " (.eh_frame %" PRIu32 ", .debug_frame %" PRIu32
	       ", skipped %" PRIu32 ")\n",
	       t->nfdes, t->nfdes_eh, t->nfdes_debug, t->nfdes_bad);
	printf("  rows: %" PRIu32 "  rules: %" PRIu32 "  pages: %" PRIu32 "  bytes: %" PRIu64
	       " (%.2f per row)\n",
	       t->nrows, t->nrules, t->npages, bytes, per_row(bytes, t->nrows));
	printf("  code covered by CFI: %" PRIu64 " bytes, walker-supported: %" PRIu64
	       " (%.3f%%)\n",
	       t->covered_bytes, t->supported_bytes, percent(t->supported_bytes, t->covered_bytes));
}

static int span_print(const struct table_span *span, void *arg)
{
	const struct unwind_table *t = arg;
	char text[RULE_TEXT_MAX];

	table_rule_format(span->rule, t->arch, text, sizeof(text));
	printf("  %#" PRIx64 "-%#" PRIx64 "  %s\n", span->start, span->end, text);
	return 0;
}

/* State of one --verify run, for the mismatch callback. */
struct verify_print {
	const char *path;
	uint64_t shown;
	uint64_t seen;
};

static void mismatch_print(void *arg, uint64_t addr, const char *ours, const char *theirs)
{
	struct verify_print *vp = arg;

	if (vp->seen++ >= MISMATCHES_SHOWN)
		return;
	vp->shown++;
	printf("mismatch %s %#" PRIx64 ": ours %s, libdw %s\n", vp->path, addr, ours, theirs);
}

/* Runs table_verify() and prints the summary; returns an exit status. */
static int object_verify(const char *path, int fd, const struct table_opts *opts,
			 const struct unwind_table *t)
{
	struct verify_print vp = { .path = path };
	struct table_verify_result res;
	int ret;

	ret = table_verify(fd, opts, t, &res, mismatch_print, &vp);
	if (ret) {
		report_error(path, ret, table_verify_last_error());
		return EXIT_USAGE;
	}
	if (vp.seen > vp.shown)
		printf("mismatch %s: ... %" PRIu64 " more not shown\n", path, vp.seen - vp.shown);
	printf("verify %s: fdes=%" PRIu32 " rows=%" PRIu32 " bytes=%" PRIu64
	       " bytes_per_row=%.2f coverage=%.3f%% mismatches=%" PRIu64 "\n",
	       path, res.nfdes, res.nrows, res.walker_bytes, per_row(res.walker_bytes, res.nrows),
	       percent(res.supported_bytes, res.covered_bytes), res.mismatches);
	return res.mismatches ? EXIT_MISMATCH : 0;
}

/* What a file of type MODE is, for a refusal message. */
static const char *file_kind(mode_t mode)
{
	if (S_ISDIR(mode))
		return "is a directory";
	if (S_ISFIFO(mode))
		return "is a FIFO (named pipe), not a regular file";
	if (S_ISSOCK(mode))
		return "is a socket, not a regular file";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "is a device, not a regular file";
	return "not a regular file";
}

/* Opens PATH for reading; refuses what is not a regular file.  O_NONBLOCK:
 * opening a FIFO would otherwise wait for a writer forever. */
static int object_open(const char *path, int *fd)
{
	struct stat st;
	int err;

	*fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (*fd < 0) {
		err = -errno;
		report_error(path, err, strerror(-err));
		return err;
	}
	if (fstat(*fd, &st) == 0 && !S_ISREG(st.st_mode)) {
		err = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		report_error(path, err, file_kind(st.st_mode));
		close(*fd);
		*fd = -1;
		return err;
	}
	return 0;
}

/* The debug file to use for FD: --debug-file, else the usual lookup. */
static char *debug_path_for(const struct tables_env *env, int fd, const char *path)
{
	char *found = NULL;

	if (env->debug_file)
		return strdup(env->debug_file);
	if (debug_file_find(fd, path, env->debug_dirs, &found) == 0)
		return found;
	return NULL;
}

/* Compiles (or fetches) and prints or verifies one FILE; returns an exit status. */
static int object_run(const struct tables_env *env, const char *path)
{
	struct unwind_table *t = NULL;
	struct table_opts opts = { 0 };
	char *debug_path = NULL;
	int fd, ret, status = EXIT_USAGE;

	if (object_open(path, &fd))
		return EXIT_USAGE;
	debug_path = debug_path_for(env, fd, path);
	opts.debug_path = debug_path;
	ret = table_cache_get(env->cache, fd, path, &opts, &t, NULL);
	if (ret) {
		report_error(path, ret, table_last_error());
		goto out;
	}
	if (env->verify) {
		status = object_verify(path, fd, &opts, t);
		goto out;
	}
	header_print(path, debug_path, t);
	table_for_each_span(t, span_print, t);
	status = 0;
out:
	table_free(t);
	free(debug_path);
	close(fd);
	return status;
}

/* Parses options into ENV; returns -1 to go on, else an exit status. */
static int options_parse(struct tables_env *env, int argc, char **argv)
{
	int c;

	optind = 1;
	opterr = 0; /* our own message names the command */
	while ((c = getopt_long(argc, argv, "h", tables_options, NULL)) != -1) {
		switch (c) {
		case OPT_VERIFY:
			env->verify = true;
			break;
		case OPT_DEBUG_FILE:
			env->debug_file = optarg;
			break;
		case OPT_DEBUG_DIR:
			if (debug_dir_option("dwleak tables", &env->debug_dirs, &env->ndebug_dirs, optarg))
				return EXIT_USAGE;
			break;
		case OPT_NO_CACHE:
			env->no_cache = true;
			break;
		case 'h':
			fputs(tables_usage, stdout);
			return 0;
		default:
			return usage_error("dwleak tables", "unknown option or missing argument '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("dwleak tables", "%s", "no FILE given");
	if (env->debug_file && argc - optind > 1)
		return usage_error("dwleak tables", "%s", "--debug-file applies to a single FILE");
	return -1;
}

int cmd_tables(int argc, char **argv)
{
	struct tables_env env = { 0 };
	int i, ret, status = 0;

	ret = options_parse(&env, argc, argv);
	if (ret >= 0)
		goto out;
	/* A cache that cannot be used (no $HOME, a directory others can write)
	 * just means compiling every time; say why once. */
	if (!env.no_cache && table_cache_open(NULL, &env.cache))
		fprintf(stderr, "dwleak: warning: not using the table cache: %s\n", table_cache_why());
	for (i = optind; i < argc; i++) {
		ret = object_run(&env, argv[i]);
		if (ret > status)
			status = ret;
		fflush(stdout);
	}
	ret = status;
out:
	table_cache_close(env.cache);
	free(env.debug_dirs);
	return ret;
}
