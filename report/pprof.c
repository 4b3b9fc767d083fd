/* The pprof writer: the leak report encoded by hand as a profile.proto
 * message (protobuf.c: varints and length-delimited fields) and
 * gzip-compressed with zlib, so dwleak needs no protobuf library.  Samples
 * carry labels users filter by (-tagfocus, Pyroscope and Parca queries):
 * allocator, pid, command and comm, and with a leak check leak_kind.  The
 * same bytes go to a file (report_write_pprof) or to memory
 * (report_pprof_encode: the agent's /debug/pprof/heap). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>
#include <gelf.h>
#include <libelf.h>
#include <zlib.h>

#include "constants.h"
#include "intern.h"
#include "pprof.h"
#include "protobuf.h"
#include "report_internal.h"

/* Field numbers of perftools.profiles (github.com/google/pprof, proto/profile.proto). */
enum profile_field {
	PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4, PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS = 10, PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12, PROFILE_COMMENT = 13, PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};
enum value_type_field { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2 };
enum sample_field { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3 };
enum label_field { LABEL_KEY = 1, LABEL_STR = 2 };
enum mapping_field {
	MAPPING_ID = 1, MAPPING_MEMORY_START = 2, MAPPING_MEMORY_LIMIT = 3,
	MAPPING_FILE_OFFSET = 4, MAPPING_FILENAME = 5, MAPPING_BUILD_ID = 6,
	MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9, MAPPING_HAS_INLINE_FRAMES = 10,
};
enum location_field { LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3, LOCATION_LINE = 4 };
enum line_field { LINE_FUNCTION_ID = 1, LINE_LINE = 2 };
enum function_field { FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4 };

/* Approximated mappings (see mapping_approximate()) cover whole pages. */

/* ---- The profile under construction ---- */

/*
 * One mapping per (module, load bias).  BIAS = address - elf_address of its
 * frames; ELF_MIN/ELF_MAX bound their ELF addresses.  The HAS_* flags say
 * whether dwleak named any of its locations (see mappings_finish()).
 */
struct mapping {
	const char *module, *build_id;
	uint64_t bias, elf_min, elf_max;
	uint64_t start, limit, offset; /* set by mappings_finish() */
	bool has_functions, has_filenames, has_line_numbers;
	uint64_t id;                   /* 1-based, main binary first */
};

/*
 * STRINGS is the string table ("" is id 0).  FUNCTIONS' keys are three
 * uint32 string ids (name, system name, file).  LOCATIONS' keys are packed
 * native-endian fields with no padding: the mapping (index + 1, 0 = none,
 * uint32) and the address (uint64), then per Line the function (intern id,
 * uint32) and the line (int64).  MAPPINGS[i] belongs to MAPPING_KEYS' key i
 * and MAPPING_ORDER[id - 1] is the index of mapping ID.  Every id in the
 * profile is the intern id + 1 (0 is reserved).
 */
/* A process's name for the comm label, looked up by pid. */
struct comm_entry {
	int pid;
	const char *comm;
};

struct profile {
	struct intern strings, functions, locations, mapping_keys;
	struct comm_entry *comms;    /* R's processes with a comm, by pid */
	size_t ncomms;
	struct mapping *mappings;
	size_t nmappings, mappings_cap;
	size_t *mapping_order;
	struct pb_buf samples;       /* the encoded Sample fields */
	struct pb_buf msg, sub;      /* scratch for embedded messages */
	/* location_memo(): frame groups by the identity of their strings */
	struct intern memo;
	uint32_t *memo_loc;          /* MEMO id -> location intern id */
	size_t memo_cap;
	struct pb_buf memo_key;
	/* label strings by their pointer: every sample has a few labels,
	 * whose strings (the report's, or literals) are shared by thousands
	 * of samples and stay put while it is encoded */
	struct {
		const char *s;
		long id;
	} label_ids[64];
	int last_pid;		     /* the last pid label's value, and its id */
	long last_pid_id;
};

#define LOC_HEAD_SIZE (sizeof(uint32_t) + sizeof(uint64_t))
#define LOC_LINE_SIZE (sizeof(uint32_t) + sizeof(int64_t))

