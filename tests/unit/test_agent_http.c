/* Unit tests for the agent's HTTP server (agent/http.c): listen addresses,
 * the token file's checks, the bearer comparison, every request check
 * (routes, methods, parameters), and the server itself on a loopback port
 * driven from this thread's poll loop as the agent drives it: callbacks
 * called with the parsed request, 401/404/405/400 bodies, a POST body
 * dropped, a callback's error as 500/503, and a non-loopback address
 * refused without a token. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "check.h"
#include "http.h"

static void test_listen_parse(void)
{
	static const struct {
		const char *text;
		int ok;
		int loopback;
	} cases[] = {
		{ "127.0.0.1:6464", 1, 1 }, { "127.1.2.3:0", 1, 1 }, { "0.0.0.0:80", 1, 0 },
		{ "10.0.0.1:65535", 1, 0 }, { "[::1]:6464", 1, 1 }, { "[::]:6464", 1, 0 },
		{ "[::ffff:127.0.0.1]:1", 1, 1 }, { "[::ffff:10.0.0.1]:1", 1, 0 },
		{ "localhost:6464", 0, 0 }, { "127.0.0.1", 0, 0 }, { "127.0.0.1:", 0, 0 },
		{ "127.0.0.1:65536", 0, 0 }, { "127.0.0.1:-1", 0, 0 }, { "127.0.0.1:12a", 0, 0 },
		{ "::1:6464", 0, 0 }, { "[::1]6464", 0, 0 }, { "[::1:6464", 0, 0 }, { ":6464", 0, 0 },
		{ "", 0, 0 }, { "127.0.0.1:000080", 0, 0 }, { "1.2.3.4.5:1", 0, 0 },
	};
	struct agent_listen l;
	const char *why;

	for (size_t i = 0; i < N(cases); i++) {
		int err = agent_listen_parse(cases[i].text, &l, &why);

		EXPECT((err == 0) == cases[i].ok, "'%s': %d (%s)", cases[i].text, err, why ? why : "");
		EXPECT(err == 0 || why, "'%s': no reason", cases[i].text);
		if (!err)
			EXPECT(l.loopback == cases[i].loopback, "'%s': loopback %d", cases[i].text, l.loopback);
	}
}

static char tmpdir[] = "/tmp/dwleak-test-agent-http-XXXXXX";

static char *token_file(const char *name, const char *text, mode_t mode)
{
	char *path;
	FILE *f;

	CHECK(asprintf(&path, "%s/%s", tmpdir, name) > 0, "asprintf");
	f = fopen(path, "w");
	CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
	CHECK(chmod(path, mode) == 0, "chmod %s", path);
	return path;
}

static void test_token_read(void)
{
	char why[512], *tok, *p;
	int err;

	p = token_file("good", "0123456789abcdef0123\r\nsecond line\n", 0600);
	EXPECT(agent_token_read(p, &tok, why, sizeof(why)) == 0 && tok && !strcmp(tok, "0123456789abcdef0123"),
	       "%s", why);
	free(tok);
	free(p);
	p = token_file("group", "0123456789abcdef0123", 0640);
	EXPECT(agent_token_read(p, &tok, why, sizeof(why)) == 0, "group-readable refused: %s", why);
	free(tok);
	free(p);
	p = token_file("world", "0123456789abcdef0123", 0644);
	err = agent_token_read(p, &tok, why, sizeof(why));
	EXPECT(err == -EPERM && strstr(why, "readable by others (mode 0644)") && strstr(why, "chmod o-rwx") && !tok,
	       "%d %s", err, why);
	free(p);
	p = token_file("worldw", "0123456789abcdef0123", 0602);
	err = agent_token_read(p, &tok, why, sizeof(why));
	EXPECT(err == -EPERM && strstr(why, "writable by others"), "%d %s", err, why);
	free(p);
	p = token_file("short", "abc\n", 0600);
	err = agent_token_read(p, &tok, why, sizeof(why));
	EXPECT(err == -EINVAL && strstr(why, "3 characters long"), "%d %s", err, why);
	free(p);
	p = token_file("space", "0123456789 abcdef0123\n", 0600);
	err = agent_token_read(p, &tok, why, sizeof(why));
	EXPECT(err == -EINVAL && strstr(why, "space"), "%d %s", err, why);
	free(p);
	p = token_file("empty", "", 0600);
	EXPECT(agent_token_read(p, &tok, why, sizeof(why)) == -EINVAL, "empty file taken");
	free(p);
	CHECK(asprintf(&p, "%s/link", tmpdir) > 0, "asprintf");
	CHECK(symlink("good", p) == 0, "symlink");
	err = agent_token_read(p, &tok, why, sizeof(why));
	EXPECT(err == -ELOOP && strstr(why, "symbolic link"), "%d %s", err, why);
	free(p);
	CHECK(asprintf(&p, "%s/missing", tmpdir) > 0, "asprintf");
	EXPECT(agent_token_read(p, &tok, why, sizeof(why)) == -ENOENT, "%s", why);
	free(p);
	EXPECT(agent_token_read(tmpdir, &tok, why, sizeof(why)) == -EINVAL && strstr(why, "not a regular file"),
	       "%s", why);
	if (geteuid() == 0) {
		p = token_file("other", "0123456789abcdef0123", 0600);
		CHECK(chown(p, 4242, 4242) == 0, "chown");
		err = agent_token_read(p, &tok, why, sizeof(why));
		EXPECT(err == -EPERM && strstr(why, "owned by uid 4242"), "%d %s", err, why);
		free(p);
	}
	{
		char big[5000];

		memset(big, 'a', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		p = token_file("big", big, 0600);
		EXPECT(agent_token_read(p, &tok, why, sizeof(why)) == -EFBIG, "%s", why);
		free(p);
	}
}

static void test_token_matches(void)
{
	const char *t = "0123456789abcdef";

	EXPECT(agent_token_matches(t, "Bearer 0123456789abcdef"), "exact");
	EXPECT(agent_token_matches(t, "bearer  0123456789abcdef"), "scheme in any case, spaces");
	EXPECT(!agent_token_matches(t, NULL), "no header");
	EXPECT(!agent_token_matches(t, "Bearer 0123456789abcde"), "shorter");
	EXPECT(!agent_token_matches(t, "Bearer 0123456789abcdef0"), "longer");
	EXPECT(!agent_token_matches(t, "Bearer 0123456789abcdeF"), "last byte");
	EXPECT(!agent_token_matches(t, "Basic 0123456789abcdef"), "scheme");
	EXPECT(!agent_token_matches(t, "0123456789abcdef"), "no scheme");
	EXPECT(!agent_token_matches(t, "Bearer "), "empty");
}

/* agent_request_check() on METHOD PATH?K=V&... (no escaping in these). */
static unsigned int check(const char *method, const char *path, const char *query, struct agent_request *rq,
			  char *why, size_t whylen, const char **allow)
{
	const char *keys[16], *values[16];
	char buf[256], *save = NULL, *kv;
	size_t n = 0;

	snprintf(buf, sizeof(buf), "%s", query ? query : "");
	for (kv = strtok_r(buf, "&", &save); kv && n < 16; kv = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(kv, '=');

		if (eq)
			*eq = '\0';
		keys[n] = kv;
		values[n++] = eq ? eq + 1 : NULL;
	}
	return agent_request_check(method, path, keys, values, n, rq, allow, why, whylen);
}

