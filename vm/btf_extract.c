/* The kernel's BTF out of an arm64 kernel Image, on any host: what `make
 * ARCH=arm64` compiles the BPF programs against (bpftool turns it into
 * vmlinux.h), without booting the kernel.  Debian's arm64 vmlinuz is the
 * raw Image (an EFI stub, not ELF, not compressed), whose .BTF section
 * lies in it as is; its header is found by its magic and checked, and the
 * one candidate that passes is written out (the same bytes as the booted
 * kernel's /sys/kernel/btf/vmlinux: 4,831,546 of them for 6.1.0-56).
 * Usage: btf_extract IMAGE OUT.  Exit 0, or 2 with a message. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* struct btf_header (include/uapi/linux/btf.h), little-endian */
#define BTF_MAGIC_LE "\x9f\xeb"
#define BTF_HEADER_LEN 24u

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The whole BTF blob's length when a valid header starts at P (LEFT bytes
 * to the end of the image), else 0: version 1, no flags, a 24-byte header,
 * types first and strings right after them, strings starting with the
 * empty string, all inside the image. */
static uint64_t btf_at(const unsigned char *p, uint64_t left)
{
	uint32_t hdr_len, type_off, type_len, str_off, str_len;
	uint64_t total;

	if (left < BTF_HEADER_LEN || memcmp(p, BTF_MAGIC_LE, 2) || p[2] != 1 || p[3] != 0)
		return 0;
	hdr_len = le32(p + 4);
	type_off = le32(p + 8);
	type_len = le32(p + 12);
	str_off = le32(p + 16);
	str_len = le32(p + 20);
	if (hdr_len != BTF_HEADER_LEN || type_off != 0 || type_len == 0 || str_off != type_len || str_len == 0)
		return 0;
	total = (uint64_t)hdr_len + str_off + str_len;
	if (total > left || p[hdr_len + str_off] != 0 || p[total - 1] != 0)
		return 0;
	return total;
}

int main(int argc, char **argv)
{
	const unsigned char *hit = NULL;
	unsigned char *img;
	uint64_t len = 0, cap = 1 << 24, i, found = 0, n = 0, blob = 0;
	size_t got;
	FILE *in, *out;

	if (argc != 3) {
		fprintf(stderr, "usage: btf_extract IMAGE OUT  (IMAGE: an arm64 kernel Image, e.g. Debian's /boot/vmlinuz-*-arm64)\n");
		return 2;
	}
	if (!(in = fopen(argv[1], "rb"))) {
		fprintf(stderr, "btf_extract: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	img = malloc(cap);
	while (img && (got = fread(img + len, 1, cap - len, in)) > 0) {
		len += got;
		if (len == cap && !(img = realloc(img, cap *= 2)))
			break;
	}
	fclose(in);
	if (!img) {
		fprintf(stderr, "btf_extract: out of memory reading %s\n", argv[1]);
		return 2;
	}
	if (len >= 2 && img[0] == 0x1f && img[1] == 0x8b) {
		fprintf(stderr, "btf_extract: %s is gzip-compressed: give the uncompressed Image (zcat it first)\n", argv[1]);
		return 2;
	}
	for (i = 0; i + BTF_HEADER_LEN <= len; i++) {
		uint64_t t;

		if (img[i] != 0x9f || !(t = btf_at(img + i, len - i)))
			continue;
		if (!n++) {
			hit = img + i;
			found = i;
			blob = t;
		}
	}
	if (n != 1) {
		fprintf(stderr, "btf_extract: %s: %s BTF header found: is it a kernel built with CONFIG_DEBUG_INFO_BTF?\n",
			argv[1], n ? "more than one" : "no");
		return 2;
	}
	if (!(out = fopen(argv[2], "wb")) || fwrite(hit, 1, blob, out) != blob || fclose(out)) {
		fprintf(stderr, "btf_extract: writing %s: %s\n", argv[2], strerror(errno));
		return 2;
	}
	fprintf(stderr, "btf_extract: %llu bytes of BTF at offset %llu of %s\n", (unsigned long long)blob,
		(unsigned long long)found, argv[1]);
	free(img);
	return 0;
}
