/* The folded report: one line per stack, "outer;...;inner BYTES", the input
 * of Brendan Gregg's FlameGraph, inferno and speedscope.  With several
 * processes each line starts with its process ("COMMAND [PID]"), and with a
 * leak check a stack gives a line per kind, which starts with the kind
 * ("[definitely_lost]"), so a flame graph splits by process, then kind. */
#include <inttypes.h>
#include <stdbool.h>
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

/* One line of stack S: the process ("COMMAND [PID]", PROCESS when not NULL)
 * and the kind as outermost frames, then S's frames, outermost first. */
static void folded_line(FILE *f, const char *process, const struct report_stack *s,
			const struct report_part *part)
{
	size_t j;

	if (process) {
		folded_put(f, process);
		fputc(';', f);
	}
	if (report_part_label(part->kind))
		fprintf(f, "%s;", report_part_label(part->kind));
	if (!s->nframes) {
		fputs("[unknown]", f);
	} else {
		for (j = s->nframes; j-- > 0;) {
			folded_frame(f, &s->frames[j]);
			if (j)
				fputc(';', f);
		}
	}
	fprintf(f, " %" PRIu64 "\n", part->count.bytes);
}

int report_write_folded(FILE *f, const struct report *r, unsigned int top)
{
	struct report_part parts[REPORT_PARTS_MAX];
	const struct report_stack **order;
	bool multi = report_is_multiprocess(r);
	char *process = NULL;
	size_t i, j, n, nparts;
	int err;

	err = report_stacks_top(r, top, &order, &n);
	for (i = 0; i < n && !err; i++) {
		if (multi && (err = report_process_label(r, order[i], &process)))
			break;
		/* a stack with nothing outstanding keeps its line, as it always did */
		nparts = report_stack_parts(r, order[i], parts);
		if (!nparts && !r->leak_check.present)
			nparts = 1;
		for (j = 0; j < nparts; j++)
			folded_line(f, process, order[i], &parts[j]);
		free(process);
		process = NULL;
	}
	free(order);
	return err ? err : report_stream_status(f);
}
