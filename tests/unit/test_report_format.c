/* Unit tests for the format table (report/write.h): every name parses to its
 * format and back, unknown names are refused, the properties are those of
 * SPEC.md's formats, and report_write() writes exactly what each format's own
 * writer writes. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pprof.h"
#include "report.h"
#include "svg.h"
#include "write.h"

/* The formats of SPEC.md's --format, in its order. */
static const char *const spec_names[] = { "text", "json", "folded", "pprof", "svg" };

static void test_names(void)
{
	size_t i;

	CHECK(REPORT_FORMAT_COUNT == N(spec_names), "%d formats", (int)REPORT_FORMAT_COUNT);
	for (i = 0; i < N(spec_names); i++) {
		enum report_format fmt = REPORT_FORMAT_COUNT;

		EXPECT(report_format_parse(spec_names[i], &fmt) == 0, "%s", spec_names[i]);
		EXPECT(fmt == (enum report_format)i, "%s parsed as %d", spec_names[i], (int)fmt);
		EXPECT(report_format_name(fmt) && strcmp(report_format_name(fmt), spec_names[i]) == 0,
		       "%s named %s", spec_names[i], report_format_name(fmt));
		EXPECT(report_format_names[i] && strcmp(report_format_names[i], spec_names[i]) == 0,
		       "names[%zu] = %s", i, report_format_names[i]);
	}
	EXPECT(report_format_names[REPORT_FORMAT_COUNT] == NULL, "names end in NULL");
	EXPECT(strcmp(report_format_list, "text, json, folded, pprof, svg") == 0, "list '%s'",
	       report_format_list);
	EXPECT(report_format_name(REPORT_FORMAT_TEXT) == report_format_names[0], "one string per name");
	EXPECT(report_format_name(REPORT_FORMAT_COUNT) == NULL);
	EXPECT(report_format_name((enum report_format)-1) == NULL);
}

static void test_refused(void)
{
	static const char *const bad[] = { "", "JSON", "json ", " json", "jso", "jsonx", "xml",
					   "text,json", "svg\n" };
	enum report_format fmt = REPORT_FORMAT_SVG;
	size_t i;

	for (i = 0; i < N(bad); i++) {
		EXPECT(report_format_parse(bad[i], &fmt) == -EINVAL, "'%s' accepted", bad[i]);
		EXPECT(fmt == REPORT_FORMAT_SVG, "'%s' changed *out", bad[i]);
	}
	EXPECT(report_format_parse(NULL, &fmt) == -EINVAL);
}

static void test_properties(void)
{
	EXPECT(!report_format_is_binary(REPORT_FORMAT_TEXT));
	EXPECT(!report_format_is_binary(REPORT_FORMAT_JSON));
	EXPECT(!report_format_is_binary(REPORT_FORMAT_FOLDED));
	EXPECT(report_format_is_binary(REPORT_FORMAT_PPROF));
	EXPECT(!report_format_is_binary(REPORT_FORMAT_SVG));
	EXPECT(!report_format_is_structured(REPORT_FORMAT_TEXT));
	EXPECT(report_format_is_structured(REPORT_FORMAT_JSON));
	EXPECT(report_format_is_structured(REPORT_FORMAT_FOLDED));
	EXPECT(report_format_is_structured(REPORT_FORMAT_PPROF));
	EXPECT(report_format_is_structured(REPORT_FORMAT_SVG));
	EXPECT(!report_format_is_binary(REPORT_FORMAT_COUNT));
	EXPECT(!report_format_is_structured(REPORT_FORMAT_COUNT));
}

/* What WRITE (FMT when WRITE is NULL: through report_write()) puts in a
 * memory stream; *LEN gets its length. */
static char *written(int (*write)(FILE *, const struct report *, unsigned int),
		     enum report_format fmt, const struct report *r, size_t *len, int *err)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	CHECK(f, "open_memstream");
	*err = write ? write(f, r, 1) : report_write(f, fmt, r, 1);
	CHECK(fclose(f) == 0);
	return buf;
}

static void test_dispatch(void)
{
	static int (*const writers[])(FILE *, const struct report *, unsigned int) = {
		report_write_text, report_write_json, report_write_folded, report_write_pprof,
		report_write_svg,
	};
	static const struct report_frame frames[] = {
		{ 0x7f0000001000, 0x1000, "/usr/lib/libc.so.6", "ab12", "malloc", 0, NULL, 0, false, NULL },
		{ 0x401000, 0x1000, "/app", NULL, "leak", 0x10, "/src/leak.c", 7, false, NULL },
	};
	struct report_stack stacks[2] = {
		{ .bytes = 64, .allocations = 1, .allocator = "malloc", .frames = frames,
		  .nframes = 2, .fp_divergence = -1 },
		{ .bytes = 128, .allocations = 2, .allocator = "malloc", .frames = frames + 1,
		  .nframes = 1, .fp_divergence = -1 },
	};
	struct report r = { .pid = 7, .command = "/app", .unwind = "dwarf", .duration_s = 1.0,
			    .timestamp = 1700000000, .stacks = stacks, .nstacks = 2 };
	size_t i, len, want_len;
	char *got, *want;
	int err;

	CHECK(N(writers) == REPORT_FORMAT_COUNT);
	report_totals_from_stacks(&r);
	for (i = 0; i < REPORT_FORMAT_COUNT; i++) {
		int want_err;

		got = written(NULL, (enum report_format)i, &r, &len, &err);
		want = written(writers[i], 0, &r, &want_len, &want_err);
		EXPECT(err == 0 && want_err == 0, "%s: %d, %d", spec_names[i], err, want_err);
		EXPECT(len > 0 && len == want_len && memcmp(got, want, len) == 0,
		       "%s: report_write wrote %zu bytes, its writer %zu", spec_names[i], len,
		       want_len);
		free(got);
		free(want);
	}
	got = written(NULL, REPORT_FORMAT_COUNT, &r, &len, &err);
	EXPECT(err == -EINVAL && len == 0, "no format: %d, %zu bytes", err, len);
	free(got);
}

int main(void)
{
	test_names();
	test_refused();
	test_properties();
	test_dispatch();
	if (check_failures)
		return check_status();
	printf("test_report_format: ok\n");
	return 0;
}
