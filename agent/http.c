/* The agent's HTTP server over GNU libmicrohttpd in "external epoll" mode:
 * MHD keeps its connections in one epoll set that the agent's own poll
 * loop watches, and runs only when that loop calls agent_http_run(), so
 * the route callbacks run in the agent's thread next to the BPF ring
 * buffer's and need no locks.  Every request is checked (token, path,
 * method, parameters) before a callback sees it; memory per connection is
 * bounded by MHD's pool (request line and headers) and bodies are
 * discarded, counted. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http.h"

/* Bounds of what one client can make the server hold. */
#define CONNECTIONS_DEFAULT 32
#define CONNECTIONS_PER_IP 16
#define TIMEOUT_DEFAULT_S 10
/* MHD's pool per connection: request line, headers, parsed arguments.  A
 * request that does not fit gets 414 or 431 from MHD itself. */
#define CONNECTION_MEMORY (32u << 10)
/* Query parameters a request may carry: more is a 400. */
#define PARAMS_MAX 8
/* A token file larger than this is not a token file. */
#define TOKEN_FILE_MAX 4096
#define TOKEN_MIN 16
/* PID_MAX_LIMIT on 64-bit kernels (include/linux/threads.h). */
#define PID_LIMIT 4194304
#define WHY_MAX 256

struct agent_http {
	struct MHD_Daemon *mhd;
	struct agent_http_handlers h;
	char *token;               /* NULL: no Authorization needed */
	int epoll_fd;              /* MHD's */
	char address[64];          /* INET6_ADDRSTRLEN + brackets + port */
	struct agent_http_stats stats;
};

/* What one connection has seen of its request, across MHD's calls. */
struct request_state {
	uint64_t body_bytes;
};

static const char *const route_paths[AGENT_ROUTE_COUNT] = {
#define AGENT_ROUTE_PATH(id, path, method) path,
	AGENT_ROUTES(AGENT_ROUTE_PATH)
#undef AGENT_ROUTE_PATH
};
static const char *const route_methods[AGENT_ROUTE_COUNT] = {
#define AGENT_ROUTE_METHOD(id, path, method) method,
	AGENT_ROUTES(AGENT_ROUTE_METHOD)
#undef AGENT_ROUTE_METHOD
};

/* ---- Pure parts: address, token, request ---- */

static bool loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;

		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	const struct sockaddr_in6 *a6 = (const void *)ss;

	if (IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr))
		return true;
	return IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr) && a6->sin6_addr.s6_addr[12] == 127;
}

int agent_listen_parse(const char *text, struct agent_listen *out, const char **why)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *colon, *port_s, *h;
	size_t hlen;
	unsigned long port = 0;

	memset(out, 0, sizeof(*out));
	*why = NULL;
	if (!text || !*text) {
		*why = "empty address: give ADDR:PORT, e.g. 127.0.0.1:6464";
		return -EINVAL;
	}
	if (text[0] == '[') {
		colon = strchr(text, ']');
		if (!colon || colon[1] != ':') {
			*why = "an IPv6 address is written [ADDR]:PORT";
			return -EINVAL;
		}
		h = text + 1;
		hlen = (size_t)(colon - h);
		port_s = colon + 2;
	} else {
		colon = strrchr(text, ':');
		if (!colon) {
			*why = "no port: give ADDR:PORT, e.g. 127.0.0.1:6464";
			return -EINVAL;
		}
		h = text;
		hlen = (size_t)(colon - text);
		port_s = colon + 1;
		if (memchr(h, ':', hlen)) {
			*why = "an IPv6 address is written [ADDR]:PORT";
			return -EINVAL;
		}
	}
	if (!*port_s || strlen(port_s) > 5 || strspn(port_s, "0123456789") != strlen(port_s) ||
	    (port = strtoul(port_s, NULL, 10)) > 65535) {
		*why = "the port is not a number from 0 to 65535";
		return -EINVAL;
	}
	if (hlen == 0 || hlen >= sizeof(host)) {
		*why = "no address before the port (a name is not resolved: give a numeric address)";
		return -EINVAL;
	}
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	if (text[0] == '[') {
		struct sockaddr_in6 *a6 = (void *)&out->addr;

		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1) {
			*why = "not a numeric IPv6 address";
			return -EINVAL;
		}
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		out->addrlen = sizeof(*a6);
	} else {
		struct sockaddr_in *a = (void *)&out->addr;

		if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
			*why = "not a numeric IPv4 address (a name is not resolved)";
			return -EINVAL;
		}
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		out->addrlen = sizeof(*a);
	}
	out->loopback = loopback(&out->addr);
	return 0;
}

