/* Walks a stopped arm64 process's stack with dwleak's tables and the
 * aarch64 step (bpf/abi/unwind_step_a64.h), through ptrace, and prints
 * one pc a line: the walker's arm64 half checked in the guest against gdb
 * (vm/check_arm64.sh) before the probes that will feed it exist there.
 * Usage: walk_a64 PID   (PID stopped, e.g. by SIGSTOP; left stopped)
 * Prints "pc 0x..." lines, outermost last, then "end REASON" and how
 * many return addresses carried a pointer authentication code; then the
 * frame-pointer walk of the same stack, "fp 0x..." lines and "fp_end".  Exit 0
 * when the walk reached the outermost frame, 1 when it stopped short, 2
 * when it could not start. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dwleak.h"
#include "table.h"
#include "unwind_step_a64.h"

#ifndef NT_ARM_PAC_MASK
#define NT_ARM_PAC_MASK 0x406
#endif

#define MAX_FRAMES 256
#define MAX_MAPS 4096

/* arm64's struct user_pt_regs, as NT_PRSTATUS gives it */
struct a64_regs {
	uint64_t regs[31];
	uint64_t sp;
	uint64_t pc;
	uint64_t pstate;
};

/* One executable file mapping: [start, end) holds file offsets from
 * offset on; its table and the segment's vaddr - offset, found once. */
struct exec_map {
	uint64_t start, end, offset;
	char path[512];
	struct unwind_table *table;
	int64_t vaddr_minus_off; /* the PT_LOAD's p_vaddr - p_offset */
	int tried;
};

static struct exec_map maps[MAX_MAPS];
static int nmaps;
static int mem_fd = -1;

static int maps_read(pid_t pid)
{
	char name[64], line[1024], perms[8];
	uint64_t start, end, off;
	int n;
	FILE *f;

	snprintf(name, sizeof(name), "/proc/%d/maps", pid);
	f = fopen(name, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct exec_map *m;
		char *path;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %n", &start, &end, perms, &off,
			   &n) < 4)
			continue;
		if (perms[2] != 'x')
			continue;
		path = line + n;
		path[strcspn(path, "\n")] = 0;
		if (path[0] != '/')
			continue; /* the vdso, anonymous code: no table here */
		if (nmaps == MAX_MAPS) {
			fprintf(stderr, "walk_a64: more than %d executable mappings; the rest ignored\n", MAX_MAPS);
			break;
		}
		m = &maps[nmaps++];
		m->start = start;
		m->end = end;
		m->offset = off;
		snprintf(m->path, sizeof(m->path), "%s", path);
	}
	fclose(f);
	return 0;
}

