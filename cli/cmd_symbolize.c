/* `dwleak symbolize [--debug-dir DIR]... [-o OUT] REPORT.json`: reads a JSON
 * report back (report/json_read.c), names every frame again against the
 * objects and debug files found here or fetched from debuginfod
 * (report/frames.c, report/symbolize.h), and writes it out in the same
 * format, with a loss line for each debug file a lookup did not get. */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_symbolize.h"
#include "fetch.h"

/* No report dwleak writes comes near this. */
#define REPORT_JSON_MAX (1ull << 30)
#include "options.h"
#include "frames.h"
#include "json_read.h"
#include "report.h"
#include "symbolize.h"
#include "text_file.h"
#include "write.h"

/* The kernel's signal trampoline: its own frame and the interrupted one
 * after it were recorded at exact pcs, not return addresses. */
#define SIGNAL_TRAMPOLINE "__restore_rt"

/* Settings of one `dwleak symbolize` run. */
struct symbolize_env {
	const char **debug_dirs; /* --debug-dir (repeatable), NULL-terminated */
	size_t ndebug_dirs;
	const char *output;	 /* -o: NULL = stdout */
	const char *input;	 /* REPORT.json, "-" = stdin */
};

/*
 * One object the report's frames name, found at most once per run.
 * CANDIDATES are the registered files with its bytes, best first: the
 * recorded path (when its build id matches), then per --debug-dir the
 * build-id copy and the .debug file.  Reports name a few dozen objects at
 * most, so a list searched in order is enough.
 */
struct module_entry {
	const char *path;     /* as the report has it (borrowed from the tree) */
	const char *build_id; /* NULL when the report has none */
	struct sym_module **candidates;
	size_t ncandidates;
};

/*
 * A run's state.  IN is the report read; its stacks' frame lists are
 * replaced by spans of FRAMES, whose new names FRAMES owns and whose
 * paths and build ids stay borrowed from IN.
 */
struct run {
	const struct symbolize_env *env;
	struct report_json in;
	struct symbolizer *sym;
	struct module_entry *modules;
	size_t nmodules;
	struct frame_arena frames;
	/* the report's losses and a line per debuginfod miss after them; the
	 * new lines' texts are owned here */
	struct report_loss *losses;
	char **loss_texts;
	size_t nloss_texts;
};

