/* Unit tests for the agent's targets (agent/targets.c) on fake /proc and
 * /sys trees: a hybrid host (cgroup v2 at /sys/fs/cgroup/unified beside v1
 * controllers and name=systemd, as Debian's systemd mounts them) and a
 * unified one; units (a template instance too) and cgroups found in
 * either hierarchy, their descendants included, members listed, exec
 * events matched by comm and cgroup; the parsers on bad input. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "targets.h"

static char tmpdir[] = "/tmp/dwleak-test-agent-targets-XXXXXX";

/* Writes TEXT to ROOT/REL, making the directories on the way. */
static void put(const char *root, const char *rel, const char *text)
{
	char path[1024], *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

static void mkdirs(const char *root, const char *rel)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s/x", root, rel);
	put(root, path + strlen(root) + 1, "");
	unlink(path);
}

static const char hybrid_mountinfo[] =
	"22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
	"25 30 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
	"26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate\n"
	"27 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd\n"
	"30 25 0:27 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory\n"
	"31 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw shared:15 - cgroup cgroup rw,cpu,cpuacct\n"
	"40 25 0:29 / /sys/fs/cgroup/my\\040pids rw - cgroup cgroup rw,pids\n";

static void hybrid_tree(const char *r)
{
	put(r, "proc/self/mountinfo", hybrid_mountinfo);
	/* 100: nginx in its unit, both trees and memory */
	put(r, "proc/100/comm", "nginx\n");
	put(r, "proc/100/cgroup", "12:pids:/\n5:cpu,cpuacct:/\n4:memory:/system.slice/nginx.service\n"
	    "1:name=systemd:/system.slice/nginx.service\n0::/system.slice/nginx.service\n");
	/* 101: in a cgroup below the unit's, in v2 only */
	put(r, "proc/101/comm", "worker\n");
	put(r, "proc/101/cgroup", "1:name=systemd:/\n0::/system.slice/nginx.service/sub\n");
	/* 102: an nginx elsewhere */
	put(r, "proc/102/comm", "nginx\n");
	put(r, "proc/102/cgroup", "1:name=systemd:/user.slice\n0::/user.slice\n");
	/* 103: in a memory cgroup below --cgroup's */
	put(r, "proc/103/comm", "app\n");
	put(r, "proc/103/cgroup", "4:memory:/box/inner\n1:name=systemd:/\n0::/\n");
	/* 104: a template instance, in v1 name=systemd only */
	put(r, "proc/104/comm", "foo\n");
	put(r, "proc/104/cgroup", "1:name=systemd:/system.slice/system-foo.slice/foo@2.service\n0::/\n");
	/* 105: cpu,cpuacct; and 106: in a sibling whose name starts the same */
	put(r, "proc/105/comm", "cpu\n");
	put(r, "proc/105/cgroup", "5:cpu,cpuacct:/grp\n0::/\n");
	put(r, "proc/106/comm", "cpu\n");
	put(r, "proc/106/cgroup", "5:cpu,cpuacct:/grp2\n4:memory:/boxer\n0::/system.slice/nginx.serviceX\n");
	/* 107: a pids cgroup through a mount point with a space */
	put(r, "proc/107/comm", "p\n");
	put(r, "proc/107/cgroup", "12:pids:/a\n0::/\n");
	put(r, "sys/fs/cgroup/unified/system.slice/nginx.service/cgroup.procs", "100\n");
	put(r, "sys/fs/cgroup/unified/system.slice/nginx.service/sub/cgroup.procs", "101\n");
	put(r, "sys/fs/cgroup/systemd/system.slice/nginx.service/cgroup.procs", "100\n");
	put(r, "sys/fs/cgroup/systemd/system.slice/system-foo.slice/foo@2.service/cgroup.procs", "104\n");
	put(r, "sys/fs/cgroup/memory/box/cgroup.procs", "");
	put(r, "sys/fs/cgroup/memory/box/inner/cgroup.procs", "103\n");
	put(r, "sys/fs/cgroup/cpu,cpuacct/grp/cgroup.procs", "105\n");
	put(r, "sys/fs/cgroup/my pids/a/cgroup.procs", "107\n");
}

static void expect_match(struct agent_targets *t, pid_t pid, int want, const char *want_text)
{
	struct agent_match m = { 0 };
	int r = agent_targets_match_pid(t, pid, &m);

	EXPECT(r == want, "pid %d: %d, want %d", (int)pid, r, want);
	if (r == 1 && want_text)
		EXPECT(!strcmp(m.text, want_text), "pid %d matched %s, want %s", (int)pid, m.text, want_text);
}

static void expect_members(struct agent_targets *t, const pid_t *want, size_t nwant)
{
	pid_t *pids;
	size_t n;

	CHECK(agent_targets_members(t, &pids, &n) == 0, "members");
	EXPECT(n == nwant && !memcmp(pids, want, n * sizeof(*pids)), "%zu members, want %zu (first %d)", n, nwant,
	       n ? (int)pids[0] : 0);
	free(pids);
}