int agent_token_read(const char *path, char **token, char *why, size_t whylen)
{
	char buf[TOKEN_FILE_MAX + 1];
	struct stat st;
	ssize_t n, total = 0;
	size_t len;
	int fd, err = 0;

	*token = NULL;
	/* O_NONBLOCK: a FIFO put in its place does not hang the agent */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		snprintf(why, whylen, "cannot open the token file %s: %s%s", path, strerror(errno),
			 errno == ELOOP ? " (a symbolic link is not followed)" : "");
		return err;
	}
	if (fstat(fd, &st)) {
		err = -errno;
		snprintf(why, whylen, "cannot stat the token file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EINVAL;
		snprintf(why, whylen, "the token file %s is not a regular file", path);
		goto out;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		err = -EPERM;
		snprintf(why, whylen, "the token file %s is owned by uid %u; it must be root's or the agent's (uid %u)",
			 path, (unsigned int)st.st_uid, (unsigned int)geteuid());
		goto out;
	}
	if (st.st_mode & (S_IROTH | S_IWOTH)) {
		err = -EPERM;
		snprintf(why, whylen, "the token file %s is %s by others (mode %04o): chmod o-rwx %s", path,
			 st.st_mode & S_IROTH ? "readable" : "writable", (unsigned int)(st.st_mode & 07777), path);
		goto out;
	}
	while (total <= TOKEN_FILE_MAX && (n = read(fd, buf + total, sizeof(buf) - (size_t)total)) > 0)
		total += n;
	if (total > TOKEN_FILE_MAX) {
		err = -EFBIG;
		snprintf(why, whylen, "the token file %s is larger than %d bytes", path, TOKEN_FILE_MAX);
		goto out;
	}
	if (n < 0) {
		err = -errno;
		snprintf(why, whylen, "cannot read the token file %s: %s", path, strerror(errno));
		goto out;
	}
	buf[total] = '\0';
	len = strcspn(buf, "\n");
	if (len && buf[len - 1] == '\r')
		len--;
	for (size_t i = 0; i < len; i++) {
		if (buf[i] <= ' ' || buf[i] > '~') {
			err = -EINVAL;
			snprintf(why, whylen, "the token in %s holds a space or a byte that is not printable ASCII "
				 "(its first line is the token)", path);
			goto out;
		}
	}
	if (len < TOKEN_MIN) {
		err = -EINVAL;
		snprintf(why, whylen, "the token in %s is %zu characters long; at least %d are needed "
			 "(e.g. openssl rand -hex 32 > %s)", path, len, TOKEN_MIN, path);
		goto out;
	}
	*token = strndup(buf, len);
	if (!*token)
		err = -ENOMEM;
out:
	explicit_bzero(buf, sizeof(buf));
	close(fd);
	return err;
}

bool agent_token_matches(const char *token, const char *header)
{
	size_t tlen = strlen(token), hlen, i;
	unsigned char diff;

	if (!header || strncasecmp(header, "Bearer ", 7) != 0)
		return false;
	header += 7;
	while (*header == ' ')
		header++;
	hlen = strlen(header);
	/* Every byte of TOKEN is compared whatever the header holds, so the
	 * time taken says nothing of how much of it matched. */
	diff = hlen != tlen;
	for (i = 0; i < tlen; i++)
		diff |= (unsigned char)token[i] ^ (unsigned char)(i < hlen ? header[i] : 0);
	return diff == 0;
}

/* Parses a pid parameter: 1 to PID_LIMIT in decimal, nothing else. */
static bool pid_parse(const char *v, int *out)
{
	long pid = 0;

	if (!*v || strlen(v) > 7 || strspn(v, "0123456789") != strlen(v))
		return false;
	pid = strtol(v, NULL, 10);
	if (pid < 1 || pid > PID_LIMIT)
		return false;
	*out = (int)pid;
	return true;
}

static bool bool_parse(const char *v, bool *out)
{
	if (!strcmp(v, "1") || !strcmp(v, "true"))
		*out = true;
	else if (!strcmp(v, "0") || !strcmp(v, "false"))
		*out = false;
	else
		return false;
	return true;
}

