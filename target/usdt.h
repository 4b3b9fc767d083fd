/* USDT probe sites of an ELF object: its .note.stapsdt notes (SystemTap's
 * layout, which bpftrace, perf and libbpf read too) with the file offsets
 * a uprobe and its semaphore (ref_ctr_offset) attach at. */
#ifndef DWLEAK_USDT_H
#define DWLEAK_USDT_H

#include <stddef.h>
#include <stdint.h>

struct usdt_note {
	char *provider;
	char *name;
	char *args;	  /* the argument string, "8@%rdi 8@%rsi ..." */
	uint64_t pc;	  /* ELF address of the site (moved with .stapsdt.base if prelinked) */
	uint64_t pc_off;  /* its file offset: where the uprobe goes */
	uint64_t sem;	  /* ELF address of its semaphore; 0 = none */
	uint64_t sem_off; /* its file offset (0 = none, or not in the file's data): the
			   * ref_ctr_offset the kernel counts attached probes at */
};

/*
 * Reads the USDT notes of the ELF object open at FD into a malloc'd array
 * *OUT of *N (free with usdt_notes_free).  A site outside any loadable
 * segment is left out.  Returns 0 (maybe with no notes), -ENOEXEC when FD
 * is not an ELF object, or -ENOMEM.
 */
int usdt_notes_read(int fd, struct usdt_note **out, size_t *n);

/* The note of PROVIDER:NAME among V[0..N), or NULL. */
const struct usdt_note *usdt_note_find(const struct usdt_note *v, size_t n, const char *provider,
				       const char *name);

void usdt_notes_free(struct usdt_note *v, size_t n);

#endif