static void test_hybrid(void)
{
	char root[512], why[512];
	struct agent_targets *t;
	struct agent_match m;

	snprintf(root, sizeof(root), "%s/hybrid", tmpdir);
	hybrid_tree(root);
	CHECK(agent_targets_new(root, &t) == 0, "agent_targets_new");
	EXPECT(agent_targets_add_unit(t, "nginx.service", why, sizeof(why)) == 0 && !why[0], "%s", why);
	expect_match(t, 100, 1, "nginx.service");
	expect_match(t, 101, 1, "nginx.service");
	expect_match(t, 102, 0, NULL);
	expect_match(t, 106, 0, NULL); /* nginx.serviceX is not below nginx.service */
	expect_match(t, 999, -ENOENT, NULL);
	{
		pid_t want[] = { 100, 101 };

		expect_members(t, want, N(want));
	}
	EXPECT(agent_targets_add_unit(t, "foo@2.service", why, sizeof(why)) == 0, "%s", why);
	expect_match(t, 104, 1, "foo@2.service");
	EXPECT(agent_targets_add_cgroup(t, "/sys/fs/cgroup/memory/box/", why, sizeof(why)) == 0, "%s", why);
	expect_match(t, 103, 1, "/sys/fs/cgroup/memory/box/");
	expect_match(t, 106, 0, NULL); /* /boxer is not below /box */
	EXPECT(agent_targets_add_cgroup(t, "/sys/fs/cgroup/cpu,cpuacct/grp", why, sizeof(why)) == 0, "%s", why);
	expect_match(t, 105, 1, "/sys/fs/cgroup/cpu,cpuacct/grp");
	EXPECT(agent_targets_add_cgroup(t, "/sys/fs/cgroup/my pids/a", why, sizeof(why)) == 0, "%s", why);
	expect_match(t, 107, 1, "/sys/fs/cgroup/my pids/a");
	EXPECT(agent_targets_add_comm(t, "nginx", why, sizeof(why)) == 0, "%s", why);
	expect_match(t, 102, 1, "nginx");
	EXPECT(agent_targets_add_pid(t, 106, why, sizeof(why)) == 0, "%s", why);
	expect_match(t, 106, 1, "106");
	EXPECT(agent_targets_count(t) == 7, "count");
	{
		pid_t want[] = { 100, 101, 102, 103, 104, 105, 106, 107 };

		expect_members(t, want, N(want));
	}
	/* an exec event: its comm is the event's, the cgroup is read */
	EXPECT(agent_targets_match_exec(t, 102, "nginx", &m) == 1 && m.kind == AGENT_TARGET_COMM, "exec by comm");
	EXPECT(agent_targets_match_exec(t, 102, "bash", &m) == 0, "exec of another program");
	EXPECT(agent_targets_match_exec(t, 101, "bash", &m) == 1 && m.kind == AGENT_TARGET_UNIT, "exec in the unit");
	EXPECT(agent_targets_match_exec(t, 999, "nginx", &m) == 1, "exec by comm needs no /proc");
	agent_targets_free(t);

	/* errors */
	CHECK(agent_targets_new(root, &t) == 0, "agent_targets_new");
	EXPECT(agent_targets_add_unit(t, "nginx", why, sizeof(why)) == -EINVAL && strstr(why, "NAME.service"), "%s",
	       why);
	EXPECT(agent_targets_add_unit(t, "../x.service", why, sizeof(why)) == -EINVAL, "%s", why);
	EXPECT(agent_targets_add_cgroup(t, "/sys/fs/cgroup/memory/nope", why, sizeof(why)) == -ENOENT &&
	       strstr(why, "no such directory"), "%s", why);
	EXPECT(agent_targets_add_cgroup(t, "/tmp", why, sizeof(why)) == -ENOENT && strstr(why, "no cgroup file system"),
	       "%s", why);
	EXPECT(agent_targets_add_cgroup(t, "/sys/fs/cgroup/memory/../x", why, sizeof(why)) == -EINVAL, "%s", why);
	EXPECT(agent_targets_add_cgroup(t, "memory/box", why, sizeof(why)) == -EINVAL, "%s", why);
	EXPECT(agent_targets_add_pid(t, 4242, why, sizeof(why)) == -ESRCH && strstr(why, "no process with pid 4242"),
	       "%s", why);
	EXPECT(agent_targets_add_comm(t, "a/b", why, sizeof(why)) == -EINVAL, "%s", why);
	EXPECT(agent_targets_add_comm(t, "averyveryverylongname", why, sizeof(why)) == 0 &&
	       strstr(why, "'averyveryverylo'"), "%s", why);
	EXPECT(agent_targets_count(t) == 1, "failed adds left targets: %zu", agent_targets_count(t));
	put(root, "proc/108/comm", "averyveryverylo\n");
	put(root, "proc/108/cgroup", "0::/\n");
	expect_match(t, 108, 1, "averyveryverylongname");
	agent_targets_free(t);
}

