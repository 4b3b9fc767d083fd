/* The probe-site decoder against objdump (the oracle for instruction
 * boundaries) on the allocators' real free(), and on hand-made byte
 * sequences for every form it accepts or refuses. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "elf_symbols.h"
#include "probe_site.h"

/* Does objdump put an instruction boundary at VADDR in OBJ? */
static int objdump_boundary(const char *obj, unsigned long start, unsigned long vaddr)
{
	char *cmd, line[512];
	unsigned long a;
	int found = 0;
	FILE *f;

	if (asprintf(&cmd, "objdump -d --start-address=0x%lx --stop-address=0x%lx %s", start,
		     vaddr + 16, obj) < 0)
		return 0;
	f = popen(cmd, "r");
	free(cmd);
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " %lx:", &a) == 1 && a == vaddr)
			found = 1;
	pclose(f);
	return found;
}

static void real_free(const char *obj, long want)
{
	struct elf_sym_want w = { .name = "free" };
	struct probe_site site;
	uint8_t code[32];
	int fd = open(obj, O_RDONLY);

	if (fd < 0) {
		EXPECT(0, "cannot open %s", obj);
		return;
	}
	elf_symbols_find(fd, &w, 1);
	EXPECT(w.found && pread(fd, code, sizeof(code), (off_t)w.file_off) == sizeof(code),
	       "%s: no free()", obj);
	close(fd);
	probe_site_pick(code, sizeof(code), &site);
	if (want >= 0)
		EXPECT((long)site.offset == want, "%s: free site +%lu, want +%ld", obj,
		       (unsigned long)site.offset, want);
	EXPECT(objdump_boundary(obj, w.vaddr, w.vaddr + site.offset),
	       "%s: free+%lu is not an instruction boundary for objdump", obj,
	       (unsigned long)site.offset);
	printf("%s: free at +%lu (%s)\n", obj, (unsigned long)site.offset, site.why);
}

static void bytes(const char *what, const uint8_t *code, size_t len, uint64_t want)
{
	struct probe_site site;

	probe_site_pick(code, len, &site);
	EXPECT(site.offset == want, "%s: site +%lu, want +%lu", what, (unsigned long)site.offset,
	       (unsigned long)want);
}

int main(void)
{
	static const uint8_t glibc[] = { 0x48, 0x85, 0xff, 0x0f, 0x84, 1, 0, 0, 0, 0x55 };
	static const uint8_t je8[] = { 0x48, 0x85, 0xff, 0x74, 0x10, 0x41, 0x54 };
	static const uint8_t endbr[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x85, 0xff, 0x74, 0x10, 0x53 };
	static const uint8_t push0[] = { 0x41, 0x54, 0x48, 0x85, 0xff };
	static const uint8_t jne[] = { 0x48, 0x85, 0xff, 0x75, 0x10, 0x55 };
	static const uint8_t rsi[] = { 0x48, 0x85, 0xf6, 0x74, 0x10, 0x55 };
	static const uint8_t nopush[] = { 0x48, 0x85, 0xff, 0x74, 0x10, 0x48, 0x89, 0xf8 };
	static const uint8_t cut[] = { 0x48, 0x85, 0xff, 0x0f, 0x84, 1 };

	bytes("glibc free (test; je rel32; push %rbp)", glibc, sizeof(glibc), 9);
	bytes("je rel8 then push %r12", je8, sizeof(je8), 5);
	bytes("endbr64 first", endbr, sizeof(endbr), 9);
	bytes("entry push is emulated already", push0, sizeof(push0), 0);
	bytes("jne: the skipped path is not the NULL one", jne, sizeof(jne), 0);
	bytes("tests rsi, not the pointer argument", rsi, sizeof(rsi), 0);
	bytes("no push after the check", nopush, sizeof(nopush), 0);
	bytes("truncated je", cut, sizeof(cut), 0);
	real_free("/lib/x86_64-linux-gnu/libc.so.6", 9);
	real_free("/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4", -1);
	real_free("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", -1);
	if (check_status())
		return 1;
	puts("test_probe_site: ok");
	return 0;
}
