/* The kernel's preemption model, read from what the system shows of it.
 * The running model of a PREEMPT_DYNAMIC kernel is in debugfs (often not
 * readable, even by root) and in the kernel log line the kernel prints at
 * boot and at each change; the boot command line and the kernel config
 * give the model it started with. */
#include "preempt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

#define KMSG_RECORDS_MAX 200000 /* a kernel log holds far fewer */

static enum preempt_model model_of_word(const char *w, size_t n)
{
	static const struct {
		const char *name;
		enum preempt_model model;
	} names[] = {
		{ "none", PREEMPT_MODEL_NONE },	  { "voluntary", PREEMPT_MODEL_VOLUNTARY },
		{ "full", PREEMPT_MODEL_FULL },	  { "lazy", PREEMPT_MODEL_LAZY },
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i].name) == n && !strncmp(w, names[i].name, n))
			return names[i].model;
	return PREEMPT_MODEL_UNKNOWN;
}

/* The word at P, up to a space, ')' or the end. */
static enum preempt_model model_at(const char *p)
{
	return model_of_word(p, strcspn(p, " \t\n)"));
}

enum preempt_model preempt_parse_debugfs(const char *text)
{
	const char *open = strchr(text, '(');

	return open ? model_at(open + 1) : PREEMPT_MODEL_UNKNOWN;
}