/* A unified host: cgroup2 at /sys/fs/cgroup, no v1 hierarchy. */
static void test_unified(void)
{
	char root[512], why[512];
	struct agent_targets *t;

	snprintf(root, sizeof(root), "%s/unified", tmpdir);
	put(root, "proc/self/mountinfo",
	    "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n");
	put(root, "proc/200/comm", "svc\n");
	put(root, "proc/200/cgroup", "0::/system.slice/svc.service\n");
	put(root, "sys/fs/cgroup/system.slice/svc.service/cgroup.procs", "200\n");
	CHECK(agent_targets_new(root, &t) == 0, "agent_targets_new");
	EXPECT(agent_targets_add_unit(t, "svc.service", why, sizeof(why)) == 0, "%s", why);
	expect_match(t, 200, 1, "svc.service");
	{
		pid_t want[] = { 200 };

		expect_members(t, want, N(want));
	}
	/* a unit that does not run yet: found once it does */
	EXPECT(agent_targets_add_unit(t, "later.service", why, sizeof(why)) == 0, "%s", why);
	put(root, "proc/201/comm", "later\n");
	put(root, "proc/201/cgroup", "0::/system.slice/later.service\n");
	expect_match(t, 201, 1, "later.service");
	/* the root cgroup holds everyone */
	EXPECT(agent_targets_add_cgroup(t, "/sys/fs/cgroup", why, sizeof(why)) == 0, "%s", why);
	put(root, "proc/202/comm", "x\n");
	put(root, "proc/202/cgroup", "0::/init.scope\n");
	expect_match(t, 202, 1, "/sys/fs/cgroup");
	agent_targets_free(t);

	/* no cgroup file system at all */
	snprintf(root, sizeof(root), "%s/none", tmpdir);
	put(root, "proc/self/mountinfo", "22 1 0:21 / /proc rw - proc proc rw\n");
	CHECK(agent_targets_new(root, &t) == 0, "agent_targets_new");
	EXPECT(agent_targets_add_unit(t, "svc.service", why, sizeof(why)) == -ENOENT && strstr(why, "no unit"), "%s",
	       why);
	EXPECT(agent_targets_count(t) == 0, "count");
	agent_targets_free(t);
	mkdirs(root, "x");
}

static int count_line(void *ctx, const struct agent_cgroup_line *l)
{
	(void)l;
	++*(int *)ctx;
	return 0;
}

static void test_parsers(void)
{
	static const char *const bad_cgroup[] = {
		"x:memory:/a\n", ":memory:/a\n", "1:memory\n", "1:memory:a\n", "1:memory:\n", "12345678901:a:/\n",
		"1\n",
	};
	static const char *const bad_mountinfo[] = {
		"1 2 0:1 / /sys/fs/cgroup rw - cgroup2\n",             /* no source, options */
		"1 2 0:1 / /sys/fs/cgroup rw cgroup2 cgroup2 rw\n",    /* no separator */
		"1 2 0:1 / /sys/fs/\\9x rw - cgroup2 cgroup2 rw\n",    /* bad escape */
		"1 2 0:1 / /sys/fs/\\000 rw - cgroup cgroup rw,pids\n", /* a NUL */
		"1 2 0:1 x /sys rw - cgroup cgroup rw,pids\n",          /* a relative root */
		"1 2\n",
	};
	struct agent_cgroup_mount *m;
	size_t n;
	int lines = 0;

	for (size_t i = 0; i < N(bad_cgroup); i++)
		EXPECT(agent_cgroup_lines(bad_cgroup[i], strlen(bad_cgroup[i]), count_line, &lines) == -EPROTO,
		       "taken: %s", bad_cgroup[i]);
	lines = 0;
	EXPECT(agent_cgroup_lines("0::/\n\n1:a,b:/x:y\n", 17, count_line, &lines) == 0 && lines == 2, "%d", lines);
	for (size_t i = 0; i < N(bad_mountinfo); i++) {
		int r = agent_mountinfo_parse(bad_mountinfo[i], strlen(bad_mountinfo[i]), &m, &n);

		EXPECT(r == -EPROTO, "taken (%d): %s", r, bad_mountinfo[i]);
	}
	CHECK(agent_mountinfo_parse(hybrid_mountinfo, strlen(hybrid_mountinfo), &m, &n) == 0, "hybrid");
	EXPECT(n == 5 && m[0].v2 && !strcmp(m[0].point, "/sys/fs/cgroup/unified") &&
	       !strcmp(m[4].point, "/sys/fs/cgroup/my pids") && !strcmp(m[1].options, "rw,xattr,name=systemd"),
	       "%zu mounts", n);
	agent_cgroup_mounts_free(m, n);
}

int main(void)
{
	char cmd[128];

	CHECK(mkdtemp(tmpdir), "mkdtemp");
	check_tmpdir = tmpdir;
	test_parsers();
	test_hybrid();
	test_unified();
	if (check_failures)
		return 1;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		return 1;
	printf("test_agent_targets: ok\n");
	return 0;
}
