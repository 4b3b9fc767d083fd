/* Finds the NT_GNU_BUILD_ID note of an ELF object with libelf.  The id keys
 * the table cache, so this must cope with any bytes a file may hold: every
 * note is bounds-checked by gelf_getnote() and nothing is trusted beyond it. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#include <gelf.h>
#include <libelf.h>

#include "build_id.h"

static pthread_once_t libelf_once = PTHREAD_ONCE_INIT;

static void libelf_init(void)
{
	elf_version(EV_CURRENT);
}

/* Scans one block of notes; returns the id length, 0 if absent, -ENOBUFS. */
static int notes_find_build_id(Elf_Data *data, uint8_t *out, size_t cap)
{
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nhdr;

	if (!data || !data->d_buf)
		return 0;
	while ((next = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
		const char *base = data->d_buf;

		if (nhdr.n_type == NT_GNU_BUILD_ID && nhdr.n_namesz == sizeof(ELF_NOTE_GNU) &&
		    memcmp(base + name_off, ELF_NOTE_GNU, sizeof(ELF_NOTE_GNU)) == 0 &&
		    nhdr.n_descsz > 0) {
			if (nhdr.n_descsz > cap || nhdr.n_descsz > INT_MAX)
				return -ENOBUFS;
			memcpy(out, base + desc_off, nhdr.n_descsz);
			return (int)nhdr.n_descsz;
		}
		off = next;
	}
	return 0;
}

static int sections_find_build_id(Elf *elf, uint8_t *out, size_t cap)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	int ret;

	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		ret = notes_find_build_id(elf_getdata(scn, NULL), out, cap);
		if (ret != 0)
			return ret;
	}
	return 0;
}

static int segments_find_build_id(Elf *elf, uint8_t *out, size_t cap)
{
	size_t i, nphdrs;
	GElf_Phdr phdr;
	Elf_Data *data;
	int ret;

	if (elf_getphdrnum(elf, &nphdrs) != 0)
		return 0;
	for (i = 0; i < nphdrs; i++) {
		if (!gelf_getphdr(elf, (int)i, &phdr) || phdr.p_type != PT_NOTE ||
		    phdr.p_filesz == 0)
			continue;
		data = elf_getdata_rawchunk(elf, (int64_t)phdr.p_offset, phdr.p_filesz,
					    phdr.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
		ret = notes_find_build_id(data, out, cap);
		if (ret != 0)
			return ret;
	}
	return 0;
}

/* Sections when there are any (what readelf and eu-readelf trust), else
 * PT_NOTE segments (section headers stripped).  Consumes ELF. */
static int elf_find_build_id(Elf *elf, uint8_t *out, size_t cap)
{
	GElf_Ehdr ehdr;
	size_t nscns;
	int ret;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr)) {
		ret = -ENOEXEC;
		goto out;
	}
	if (elf_getshdrnum(elf, &nscns) == 0 && nscns > 0)
		ret = sections_find_build_id(elf, out, cap);
	else
		ret = segments_find_build_id(elf, out, cap);
out:
	elf_end(elf);
	return ret;
}

int elf_build_id_fd(int fd, uint8_t *out, size_t cap)
{
	struct stat st;
	Elf *elf;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	pthread_once(&libelf_once, libelf_init);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -EIO;
	return elf_find_build_id(elf, out, cap);
}

int elf_build_id_mem(const void *image, size_t size, uint8_t *out, size_t cap)
{
	Elf *elf;

	if (!image)
		return -EINVAL;
	pthread_once(&libelf_once, libelf_init);
	/* elf_memory() takes a mutable pointer for ELF_C_RDWR users; reading
	 * never writes to the image. */
	elf = elf_memory((char *)image, size);
	if (!elf)
		return -ENOMEM;
	return elf_find_build_id(elf, out, cap);
}