/* Which parameters each route takes. */
enum param { PARAM_PID, PARAM_PEAK, PARAM_FORMAT, PARAM_IGNORED, PARAM_COUNT };
static const char *const param_names[PARAM_COUNT] = { "pid", "peak", "format", NULL };
static const unsigned int route_params[AGENT_ROUTE_COUNT] = {
	[AGENT_ROUTE_HEAP] = 1u << PARAM_PID | 1u << PARAM_PEAK | 1u << PARAM_IGNORED,
	[AGENT_ROUTE_METRICS] = 0,
	[AGENT_ROUTE_REPORT] = 1u << PARAM_PID | 1u << PARAM_PEAK | 1u << PARAM_FORMAT,
	[AGENT_ROUTE_LEAK_CHECK] = 1u << PARAM_PID,
};

/* Parameters Go's pprof clients add to a heap profile's URL (`seconds`
 * for a delta profile, `gc` to collect first): meaningless for what is
 * outstanding now, accepted and ignored so those clients work. */
static bool param_ignored(const char *key)
{
	return !strcmp(key, "seconds") || !strcmp(key, "gc");
}

unsigned int agent_request_check(const char *method, const char *path, const char *const *keys,
				 const char *const *values, size_t n, struct agent_request *rq,
				 const char **allow, char *why, size_t whylen)
{
	unsigned int seen = 0;
	int r;

	*allow = NULL;
	memset(rq, 0, sizeof(*rq));
	rq->format = REPORT_FORMAT_JSON;
	for (r = 0; r < AGENT_ROUTE_COUNT; r++)
		if (!strcmp(path, route_paths[r]))
			break;
	if (r == AGENT_ROUTE_COUNT) {
		snprintf(why, whylen, "no such path; the agent serves /debug/pprof/heap, /metrics, "
			 "/report?pid=N&format=F and POST /leak-check?pid=N");
		return 404;
	}
	rq->route = (enum agent_route)r;
	if (!strcmp(route_methods[r], "GET") && !strcmp(method, "HEAD"))
		rq->head = true;
	else if (strcmp(method, route_methods[r])) {
		*allow = !strcmp(route_methods[r], "GET") ? "GET, HEAD" : route_methods[r];
		snprintf(why, whylen, "%s takes %s, not %s%s", path, *allow, method,
			 r == AGENT_ROUTE_LEAK_CHECK ? " (a leak check stops the process: it is a POST)" : "");
		return 405;
	}
	if (n > PARAMS_MAX) {
		snprintf(why, whylen, "too many parameters (%zu; at most %d)", n, PARAMS_MAX);
		return 400;
	}
	for (size_t i = 0; i < n; i++) {
		const char *k = keys[i], *v = values[i] ? values[i] : "";
		int p;

		/* p: the parameter, PARAM_COUNT when it is none this agent knows */
		for (p = 0; p < PARAM_IGNORED; p++)
			if (!strcmp(k, param_names[p]))
				break;
		if (p == PARAM_IGNORED && !param_ignored(k))
			p = PARAM_COUNT;
		if (p == PARAM_COUNT || !(route_params[r] & 1u << p)) {
			snprintf(why, whylen, "%s takes no parameter '%.64s'", path, k);
			return 400;
		}
		if (p == PARAM_IGNORED)
			continue;
		if (seen & 1u << p) {
			snprintf(why, whylen, "parameter '%s' given twice", k);
			return 400;
		}
		seen |= 1u << p;
		if (p == PARAM_PID && !pid_parse(v, &rq->pid)) {
			snprintf(why, whylen, "pid must be a process id from 1 to %d, not '%.32s'", PID_LIMIT, v);
			return 400;
		}
		if (p == PARAM_PEAK && !bool_parse(v, &rq->peak)) {
			snprintf(why, whylen, "peak must be 1 or 0, not '%.32s'", v);
			return 400;
		}
		if (p == PARAM_FORMAT && report_format_parse(v, &rq->format)) {
			snprintf(why, whylen, "format must be one of %s, not '%.32s'", report_format_list, v);
			return 400;
		}
	}
	if ((r == AGENT_ROUTE_REPORT || r == AGENT_ROUTE_LEAK_CHECK) && !rq->pid) {
		snprintf(why, whylen, "%s needs ?pid=N", path);
		return 400;
	}
	return 200;
}

int agent_response_text(struct agent_response *rs, unsigned int status, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	free(rs->body);
	rs->status = status;
	rs->content_type = "text/plain; charset=utf-8";
	rs->body = s;
	rs->len = (size_t)n;
	return 0;
}

