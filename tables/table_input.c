/* Reads what a table is compiled from (an object's headers, CFI sections
 * and build id, and a separate debug file's .debug_frame) into buffers of
 * our own, checking every size before it is allocated, and digests those
 * bytes: the digest keys the cache, and the compile reads the same buffers,
 * so no entry can describe bytes other than the ones it was compiled from. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "build_id.h"
#include "cfi.h"
#include "table_input.h"
#include "table_serialize.h"

#define DIGEST_DOMAIN "dwleak table input" /* so no other SHA-256 use can collide */

static const char *const part_names[CFI_PART_COUNT] = {
	[CFI_PART_EH_FRAME] = ".eh_frame",
	[CFI_PART_EH_FRAME_HDR] = ".eh_frame_hdr",
	[CFI_PART_DEBUG_FRAME] = ".debug_frame",
};

/* Owned by root or the effective user, and writable by nobody else: only
 * those who could write our cache anyway can have chosen these bytes. */
static bool stat_trusted(const struct stat *st)
{
	return (st->st_uid == 0 || st->st_uid == geteuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* The type check every input file gets: regular and not empty. */
static int regular_check(const struct stat *st, const char *what)
{
	if (S_ISDIR(st->st_mode)) {
		table_set_error("%sis a directory, not an ELF object", what);
		return -EISDIR;
	}
	if (!S_ISREG(st->st_mode)) {
		table_set_error("%s%s, not a regular file", what,
				S_ISFIFO(st->st_mode) ? "is a FIFO (named pipe)"
				: S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ? "is a device"
									 : "is not a file");
		return -ENOEXEC;
	}
	if (st->st_size == 0) {
		table_set_error("%sempty file, not an ELF object", what);
		return -ENOEXEC;
	}
	return 0;
}

static void file_release(struct table_input_file *f)
{
	for (int i = 0; i < CFI_PART_COUNT; i++)
		elf_section_release(&f->sec[i]);
	elf_image_close(&f->img);
}

void table_input_release(struct table_input *in)
{
	file_release(&in->obj);
	if (in->have_dbg)
		file_release(&in->dbg);
	memset(in, 0, sizeof(*in));
}

/* Reads section PART of F, refusing one whose stored size exceeds LIMIT. */
static int part_read(struct table_input_file *f, enum table_cfi_part part, uint64_t limit)
{
	return elf_image_section(&f->img, part_names[part], limit, &f->sec[part]);
}

static int part_error(int err, const char *file, const char *name, uint64_t limit)
{
	if (err == -EFBIG)
		table_set_error("%s%s is larger than any real CFI section (over %llu bytes for this "
				"object's code); refusing",
				file, name, (unsigned long long)limit);
	else if (err == -EIO)
		table_set_error("%sthe file shrank while it was read", file);
	else if (err == -ENOMEM)
		table_set_error("out of memory");
	else
		table_set_error("%s%s lies outside the file (truncated?)", file, name);
	return err;
}

/* The bound of any CFI section of an object with IMG's code. */
static uint64_t cfi_limit_for(const struct elf_image *img)
{
	uint64_t limit = elf_image_code_bytes(img) * TABLE_CFI_PER_CODE_BYTE + TABLE_CFI_SLACK;

	return limit < TABLE_MAX_CFI_BYTES ? limit : TABLE_MAX_CFI_BYTES;
}

/* A section header for bytes found through a program header, so that the
 * compile and the digest see them as they see a section's. */
static Elf64_Shdr shdr_for(uint64_t addr, uint64_t off, uint64_t size)
{
	return (Elf64_Shdr){ .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC, .sh_addr = addr,
			     .sh_offset = off, .sh_size = size };
}

/* The PT_LOAD segment whose file bytes hold ADDR, or NULL. */
static const Elf64_Phdr *load_holding(const struct elf_image *img, uint64_t addr)
{
	for (size_t i = 0; i < img->phnum; i++) {
		const Elf64_Phdr *ph = &img->phdrs[i];

		if (ph->p_type == PT_LOAD && addr >= ph->p_vaddr && addr - ph->p_vaddr < ph->p_filesz)
			return ph;
	}
	return NULL;
}

/*
 * .eh_frame as the program's own unwinder finds it, for an object with no
 * .eh_frame section header (section headers stripped or zeroed: neither
 * the kernel nor the dynamic linker reads them, so such a program runs):
 * PT_GNU_EH_FRAME is the .eh_frame_hdr, whose eh_frame_ptr is .eh_frame's
 * address.  Nothing records .eh_frame's size, so it is taken to run to the
 * end of its PT_LOAD segment's file bytes (within the CFI bound); the
 * header's search table, or the section's zero terminator, ends the
 * reading before that.  Returns 0 (found or not), -EIO, -ENOMEM.
 */
static int eh_frame_from_phdrs(struct table_input *in)
{
	struct table_input_file *f = &in->obj;
	const Elf64_Phdr *hdr = NULL, *load;
	struct elf_section hb, eb;
	uint64_t frame, delta, size;
	size_t i;
	int err;

	for (i = 0; i < f->img.phnum && !hdr; i++)
		if (f->img.phdrs[i].p_type == PT_GNU_EH_FRAME)
			hdr = &f->img.phdrs[i];
	if (!hdr || hdr->p_filesz > in->cfi_limit)
		return 0;
	err = elf_image_bytes(&f->img, hdr->p_offset, hdr->p_filesz, &hb);
	if (err)
		return err == -ENOEXEC ? 0 : err;
	if (cfi_hdr_frame_addr(hb.data, hb.size, hdr->p_vaddr, &frame) || !(load = load_holding(&f->img, frame))) {
		elf_section_release(&hb);
		return 0;
	}
	delta = frame - load->p_vaddr;
	size = load->p_filesz - delta < in->cfi_limit ? load->p_filesz - delta : in->cfi_limit;
	err = load->p_offset + delta < load->p_offset ? -ENOEXEC
						       : elf_image_bytes(&f->img, load->p_offset + delta, size, &eb);
	if (err) {
		elf_section_release(&hb);
		return err == -ENOEXEC ? 0 : err;
	}
	hb.shdr = shdr_for(hdr->p_vaddr, hdr->p_offset, hdr->p_filesz);
	hb.addr = hdr->p_vaddr;
	eb.shdr = shdr_for(frame, load->p_offset + delta, size);
	eb.addr = frame;
	elf_section_release(&f->sec[CFI_PART_EH_FRAME_HDR]);
	f->sec[CFI_PART_EH_FRAME_HDR] = hb;
	f->sec[CFI_PART_EH_FRAME] = eb;
	return 0;
}

/* The object's part: headers, its three CFI sections, its build id. */
static int object_read(struct table_input *in)
{
	struct table_input_file *f = &in->obj;
	const char *why;
	int err;

	err = elf_image_check_object(&f->img, &why);
	if (err) {
		table_set_error("%s", why);
		return err;
	}
	in->cfi_limit = cfi_limit_for(&f->img);
	err = part_read(f, CFI_PART_EH_FRAME, in->cfi_limit);
	if (err && err != -ENOENT)
		return part_error(err, "", ".eh_frame", in->cfi_limit);
	err = part_read(f, CFI_PART_DEBUG_FRAME, in->cfi_limit);
	if (err && err != -ENOENT)
		return part_error(err, "", ".debug_frame", in->cfi_limit);
	/* A damaged .eh_frame_hdr only means scanning .eh_frame instead. */
	err = part_read(f, CFI_PART_EH_FRAME_HDR, in->cfi_limit);
	if (err == -EIO || err == -ENOMEM)
		return part_error(err, "", ".eh_frame_hdr", in->cfi_limit);
	err = f->sec[CFI_PART_EH_FRAME].data ? 0 : eh_frame_from_phdrs(in);
	if (err)
		return part_error(err, "", "PT_GNU_EH_FRAME", in->cfi_limit);
	err = elf_image_build_id(&f->img, in->build_id, sizeof(in->build_id));
	if (err == -EIO || err == -ENOMEM)
		return part_error(err, "", "a note", in->cfi_limit);
	in->build_id_len = err > 0 ? (uint32_t)err : 0;
	return 0;
}

uint8_t table_input_arch(const struct table_input *in)
{
	return (uint8_t)elf_machine_arch(in->obj.img.ehdr.e_machine); /* one elf_image_check_object took */
}

/* The debug file's part: its headers and .debug_frame, read and closed. */
static int debug_read(struct table_input *in, const char *path)
{
	struct table_input_file *f = &in->dbg;
	char *what = NULL;
	const char *why;
	struct stat st;
	int fd, err;

	/* O_NONBLOCK: a FIFO put where a debug file was found must not hang us. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		err = -errno;
		table_set_error("cannot read debug file %s: %s", path, strerror(-err));
		goto out;
	}
	if (asprintf(&what, "debug file %s: ", path) < 0) {
		what = NULL;
		err = -ENOMEM;
		table_set_error("out of memory");
		goto out;
	}
	err = regular_check(&st, what);
	if (err)
		goto out;
	f->trusted = stat_trusted(&st);
	err = elf_image_open_fd(&f->img, fd, (uint64_t)st.st_size, &why);
	err = err ?: elf_image_check_object(&f->img, &why);
	if (!err && f->img.ehdr.e_machine != in->obj.img.ehdr.e_machine) {
		why = "for another architecture than the object";
		err = -ENOEXEC;
	}
	if (err) {
		table_set_error("%s%s", what, why);
		elf_image_close(&f->img);
		goto out;
	}
	in->have_dbg = true;
	err = part_read(f, CFI_PART_DEBUG_FRAME, in->cfi_limit);
	if (err == -ENOENT)
		err = 0;
	else if (err)
		part_error(err, what, ".debug_frame", in->cfi_limit);
out:
	free(what);
	if (fd >= 0)
		close(fd);
	return err;
}

static int input_finish(struct table_input *in, const struct table_opts *opts)
{
	int err = object_read(in);

	if (!err && opts && opts->debug_path)
		err = debug_read(in, opts->debug_path);
	if (err)
		table_input_release(in);
	return err;
}

int table_input_read_fd(int fd, const struct table_opts *opts, struct table_input *in)
{
	const char *why;
	struct stat st;
	int err;

	memset(in, 0, sizeof(*in));
	if (fstat(fd, &st)) {
		err = -errno;
		table_set_error("%s", strerror(-err));
		return err;
	}
	err = regular_check(&st, "");
	if (err)
		return err;
	in->obj.trusted = stat_trusted(&st);
	err = elf_image_open_fd(&in->obj.img, fd, (uint64_t)st.st_size, &why);
	if (err) {
		table_set_error("%s", why);
		return err;
	}
	return input_finish(in, opts);
}

int table_input_read_mem(const void *image, size_t size, const struct table_opts *opts,
			 struct table_input *in)
{
	const char *why;
	int err;

	memset(in, 0, sizeof(*in));
	err = elf_image_open_mem(&in->obj.img, image, size, &why);
	if (err) {
		table_set_error("%s", why);
		return err;
	}
	return input_finish(in, opts);
}

bool table_input_trusted(const struct table_input *in)
{
	return in->obj.trusted && (!in->have_dbg || in->dbg.trusted);
}

static void digest_u64(struct sha256_ctx *h, uint64_t v)
{
	uint8_t le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(v >> (8 * i));
	sha256_update(h, sizeof(le), le);
}

/* LEN as a prefix, then the bytes: no two sequences of parts digest alike. */
static void digest_bytes(struct sha256_ctx *h, const void *p, uint64_t len)
{
	digest_u64(h, len);
	if (len)
		sha256_update(h, (size_t)len, p);
}

static void digest_file(struct sha256_ctx *h, const struct table_input_file *f)
{
	digest_bytes(h, &f->img.ehdr, sizeof(f->img.ehdr));
	digest_bytes(h, f->img.phdrs, f->img.phnum * sizeof(*f->img.phdrs));
	for (int i = 0; i < CFI_PART_COUNT; i++) {
		const struct elf_section *s = &f->sec[i];

		digest_u64(h, s->data != NULL);
		if (!s->data)
			continue;
		digest_bytes(h, &s->shdr, sizeof(s->shdr));
		digest_bytes(h, s->data, s->size);
	}
}

void table_input_digest(const struct table_input *in, uint8_t out[TABLE_INPUT_DIGEST_SIZE])
{
	struct sha256_ctx h;

	sha256_init(&h);
	digest_bytes(&h, DIGEST_DOMAIN, sizeof(DIGEST_DOMAIN));
	digest_u64(&h, TABLE_FORMAT_VERSION);
	digest_file(&h, &in->obj);
	digest_u64(&h, in->have_dbg);
	if (in->have_dbg)
		digest_file(&h, &in->dbg);
	digest_bytes(&h, in->build_id, in->build_id_len);
	sha256_digest(&h, TABLE_INPUT_DIGEST_SIZE, out);
}

/* Decompressed bytes of a CFI section that can produce rows. */
static uint64_t part_bytes(const struct elf_section *s, uint64_t limit)
{
	uint64_t n = s->data ? elf_section_claimed_size(s) : 0;

	return n < limit ? n : limit;
}

/*
 * A row starts where an FDE or one of its advance instructions (at least
 * one byte each) puts it, and ends where the next starts or at a gap, so a
 * table has at most two rows per byte of CFI, plus the row each page
 * restates; pages are bounded by the PT_LOAD extent, rules by the rows.
 */
uint64_t table_input_max_serialized(const struct table_input *in)
{
	uint64_t cfi, pages = 0, lo, hi, rules;

	cfi = part_bytes(&in->obj.sec[CFI_PART_EH_FRAME], in->cfi_limit) +
	      part_bytes(&in->obj.sec[CFI_PART_DEBUG_FRAME], in->cfi_limit);
	if (in->have_dbg)
		cfi += part_bytes(&in->dbg.sec[CFI_PART_DEBUG_FRAME], in->cfi_limit);
	if (elf_image_load_extent(&in->obj.img, &lo, &hi) && hi > lo)
		pages = ((hi - 1) >> UNWIND_PAGE_SHIFT) - (lo >> UNWIND_PAGE_SHIFT) + 1;
	if (pages > TABLE_MAX_PAGES)
		pages = TABLE_MAX_PAGES;
	rules = cfi + 1 < UNWIND_MAX_RULES ? cfi + 1 : UNWIND_MAX_RULES;
	return table_serialized_size(pages, 2 * cfi + pages, rules);
}
