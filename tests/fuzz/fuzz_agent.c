/* libFuzzer target for what the agent parses from others: /proc/PID/cgroup
 * and mountinfo (any process's, any user's cgroup names), /proc/PID/stat
 * (a command in parentheses may hold anything), --listen addresses, HTTP
 * query parameters as MHD hands them over, label values escaped for
 * /metrics, and the bearer comparison.  The first byte picks the parser;
 * each checks what it can of its own result. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "metrics.h"
#include "targets.h"

static int line_seen(void *ctx, const struct agent_cgroup_line *l)
{
	const char *end = ctx;

	/* every piece lies inside the text and the path starts with '/' */
	if (l->path + l->path_len > end || l->controllers + l->controllers_len > end || l->path[0] != '/')
		abort();
	return 0;
}

/* Splits TEXT (N bytes, NUL-ended copy) at newlines into up to 16
 * key=value parameters after a method and a path line. */
static void request(char *text)
{
	const char *keys[16], *values[16], *method = text, *path, *allow;
	struct agent_request rq;
	char why[256], *p = strchr(text, '\n');
	size_t n = 0;
	unsigned int st;

	if (!p)
		return;
	*p++ = '\0';
	path = p;
	p = strchr(p, '\n');
	while (p && n < 16) {
		char *eq;

		*p++ = '\0';
		keys[n] = p;
		p = strchr(p, '\n');
		eq = strchr(keys[n], '=');
		if (eq && (!p || eq < p)) {
			*eq = '\0';
			values[n] = eq + 1;
		} else {
			values[n] = NULL;
		}
		n++;
	}
	if (p)
		*p = '\0';
	st = agent_request_check(method, path, keys, values, n, &rq, &allow, why, sizeof(why));
	if (st != 200 && st != 400 && st != 404 && st != 405)
		abort();
	if (st == 200 && (rq.route >= AGENT_ROUTE_COUNT || rq.pid < 0 || rq.pid > 4194304))
		abort();
	if (st == 405 && !allow)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;
	size_t n;

	if (size < 1)
		return 0;
	n = size - 1;
	text = malloc(n + 1);
	if (!text)
		return 0;
	memcpy(text, data + 1, n);
	text[n] = '\0';
	switch (data[0] % 7) {
	case 0:
		agent_cgroup_lines(text, n, line_seen, text + n);
		break;
	case 1: {
		struct agent_cgroup_mount *m;
		size_t nm;

		if (agent_mountinfo_parse(text, n, &m, &nm) == 0) {
			for (size_t i = 0; i < nm; i++)
				if (m[i].point[0] != '/' || m[i].root[0] != '/')
					abort();
			agent_cgroup_mounts_free(m, nm);
		}
		break;
	}
	case 2: {
		uint64_t ut, st;

		agent_stat_parse(text, n, &ut, &st);
		break;
	}
	case 3: {
		struct agent_listen l;
		const char *why;

		if (agent_listen_parse(text, &l, &why) != 0 && !why)
			abort();
		break;
	}
	case 4:
		request(text);
		break;
	case 5: {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		if (!f)
			break;
		agent_metrics_label_escape(f, text, n);
		fclose(f);
		/* no raw quote, backslash or newline is left unescaped */
		for (size_t i = 0; i < len; i++) {
			if (buf[i] == '\n')
				abort();
			if (buf[i] == '\\') {
				if (i + 1 >= len || !strchr("\\\"n", buf[i + 1]))
					abort();
				i++;
			} else if (buf[i] == '"') {
				abort();
			}
		}
		free(buf);
		break;
	}
	case 6: {
		/* the header against a fixed token; equal only when it is exactly it */
		static const char token[] = "0123456789abcdef0123";
		bool m = agent_token_matches(token, text);
		const char *v;

		if (!m)
			break;
		if (strncasecmp(text, "Bearer ", 7))
			abort();
		for (v = text + 7; *v == ' '; v++)
			;
		if (strcmp(v, token))
			abort();
		break;
	}
	}
	free(text);
	return 0;
}