/* ---- Serving ---- */

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	/* only cli/ prints; MHD's own messages are of no use to a caller */
	(void)cls;
	(void)fmt;
	(void)ap;
}

/* Queues RS (its body is freed once sent or when queueing fails). */
static enum MHD_Result respond(struct agent_http *s, struct MHD_Connection *c, struct agent_response *rs,
			       const char *allow)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (rs->len)
		resp = MHD_create_response_from_buffer_with_free_callback(rs->len, rs->body, free);
	else {
		free(rs->body);
		resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	}
	rs->body = NULL;
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				rs->content_type ? rs->content_type : "text/plain; charset=utf-8");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	if (allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	if (rs->status == 401)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"dwleak\"");
	ret = MHD_queue_response(c, rs->status, resp);
	MHD_destroy_response(resp);
	s->stats.requests++;
	if (rs->status == 401)
		s->stats.unauthorized++;
	else if (rs->status >= 500)
		s->stats.errors++;
	else if (rs->status >= 400)
		s->stats.bad_requests++;
	return ret;
}

/* The query parameters, collected (at most PARAMS_MAX + 1: one more says
 * there are too many). */
struct params {
	const char *keys[PARAMS_MAX + 1], *values[PARAMS_MAX + 1];
	size_t n;
};

static enum MHD_Result param_collect(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct params *p = cls;

	(void)kind;
	if (p->n == PARAMS_MAX + 1)
		return MHD_NO;
	p->keys[p->n] = key;
	p->values[p->n] = value;
	p->n++;
	return MHD_YES;
}

/* Answers the request on C whose headers are in: every check, then the
 * route's callback. */
static enum MHD_Result request_answer(struct agent_http *s, struct MHD_Connection *c, const char *url,
				      const char *method)
{
	struct agent_response rs = { .status = 200 };
	struct agent_request rq;
	struct params p = { .n = 0 };
	char why[WHY_MAX];
	const char *allow = NULL;
	unsigned int status;
	int err;

	if (s->token &&
	    !agent_token_matches(s->token, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
								       MHD_HTTP_HEADER_AUTHORIZATION))) {
		if (agent_response_text(&rs, 401, "dwleak agent: this request needs the header "
				        "'Authorization: Bearer <token>' with the agent's token\n"))
			return MHD_NO;
		return respond(s, c, &rs, NULL);
	}
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, param_collect, &p);
	status = agent_request_check(method, url, p.keys, p.values, p.n, &rq, &allow, why, sizeof(why));
	if (status != 200) {
		if (agent_response_text(&rs, status, "dwleak agent: %s\n", why))
			return MHD_NO;
		return respond(s, c, &rs, allow);
	}
	if (!s->h.route[rq.route]) {
		err = agent_response_text(&rs, 404, "dwleak agent: %s is not served by this agent\n", url);
	} else {
		err = s->h.route[rq.route](s->h.ctx, &rq, &rs);
		if (err) {
			free(rs.body);
			rs = (struct agent_response){ 0 };
			err = agent_response_text(&rs, err == -EAGAIN ? 503 : 500, "dwleak agent: %s\n",
						  strerror(-err));
		}
	}
	if (err) {
		free(rs.body);
		return MHD_NO;
	}
	return respond(s, c, &rs, NULL);
}

/* MHD's access handler: called once with the headers, then once per piece
 * of body, then once more when the body is in.  The answer never depends
 * on a body, so it is queued at the first call; MHD then drops whatever
 * body follows and closes the connection after the response. */
static enum MHD_Result access_handler(void *cls, struct MHD_Connection *c, const char *url,
				      const char *method, const char *version, const char *upload_data,
				      size_t *upload_data_size, void **con_cls)
{
	struct agent_http *s = cls;
	struct request_state *st = *con_cls;

	(void)version;
	(void)upload_data;
	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return MHD_NO;
		*con_cls = st;
		return request_answer(s, c, url, method);
	}
	/* a body after the answer was queued: counted and dropped */
	st->body_bytes += *upload_data_size;
	s->stats.body_bytes_discarded += *upload_data_size;
	*upload_data_size = 0;
	return MHD_YES;
}

static void request_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			      enum MHD_RequestTerminationCode code)
{
	(void)cls;
	(void)c;
	(void)code;
	free(*con_cls);
	*con_cls = NULL;
}

