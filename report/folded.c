/* The folded report: one line per stack, "outer;...;inner BYTES", the input
 * of Brendan Gregg's FlameGraph, inferno and speedscope. */
#include <inttypes.h>
#include <stdlib.h>

#include "report.h"
#include "report_internal.h"

/* ';' separates frames and the last ' ' the count: a name keeps its spaces
 * (the count is found from the end) but not ';' or control bytes, and the
 * flame-graph tools want UTF-8, so a broken byte becomes U+FFFD. */
static void folded_put(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	while (*s) {
		size_t len = report_utf8_len(s);

		if (len) {
			fputc(*s == ';' ? '_' : *s, f);
			fwrite(s + 1, 1, len - 1, f);
			s += len;
		} else {
			fputs(*s < 0x20 || *s == 0x7f ? "_" : "\xef\xbf\xbd", f);
			s++;
		}
	}
}

static void folded_frame(FILE *f, const struct report_frame *fr)
{
	if (fr->function) {
		folded_put(f, fr->function);
	} else if (fr->module) {
		fputc('[', f);
		folded_put(f, report_base_name(fr->module));
		fprintf(f, "]+0x%" PRIx64, fr->elf_address);
	} else {
		fprintf(f, "[unknown]+0x%" PRIx64, fr->address);
	}
}

int report_write_folded(FILE *f, const struct report *r, unsigned int top)
{
	const struct report_stack **order;
	size_t i, j, n;
	int err;

	err = report_stacks_top(r, top, &order, &n);
	if (err)
		return err;
	for (i = 0; i < n; i++) {
		const struct report_stack *s = order[i];

		if (!s->nframes) {
			fputs("[unknown]", f);
		} else {
			for (j = s->nframes; j-- > 0;) {
				folded_frame(f, &s->frames[j]);
				if (j)
					fputc(';', f);
			}
		}
		fprintf(f, " %" PRIu64 "\n", s->bytes);
	}
	free(order);
	return report_stream_status(f);
}