/* The PT_LOAD of PATH holding file offset OFF: its p_vaddr - p_offset. */
static int segment_bias(const char *path, uint64_t off, int64_t *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = -ENOENT;
	size_t n, i;
	Elf *e;

	if (fd < 0)
		return -errno;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && !elf_getphdrnum(e, &n)) {
		for (i = 0; i < n; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			if (off >= ph.p_offset && off < ph.p_offset + ph.p_filesz) {
				*out = (int64_t)(ph.p_vaddr - ph.p_offset);
				ret = 0;
				break;
			}
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return ret;
}

/* The mapping holding PC, its table compiled on first use, or NULL. */
static struct exec_map *map_of(uint64_t pc)
{
	int i, err;

	for (i = 0; i < nmaps; i++) {
		struct exec_map *m = &maps[i];

		if (pc < m->start || pc >= m->end)
			continue;
		if (!m->tried) {
			m->tried = 1;
			err = segment_bias(m->path, m->offset, &m->vaddr_minus_off);
			if (!err)
				err = table_compile_path(m->path, NULL, &m->table);
			if (err)
				fprintf(stderr, "walk_a64: %s: no table: %s\n", m->path,
					m->table ? "" : table_last_error());
		}
		return m;
	}
	return NULL;
}

static int mem_read(void *arg, __u64 *dst, __u64 addr)
{
	(void)arg;
	if (pread(mem_fd, dst, sizeof(*dst), (off_t)addr) != (ssize_t)sizeof(*dst))
		return WALK_ERR_READ;
	return 0;
}

static const struct unwind_step_a64_ops read_ops = { .read = mem_read };

static const char *end_name(uint32_t end)
{
	switch (end) {
	case WALK_END_OK:
		return "outermost";
	case WALK_END_ZERO_RA:
		return "zero_ra";
	case WALK_END_TRUNCATED:
		return "truncated";
	case WALK_ERR_NO_MAPPING:
		return "no_mapping";
	case WALK_ERR_NO_TABLE:
		return "no_table";
	case WALK_ERR_NO_FDE:
		return "no_fde";
	case WALK_ERR_UNSUPPORTED:
		return "unsupported";
	case WALK_ERR_READ:
		return "read";
	case WALK_ERR_RBP_UNKNOWN:
		return "fp_unknown";
	default:
		return "other";
	}
}

/* Walks from R, printing each frame's pc; returns the walk's end. */
static uint32_t walk(struct unwind_regs_a64 *r)
{
	uint32_t end = WALK_END_TRUNCATED;
	int n;

	for (n = 0; n < MAX_FRAMES; n++) {
		const struct unwind_rule *rule;
		struct exec_map *m;
		uint64_t addr;

		printf("pc %#" PRIx64 "\n", (uint64_t)r->pc);
		/* a signal handler's return: the vdso's trampoline, no table */
		switch (unwind_a64_signal(r, &end, &read_ops, NULL)) {
		case 0:
			continue;
		case 1:
			return end;
		}
		m = map_of(r->pc);
		if (!m)
			return WALK_ERR_NO_MAPPING;
		if (!m->table)
			return WALK_ERR_NO_TABLE;
		addr = unwind_a64_lookup_pc(r) - m->start + m->offset + (uint64_t)m->vaddr_minus_off;
		rule = table_lookup(m->table, addr, NULL, NULL);
		if (!rule)
			return WALK_ERR_NO_FDE;
		if (unwind_step_a64(r, rule, &end, &read_ops, NULL))
			return end;
	}
	return WALK_END_TRUNCATED;
}

int main(int argc, char **argv)
{
	struct unwind_regs_a64 r = { 0 }, fp_start;
	struct { uint64_t data_mask, insn_mask; } pac = { 0, 0 };
	uint32_t fp_end = WALK_END_OK;
	int n;
	struct a64_regs regs;
	struct iovec iov;
	char name[64];
	uint32_t end;
	pid_t pid;
	int status;

	if (argc != 2 || (pid = (pid_t)atoi(argv[1])) <= 0) {
		fprintf(stderr, "usage: walk_a64 PID   (a stopped process)\n");
		return 2;
	}
	if (elf_version(EV_CURRENT) == EV_NONE)
		return 2;
	if (ptrace(PTRACE_ATTACH, pid, 0, 0)) {
		fprintf(stderr, "walk_a64: cannot attach to %d: %s\n", pid, strerror(errno));
		return 2;
	}
	if (waitpid(pid, &status, __WALL) < 0) {
		fprintf(stderr, "walk_a64: waitpid %d: %s\n", pid, strerror(errno));
		return 2;
	}
	iov.iov_base = &regs;
	iov.iov_len = sizeof(regs);
	if (ptrace(PTRACE_GETREGSET, pid, NT_PRSTATUS, &iov)) {
		fprintf(stderr, "walk_a64: cannot read %d's registers: %s\n", pid, strerror(errno));
		return 2;
	}
	iov.iov_base = &pac;
	iov.iov_len = sizeof(pac);
	if (ptrace(PTRACE_GETREGSET, pid, NT_ARM_PAC_MASK, &iov))
		pac.insn_mask = 0; /* no pointer authentication on this CPU */
	printf("pac_mask %#" PRIx64 "\n", pac.insn_mask);
	snprintf(name, sizeof(name), "/proc/%d/mem", pid);
	mem_fd = open(name, O_RDONLY | O_CLOEXEC);
	if (mem_fd < 0 || maps_read(pid)) {
		fprintf(stderr, "walk_a64: cannot read %d's memory or maps: %s\n", pid, strerror(errno));
		return 2;
	}
	r.pc = regs.pc;
	r.sp = regs.sp;
	r.fp = regs.regs[29];
	r.fp_ok = 1;
	r.lr = unwind_a64_strip(regs.regs[30], pac.insn_mask);
	r.lr_ok = 1;
	r.exact_pc = 1;
	r.pac_mask = pac.insn_mask;
	fp_start = r;
	end = walk(&r);
	printf("end %s\n", end_name(end));
	printf("pac_stripped %u\n", r.pac_stripped);
	/* the frame-pointer walk of the same stack, for --unwind both's
	 * comparison: "fp 0x..." lines */
	r = fp_start;
	printf("fp %#" PRIx64 "\n", (uint64_t)r.pc);
	for (n = 1; n < MAX_FRAMES && !unwind_step_a64_fp(&r, &fp_end, &read_ops, NULL); n++)
		printf("fp %#" PRIx64 "\n", (uint64_t)r.pc);
	printf("fp_end %s\n", end_name(n == MAX_FRAMES ? WALK_END_TRUNCATED : fp_end));
	/* left stopped, for gdb to see the same stack */
	ptrace(PTRACE_DETACH, pid, 0, (void *)(long)SIGSTOP);
	return end == WALK_END_OK || end == WALK_END_ZERO_RA ? 0 : 1;
}