/* Binds L's address, with a message saying what is wrong otherwise. */
static int listen_socket(const struct agent_listen *l, const char *text, char *why, size_t whylen)
{
	int fd, one = 1, err;

	fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		snprintf(why, whylen, "cannot make a socket for %s: %s", text, strerror(errno));
		return err;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l->addr.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&l->addr, l->addrlen) || listen(fd, 64)) {
		err = -errno;
		snprintf(why, whylen, "cannot listen on %s: %s%s", text, strerror(errno),
			 errno == EADDRINUSE ? " (another program listens there: choose another --listen)" :
			 errno == EADDRNOTAVAIL ? " (no interface of this machine has that address)" : "");
		close(fd);
		return err;
	}
	return fd;
}

/* S->address from the socket FD itself (the port the kernel picked). */
static void address_set(struct agent_http *s, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN];

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return;
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a6 = (void *)&ss;

		inet_ntop(AF_INET6, &a6->sin6_addr, host, sizeof(host));
		snprintf(s->address, sizeof(s->address), "[%s]:%u", host, ntohs(a6->sin6_port));
	} else {
		struct sockaddr_in *a = (void *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(s->address, sizeof(s->address), "%s:%u", host, ntohs(a->sin_port));
	}
}

int agent_http_open(const struct agent_http_config *c, const struct agent_http_handlers *h,
		    struct agent_http **out, char *why, size_t whylen)
{
	const char *text = c->listen ? c->listen : AGENT_HTTP_LISTEN_DEFAULT, *bad;
	const union MHD_DaemonInfo *info;
	struct agent_listen l;
	struct agent_http *s;
	int err, fd;

	*out = NULL;
	err = agent_listen_parse(text, &l, &bad);
	if (err) {
		snprintf(why, whylen, "bad --listen %s: %s", text, bad);
		return err;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->h = *h;
	s->epoll_fd = -1;
	if (c->token_file) {
		err = agent_token_read(c->token_file, &s->token, why, whylen);
		if (err)
			goto fail;
	} else if (!l.loopback) {
		err = -EPERM;
		snprintf(why, whylen, "refusing to listen on %s, which is not a loopback address, without "
			 "--auth-token-file: profiles name this machine's programs and paths", text);
		goto fail;
	}
	fd = listen_socket(&l, text, why, whylen);
	if (fd < 0) {
		err = fd;
		goto fail;
	}
	address_set(s, fd);
	s->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, access_handler, s,
				  MHD_OPTION_LISTEN_SOCKET, fd,
				  MHD_OPTION_CONNECTION_LIMIT,
				  (unsigned int)(c->max_connections ? c->max_connections : CONNECTIONS_DEFAULT),
				  MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)CONNECTIONS_PER_IP,
				  MHD_OPTION_CONNECTION_TIMEOUT,
				  (unsigned int)(c->timeout_s ? c->timeout_s : TIMEOUT_DEFAULT_S),
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
				  MHD_OPTION_NOTIFY_COMPLETED, request_completed, s,
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
				  MHD_OPTION_END);
	if (!s->mhd) {
		close(fd);
		err = -EIO;
		snprintf(why, whylen, "libmicrohttpd would not start on %s", text);
		goto fail;
	}
	info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	if (!info) {
		err = -EIO;
		snprintf(why, whylen, "libmicrohttpd gives no epoll descriptor (built without epoll?)");
		goto fail;
	}
	s->epoll_fd = info->epoll_fd;
	*out = s;
	return 0;
fail:
	agent_http_close(s);
	return err;
}

int agent_http_fd(const struct agent_http *s)
{
	return s->epoll_fd;
}

int agent_http_timeout_ms(const struct agent_http *s)
{
	MHD_UNSIGNED_LONG_LONG ms;

	if (MHD_get_timeout(s->mhd, &ms) != MHD_YES)
		return -1;
	return ms > 60000 ? 60000 : (int)ms;
}

int agent_http_run(struct agent_http *s)
{
	return MHD_run(s->mhd) == MHD_YES ? 0 : -EIO;
}

const char *agent_http_address(const struct agent_http *s)
{
	return s->address;
}

void agent_http_stats_get(const struct agent_http *s, struct agent_http_stats *out)
{
	*out = s->stats;
}

void agent_http_close(struct agent_http *s)
{
	if (!s)
		return;
	/* MHD closes the listening socket it was given */
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	if (s->token) {
		explicit_bzero(s->token, strlen(s->token));
		free(s->token);
	}
	free(s);
}