static void test_request_check(void)
{
	static const struct {
		const char *method, *path, *query;
		unsigned int status;
		const char *why; /* in the reason; or the Allow value for 405 */
	} cases[] = {
		{ "GET", "/debug/pprof/heap", NULL, 200, NULL },
		{ "HEAD", "/debug/pprof/heap", "pid=1", 200, NULL },
		{ "GET", "/debug/pprof/heap", "pid=4194304&peak=1", 200, NULL },
		{ "GET", "/debug/pprof/heap", "seconds=30&gc=1", 200, NULL },
		{ "GET", "/debug/pprof/heap", "pid=0", 400, "pid must be" },
		{ "GET", "/debug/pprof/heap", "pid=4194305", 400, "pid must be" },
		{ "GET", "/debug/pprof/heap", "pid=-1", 400, "pid must be" },
		{ "GET", "/debug/pprof/heap", "pid=%201", 400, "pid must be" },
		{ "GET", "/debug/pprof/heap", "pid=12345678", 400, "pid must be" },
		{ "GET", "/debug/pprof/heap", "pid", 400, "pid must be" },
		{ "GET", "/debug/pprof/heap", "pid=1&pid=2", 400, "given twice" },
		{ "GET", "/debug/pprof/heap", "peak=yes", 400, "peak must be" },
		{ "GET", "/debug/pprof/heap", "format=json", 400, "no parameter 'format'" },
		{ "GET", "/debug/pprof/heap", "pdi=1", 400, "no parameter 'pdi'" },
		{ "GET", "/debug/pprof/heap", "a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9", 400, "too many" },
		{ "POST", "/debug/pprof/heap", NULL, 405, "GET, HEAD" },
		{ "GET", "/metrics", NULL, 200, NULL },
		{ "GET", "/metrics", "pid=1", 400, "no parameter 'pid'" },
		{ "DELETE", "/metrics", NULL, 405, "GET, HEAD" },
		{ "GET", "/report", "pid=7", 200, NULL },
		{ "GET", "/report", "pid=7&format=svg&peak=0", 200, NULL },
		{ "GET", "/report", "pid=7&format=xml", 400, "format must be one of text, json" },
		{ "GET", "/report", "format=text", 400, "needs ?pid=N" },
		{ "GET", "/report", "pid=7&seconds=5", 400, "no parameter 'seconds'" },
		{ "POST", "/leak-check", "pid=7", 200, NULL },
		{ "GET", "/leak-check", "pid=7", 405, "POST" },
		{ "HEAD", "/leak-check", "pid=7", 405, "POST" },
		{ "POST", "/leak-check", NULL, 400, "needs ?pid=N" },
		{ "POST", "/leak-check", "pid=7&peak=1", 400, "no parameter 'peak'" },
		{ "GET", "/", NULL, 404, "no such path" },
		{ "GET", "/metrics/", NULL, 404, "no such path" },
		{ "GET", "/debug/pprof/heap/../heap", NULL, 404, "no such path" },
	};
	struct agent_request rq;
	const char *allow;
	char why[256];

	for (size_t i = 0; i < N(cases); i++) {
		unsigned int st;

		why[0] = '\0';
		st = check(cases[i].method, cases[i].path, cases[i].query, &rq, why, sizeof(why), &allow);
		EXPECT(st == cases[i].status, "%s %s?%s: %u (%s)", cases[i].method, cases[i].path,
		       cases[i].query ? cases[i].query : "", st, why);
		if (st == 405)
			EXPECT(allow && !strcmp(allow, cases[i].why), "%s %s: Allow %s", cases[i].method,
			       cases[i].path, allow ? allow : "(none)");
		else if (cases[i].why)
			EXPECT(strstr(why, cases[i].why), "%s %s?%s: reason '%s'", cases[i].method, cases[i].path,
			       cases[i].query ? cases[i].query : "", why);
	}
	CHECK(check("GET", "/report", "pid=7&format=folded&peak=1", &rq, why, sizeof(why), &allow) == 200, "%s", why);
	EXPECT(rq.route == AGENT_ROUTE_REPORT && rq.pid == 7 && rq.peak && rq.format == REPORT_FORMAT_FOLDED &&
	       !rq.head, "parsed request");
	CHECK(check("HEAD", "/debug/pprof/heap", NULL, &rq, why, sizeof(why), &allow) == 200, "%s", why);
	EXPECT(rq.route == AGENT_ROUTE_HEAP && rq.pid == 0 && !rq.peak && rq.head, "parsed HEAD");
	CHECK(check("GET", "/report", "pid=7", &rq, why, sizeof(why), &allow) == 200, "%s", why);
	EXPECT(rq.format == REPORT_FORMAT_JSON, "default format");
}

