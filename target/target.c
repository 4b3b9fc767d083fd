/* Target process handling for the tracer: pid checks, the held child of
 * `dwleak -- CMD`, and the list of objects a command will map. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "target.h"

/* The state letter and flags of PID from /proc/PID/stat; 0 or -errno. */
static int proc_stat_read(pid_t pid, char *state, unsigned long *flags)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	/* the command name may hold anything, ')' too: fields follow the last ')' */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", state, flags) != 2)
		return -EIO;
	return 0;
}

#define PF_KTHREAD 0x00200000 /* include/linux/sched.h */

int target_check_pid(pid_t pid, const char **why)
{
	unsigned long flags = 0;
	char state = 0;
	int err = proc_stat_read(pid, &state, &flags);

	if (err == -ENOENT) {
		*why = "no such process";
		return -ESRCH;
	}
	if (err) {
		*why = "cannot be read in /proc";
		return err;
	}
	if (flags & PF_KTHREAD) {
		*why = "is a kernel thread (it has no user-space memory to trace)";
		return -EINVAL;
	}
	if (state == 'Z' || state == 'X') {
		*why = "has exited (a zombie its parent has not reaped): there is nothing left to trace";
		return -ESRCH;
	}
	return 0;
}

char *target_cmdline(pid_t pid)
{
	char path[64], *buf;
	ssize_t n, i;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return strdup("?");
	buf = calloc(1, 4097);
	n = buf ? read(fd, buf, 4096) : -1;
	close(fd);
	if (n <= 0) {
		free(buf);
		return strdup("?");
	}
	for (i = 0; i < n - 1; i++)
		if (!buf[i])
			buf[i] = ' ';
	return buf;
}

int target_attach(struct target *t, pid_t pid)
{
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->release_fd = -1;
	t->command = target_cmdline(pid);
	return t->command ? 0 : -ENOMEM;
}

static char *join_argv(char **argv)
{
	size_t len = 1, i;
	char *s;

	for (i = 0; argv[i]; i++)
		len += strlen(argv[i]) + 1;
	s = calloc(1, len);
	if (!s)
		return NULL;
	for (i = 0; argv[i]; i++) {
		if (i)
			strcat(s, " ");
		strcat(s, argv[i]);
	}
	return s;
}

int target_spawn(struct target *t, char **argv, char **envp)
{
	sigset_t none;
	int pfd[2];
	char c;
	pid_t pid;

	memset(t, 0, sizeof(*t));
	t->release_fd = -1;
	t->command = join_argv(argv);
	if (!t->command)
		return -ENOMEM;
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (pid == 0) {
		close(pfd[1]);
		/* what dwleak set for itself is not the command's: signals it
		 * blocks (SIGCHLD, read through a signalfd) and ignores (SIGPIPE)
		 * would be inherited across execve */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		/* wait for the probes; EOF without a byte means dwleak gave up */
		if (read(pfd[0], &c, 1) != 1)
			_exit(127);
		if (envp)
			execvpe(argv[0], argv, envp);
		else
			execvp(argv[0], argv);
		fprintf(stderr, "dwleak: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[0]);
	t->pid = pid;
	t->spawned = true;
	t->release_fd = pfd[1];
	return 0;
}

int target_release(struct target *t)
{
	int err = 0;

	if (t->release_fd < 0)
		return 0;
	if (write(t->release_fd, "x", 1) != 1)
		err = -errno;
	close(t->release_fd);
	t->release_fd = -1;
	return err;
}

void target_abort(struct target *t)
{
	if (!t->spawned || t->exited || t->release_fd < 0)
		return; /* a command that runs is left running */
	close(t->release_fd); /* the child sees EOF and exits 127 */
	t->release_fd = -1;
	waitpid(t->pid, &t->exit_status, 0);
	t->exited = true;
}

void target_free(struct target *t)
{
	if (t->release_fd >= 0)
		close(t->release_fd);
	free(t->command);
}

char *target_which(const char *cmd)
{
	const char *path = getenv("PATH");
	char *dirs, *dir, *save = NULL, *cand;

	if (strchr(cmd, '/'))
		return realpath(cmd, NULL);
	dirs = strdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
	if (!dirs)
		return NULL;
	for (dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		if (asprintf(&cand, "%s/%s", dir, cmd) < 0)
			break;
		if (access(cand, X_OK) == 0) {
			char *real = realpath(cand, NULL);

			free(cand);
			free(dirs);
			return real;
		}
		free(cand);
	}
	free(dirs);
	return NULL;
}

int target_program_check(const char *prog, char **script)
{
	char head[256] = "";
	ssize_t n = -1;
	int fd = open(prog, O_RDONLY | O_CLOEXEC), err = 0;

	*script = NULL;
	if (fd < 0)
		return -errno;
	n = read(fd, head, sizeof(head) - 1);
	if (n < 0)
		err = -errno;
	close(fd);
	if (err)
		return err;
	if (n >= 4 && !memcmp(head, "\177ELF", 4))
		return 0;
	if (n >= 2 && head[0] == '#' && head[1] == '!') {
		head[n] = 0;
		head[strcspn(head, "\n")] = 0;
		*script = strdup(head);
	}
	return -ENOEXEC;
}