static void profile_free(struct profile *p)
{
	intern_free(&p->strings);
	intern_free(&p->functions);
	intern_free(&p->locations);
	intern_free(&p->mapping_keys);
	free(p->mappings);
	free(p->mapping_order);
	free(p->comms);
	intern_free(&p->memo);
	free(p->memo_loc);
	pb_buf_free(&p->memo_key);
	pb_buf_free(&p->samples);
	pb_buf_free(&p->msg);
	pb_buf_free(&p->sub);
}

/* Returns the string table index of S (NULL counts as ""), or -ENOMEM. */
static long str_id(struct profile *p, const char *s)
{
	return intern_get(&p->strings, s ? s : "", s ? strlen(s) : 0);
}

/* Returns the index of FR's mapping, adding or widening it; or -ENOMEM. */
static long mapping_of(struct profile *p, const struct report_frame *fr)
{
	uint64_t bias = fr->address - fr->elf_address;
	struct pb_buf *key = &p->sub; /* free until sample_add() adds labels */
	struct mapping *m;
	long id;

	key->len = 0;
	pb_buf_put(key, fr->module, strlen(fr->module) + 1);
	pb_buf_put(key, &bias, sizeof(bias));
	id = key->oom ? -ENOMEM : intern_get(&p->mapping_keys, key->data, key->len);
	key->len = 0;
	if (id < 0)
		return id;
	if ((size_t)id == p->nmappings && p->nmappings == p->mappings_cap) {
		size_t cap = p->mappings_cap ? p->mappings_cap * 2 : 16;
		struct mapping *v = realloc(p->mappings, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->mappings = v;
		p->mappings_cap = cap;
	}
	m = &p->mappings[id];
	if ((size_t)id == p->nmappings) {
		*m = (struct mapping){ .module = fr->module, .bias = bias,
				       .elf_min = fr->elf_address, .elf_max = fr->elf_address };
		p->nmappings++;
	}
	if (!m->build_id)
		m->build_id = fr->build_id;
	if (fr->elf_address < m->elf_min)
		m->elf_min = fr->elf_address;
	if (fr->elf_address > m->elf_max)
		m->elf_max = fr->elf_address;
	return id;
}

/* Returns the function id (intern id) of FR, or -ENOMEM. */
static long function_of(struct profile *p, const struct report_frame *fr)
{
	long name = str_id(p, fr->function), file = str_id(p, fr->file);
	uint32_t key[3];

	if (name < 0 || file < 0)
		return -ENOMEM;
	/* dwleak has only the demangled name; it serves as both. */
	key[0] = key[1] = (uint32_t)name;
	key[2] = (uint32_t)file;
	return intern_get(&p->functions, key, sizeof(key));
}

/*
 * Returns the location id (intern id) of FRAMES[0..N): a physical frame
 * (the last) and the frames inlined into it, innermost first; or -ENOMEM.
 */
static long location_of(struct profile *p, const struct report_frame *frames, size_t n)
{
	const struct report_frame *phys = &frames[n - 1];
	struct pb_buf *key = &p->msg;
	uint32_t mapping = 0;
	long id;

	if (phys->module) {
		long m = mapping_of(p, phys);

		if (m < 0)
			return m;
		mapping = (uint32_t)m + 1;
	}
	key->len = 0;
	pb_buf_put(key, &mapping, sizeof(mapping));
	pb_buf_put(key, &phys->address, sizeof(phys->address));
	for (size_t i = 0; i < n; i++) {
		const struct report_frame *fr = &frames[i];
		int64_t line = fr->line > 0 ? fr->line : 0;
		uint32_t fn32;
		long fn;

		if (!fr->function)
			continue;
		fn = function_of(p, fr);
		if (fn < 0)
			return fn;
		fn32 = (uint32_t)fn;
		pb_buf_put(key, &fn32, sizeof(fn32));
		pb_buf_put(key, &line, sizeof(line));
		if (mapping) {
			struct mapping *m = &p->mappings[mapping - 1];

			m->has_functions = true;
			m->has_filenames |= fr->file != NULL;
			m->has_line_numbers |= fr->line > 0;
		}
	}
	id = key->oom ? -ENOMEM : intern_get(&p->locations, key->data, key->len);
	key->len = 0;
	return id;
}

/*
 * location_of() remembered by what the frames point to rather than what
 * they say: the same group of frames (same address, same module, build id,
 * function and file strings by pointer, same lines) is the same Location,
 * found without reading a string.  Reports made by a live trace share
 * their names (one string per object and symbol), so most frames of 10,000
 * stacks are found here; frames with equal strings at other addresses
 * take location_of() and still get the one Location.
 */
static long location_memo(struct profile *p, const struct report_frame *frames, size_t n)
{
	struct pb_buf *key = &p->memo_key;
	size_t known;
	long m, id;

	struct memo_frame {
		uint64_t address, elf_address;
		const void *ptrs[4];
		int64_t line;
	} *k;

	/* the key written in place: this runs for every frame of every stack */
	key->len = 0;
	k = pb_buf_append(key, n * sizeof(*k));
	if (!k)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct report_frame *fr = &frames[i];
		struct memo_frame f = { fr->address, fr->elf_address, { fr->module, fr->build_id, fr->function, fr->file },
					fr->line };

		memcpy(&k[i], &f, sizeof(f));
	}
	known = p->memo.n;
	m = intern_get(&p->memo, key->data, key->len);
	if (m < 0)
		return m;
	if ((size_t)m < known)
		return p->memo_loc[m];
	/* new: an -ENOMEM from here on ends the whole profile, so an entry
	 * without its location is never looked up again */
	if ((size_t)m >= p->memo_cap) {
		size_t cap = p->memo_cap ? p->memo_cap * 2 : 1024;
		uint32_t *v = realloc(p->memo_loc, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->memo_loc = v;
		p->memo_cap = cap;
	}
	id = location_of(p, frames, n);
	if (id >= 0)
		p->memo_loc[m] = (uint32_t)id;
	return id;
}

/* str_id() of S, a string that stays put while the profile is made, found
 * by its pointer when it was asked for before. */
static long label_str_id(struct profile *p, const char *s)
{
	size_t slot = ((uintptr_t)s >> 3 ^ (uintptr_t)s >> 9) & (sizeof(p->label_ids) / sizeof(p->label_ids[0]) - 1);
	long id;

	if (s && p->label_ids[slot].s == s)
		return p->label_ids[slot].id;
	id = str_id(p, s);
	if (s && id >= 0)
		p->label_ids[slot].s = s, p->label_ids[slot].id = id;
	return id;
}

static int label_add_id(struct profile *p, const char *key, long v)
{
	long k = label_str_id(p, key);

	if (k < 0 || v < 0)
		return -ENOMEM;
	pb_uint(&p->sub, LABEL_KEY, (uint64_t)k);
	pb_uint(&p->sub, LABEL_STR, (uint64_t)v);
	pb_message(&p->msg, SAMPLE_LABEL, &p->sub);
	return 0;
}

static int label_add(struct profile *p, const char *key, const char *value)
{
	return label_add_id(p, key, label_str_id(p, value));
}

static int comm_cmp(const void *a, const void *b)
{
	const struct comm_entry *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Indexes the comm of each of R's processes that has one, by pid (a report
 * of 10,000 stacks from 200 processes looks one up per stack). */
static int comms_index(struct profile *p, const struct report *r)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nprocesses; i++)
		n += r->processes[i].comm != NULL;
	if (!n)
		return 0;
	p->comms = malloc(n * sizeof(*p->comms));
	if (!p->comms)
		return -ENOMEM;
	for (size_t i = 0; i < r->nprocesses; i++)
		if (r->processes[i].comm)
			p->comms[p->ncomms++] = (struct comm_entry){ r->processes[i].pid, r->processes[i].comm };
	qsort(p->comms, p->ncomms, sizeof(*p->comms), comm_cmp);
	return 0;
}