/* ---- The server on loopback ---- */

struct seen {
	int calls;
	struct agent_request last;
	int fail; /* the errno the next callback returns */
};

static int handler(void *ctx, const struct agent_request *rq, struct agent_response *rs)
{
	struct seen *seen = ctx;

	seen->calls++;
	seen->last = *rq;
	if (seen->fail) {
		int err = seen->fail;

		seen->fail = 0;
		/* a body the callback made before failing is freed too */
		agent_response_text(rs, 200, "partial");
		return -err;
	}
	if (rq->pid == 99)
		return agent_response_text(rs, 404, "no traced process with pid %d\n", rq->pid);
	return agent_response_text(rs, 200, "route %d pid %d peak %d format %d\n", rq->route, rq->pid, rq->peak,
				   rq->format);
}

/* Sends REQUEST to S's address and serves until the server closes the
 * connection; returns the whole response (malloc'd). */
static char *roundtrip(struct agent_http *s, const char *request)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	char *out = NULL, buf[4096];
	size_t len = 0;
	const char *addr = agent_http_address(s), *colon = strrchr(addr, ':');
	struct timespec t0, t;
	int fd;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	a.sin_port = htons((uint16_t)atoi(colon + 1));
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0, "socket");
	CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 || errno == EINPROGRESS, "connect");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bool sent = false;

	for (;;) {
		struct pollfd p[2] = { { agent_http_fd(s), POLLIN, 0 }, { fd, POLLIN | (sent ? 0 : POLLOUT), 0 } };
		ssize_t n;

		poll(p, 2, 50);
		CHECK(agent_http_run(s) == 0, "agent_http_run");
		if (!sent && (p[1].revents & POLLOUT)) {
			CHECK(send(fd, request, strlen(request), MSG_NOSIGNAL) == (ssize_t)strlen(request), "send");
			sent = true;
		}
		n = recv(fd, buf, sizeof(buf), 0);
		if (n > 0) {
			out = realloc(out, len + (size_t)n + 1);
			CHECK(out, "realloc");
			memcpy(out + len, buf, (size_t)n);
			len += (size_t)n;
			out[len] = '\0';
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		CHECK(t.tv_sec - t0.tv_sec < 5, "no answer in 5 s to: %s", request);
	}
	close(fd);
	return out ? out : strdup("");
}

