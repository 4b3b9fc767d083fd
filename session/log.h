/* What the session has to tell its user (a process it cannot trace, a
 * warning, the line scripts wait for), handed to its host as text: the
 * command prints it on stderr, the agent logs it.  The session itself
 * never prints. */
#ifndef DWLEAK_SESSION_LOG_H
#define DWLEAK_SESSION_LOG_H

enum session_level {
	SESSION_INFO,	 /* a fact the user waits for ("tracing pid N ...") */
	SESSION_NOTE,	 /* how something is done, and why */
	SESSION_WARNING, /* something is missing from the result: what and why */
	SESSION_ERROR,	 /* the session cannot do what it was asked */
};

/* The host's sink: SAY gets each message, one line without its newline
 * and without a "warning: " or "note: " prefix (LEVEL tells which). */
struct session_log {
	void *ctx;
	void (*say)(void *ctx, enum session_level level, const char *text);
};

/* Formats and hands one message to LOG (NULL or no SAY: dropped). */
void session_say(const struct session_log *log, enum session_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