static const struct option symbolize_options[] = {
	{ "debug-dir", required_argument, NULL, 'D' },
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static const char symbolize_usage[] =
	"Usage: dwleak symbolize [--debug-dir DIR]... [-o OUT] REPORT.json\n"
	"\n"
	"Names the frames of a JSON report (dwleak --format json) again, here: for\n"
	"a report taken on stripped binaries, on a machine without their debug files.\n"
	"Each frame's object is found at its recorded path when its build id matches,\n"
	"else by build id in each DIR (DIR/.build-id/xx/rest, an executable or library\n"
	"with symbols, or DIR/.build-id/xx/rest.debug, a separate debug file); debug\n"
	"files for the recorded path are also looked up as dwleak does when tracing.\n"
	"Function, offset, file, line and inlined frames are replaced; a frame whose\n"
	"object or symbols are not found keeps what the report had.  Everything else\n"
	"in the report is written back unchanged.\n"
	"\n"
	"With DEBUGINFOD_URLS set, a debug file found nowhere here is fetched by build\n"
	"id from those servers (into debuginfod's cache), for an object that is here\n"
	"and for one that is not; what could not be fetched is said on stderr and\n"
	"added to the report's \"losses\".  DWLEAK_DEBUGINFOD_SECONDS (default 120)\n"
	"bounds the time all lookups take.\n"
	"\n"
	"  -D, --debug-dir DIR   look for objects and debug files by build id under DIR\n"
	"                        (repeatable, searched in order)\n"
	"  -o, --output OUT      write the report to OUT (default: stdout)\n"
	"  -h, --help            show this help\n"
	"\n"
	"REPORT.json may be '-' for stdin.\n"
	"\n"
	"Examples:\n"
	"  dwleak --format json -o leaks.json -- ./app-stripped\n"
	"                        in CI: a report on stripped binaries\n"
	"  dwleak symbolize --debug-dir ./debug -o named.json leaks.json\n"
	"                        later, where their debug files are (./debug/.build-id/)\n"
	"  dwleak symbolize --debug-dir /usr/lib/debug leaks.json | jq '.stacks[0]'\n"
	"                        the biggest stack, named from -dbgsym packages\n"
	"  DEBUGINFOD_URLS=https://debuginfod.debian.net dwleak symbolize leaks.json\n"
	"                        named from Debian's debuginfod server\n"
	"\n"
	"Exit status: 0 success, 2 a usage error, an unreadable or invalid report, or\n"
	"an output that could not be written.\n";

static int symbolize_usage_error(const char *fmt, const char *arg)
{
	return usage_error("dwleak symbolize", fmt, arg);
}

static void run_free(struct run *run)
{
	for (size_t i = 0; i < run->nloss_texts; i++)
		free(run->loss_texts[i]);
	free(run->loss_texts);
	free(run->losses);
	frame_arena_free(&run->frames);
	for (size_t i = 0; i < run->nmodules; i++)
		free(run->modules[i].candidates);
	free(run->modules);
	symbolizer_free(run->sym);
	report_json_free(&run->in);
}

/* ---- Finding objects ---- */

/* Registers PATH when it exists and has BUILD_ID (any when NULL), as the
 * next candidate of E. */
static int candidate_try(struct run *run, struct module_entry *e, const char *path)
{
	struct sym_module *m, **g;
	const char *id;

	if (access(path, R_OK) != 0 || symbolizer_module(run->sym, path, -1, &m) != 0)
		return 0; /* not here: the next place may have it */
	id = sym_module_build_id(m);
	if (e->build_id && (!id || strcmp(id, e->build_id) != 0))
		return 0;
	g = realloc(e->candidates, (e->ncandidates + 1) * sizeof(*g));
	if (!g)
		return -ENOMEM;
	e->candidates = g;
	e->candidates[e->ncandidates++] = m;
	return 0;
}

/* Looks up the candidates of E: its recorded path, then by build id in
 * every --debug-dir, the way gdb and libdwfl lay out .build-id trees,
 * and last, when none is here, its debug file from debuginfod. */
static int candidates_find(struct run *run, struct module_entry *e)
{
	static const char *const suffixes[] = { "", ".debug" };
	size_t i, j;
	int err;

	err = candidate_try(run, e, e->path);
	if (err || !e->build_id || strlen(e->build_id) < 3)
		return err;
	for (i = 0; i < run->env->ndebug_dirs; i++) {
		for (j = 0; j < sizeof(suffixes) / sizeof(suffixes[0]); j++) {
			char *path;

			if (asprintf(&path, "%s/.build-id/%.2s/%s%s", run->env->debug_dirs[i],
				     e->build_id, e->build_id + 2, suffixes[j]) < 0)
				return -ENOMEM;
			err = candidate_try(run, e, path);
			free(path);
			if (err)
				return err;
		}
	}
	if (!e->ncandidates) {
		char *fetched;

		/* a failure is noted by the symbolizer and said with the others */
		err = symbolizer_fetch_debuginfo(run->sym, e->path, e->build_id, &fetched);
		if (err == -ENOMEM)
			return err;
		if (!err) {
			err = candidate_try(run, e, fetched);
			free(fetched);
		}
		return err == -ENOMEM ? err : 0;
	}
	return 0;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* The entry of (PATH, BUILD_ID), looked up on first use; NULL on -ENOMEM. */
static struct module_entry *module_entry_get(struct run *run, const char *path,
					     const char *build_id)
{
	struct module_entry *e, *g;
	size_t i;

	for (i = 0; i < run->nmodules; i++)
		if (str_eq(run->modules[i].path, path) && str_eq(run->modules[i].build_id, build_id))
			return &run->modules[i];
	g = realloc(run->modules, (run->nmodules + 1) * sizeof(*g));
	if (!g)
		return NULL;
	run->modules = g;
	e = &run->modules[run->nmodules++];
	memset(e, 0, sizeof(*e));
	e->path = path;
	e->build_id = build_id;
	return candidates_find(run, e) ? NULL : e;
}

/* ---- Resolving ---- */

/* How much a group of frames says: 2 with a source position, 1 with a
 * name only, 0 with neither.  SCORE is the group's so far; this adds one
 * frame to it, for the resolved frames and the report's alike. */
static int score_add(int score, const char *function, const char *file, int line)
{
	if (file || line > 0)
		return 2;
	return function && score < 1 ? 1 : score;
}

static int sym_score(const struct sym_frame *f, size_t n)
{
	int score = 0;

	for (size_t i = 0; i < n; i++)
		score = score_add(score, f[i].function, f[i].file, f[i].line);
	return score;
}

static int report_score(const struct report_frame *f, size_t n)
{
	int score = 0;

	for (size_t i = 0; i < n; i++)
		score = score_add(score, f[i].function, f[i].file, f[i].line);
	return score;
}

/*
 * Resolves ELF address ADDR in the candidates of E, keeping the first
 * answer with a source position, else the first with a name.  Stores the
 * kept frames (NULL when no candidate named anything) at *OUT.
 */
static int entry_resolve(struct module_entry *e, uint64_t addr, bool return_addr,
			 struct sym_frame **out, size_t *n)
{
	int best = 0;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < e->ncandidates && best < 2; i++) {
		struct sym_frame *f;
		size_t nf;
		int score;

		if (sym_module_resolve(e->candidates[i], addr, return_addr, &f, &nf) != 0)
			return -ENOMEM;
		score = sym_score(f, nf);
		if (score > best) {
			sym_frames_free(*out, *n);
			*out = f;
			*n = nf;
			best = score;
		} else {
			sym_frames_free(f, nf);
		}
	}
	return 0;
}

static bool is_trampoline(const char *function)
{
	return function && strcmp(function, SIGNAL_TRAMPOLINE) == 0;
}

/*
 * Appends to RUN->frames the frame list IN (N frames) resolved again group
 * by group - a physical frame and the inlined frames before it, which share
 * its address - keeping a group as it was when the report said more than
 * the objects found here do.  The first group, the signal trampoline and the
 * frame it interrupted are exact pcs; every other group is a return
 * address, as the tracer resolved them.
 */
static int frames_symbolize(struct run *run, const struct report_frame *in, size_t n)
{
	bool after_trampoline = false;
	size_t i = 0, group = 0;
	int err = 0;

	while (i < n) {
		const struct report_frame *phys;
		size_t len = 1, k;
		struct sym_frame *sf = NULL;
		size_t nsf = 0;
		bool trampoline;

		while (i + len < n && in[i + len - 1].inlined &&
		       in[i + len].address == in[i].address && str_eq(in[i + len].module, in[i].module))
			len++;
		phys = &in[i + len - 1];
		trampoline = is_trampoline(phys->function);
		if (phys->module) {
			struct module_entry *e = module_entry_get(run, phys->module, phys->build_id);
			bool exact = group == 0 || trampoline || after_trampoline;

			if (!e)
				return -ENOMEM;
			err = entry_resolve(e, phys->elf_address, !exact, &sf, &nsf);
			if (err)
				return err;
		}
		if (nsf && sym_score(sf, nsf) >= report_score(&in[i], len)) {
			for (k = 0; k < nsf; k++)
				trampoline = trampoline || is_trampoline(sf[k].function);
			err = frame_arena_add_names(&run->frames, phys->module, phys->build_id,
						    phys->address, phys->elf_address, sf, nsf);
		} else {
			sym_frames_free(sf, nsf);
			err = frame_arena_add_copies(&run->frames, &in[i], len);
		}
		if (err)
			return err;
		after_trampoline = trampoline;
		i += len;
		group++;
	}
	return 0;
}

/* Resolves every stack's frames and FP frames into RUN->frames, then points
 * the stacks at them once the arena stopped growing. */
static int report_symbolize(struct run *run)
{
	struct report *r = &run->in.report;
	struct frame_span *spans = calloc(2 * r->nstacks + 1, sizeof(*spans));
	int err = spans ? 0 : -ENOMEM;

	for (size_t i = 0; i < r->nstacks && !err; i++) {
		spans[2 * i] = frame_span_start(&run->frames);
		err = frames_symbolize(run, r->stacks[i].frames, r->stacks[i].nframes);
		frame_span_end(&run->frames, &spans[2 * i]);
		spans[2 * i + 1] = frame_span_start(&run->frames);
		if (!err)
			err = frames_symbolize(run, r->stacks[i].fp_frames, r->stacks[i].nfp_frames);
		frame_span_end(&run->frames, &spans[2 * i + 1]);
	}
	for (size_t i = 0; i < r->nstacks && !err; i++) {
		struct report_stack *s = &r->stacks[i];

		s->frames = frame_span_frames(&run->frames, spans[2 * i]);
		s->nframes = spans[2 * i].n;
		s->fp_frames = frame_span_frames(&run->frames, spans[2 * i + 1]);
		s->nfp_frames = spans[2 * i + 1].n;
	}
	free(spans);
	return err;
}

/* Adds to the report a loss line per debug file debuginfod did not give
 * (the report's own lines first).  Returns 0 or -ENOMEM. */
static int fetch_losses_add(struct run *run)
{
	struct report *r = &run->in.report;
	const struct sym_fetch_miss *m;
	size_t n = symbolizer_fetch_misses(run->sym, &m);

	if (!n)
		return 0;
	run->losses = calloc(r->nlosses + n, sizeof(*run->losses));
	run->loss_texts = calloc(n, sizeof(*run->loss_texts));
	if (!run->losses || !run->loss_texts)
		return -ENOMEM;
	if (r->nlosses)
		memcpy(run->losses, r->losses, r->nlosses * sizeof(*r->losses));
	for (size_t i = 0; i < n; i++) {
		if (sym_fetch_miss_text(&m[i], &run->loss_texts[i]))
			return -ENOMEM;
		run->nloss_texts++;
		run->losses[r->nlosses + i] = (struct report_loss){ .what = "debuginfo_not_fetched", .count = 1,
								    .text = run->loss_texts[i] };
	}
	r->losses = run->losses;
	r->nlosses += n;
	return 0;
}

/* Says which objects were found nowhere, so the user knows what to add. */
static void missing_print(const struct run *run)
{
	for (size_t i = 0; i < run->nmodules; i++) {
		const struct module_entry *e = &run->modules[i];

		if (e->ncandidates)
			continue;
		fprintf(stderr, "dwleak: note: %s", e->path);
		if (e->build_id)
			fprintf(stderr, " (build id %s)", e->build_id);
		fputs(" not found here or under any --debug-dir; its frames are kept as they were\n",
		      stderr);
	}
}

/* ---- Command ---- */

/* Reads all of PATH ("-" = stdin) into a malloc'd *BUF of *LEN bytes. */
static int report_output(struct run *run)
{
	const char *path = run->env->output;
	FILE *f = path ? fopen(path, "w") : stdout;
	int err;

	if (!f) {
		err = -errno;
		fprintf(stderr, "dwleak: cannot write %s: %s\n", path, strerror(-err));
		return err;
	}
	err = report_write(f, REPORT_FORMAT_JSON, &run->in.report, 0);
	if (path) {
		if (fclose(f) != 0 && !err)
			err = -EIO;
	} else if (fflush(f) != 0 && !err) {
		err = -EIO;
	}
	if (err)
		fprintf(stderr, "dwleak: cannot write %s: %s\n", path ? path : "the report to stdout",
			strerror(-err));
	return err;
}

/* Says what reading INPUT gave besides the report: the fields left out of
 * the output, then, when ERR is -EINVAL, why it is not a report. */
static void read_messages_print(const char *input, const struct report_json *in, int err)
{
	for (size_t i = 0; i < in->nunknown_fields; i++)
		fprintf(stderr, "dwleak: warning: %s: field '%s' is not known to this dwleak and "
			"is left out of the output\n", input, in->unknown_fields[i]);
	if (err != -EINVAL)
		return;
	fprintf(stderr, "dwleak: %s", input);
	if (in->error.line)
		fprintf(stderr, ":%u:%u", in->error.line, in->error.column);
	fprintf(stderr, ": %s\n", in->error.message);
}

/* Parses ARGV into ENV; returns -1 to go on, else an exit status. */
static int options_parse(struct symbolize_env *env, int argc, char **argv)
{
	int c;

	optind = 1;
	opterr = 0; /* our own message names the command */
	while ((c = getopt_long(argc, argv, "D:o:h", symbolize_options, NULL)) != -1) {
		switch (c) {
		case 'D':
			if (debug_dir_option("dwleak symbolize", &env->debug_dirs, &env->ndebug_dirs, optarg))
				return EXIT_USAGE;
			break;
		case 'o':
			env->output = optarg;
			break;
		case 'h':
			fputs(symbolize_usage, stdout);
			return 0;
		default:
			return symbolize_usage_error("unknown option or missing argument '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return symbolize_usage_error("%s", "no REPORT.json given");
	if (argc - optind > 1)
		return symbolize_usage_error("one REPORT.json at a time, not also '%s'", argv[optind + 1]);
	env->input = argv[optind];
	return -1;
}

int cmd_symbolize(int argc, char **argv)
{
	struct symbolize_env env = { 0 };
	struct run run = { .env = &env };
	struct sym_fetch fetch;
	const char *what = NULL;
	char *text = NULL;
	size_t len;
	int ret, err;

	/* Options and input */
	ret = options_parse(&env, argc, argv);
	if (ret >= 0)
		goto out;
	ret = EXIT_USAGE;
	err = text_file_read(env.input, REPORT_JSON_MAX, &text, &len, &what);
	if (err) {
		fprintf(stderr, "dwleak: cannot read %s: %s%s\n", env.input,
			what		 ? what
			: err == -EFBIG	 ? "larger than 1 GiB, more than any report dwleak writes"
			: err == -EISDIR ? "it is a directory"
					 : strerror(-err),
			what ? " (give a regular file, or '-' to read standard input)" : "");
		goto out;
	}
	err = report_json_read(text, len, &run.in);
	read_messages_print(env.input, &run.in, err);
	if (err == -ENOMEM)
		goto nomem;
	if (err)
		goto out;

	/* Resolve every frame group, then write */
	if (fetch_settings("dwleak symbolize", &fetch))
		goto out;
	err = symbolizer_new(env.debug_dirs, &run.sym);
	if (err == -EINVAL) {
		ret = symbolize_usage_error("%s", "a --debug-dir is empty or contains ':'");
		goto out;
	}
	if (!err) {
		symbolizer_set_fetch(run.sym, &fetch);
		err = report_symbolize(&run);
	}
	err = err ?: fetch_losses_add(&run);
	if (err)
		goto nomem;
	missing_print(&run);
	fetch_misses_print("dwleak symbolize", run.sym);
	if (report_output(&run) == 0)
		ret = 0;
	goto out;
nomem:
	fprintf(stderr, "dwleak: out of memory\n");
out:
	run_free(&run);
	free(text);
	free(env.debug_dirs);
	return ret;
}