static void expect_response(struct agent_http *s, const char *request, const char *status_line,
			    const char *body_part)
{
	char *r = roundtrip(s, request);

	EXPECT(!strncmp(r, status_line, strlen(status_line)), "%s\n-> %s", request, r);
	if (body_part)
		EXPECT(strstr(r, body_part), "%s\n-> no '%s' in: %s", request, body_part, r);
	free(r);
}

static void test_server(void)
{
	struct seen seen = { 0 };
	struct agent_http_handlers h = { .ctx = &seen };
	struct agent_http_config c = { .listen = "127.0.0.1:0" };
	struct agent_http_stats st;
	struct agent_http *s;
	char why[512], *tok;

	for (int r = 0; r < AGENT_ROUTE_COUNT; r++)
		h.route[r] = r == AGENT_ROUTE_METRICS ? NULL : handler;
	CHECK(agent_http_open(&c, &h, &s, why, sizeof(why)) == 0, "%s", why);
	EXPECT(!strncmp(agent_http_address(s), "127.0.0.1:", 10) && strcmp(agent_http_address(s), "127.0.0.1:0"),
	       "address %s", agent_http_address(s));
	expect_response(s, "GET /report?pid=7&format=folded HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 200", "route 2 pid 7 peak 0 format 2");
	EXPECT(seen.calls == 1, "calls %d", seen.calls);
	/* escaped parameters arrive unescaped */
	expect_response(s, "GET /debug/pprof/heap?p%69d=%34%32 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 200", "route 0 pid 42");
	expect_response(s, "GET /leak-check?pid=7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 405", "a leak check stops the process");
	expect_response(s, "GET /leak-check?pid=7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			"HTTP/1.1 405", "Allow: POST");
	expect_response(s, "POST /leak-check?pid=7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
			"Content-Length: 11\r\n\r\nhello world",
			"HTTP/1.1 200", "route 3 pid 7");
	expect_response(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 404",
			"not served by this agent");
	expect_response(s, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 404",
			"no such path");
	expect_response(s, "GET /report?pid=99 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 404",
			"no traced process with pid 99");
	expect_response(s, "GET /report?pid=x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 400",
			"pid must be");
	seen.fail = ENOMEM;
	expect_response(s, "GET /report?pid=3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 500",
			"Cannot allocate memory");
	seen.fail = EAGAIN;
	expect_response(s, "GET /report?pid=3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 503",
			NULL);
	{
		/* a request line longer than the connection's memory: MHD refuses it */
		char *big = malloc(70000);

		CHECK(big, "malloc");
		strcpy(big, "GET /metrics?");
		memset(big + 13, 'a', 65000);
		strcpy(big + 13 + 65000, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
		expect_response(s, big, "HTTP/1.1 414", NULL);
		free(big);
	}
	agent_http_stats_get(s, &st);
	EXPECT(st.requests == 11 && st.bad_requests == 6 && st.errors == 2 && st.unauthorized == 0,
	       "stats: %llu requests, %llu bad, %llu errors", (unsigned long long)st.requests,
	       (unsigned long long)st.bad_requests, (unsigned long long)st.errors);
	agent_http_close(s);

	/* not loopback: refused without a token; with one, 401 unless it comes */
	c.listen = "0.0.0.0:0";
	EXPECT(agent_http_open(&c, &h, &s, why, sizeof(why)) == -EPERM && strstr(why, "not a loopback address"),
	       "%s", why);
	tok = token_file("server-token", "0123456789abcdef0123\n", 0600);
	c.token_file = tok;
	CHECK(agent_http_open(&c, &h, &s, why, sizeof(why)) == 0, "%s", why);
	expect_response(s, "GET /report?pid=7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 401",
			"WWW-Authenticate: Bearer");
	expect_response(s, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 401", NULL);
	expect_response(s, "GET /report?pid=7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
			"Authorization: Bearer 0123456789abcdef0124\r\n\r\n", "HTTP/1.1 401", NULL);
	expect_response(s, "GET /report?pid=7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
			"Authorization: Bearer 0123456789abcdef0123\r\n\r\n", "HTTP/1.1 200", "pid 7");
	agent_http_close(s);
	free(tok);

	/* an address in use says so */
	c = (struct agent_http_config){ .listen = "127.0.0.1:0" };
	CHECK(agent_http_open(&c, &h, &s, why, sizeof(why)) == 0, "%s", why);
	{
		struct agent_http *s2;
		struct agent_http_config c2 = { .listen = agent_http_address(s) };

		EXPECT(agent_http_open(&c2, &h, &s2, why, sizeof(why)) == -EADDRINUSE && strstr(why, "in use"), "%s",
		       why);
	}
	agent_http_close(s);
	agent_http_close(NULL);
}

int main(void)
{
	char cmd[128];

	CHECK(mkdtemp(tmpdir), "mkdtemp");
	check_tmpdir = tmpdir;
	test_listen_parse();
	test_token_read();
	test_token_matches();
	test_request_check();
	test_server();
	if (check_failures)
		return 1;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		return 1;
	printf("test_agent_http: ok\n");
	return 0;
}