/* The comm of process PID, NULL when R gave none. */
static const char *comm_of(const struct profile *p, int pid)
{
	struct comm_entry key = { pid, NULL }, *e;

	if (!p->ncomms)
		return NULL;
	e = bsearch(&key, p->comms, p->ncomms, sizeof(key), comm_cmp);
	return e ? e->comm : NULL;
}

/* The labels of a sample of stack S of R, part PART: its allocator, how its
 * walk ended, the process when the stack names one (its comm when R's
 * processes give it), the leak kind. */
static int labels_add(struct profile *p, const struct report *r, const struct report_stack *s,
		      const struct report_part *part)
{
	const char *comm;
	char pid[16];
	int err = 0;

	if (s->allocator && (err = label_add(p, "allocator", s->allocator)))
		return err;
	if (s->truncated && (err = label_add(p, "truncated", "true")))
		return err;
	if (s->unwind_error && (err = label_add(p, "unwind_error", s->unwind_error)))
		return err;
	if (s->pid || s->command) {
		/* a stack buffer: by value, not by pointer */
		if (!p->last_pid_id || p->last_pid != report_stack_pid(r, s)) {
			p->last_pid = report_stack_pid(r, s);
			snprintf(pid, sizeof(pid), "%d", p->last_pid);
			p->last_pid_id = str_id(p, pid);
		}
		if ((err = label_add_id(p, "pid", p->last_pid_id)))
			return err;
		if (report_stack_command(r, s) &&
		    (err = label_add(p, "command", report_stack_command(r, s))))
			return err;
		comm = comm_of(p, report_stack_pid(r, s));
		if (comm && (err = label_add(p, "comm", comm)))
			return err;
	}
	if (part->kind == REPORT_PART_UNCLASSIFIED)
		err = label_add(p, "leak_kind", "unclassified");
	else if (part->kind < REPORT_LEAK_KIND_COUNT)
		err = label_add(p, "leak_kind", report_leak_kind_names[part->kind]);
	return err;
}

