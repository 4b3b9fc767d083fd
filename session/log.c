/* Formatting the session's messages for its host's sink (log.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

void session_say(const struct session_log *log, enum session_level level, const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;

	if (!log || !log->say)
		return;
	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0)
		text = NULL;
	va_end(ap);
	/* out of memory: the message's fixed part at least */
	log->say(log->ctx, level, text ? text : fmt);
	free(text);
}
