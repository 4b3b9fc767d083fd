/* libFuzzer target for what target/ reads from a traced process's own
 * files (any user may plant them: a library named libdwleak-preload.so,
 * an allocator, an executable): the USDT notes (usdt.c: the preload
 * library's sites and semaphores) and the symbol lookups (elf_symbols.c:
 * allocator functions, the control block, imports).  The input is the
 * file's contents, handed over as a memfd as the real code gets an fd.
 * Besides not crashing, leaking or over-allocating: every note kept has
 * its three strings and a file offset for its site (one in no PT_LOAD is
 * left out), a failed read leaves nothing behind, and a symbol not found
 * has no address. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "elf_symbols.h"
#include "usdt.h"

static void import_count(void *arg, const char *name)
{
	size_t *n = arg;

	if (!name)
		abort();
	*n += strlen(name) > 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct elf_sym_want want[] = {
		{ .name = "malloc" },
		{ .name = "free" },
		{ .name = "dwleak_preload_control", .data = true, .dynsym_only = true },
		{ .name = "_Znwm" },
	};
	struct usdt_note *notes;
	size_t n = 0, imports = 0, i;

	if (fd < 0 && (fd = memfd_create("fuzz_objects", MFD_CLOEXEC)) < 0)
		abort();
	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();

	if (!usdt_notes_read(fd, &notes, &n)) {
		for (i = 0; i < n; i++) {
			if (!notes[i].provider || !notes[i].name || !notes[i].args || !notes[i].pc_off)
				abort();
			usdt_note_find(notes, n, notes[i].provider, notes[i].name);
		}
		usdt_notes_free(notes, n);
	} else if (n || notes) {
		abort(); /* a failure leaves nothing to free */
	}
	elf_symbols_find(fd, want, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!want[i].found && (want[i].vaddr || want[i].file_off))
			abort();
	elf_has_section(fd, ".note.stapsdt");
	elf_symbols_imports(fd, import_count, &imports);
	return 0;
}