/* Appends the Samples of stack S of R to P->samples: one, or with a leak
 * check one per kind that holds bytes (labelled leak_kind), sharing the
 * locations. */
static int sample_add(struct profile *p, const struct report *r, const struct report_stack *s)
{
	struct report_part parts[REPORT_PARTS_MAX];
	uint64_t *ids = NULL, values[2];
	size_t n = 0, i, j, k, nparts = report_stack_parts(r, s, parts);
	int err = 0;

	/* without a leak check a stack with nothing outstanding keeps its sample */
	if (!nparts && !r->leak_check.present)
		nparts = 1;
	if (s->nframes) {
		ids = malloc(s->nframes * sizeof(*ids));
		if (!ids)
			return -ENOMEM;
	}
	/* Frames I..J: inlined frames, then the physical frame at their address. */
	for (i = 0; i < s->nframes; i = j + 1) {
		long id;

		for (j = i; j + 1 < s->nframes && s->frames[j].inlined &&
			    s->frames[j + 1].address == s->frames[j].address; j++)
			;
		id = location_memo(p, &s->frames[i], j - i + 1);
		if (id < 0) {
			err = (int)id;
			goto out;
		}
		ids[n++] = (uint64_t)id + 1;
	}
	for (k = 0; k < nparts && !err; k++) {
		values[0] = parts[k].count.allocations;
		values[1] = parts[k].count.bytes;
		pb_packed(&p->msg, SAMPLE_LOCATION_ID, ids, n);
		/* Packed, so a zero value still takes its place. */
		pb_packed(&p->msg, SAMPLE_VALUE, values, 2);
		err = labels_add(p, r, s, &parts[k]);
		pb_message(&p->samples, PROFILE_SAMPLE, &p->msg);
	}
out:
	free(ids);
	return err;
}

/* ---- Mapping bounds ---- */

/*
 * Sets M's bounds to the PT_LOAD segment of M->module that holds all its
 * frames: start = bias + p_vaddr, limit = start + p_memsz, file_offset =
 * p_offset, not rounded to pages, because the two pprofs map back
 * differently and this satisfies both:
 *  - google/pprof (binutils.go, elfexec.GetBase) finds the segment whose
 *    file range holds file_offset and computes the load bias as
 *    start - file_offset + p_offset - p_vaddr = M->bias;
 *  - `go tool pprof` (cmd/pprof's objTool) ignores file_offset and uses
 *    start - p_vaddr of the first executable segment, which is M->bias too
 *    for frames in that segment, even when p_vaddr is not page-aligned
 *    (lld), where a page-aligned start would be off by p_vaddr % 4096.
 * Returns false when the file is gone, is not ELF, has another build id,
 * or no segment holds the frames.
 */
