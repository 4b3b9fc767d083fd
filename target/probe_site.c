/* The probe-site decoder: the few x86_64 instruction forms that may come
 * before the site are recognised exactly; anything else keeps the probe
 * at the function's entry. */
#include <string.h>

#include "probe_site.h"

static const uint8_t endbr64[] = { 0xf3, 0x0f, 0x1e, 0xfa };
static const uint8_t test_rdi[] = { 0x48, 0x85, 0xff }; /* test %rdi,%rdi */

/* Length of `push %reg` (50+r, or 41 50+r for r8-r15) at P, or 0. */
static size_t push_len(const uint8_t *p, size_t left)
{
	if (left >= 1 && p[0] >= 0x50 && p[0] <= 0x57)
		return 1;
	if (left >= 2 && p[0] == 0x41 && p[1] >= 0x50 && p[1] <= 0x57)
		return 2;
	return 0;
}

/* Length of `je rel8` / `je rel32` at P, or 0. */
static size_t je_len(const uint8_t *p, size_t left)
{
	if (left >= 2 && p[0] == 0x74)
		return 2;
	if (left >= 6 && p[0] == 0x0f && p[1] == 0x84)
		return 6;
	return 0;
}

void probe_site_pick(const uint8_t *code, size_t len, struct probe_site *out)
{
	size_t off = 0, n;

	out->offset = 0;
	if (push_len(code, len)) {
		out->why = "entry: its first instruction (push) is emulated";
		return;
	}
	if (len >= sizeof(endbr64) && !memcmp(code, endbr64, sizeof(endbr64)))
		off += sizeof(endbr64);
	if (len - off >= sizeof(test_rdi) && !memcmp(code + off, test_rdi, sizeof(test_rdi))) {
		off += sizeof(test_rdi);
		n = je_len(code + off, len - off);
		if (n && push_len(code + off + n, len - off - n)) {
			out->offset = off + n;
			out->why = "past the NULL check (test %rdi,%rdi; je), at the emulated push "
				   "every non-NULL call reaches; rdi and rsp as at entry";
			return;
		}
	}
	out->why = "entry: no emulated instruction before the arguments could change";
}
