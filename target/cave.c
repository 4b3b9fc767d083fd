/* Finding a cave for code placed in a process, and the thread state its
 * code restores (cave.h). */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cave.h"

/* The end of the file contents of M's executable segment, when they end
 * inside M, or 0. */
static uint64_t segment_end(pid_t pid, const struct proc_map *m)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	uint64_t end = 0;
	int fd = proc_map_open(pid, m), k;

	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_phentsize != sizeof(ph) || eh.e_phnum > 64) {
		close(fd);
		return 0;
	}
	for (k = 0; k < eh.e_phnum; k++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + k * sizeof(ph))) != sizeof(ph))
			break;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_offset + ph.p_filesz > m->offset &&
		    ph.p_offset + ph.p_filesz - m->offset < m->end - m->start)
			end = m->start + (ph.p_offset + ph.p_filesz - m->offset);
	}
	close(fd);
	return end;
}

int cave_find(pid_t pid, const struct proc_map *maps, size_t n, const struct proc_map *prefer, size_t len,
	      const char magic[8], uint64_t *at)
{
	unsigned char buf[4096];
	uint64_t zeros = 0;

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			const struct proc_map *m = &maps[i];
			bool preferred = prefer && m->ino == prefer->ino && m->dev == prefer->dev;
			uint64_t seg_end, a;
			struct iovec local, remote;

			if (!m->exec || m->path[0] != '/' || (pass == 0) != preferred)
				continue;
			seg_end = segment_end(pid, m);
			if (!seg_end || m->end - seg_end > sizeof(buf))
				continue;
			local = (struct iovec){ buf, m->end - seg_end };
			remote = (struct iovec){ (void *)seg_end, m->end - seg_end };
			if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)(m->end - seg_end))
				continue;
			for (a = (seg_end + 63) & ~63ull; a + len <= m->end; a += 64) {
				size_t j, off = a - seg_end;

				if (!memcmp(buf + off, magic, 8)) {
					*at = a;
					return 0;
				}
				for (j = 0; j < len && !buf[off + j]; j++)
					;
				if (j == len && !zeros)
					zeros = a;
			}
		}
		/* the preferred object's zeros before any other object's magic
		 * is searched: a cave is found the same way every time */
		if (zeros) {
			*at = zeros;
			return 0;
		}
	}
	return -ENOENT;
}

#define ERESTART_RESTARTBLOCK 516

void cave_resume_regs(const struct user_regs_struct *g, struct user_regs_struct *out, int64_t *exact_nr)
{
	int64_t rax = (int64_t)g->rax, nr = -1;
	/* -ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND, -ERESTART_RESTARTBLOCK */
	bool restart = (int64_t)g->orig_rax >= 0 && (rax == -512 || rax == -513 || rax == -514 || rax == -516);

	*out = *g;
	if (restart) {
		nr = rax == -ERESTART_RESTARTBLOCK ? SYS_restart_syscall : (int64_t)g->orig_rax;
		out->rip = g->rip - 2;
		out->rax = (uint64_t)nr;
	}
	out->orig_rax = (uint64_t)-1;
	if (exact_nr)
		*exact_nr = nr;
}

void cave_regs_pack(const struct user_regs_struct *g, uint64_t ir[IR_COUNT])
{
	ir[IR_RAX] = g->rax;
	ir[IR_RBX] = g->rbx;
	ir[IR_RCX] = g->rcx;
	ir[IR_RDX] = g->rdx;
	ir[IR_RSI] = g->rsi;
	ir[IR_RDI] = g->rdi;
	ir[IR_RBP] = g->rbp;
	ir[IR_RSP] = g->rsp;
	ir[IR_R8] = g->r8;
	ir[IR_R9] = g->r9;
	ir[IR_R10] = g->r10;
	ir[IR_R11] = g->r11;
	ir[IR_R12] = g->r12;
	ir[IR_R13] = g->r13;
	ir[IR_R14] = g->r14;
	ir[IR_R15] = g->r15;
	ir[IR_RFLAGS] = g->eflags;
}

int cave_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pwrite(fd, buf, len, (off_t)addr);
	close(fd);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

double cave_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int cave_wait_stop(pid_t tid, double deadline, int *status)
{
	unsigned us = 10;

	for (;;) {
		pid_t got = waitpid(tid, status, __WALL | WNOHANG);

		if (got == tid)
			return WIFEXITED(*status) || WIFSIGNALED(*status) ? -ESRCH : 0;
		if (got < 0 && errno != EINTR)
			return -errno;
		if (cave_now_ms() > deadline)
			return -ETIMEDOUT;
		usleep(us);
		us = us < 500 ? us * 2 : us;
	}
}