static bool mapping_from_elf(struct mapping *m)
{
	bool found = false;
	size_t nphdr, i;
	Elf *elf = NULL;
	int fd;

	elf_version(EV_CURRENT);
	fd = open(m->module, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	elf = elf_begin(fd, ELF_C_READ, NULL); /* read, not mapped: no SIGBUS */
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nphdr))
		goto out;
	if (m->build_id) {
		const void *bits;
		ssize_t len = dwelf_elf_gnu_build_id(elf, &bits);
		char hex[3];

		if (len <= 0 || strlen(m->build_id) != (size_t)len * 2)
			goto out;
		for (ssize_t k = 0; k < len; k++) {
			snprintf(hex, sizeof(hex), "%02x", ((const uint8_t *)bits)[k]);
			if (memcmp(hex, m->build_id + 2 * k, 2))
				goto out;
		}
	}
	for (i = 0; i < nphdr && !found; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (m->elf_min < ph.p_vaddr || m->elf_max >= ph.p_vaddr + ph.p_memsz)
			continue;
		m->start = m->bias + ph.p_vaddr;
		m->limit = m->start + ph.p_memsz;
		m->offset = ph.p_offset;
		found = true;
	}
out:
	elf_end(elf);
	close(fd);
	return found;
}

/*
 * Without the module's program headers: the pages that hold the frames seen,
 * with file_offset = the ELF address of the first page.  That assumes the
 * segment's p_offset equals its p_vaddr, which holds for the executable
 * segment of x86_64 shared libraries and PIEs as GNU ld lays them out
 * (google/pprof then computes base = start - file_offset = M->bias), but
 * not for a non-PIE executable (p_vaddr = p_offset + 0x400000), where it
 * finds no segment at that offset, nor for `go tool pprof`, which uses
 * start - p_vaddr of the executable segment.  Either can then re-symbolize
 * wrongly or not at all, which matters only for a mapping none of whose
 * frames dwleak could name (with a name, pprof keeps dwleak's), and only
 * when the file is readable where pprof runs but was not where dwleak ran.
 */
static void mapping_approximate(struct mapping *m)
{
	m->start = m->bias + DWLEAK_PAGE_DOWN(m->elf_min);
	m->limit = m->bias + DWLEAK_PAGE_DOWN(m->elf_max + DWLEAK_PAGE_SIZE);
	m->offset = DWLEAK_PAGE_DOWN(m->elf_min);
}

/* pprof's notion of a shared library (its libRx): "x.so" or "x.so.N...". */
static bool is_shared_library(const char *path)
{
	const char *base = strrchr(path, '/'), *so;

	base = base ? base + 1 : path;
	so = strstr(base, ".so");
	return so && (so[3] == '\0' || so[3] == '.' || so[3] == '_');
}

/* Sets every mapping's bounds and its id: the main executable first (pprof
 * takes mapping 1 as the program), the rest in order of appearance. */
static int mappings_finish(struct profile *p)
{
	size_t n = p->nmappings, i;
	uint64_t id = 0;

	if (!n)
		return 0;
	p->mapping_order = malloc(n * sizeof(*p->mapping_order));
	if (!p->mapping_order)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (!mapping_from_elf(&p->mappings[i]))
			mapping_approximate(&p->mappings[i]);
	}
	for (i = 0; i < n; i++) {
		if (!is_shared_library(p->mappings[i].module)) {
			p->mappings[i].id = ++id;
			p->mapping_order[id - 1] = i;
			break;
		}
	}
	for (i = 0; i < n; i++) {
		if (!p->mappings[i].id) {
			p->mappings[i].id = ++id;
			p->mapping_order[id - 1] = i;
		}
	}
	return 0;
}

/* ---- The Profile message ---- */