/* True when TEXT holds WORD as a whole space-separated word. */
static bool has_word(const char *text, const char *word)
{
	size_t n = strlen(word);
	const char *p;

	for (p = strstr(text, word); p; p = strstr(p + 1, word))
		if ((p == text || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0' || p[n] == '\n'))
			return true;
	return false;
}

enum preempt_model preempt_parse_version(const char *uts, bool *dynamic)
{
	*dynamic = has_word(uts, "PREEMPT_DYNAMIC");
	if (has_word(uts, "PREEMPT_RT"))
		return PREEMPT_MODEL_RT;
	if (*dynamic)
		return PREEMPT_MODEL_UNKNOWN; /* chosen at boot, changeable at run time */
	if (has_word(uts, "PREEMPT_LAZY"))
		return PREEMPT_MODEL_LAZY;
	if (has_word(uts, "PREEMPT"))
		return PREEMPT_MODEL_FULL;
	/* the build names every preemptible model; "#1 SMP ..." is none or
	 * voluntary, neither of which preempts kernel code at random */
	return uts[0] == '#' ? PREEMPT_MODEL_NONE : PREEMPT_MODEL_UNKNOWN;
}

enum preempt_model preempt_parse_kmsg(const char *line)
{
	const char *p = strstr(line, "Dynamic Preempt: ");

	return p ? model_at(p + strlen("Dynamic Preempt: ")) : PREEMPT_MODEL_UNKNOWN;
}

enum preempt_model preempt_parse_cmdline(const char *cmdline)
{
	enum preempt_model m = PREEMPT_MODEL_UNKNOWN;
	const char *p;

	/* the last preempt= wins, as in the kernel's own parsing */
	for (p = strstr(cmdline, "preempt="); p; p = strstr(p + 1, "preempt="))
		if (p == cmdline || p[-1] == ' ')
			m = model_at(p + strlen("preempt="));
	return m;
}

enum preempt_model preempt_parse_config_line(const char *line)
{
	static const struct {
		const char *line;
		enum preempt_model model;
	} lines[] = {
		{ "CONFIG_PREEMPT_NONE=y", PREEMPT_MODEL_NONE },
		{ "CONFIG_PREEMPT_VOLUNTARY=y", PREEMPT_MODEL_VOLUNTARY },
		{ "CONFIG_PREEMPT=y", PREEMPT_MODEL_FULL },
		{ "CONFIG_PREEMPT_LAZY=y", PREEMPT_MODEL_LAZY },
		{ "CONFIG_PREEMPT_RT=y", PREEMPT_MODEL_RT },
	};
	size_t i, n = strcspn(line, "\n");

	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		if (strlen(lines[i].line) == n && !strncmp(line, lines[i].line, n))
			return lines[i].model;
	return PREEMPT_MODEL_UNKNOWN;
}

/* The first line of PATH into BUF ("" when it cannot be read). */
static void read_first_line(const char *path, char *buf, int size)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	if (!f)
		return;
	if (!fgets(buf, size, f))
		buf[0] = '\0';
	fclose(f);
}

/* The model named by the kernel log's last "Dynamic Preempt:" line. */
static enum preempt_model read_kmsg(void)
{
	enum preempt_model m = PREEMPT_MODEL_UNKNOWN, l;
	char rec[8192];
	int fd, i;
	ssize_t n;

	fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return m;
	for (i = 0; i < KMSG_RECORDS_MAX; i++) {
		n = read(fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue; /* records overwritten while we read */
		if (n <= 0)
			break;
		rec[n] = '\0';
		l = preempt_parse_kmsg(rec);
		if (l != PREEMPT_MODEL_UNKNOWN)
			m = l;
	}
	close(fd);
	return m;
}

/* The model the kernel config selects (a dynamic kernel's boot default). */
static enum preempt_model read_config(const char *release)
{
	enum preempt_model m = PREEMPT_MODEL_UNKNOWN, l;
	char path[300], line[256];
	gzFile gz;

	gz = gzopen("/proc/config.gz", "rb");
	if (!gz) {
		snprintf(path, sizeof(path), "/boot/config-%s", release);
		gz = gzopen(path, "rb"); /* zlib reads plain files too */
	}
	if (!gz)
		return m;
	while (gzgets(gz, line, sizeof(line))) {
		l = preempt_parse_config_line(line);
		if (l == PREEMPT_MODEL_RT)
			m = l;
		else if (l != PREEMPT_MODEL_UNKNOWN && m != PREEMPT_MODEL_RT)
			m = l;
	}
	gzclose(gz);
	return m;
}

void preempt_info_read(struct preempt_info *pi)
{
	char line[4096];
	struct utsname u;
	bool dynamic = false;

	read_first_line("/sys/kernel/debug/sched/preempt", line, sizeof(line));
	pi->model = preempt_parse_debugfs(line);
	pi->source = "debugfs sched/preempt";
	if (pi->model != PREEMPT_MODEL_UNKNOWN)
		return;
	if (uname(&u))
		u.version[0] = u.release[0] = '\0';
	pi->model = preempt_parse_version(u.version, &dynamic);
	pi->source = "the kernel version string";
	if (pi->model != PREEMPT_MODEL_UNKNOWN || !dynamic)
		return;
	pi->model = read_kmsg();
	pi->source = "the kernel log's Dynamic Preempt line";
	if (pi->model != PREEMPT_MODEL_UNKNOWN)
		return;
	read_first_line("/proc/cmdline", line, sizeof(line));
	pi->model = preempt_parse_cmdline(line);
	pi->source = "the boot command line (preempt=)";
	if (pi->model != PREEMPT_MODEL_UNKNOWN)
		return;
	pi->model = read_config(u.release);
	pi->source = "the kernel config (its default model)";
	if (pi->model == PREEMPT_MODEL_UNKNOWN)
		pi->source = "nothing readable";
}

bool preempt_model_preempts_bpf(enum preempt_model m)
{
	return m != PREEMPT_MODEL_NONE && m != PREEMPT_MODEL_VOLUNTARY;
}

const char *preempt_model_name(enum preempt_model m)
{
	switch (m) {
	case PREEMPT_MODEL_NONE: return "none";
	case PREEMPT_MODEL_VOLUNTARY: return "voluntary";
	case PREEMPT_MODEL_FULL: return "full";
	case PREEMPT_MODEL_LAZY: return "lazy";
	case PREEMPT_MODEL_RT: return "rt";
	default: return "unknown";
	}
}
