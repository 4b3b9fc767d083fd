/* The format table: names, properties and writers of the report formats,
 * all from the one list in write.h, and report_write() choosing among them. */
#include <errno.h>
#include <string.h>

#include "pprof.h"
#include "report.h"
#include "svg.h"
#include "write.h"

/* One row of REPORT_FORMATS. */
struct format_row {
	const char *name;
	bool binary;
	bool structured;
	int (*write)(FILE *f, const struct report *r, unsigned int top);
};

static const struct format_row formats[REPORT_FORMAT_COUNT] = {
#define FORMAT_ROW(id, name, binary, structured) \
	[REPORT_FORMAT_##id] = { #name, binary, structured, report_write_##name },
	REPORT_FORMATS(FORMAT_ROW)
#undef FORMAT_ROW
};

const char *const report_format_names[REPORT_FORMAT_COUNT + 1] = {
#define FORMAT_NAME(id, name, binary, structured) [REPORT_FORMAT_##id] = #name,
	REPORT_FORMATS(FORMAT_NAME)
#undef FORMAT_NAME
	[REPORT_FORMAT_COUNT] = NULL,
};

/* ", text, json, ...": the list starts after the first separator. */
#define LIST_SEPARATOR ", "
#define FORMAT_LISTED(id, name, binary, structured) LIST_SEPARATOR #name
static const char format_list_joined[] = REPORT_FORMATS(FORMAT_LISTED);
#undef FORMAT_LISTED
const char *const report_format_list = format_list_joined + sizeof(LIST_SEPARATOR) - 1;

static const struct format_row *format_row(enum report_format fmt)
{
	return (unsigned int)fmt < REPORT_FORMAT_COUNT ? &formats[fmt] : NULL;
}

int report_format_parse(const char *name, enum report_format *out)
{
	for (unsigned int i = 0; name && i < REPORT_FORMAT_COUNT; i++) {
		if (strcmp(name, formats[i].name) == 0) {
			*out = (enum report_format)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *report_format_name(enum report_format fmt)
{
	const struct format_row *row = format_row(fmt);

	return row ? row->name : NULL;
}

bool report_format_is_binary(enum report_format fmt)
{
	const struct format_row *row = format_row(fmt);

	return row && row->binary;
}

bool report_format_is_structured(enum report_format fmt)
{
	const struct format_row *row = format_row(fmt);

	return row && row->structured;
}

int report_write(FILE *f, enum report_format fmt, const struct report *r, unsigned int top)
{
	const struct format_row *row = format_row(fmt);

	return row ? row->write(f, r, top) : -EINVAL;
}