static void mappings_encode(struct profile *p, struct pb_buf *out)
{
	for (size_t i = 0; i < p->nmappings; i++) {
		const struct mapping *m = &p->mappings[p->mapping_order[i]];
		pb_uint(&p->msg, MAPPING_ID, m->id);
		pb_uint(&p->msg, MAPPING_MEMORY_START, m->start);
		pb_uint(&p->msg, MAPPING_MEMORY_LIMIT, m->limit);
		pb_uint(&p->msg, MAPPING_FILE_OFFSET, m->offset);
		/* Both strings were interned in report_write_pprof(). */
		pb_uint(&p->msg, MAPPING_FILENAME, (uint64_t)str_id(p, m->module));
		pb_uint(&p->msg, MAPPING_BUILD_ID, (uint64_t)str_id(p, m->build_id));
		/*
		 * "Any", not "all": a mapping with these unset is re-symbolized
		 * by pprof from the file on its own disk, replacing every name
		 * dwleak gave (from separate debug files pprof does not look
		 * for).  Frames dwleak could not name stay bare addresses.
		 */
		pb_uint(&p->msg, MAPPING_HAS_FUNCTIONS, m->has_functions);
		pb_uint(&p->msg, MAPPING_HAS_FILENAMES, m->has_filenames);
		pb_uint(&p->msg, MAPPING_HAS_LINE_NUMBERS, m->has_line_numbers);
		pb_uint(&p->msg, MAPPING_HAS_INLINE_FRAMES, m->has_functions);
		pb_message(out, PROFILE_MAPPING, &p->msg);
	}
}

static void locations_encode(struct profile *p, struct pb_buf *out)
{
	for (size_t i = 0; i < p->locations.n; i++) {
		const struct ikey *k = &p->locations.keys[i];
		size_t nlines = (k->len - LOC_HEAD_SIZE) / LOC_LINE_SIZE;
		uint32_t mapping;
		uint64_t address;

		memcpy(&mapping, k->bytes, sizeof(mapping));
		memcpy(&address, k->bytes + sizeof(mapping), sizeof(address));
		pb_uint(&p->msg, LOCATION_ID, i + 1);
		if (mapping)
			pb_uint(&p->msg, LOCATION_MAPPING_ID, p->mappings[mapping - 1].id);
		pb_uint(&p->msg, LOCATION_ADDRESS, address);
		for (size_t j = 0; j < nlines; j++) {
			const uint8_t *l = k->bytes + LOC_HEAD_SIZE + j * LOC_LINE_SIZE;
			uint32_t fn;
			int64_t line;

			memcpy(&fn, l, sizeof(fn));
			memcpy(&line, l + sizeof(fn), sizeof(line));
			pb_uint(&p->sub, LINE_FUNCTION_ID, (uint64_t)fn + 1);
			pb_uint(&p->sub, LINE_LINE, (uint64_t)line);
			pb_message(&p->msg, LOCATION_LINE, &p->sub);
		}
		pb_message(out, PROFILE_LOCATION, &p->msg);
	}
}

static void functions_encode(struct profile *p, struct pb_buf *out)
{
	for (size_t i = 0; i < p->functions.n; i++) {
		uint32_t key[3];

		memcpy(key, p->functions.keys[i].bytes, sizeof(key));
		pb_uint(&p->msg, FUNCTION_ID, i + 1);
		pb_uint(&p->msg, FUNCTION_NAME, key[0]);
		pb_uint(&p->msg, FUNCTION_SYSTEM_NAME, key[1]);
		pb_uint(&p->msg, FUNCTION_FILENAME, key[2]);
		pb_message(out, PROFILE_FUNCTION, &p->msg);
	}
}

#define COMMENTS_MAX 6

/* The leak check's totals, one comment: "leak check: definitely_lost 1448
 * bytes in 8 allocations, ...". */
