/* The agent's HTTP server, through GNU libmicrohttpd: the listening socket
 * (loopback unless a bearer token guards it), the routes and their
 * parameters checked, each route answered by a callback of the caller.
 * It runs in the caller's thread: agent_http_fd() is one descriptor (an
 * epoll set of the listening socket and the connections) for the caller's
 * poll loop beside the BPF ring buffer, and agent_http_run() serves what
 * is ready, so the callbacks read the session's state without locks. */
#ifndef DWLEAK_AGENT_HTTP_H
#define DWLEAK_AGENT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "write.h"

/* The default --listen (SPEC.md). */
#define AGENT_HTTP_LISTEN_DEFAULT "127.0.0.1:6464"

/*
 * The routes, one list: X(ID, PATH, METHOD).  The enumerator is
 * AGENT_ROUTE_<ID>; a GET route answers HEAD too.  /leak-check is POST
 * because it stops the process.
 */
#define AGENT_ROUTES(X)                                   \
	X(HEAP, "/debug/pprof/heap", "GET")               \
	X(METRICS, "/metrics", "GET")                     \
	X(REPORT, "/report", "GET")                       \
	X(LEAK_CHECK, "/leak-check", "POST")

enum agent_route {
#define AGENT_ROUTE_ENUM(id, path, method) AGENT_ROUTE_##id,
	AGENT_ROUTES(AGENT_ROUTE_ENUM)
#undef AGENT_ROUTE_ENUM
	AGENT_ROUTE_COUNT /* not a route: how many there are */
};

/* A request that passed every check, as the callbacks get it. */
struct agent_request {
	enum agent_route route;
	int pid;                   /* ?pid=N, 1..4194304 (PID_MAX_LIMIT); 0: not given
				    * (/debug/pprof/heap: every process) */
	bool peak;                 /* ?peak=1: the outstanding heap at its highest total */
	enum report_format format; /* /report's ?format= (default json) */
	bool head;                 /* a HEAD request: the body is computed, not sent */
};

/*
 * What a callback answers.  STATUS is an HTTP status (200 unless the
 * callback says otherwise: 404 for an unknown pid, 409 for a check already
 * running...).  CONTENT_TYPE is a static string (NULL: text/plain).  BODY
 * is malloc'd (or NULL when LEN is 0) and the server frees it, whatever
 * the callback returns.
 */
struct agent_response {
	unsigned int status;
	const char *content_type;
	void *body;
	size_t len;
};

/*
 * Fills RS with a text/plain body from FMT (a line for people: "no traced
 * process with pid 42\n") and STATUS.  Returns 0 or -ENOMEM.
 */
int agent_response_text(struct agent_response *rs, unsigned int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * One route's callback: answers RQ into RS (zeroed, STATUS 200, before the
 * call) and returns 0, or a negative errno, which the server answers with
 * 500 and strerror's words (503 for -EAGAIN) instead of RS.
 */
typedef int (*agent_http_handler)(void *ctx, const struct agent_request *rq, struct agent_response *rs);

/* The callbacks, by route; CTX is passed back.  A NULL callback answers
 * 404 "not served by this agent". */
struct agent_http_handlers {
	void *ctx;
	agent_http_handler route[AGENT_ROUTE_COUNT];
};

struct agent_http_config {
	const char *listen;          /* "ADDR:PORT" (IPv4, or [IPv6]); NULL = the default;
				      * port 0: one the kernel picks (agent_http_address) */
	const char *token_file;      /* --auth-token-file; NULL = no token */
	unsigned int max_connections; /* at once; 0 = 32 */
	unsigned int timeout_s;      /* an idle connection is closed after; 0 = 10 s */
};

/* What the server has done, for --stats and logs. */
struct agent_http_stats {
	uint64_t requests;       /* answered, any status */
	uint64_t unauthorized;   /* of which 401 */
	uint64_t bad_requests;   /* of which 400, 404, 405, 413 */
	uint64_t errors;         /* of which 5xx */
	uint64_t body_bytes_discarded; /* request bodies, which no route takes */
};

struct agent_http;

/* An address to listen on, parsed. */
struct agent_listen {
	struct sockaddr_storage addr;
	socklen_t addrlen;
	bool loopback;          /* 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104 */
};

/*
 * Parses TEXT, "IPv4:PORT" or "[IPv6]:PORT" (numeric only: no name is
 * resolved, so what is checked is what is bound), PORT 0..65535, into
 * *OUT.  Returns 0, or -EINVAL with *WHY (static) saying what is wrong.
 */
int agent_listen_parse(const char *text, struct agent_listen *out, const char **why);

/*
 * Reads the bearer token from PATH: its first line, which must be 16 to
 * 4095 printable ASCII characters without spaces.  The file must be a
 * regular file owned by root or by the agent's user and neither readable
 * nor writable by others.  Returns 0 and *TOKEN (malloc'd, the caller
 * frees), or a negative errno with WHY (WHYLEN bytes) saying what is wrong
 * and what to do ("... is readable by others (mode 0644): chmod o-rwx ...").
 */
int agent_token_read(const char *path, char **token, char *why, size_t whylen);

/*
 * Whether the Authorization header value HEADER (NULL: none) is "Bearer
 * TOKEN" (the scheme in any case).  The comparison takes the same time
 * whatever the header holds, for a given TOKEN.
 */
bool agent_token_matches(const char *token, const char *header);

/*
 * Checks a request for route PATH with method METHOD and the N query
 * parameters KEYS[i]=VALUES[i] (as the client sent them, unescaped) into
 * *RQ.  Returns the HTTP status: 200 when the request is good, else 404
 * (no such path), 405 (*ALLOW then says which methods the path takes) or
 * 400, with WHY (WHYLEN bytes) saying what is wrong for the response body.
 * Pure: the unit test and the fuzzer call it directly.
 */
unsigned int agent_request_check(const char *method, const char *path, const char *const *keys,
				 const char *const *values, size_t n, struct agent_request *rq,
				 const char **allow, char *why, size_t whylen);

/*
 * Binds C->listen and starts serving through H (copied).  An address other
 * than loopback is refused (-EPERM) unless C->token_file gives a token
 * (agent_token_read).  Returns 0 and *OUT, or a negative errno with WHY
 * (WHYLEN bytes) saying what is wrong ("127.0.0.1:6464 is in use by
 * another program").  Free with agent_http_close().
 */
int agent_http_open(const struct agent_http_config *c, const struct agent_http_handlers *h,
		    struct agent_http **out, char *why, size_t whylen);

/* The descriptor to poll for input (POLLIN) in the caller's loop; S's. */
int agent_http_fd(const struct agent_http *s);

/* How long the caller's poll may wait before agent_http_run() must run
 * anyway (connection timeouts), milliseconds; -1: no limit. */
int agent_http_timeout_ms(const struct agent_http *s);

/* Serves what is ready without blocking: accepts, reads, calls the
 * callbacks, writes.  Returns 0 or -EIO (the server is broken). */
int agent_http_run(struct agent_http *s);

/* The address bound, "127.0.0.1:6464" or "[::1]:6464" (a port 0 given is
 * the one the kernel chose); S's string. */
const char *agent_http_address(const struct agent_http *s);

/* What S has served so far. */
void agent_http_stats_get(const struct agent_http *s, struct agent_http_stats *out);

/* Stops serving, closes every connection, frees S.  NULL is ok. */
void agent_http_close(struct agent_http *s);

#endif