static char *leak_comment(const struct report_leak_check *lc)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m)
		return NULL;
	fputs("leak check:", m);
	for (int k = 0; k < REPORT_LEAK_KIND_COUNT; k++)
		fprintf(m, "%s %s %" PRIu64 " bytes in %" PRIu64 " allocations", k ? "," : "",
			report_leak_kind_names[k], lc->kinds[k].bytes, lc->kinds[k].allocations);
	if (fclose(m)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* The processes not traced, one comment: "not traced (...): 2 processes:
 * pid 7 (/bin/busybox sh): no object it maps defines malloc; ...", every
 * one listed. */
static char *untraced_comment(const struct report *r)
{
	char *buf = NULL;
	size_t len = 0, i, n;
	FILE *m = open_memstream(&buf, &len);
	const char *sep = ": ";

	if (!m)
		return NULL;
	n = report_untraced_count(r);
	fprintf(m, "not traced (what %s allocated is not in this profile): %zu process%s", n == 1 ? "it" : "they",
		n, n == 1 ? "" : "es");
	for (i = 0; i < r->nprocesses; i++) {
		const struct report_process *p = &r->processes[i];

		if (report_process_traced(p))
			continue;
		fprintf(m, "%spid %d (%s): %s", sep, p->pid, p->command ? p->command : "?",
			p->reason ? p->reason : "?");
		sep = "; ";
	}
	if (fclose(m)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Interns the comments of R into IDS (at most COMMENTS_MAX); returns how
 * many or -ENOMEM. */
static int comments_intern(struct profile *p, const struct report *r, size_t shown,
			   long ids[COMMENTS_MAX])
{
	const struct report_totals *t = &r->totals;
	char *text[COMMENTS_MAX];
	int n = 0, i;
	bool ok = true;

	/* asprintf leaves its pointer undefined on failure. */
	if (asprintf(&text[n], "dwleak: pid %d, command %s", r->pid,
		     r->command ? r->command : "(unknown)") < 0)
		text[n] = NULL;
	n++;
	if (asprintf(&text[n], "unwind: %s", r->unwind ? r->unwind : "dwarf") < 0)
		text[n] = NULL;
	n++;
	if (asprintf(&text[n], "outstanding: %" PRIu64 " bytes in %" PRIu64 " allocations from %"
		     PRIu64 " stacks; %zu stacks in this profile", t->outstanding_bytes,
		     t->outstanding_allocations, t->stacks, shown) < 0)
		text[n] = NULL;
	n++;
	if (asprintf(&text[n], "lost: %" PRIu64 " dropped events, %" PRIu64 " truncated stacks, %"
		     PRIu64 " unwind errors", t->dropped_events, t->truncated_stacks,
		     t->unwind_errors) < 0)
		text[n] = NULL;
	n++;
	if (r->leak_check.present)
		text[n++] = leak_comment(&r->leak_check);
	if (report_untraced_count(r))
		text[n++] = untraced_comment(r);
	for (i = 0; i < n; i++) {
		if (!text[i] || (ids[i] = str_id(p, text[i])) < 0)
			ok = false;
		free(text[i]);
	}
	return ok ? n : -ENOMEM;
}

static int64_t time_nanos(const struct report *r)
{
	struct timespec ts;

	if (r->timestamp)
		return (int64_t)r->timestamp * 1000000000;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Encodes the Profile message of R into OUT. */
static int profile_encode(const struct report *r, unsigned int top, struct pb_buf *out)
{
	const struct report_stack **order = NULL;
	struct profile p = { 0 };
	long inuse_objects, inuse_space, count, bytes, space, comments[COMMENTS_MAX];
	size_t shown = 0, i;
	int ncomments, err = 0;

	/* "" must be string 0; then the sample and period types. */
	if (str_id(&p, "") != 0 ||
	    (inuse_objects = str_id(&p, "inuse_objects")) < 0 || (count = str_id(&p, "count")) < 0 ||
	    (inuse_space = str_id(&p, "inuse_space")) < 0 || (bytes = str_id(&p, "bytes")) < 0 ||
	    (space = str_id(&p, "space")) < 0) {
		err = -ENOMEM;
		goto out;
	}
	err = report_stacks_ordered(r, &order);
	if (!err)
		err = comms_index(&p, r);
	if (err)
		goto out;
	shown = top && top < r->nstacks ? top : r->nstacks;
	for (i = 0; i < shown; i++) {
		if ((err = sample_add(&p, r, order[i])))
			goto out;
	}
	if ((err = mappings_finish(&p)))
		goto out;
	for (i = 0; i < p.nmappings; i++) {
		if (str_id(&p, p.mappings[i].module) < 0 || str_id(&p, p.mappings[i].build_id) < 0) {
			err = -ENOMEM;
			goto out;
		}
	}
	ncomments = comments_intern(&p, r, shown, comments);
	if (ncomments < 0) {
		err = ncomments;
		goto out;
	}

	/* Every string is interned: write the fields in field-number order. */
	pb_uint(&p.msg, VALUE_TYPE_TYPE, (uint64_t)inuse_objects);
	pb_uint(&p.msg, VALUE_TYPE_UNIT, (uint64_t)count);
	pb_message(out, PROFILE_SAMPLE_TYPE, &p.msg);
	pb_uint(&p.msg, VALUE_TYPE_TYPE, (uint64_t)inuse_space);
	pb_uint(&p.msg, VALUE_TYPE_UNIT, (uint64_t)bytes);
	pb_message(out, PROFILE_SAMPLE_TYPE, &p.msg);
	if (p.samples.oom)
		out->oom = true;
	pb_buf_put(out, p.samples.data, p.samples.len);
	mappings_encode(&p, out);
	locations_encode(&p, out);
	functions_encode(&p, out);
	for (i = 0; i < p.strings.n; i++)
		pb_bytes(out, PROFILE_STRING_TABLE, p.strings.keys[i].bytes, p.strings.keys[i].len);
	pb_uint(out, PROFILE_TIME_NANOS, (uint64_t)time_nanos(r));
	if (isfinite(r->duration_s) && r->duration_s > 0)
		pb_uint(out, PROFILE_DURATION_NANOS, (uint64_t)(r->duration_s * 1e9 + 0.5));
	pb_uint(&p.msg, VALUE_TYPE_TYPE, (uint64_t)space);
	pb_uint(&p.msg, VALUE_TYPE_UNIT, (uint64_t)bytes);
	pb_message(out, PROFILE_PERIOD_TYPE, &p.msg);
	pb_uint(out, PROFILE_PERIOD, 1);
	for (i = 0; i < (size_t)ncomments; i++)
		pb_uint(out, PROFILE_COMMENT, (uint64_t)comments[i]);
	pb_uint(out, PROFILE_DEFAULT_SAMPLE_TYPE, (uint64_t)inuse_space);
	if (out->oom || p.msg.oom || p.sub.oom)
		err = -ENOMEM;
out:
	free(order);
	profile_free(&p);
	return err;
}

/* ---- gzip ---- */

/* Compresses IN into *OUT (malloc'ed, *OUTLEN bytes) as one gzip member. */
static int gzip_compress(const struct pb_buf *in, uint8_t **out, size_t *outlen)
{
	z_stream zs = { 0 };
	uLong bound;
	int rc;

	*out = NULL;
	if (in->len > UINT_MAX / 2)
		return -ENOMEM;
	/* windowBits 15 + 16: a gzip header and trailer instead of zlib's.
	 * Z_BEST_SPEED, as Go's runtime/pprof compresses its profiles: the
	 * agent serves profiles of 10,000 stacks per scrape, where the default
	 * level took half the time for a file a fifth smaller. */
	if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -EPROTO;
	bound = deflateBound(&zs, in->len);
	*out = malloc(bound);
	if (!*out) {
		deflateEnd(&zs);
		return -ENOMEM;
	}
	zs.next_in = in->data;
	zs.avail_in = (uInt)in->len;
	zs.next_out = *out;
	zs.avail_out = (uInt)bound;
	rc = deflate(&zs, Z_FINISH);
	*outlen = zs.total_out;
	deflateEnd(&zs);
	if (rc != Z_STREAM_END) {
		free(*out);
		*out = NULL;
		return -EPROTO;
	}
	return 0;
}

int report_pprof_encode(const struct report *r, unsigned int top, uint8_t **out, size_t *len)
{
	struct pb_buf pb = { 0 };
	int err;

	*out = NULL;
	*len = 0;
	err = profile_encode(r, top, &pb);
	if (!err)
		err = gzip_compress(&pb, out, len);
	pb_buf_free(&pb);
	return err;
}

int report_write_pprof(FILE *f, const struct report *r, unsigned int top)
{
	uint8_t *gz = NULL;
	size_t gzlen = 0;
	int err;

	err = report_pprof_encode(r, top, &gz, &gzlen);
	if (err)
		return err;
	if (fwrite(gz, 1, gzlen, f) != gzlen || fflush(f) || ferror(f))
		err = -EIO;
	free(gz);
	return err;
}
