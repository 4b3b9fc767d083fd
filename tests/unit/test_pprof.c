/* Unit tests for the pprof writer: a report with the seed chain (an inlined
 * caller() included), nameless frames, a frame with no module and a top-N
 * cut goes through report_write_pprof() and back through an independent
 * decoder (a protobuf wire-format walker in Python), which checks field
 * numbers, values, inline grouping and mapping bounds; and a leak check in
 * a tree of two processes, which gives a labelled sample per kind.
 *
 * usage: test_pprof                       run the tests
 *        test_pprof --write FILE [MODULE ELF_ADDR...]
 *            write the test profile to FILE for tests/pprof_read.sh; with
 *            MODULE, one more stack (7 allocations, 280 bytes) whose frames
 *            are nameless, at ELF_ADDR... (innermost first) in MODULE, so
 *            that pprof has to symbolize them from the file itself. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "pprof.h"
#include "report.h"

/* ---- The report under test ---- */

#define MAIN "/path/seed"
#define LIBC "/nonexistent/libc.so.6"
#define CXX "/nonexistent/libstdc++.so.6.0.30"
#define LIBC_BIAS 0x7f0000000000ull
#define CXX_BIAS 0x7f1000000000ull
#define MAIN_BIAS 0x555500000000ull
#define F(elf, bias, mod, bid, fn, off, file, line, inl) \
	{ (bias) + (elf), (elf), mod, bid, fn, off, file, line, inl, NULL }

/* The seed chain: main -> caller() (inlined into main) -> LeakLib::slowMemoryLeak()
 * -> operator new -> malloc, 25 allocations of 40 bytes. */
static const struct report_frame frames_seed[] = {
	F(0x98930, LIBC_BIAS, LIBC, "93ac61ec", "malloc", 0, "./malloc/malloc.c", 3281, false),
	F(0xa958c, CXX_BIAS, CXX, NULL, "operator new(unsigned long)", 28, NULL, 0, false),
	F(0x162a, MAIN_BIAS, MAIN, "abcdef", "LeakLib::slowMemoryLeak()", 138, "/src/seed_leak_lib.cpp", 23, false),
	F(0x1251, MAIN_BIAS, MAIN, "abcdef", "caller()", 0, "/src/seed_main.cpp", 16, true),
	F(0x1251, MAIN_BIAS, MAIN, "abcdef", "main", 321, "/src/seed_main.cpp", 50, false),
	F(0x2724a, LIBC_BIAS, LIBC, "93ac61ec", "__libc_start_call_main", 122,
	  "../sysdeps/nptl/libc_start_call_main.h", 58, false),
};
/* The biggest stack: a nameless frame, a frame with no module, two frames
 * inlined into a third (one Location, three Lines), main again. */
static const struct report_frame frames_big[] = {
	F(0x98930, LIBC_BIAS, LIBC, "93ac61ec", "malloc", 0, "./malloc/malloc.c", 3281, false),
	F(0xa57ba, CXX_BIAS, CXX, NULL, NULL, 0, NULL, 0, false),
	{ 0xdeadbeef, 0, NULL, NULL, NULL, 0, NULL, 0, false, NULL },
	F(0x83000, LIBC_BIAS, LIBC, "93ac61ec", "_IO_a", 0, NULL, 1, true),
	F(0x83000, LIBC_BIAS, LIBC, "93ac61ec", "_IO_b", 0, "b.c", 2, true),
	F(0x83000, LIBC_BIAS, LIBC, "93ac61ec", "_IO_c", 0x10, "c.c", -1, false),
	F(0x1244, MAIN_BIAS, MAIN, "abcdef", "main", 308, "/src/seed_main.cpp", 49, false),
};

/* The smallest stack, in this test program's own file (set at run time). */
#define EXE_BIAS 0x560000000000ull
#define OTHER_BIAS (EXE_BIAS + (1ull << 44))
static struct report_frame frames_exe[2];
static char exe_path[PATH_MAX];
static uint64_t exe_elf;

/* The entry point's ELF address in this program: inside its text segment. */
static void exe_init(void)
{
	ssize_t n = readlink("/proc/self/exe", exe_path, sizeof(exe_path) - 1);
	Elf64_Ehdr eh;
	FILE *f;

	CHECK(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	exe_path[n] = '\0';
	f = fopen(exe_path, "rb");
	CHECK(f && fread(&eh, sizeof(eh), 1, f) == 1, "read %s", exe_path);
	fclose(f);
	exe_elf = eh.e_entry;
	/* Nameless: mapping bounds from the file's PT_LOAD header. */
	frames_exe[0] = (struct report_frame){ .address = EXE_BIAS + exe_elf, .elf_address = exe_elf,
					       .module = exe_path };
	/* A build id the file does not have: bounds approximated from the frames. */
	frames_exe[1] = (struct report_frame){ .address = OTHER_BIAS + exe_elf, .elf_address = exe_elf,
					       .module = exe_path, .build_id = "00ff", .function = "main" };
}

static void report_build(struct report *r, struct report_stack *stacks, size_t nstacks)
{
	CHECK(nstacks >= 3, "room for the stacks");
	stacks[0] = (struct report_stack){
		.bytes = 24, .allocations = 3, .allocator = "malloc",
		.frames = frames_exe, .nframes = N(frames_exe),
		.oldest_age_s = NAN, .growth_bytes_per_s = NAN,
	};
	stacks[1] = (struct report_stack){
		.bytes = 1000, .allocations = 25, .allocator = "operator new",
		.frames = frames_seed, .nframes = N(frames_seed),
		.oldest_age_s = 1.0, .growth_bytes_per_s = NAN,
	};
	stacks[2] = (struct report_stack){
		.bytes = 4096, .allocations = 1, .allocator = "malloc",
		.frames = frames_big, .nframes = N(frames_big), .truncated = true,
		.unwind_error = "no unwind table for pc",
		.oldest_age_s = NAN, .growth_bytes_per_s = NAN,
	};
	*r = (struct report){
		.pid = 1234, .command = "/path/seed --iterations 25", .unwind = "dwarf",
		.duration_s = 5.016, .timestamp = 1700000000,
		.stacks = stacks, .nstacks = 3,
	};
	report_totals_from_stacks(r);
	r->totals.dropped_events = 7;
}

/* ---- The independent decoder ---- */

static const char checker_py[] =
	"import gzip, struct, sys, zlib\n"
	"path, mode, exe, exe_bias, exe_elf = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4], 0), int(sys.argv[5], 0)\n"
	"raw = open(path, 'rb').read()\n"
	"assert raw[:3] == b'\\x1f\\x8b\\x08', 'not a gzip (deflate) stream: %r' % raw[:3]\n"
	"d = zlib.decompressobj(31)\n"
	"data = d.decompress(raw)\n"
	"assert d.eof and not d.unused_data, 'trailing bytes after the gzip member'\n"
	"def varint(b, i):\n"
	"    v = s = 0\n"
	"    while True:\n"
	"        assert i < len(b), 'truncated varint'\n"
	"        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7\n"
	"        if c < 0x80:\n"
	"            return v, i\n"
	"def fields(b):\n"
	"    out, i = [], 0\n"
	"    while i < len(b):\n"
	"        k, i = varint(b, i)\n"
	"        f, wt = k >> 3, k & 7\n"
	"        assert f > 0, 'field number 0'\n"
	"        if wt == 0:\n"
	"            v, i = varint(b, i)\n"
	"        elif wt == 2:\n"
	"            n, i = varint(b, i); v = b[i:i + n]; assert len(v) == n, 'truncated field'; i += n\n"
	"        else:\n"
	"            raise AssertionError('unexpected wire type %d for field %d' % (wt, f))\n"
	"        out.append((f, wt, v))\n"
	"    return out\n"
	"# Message schemas: field -> (name, kind, repeated); kind 'u' varint, 's' string, 'p' packed varints, dict = message.\n"
	"VT = {1: ('type', 'u', 0), 2: ('unit', 'u', 0)}\n"
	"LABEL = {1: ('key', 'u', 0), 2: ('str', 'u', 0), 3: ('num', 'u', 0), 4: ('num_unit', 'u', 0)}\n"
	"SAMPLE = {1: ('location_id', 'p', 1), 2: ('value', 'p', 1), 3: ('label', LABEL, 1)}\n"
	"MAPPING = {1: ('id', 'u', 0), 2: ('memory_start', 'u', 0), 3: ('memory_limit', 'u', 0), 4: ('file_offset', 'u', 0),\n"
	"           5: ('filename', 'u', 0), 6: ('build_id', 'u', 0), 7: ('has_functions', 'u', 0), 8: ('has_filenames', 'u', 0),\n"
	"           9: ('has_line_numbers', 'u', 0), 10: ('has_inline_frames', 'u', 0)}\n"
	"LINE = {1: ('function_id', 'u', 0), 2: ('line', 'u', 0), 3: ('column', 'u', 0)}\n"
	"LOCATION = {1: ('id', 'u', 0), 2: ('mapping_id', 'u', 0), 3: ('address', 'u', 0), 4: ('line', LINE, 1), 5: ('is_folded', 'u', 0)}\n"
	"FUNCTION = {1: ('id', 'u', 0), 2: ('name', 'u', 0), 3: ('system_name', 'u', 0), 4: ('filename', 'u', 0), 5: ('start_line', 'u', 0)}\n"
	"PROFILE = {1: ('sample_type', VT, 1), 2: ('sample', SAMPLE, 1), 3: ('mapping', MAPPING, 1), 4: ('location', LOCATION, 1),\n"
	"           5: ('function', FUNCTION, 1), 6: ('string_table', 's', 1), 7: ('drop_frames', 'u', 0), 8: ('keep_frames', 'u', 0),\n"
	"           9: ('time_nanos', 'u', 0), 10: ('duration_nanos', 'u', 0), 11: ('period_type', VT, 0), 12: ('period', 'u', 0),\n"
	"           13: ('comment', 'u', 1), 14: ('default_sample_type', 'u', 0)}\n"
	"def decode(b, schema):\n"
	"    m = {name: ([] if rep else (None if isinstance(kind, dict) else 0)) for name, kind, rep in schema.values()}\n"
	"    for f, wt, v in fields(b):\n"
	"        assert f in schema, 'unknown field %d' % f\n"
	"        name, kind, rep = schema[f]\n"
	"        if isinstance(kind, dict):\n"
	"            assert wt == 2; v = decode(v, kind)\n"
	"        elif kind == 's':\n"
	"            assert wt == 2; v = v.decode('utf-8')\n"
	"        elif kind == 'p':\n"
	"            if wt == 2:\n"
	"                vals, i = [], 0\n"
	"                while i < len(v):\n"
	"                    x, i = varint(v, i); vals.append(x)\n"
	"                m[name].extend(vals); continue\n"
	"        else:\n"
	"            assert wt == 0, 'field %s: wire type %d' % (name, wt)\n"
	"        if rep:\n"
	"            m[name].append(v)\n"
	"        else:\n"
	"            m[name] = v\n"
	"    return m\n"
	"p = decode(data, PROFILE)\n"
	"st = p['string_table']\n"
	"S = lambda i: st[i]\n"
	"assert st and st[0] == '', 'string_table[0] is not \"\"'\n"
	"assert len(set(st)) == len(st), 'duplicate strings'\n"
	"assert [(S(t['type']), S(t['unit'])) for t in p['sample_type']] == [('inuse_objects', 'count'), ('inuse_space', 'bytes')], p['sample_type']\n"
	"assert (S(p['period_type']['type']), S(p['period_type']['unit'])) == ('space', 'bytes')\n"
	"assert p['period'] == 1 and S(p['default_sample_type']) == 'inuse_space'\n"
	"for kind in ('mapping', 'location', 'function'):\n"
	"    ids = [x['id'] for x in p[kind]]\n"
	"    assert ids == list(range(1, len(ids) + 1)), '%s ids %s' % (kind, ids)\n"
	"maps = {m['id']: m for m in p['mapping']}\n"
	"locs = {l['id']: l for l in p['location']}\n"
	"funcs = {f['id']: f for f in p['function']}\n"
	"ftuples = [(f['name'], f['system_name'], f['filename']) for f in p['function']]\n"
	"assert len(set(ftuples)) == len(ftuples), 'duplicate functions'\n"
	"ltuples = [(l['mapping_id'], l['address'], tuple((x['function_id'], x['line']) for x in l['line'])) for l in p['location']]\n"
	"assert len(set(ltuples)) == len(ltuples), 'duplicate locations'\n"
	"def line_view(l):\n"
	"    return [(S(funcs[x['function_id']]['name']), S(funcs[x['function_id']]['filename']), x['line']) for x in l['line']]\n"
	"def sample_view(s):\n"
	"    out = []\n"
	"    for lid in s['location_id']:\n"
	"        l = locs[lid]\n"
	"        m = maps.get(l['mapping_id'])\n"
	"        out.append((hex(l['address']), S(m['filename']) if m else None, line_view(l)))\n"
	"    return out\n"
	"def labels(s):\n"
	"    return {S(x['key']): S(x['str']) for x in s['label']}\n"
	"def mapping_of(name, bias):\n"
	"    ms = [m for m in p['mapping'] if S(m['filename']) == name and 0 <= m['memory_start'] - bias < 1 << 40]\n"
	"    assert len(ms) == 1, 'mappings of %s: %s' % (name, ms)\n"
	"    return ms[0]\n"
	"comments = [S(c) for c in p['comment']]\n"
	"assert p['time_nanos'] == 1700000000 * 10**9, p['time_nanos']\n"
	"if mode == 'kinds':\n"
	"    # one sample per stack and kind, labelled; the parts of a stack share its locations\n"
	"    got = [(tuple(s['value']), sorted(labels(s).items())) for s in p['sample']]\n"
	"    want = [((15, 600), [('allocator', 'operator new'), ('comm', 'seed'), ('command', '/path/seed'), ('leak_kind', 'definitely_lost'), ('pid', '1235')]),\n"
	"            ((9, 360), [('allocator', 'operator new'), ('comm', 'seed'), ('command', '/path/seed'), ('leak_kind', 'reachable'), ('pid', '1235')]),\n"
	"            ((1, 40), [('allocator', 'operator new'), ('comm', 'seed'), ('command', '/path/seed'), ('leak_kind', 'unclassified'), ('pid', '1235')]),\n"
	"            ((3, 24), [('allocator', 'malloc'), ('command', '/bin/sh'), ('leak_kind', 'possibly_lost'), ('pid', '1234')])]\n"
	"    assert got == want, 'kind samples\\n got %s\\nwant %s' % (got, want)\n"
	"    assert p['sample'][0]['location_id'] == p['sample'][1]['location_id'] == p['sample'][2]['location_id']\n"
	"    assert 'leak check: definitely_lost 600 bytes in 15 allocations, indirectly_lost 0 bytes in 0 allocations, '\\\n"
	"        'possibly_lost 24 bytes in 3 allocations, reachable 360 bytes in 9 allocations' in comments, comments\n"
	"    assert [(S(t['type']), S(t['unit'])) for t in p['sample_type']] == [('inuse_objects', 'count'), ('inuse_space', 'bytes')]\n"
	"    assert 'not traced (what it allocated is not in this profile): 1 process: '\\\n"
	"        'pid 1236 (/bin/busybox sh): no object it maps defines malloc' in comments, comments\n"
	"    print('kinds profile ok'); sys.exit(0)\n"
	"if mode == 'empty':\n"
	"    assert p['sample'] == [] and p['location'] == [] and p['mapping'] == [] and p['function'] == []\n"
	"    assert p['duration_nanos'] == 0 and 'dwleak: pid 1, command (unknown)' in comments, comments\n"
	"    print('empty profile ok'); sys.exit(0)\n"
	"assert p['duration_nanos'] == 5016000000, p['duration_nanos']\n"
	"assert any(c.startswith('dwleak: pid 1234, command /path/seed --iterations 25') for c in comments), comments\n"
	"assert any(c.startswith('lost: 7 dropped events') for c in comments), comments\n"
	"for s in p['sample']:\n"
	"    assert len(s['value']) == 2, s\n"
	"vals = [tuple(s['value']) for s in p['sample']]\n"
	"want_vals = [(1, 4096), (25, 1000), (3, 24)] if mode == 'full' else [(1, 4096), (25, 1000)]\n"
	"assert vals == want_vals, 'sample values %s, want %s (order: bytes descending, top cut)' % (vals, want_vals)\n"
	"MAIN, LIBC, CXX = '/path/seed', '/nonexistent/libc.so.6', '/nonexistent/libstdc++.so.6.0.30'\n"
	"big, seed = p['sample'][0], p['sample'][1]\n"
	"got = sample_view(seed)\n"
	"want = [('0x7f0000098930', LIBC, [('malloc', './malloc/malloc.c', 3281)]),\n"
	"        ('0x7f10000a958c', CXX, [('operator new(unsigned long)', '', 0)]),\n"
	"        ('0x55550000162a', MAIN, [('LeakLib::slowMemoryLeak()', '/src/seed_leak_lib.cpp', 23)]),\n"
	"        ('0x555500001251', MAIN, [('caller()', '/src/seed_main.cpp', 16), ('main', '/src/seed_main.cpp', 50)]),\n"
	"        ('0x7f000002724a', LIBC, [('__libc_start_call_main', '../sysdeps/nptl/libc_start_call_main.h', 58)])]\n"
	"assert got == want, 'seed sample\\n got %s\\nwant %s' % (got, want)\n"
	"assert labels(seed) == {'allocator': 'operator new'}, labels(seed)\n"
	"got = sample_view(big)\n"
	"want = [('0x7f0000098930', LIBC, [('malloc', './malloc/malloc.c', 3281)]),\n"
	"        ('0x7f10000a57ba', CXX, []),\n"
	"        ('0xdeadbeef', None, []),\n"
	"        ('0x7f0000083000', LIBC, [('_IO_a', '', 1), ('_IO_b', 'b.c', 2), ('_IO_c', 'c.c', 0)]),\n"
	"        ('0x555500001244', MAIN, [('main', '/src/seed_main.cpp', 49)])]\n"
	"assert got == want, 'second sample\\n got %s\\nwant %s' % (got, want)\n"
	"assert big['location_id'][0] == seed['location_id'][0], 'malloc location not shared'\n"
	"assert labels(big) == {'allocator': 'malloc', 'truncated': 'true', 'unwind_error': 'no unwind table for pc'}, labels(big)\n"
	"mains = [f for f in p['function'] if S(f['name']) == 'main' and S(f['filename']) == '/src/seed_main.cpp']\n"
	"assert len(mains) == 1 and S(mains[0]['system_name']) == 'main', 'main is not one Function'\n"
	"nomap = [l for l in p['location'] if l['address'] == 0xdeadbeef][0]\n"
	"assert nomap['mapping_id'] == 0 and nomap['line'] == [], nomap\n"
	"# Mappings: the main executable is mapping 1; approximated bounds for files that do not exist.\n"
	"assert S(p['mapping'][0]['filename']) == MAIN, 'mapping 1 is %s' % S(p['mapping'][0]['filename'])\n"
	"def check_map(m, start, limit, off, build_id, hasf):\n"
	"    got = (hex(m['memory_start']), hex(m['memory_limit']), hex(m['file_offset']), S(m['build_id']), m['has_functions'], m['has_inline_frames'])\n"
	"    want = (hex(start), hex(limit), hex(off), build_id, hasf, hasf)\n"
	"    assert got == want, 'mapping %s: got %s want %s' % (S(m['filename']), got, want)\n"
	"check_map(mapping_of(MAIN, 0x555500000000), 0x555500001000, 0x555500002000, 0x1000, 'abcdef', 1)\n"
	"check_map(mapping_of(LIBC, 0x7f0000000000), 0x7f0000027000, 0x7f0000099000, 0x27000, '93ac61ec', 1)\n"
	"check_map(mapping_of(CXX, 0x7f1000000000), 0x7f10000a5000, 0x7f10000aa000, 0xa5000, '', 1)\n"
	"assert mapping_of(MAIN, 0x555500000000)['has_line_numbers'] == 1 and mapping_of(CXX, 0x7f1000000000)['has_filenames'] == 0\n"
	"if mode == 'full':\n"
	"    # The test program itself: bounds of its real PT_LOAD segment.\n"
	"    b = open(exe, 'rb').read()\n"
	"    assert b[:4] == b'\\x7fELF' and b[4] == 2\n"
	"    phoff, = struct.unpack_from('<Q', b, 32)\n"
	"    phentsize, phnum = struct.unpack_from('<HH', b, 54)\n"
	"    seg = None\n"
	"    for i in range(phnum):\n"
	"        ptype, flags, off, vaddr, paddr, filesz, memsz, align = struct.unpack_from('<IIQQQQQQ', b, phoff + i * phentsize)\n"
	"        if ptype == 1 and vaddr <= exe_elf < vaddr + memsz:\n"
	"            seg = (off, vaddr, memsz)\n"
	"    assert seg, 'no PT_LOAD holds 0x%x' % exe_elf\n"
	"    off, vaddr, memsz = seg\n"
	"    ms = [m for m in p['mapping'] if S(m['filename']) == exe]\n"
	"    assert len(ms) == 2, 'want two mappings of %s (two biases): %s' % (exe, ms)\n"
	"    real = [m for m in ms if 0 <= m['memory_start'] - exe_bias < 1 << 40][0]\n"
	"    check_map(real, exe_bias + vaddr, exe_bias + vaddr + memsz, off, '', 0)\n"
	"    # Same file, a build id it does not have: the approximation, not the file's headers.\n"
	"    other = [m for m in ms if m is not real][0]\n"
	"    ob = exe_bias + (1 << 44)\n"
	"    check_map(other, ob + (exe_elf & ~0xfff), ob + (exe_elf & ~0xfff) + 0x1000, exe_elf & ~0xfff, '00ff', 1)\n"
	"    # pprof's own arithmetic (elfexec.GetBase for ET_DYN/ET_EXEC with the header found):\n"
	"    # base = start - offset + p_offset - p_vaddr must be the bias.\n"
	"    assert real['memory_start'] - real['file_offset'] + off - vaddr == exe_bias, 'pprof base != bias'\n"
	"    third = sample_view(p['sample'][2])\n"
	"    assert third == [(hex(exe_bias + exe_elf), exe, []), (hex(ob + exe_elf), exe, [('main', '', 0)])], third\n"
	"else:\n"
	"    assert len(p['sample']) == 2 and not any(S(m['filename']) not in (MAIN, LIBC, CXX) for m in p['mapping']), 'top cut leaked stacks'\n"
	"print('profile ok: %d samples, %d locations, %d functions, %d mappings, %d strings' % (\n"
	"    len(p['sample']), len(p['location']), len(p['function']), len(p['mapping']), len(st)))\n";

static char tmpdir[] = "/tmp/dwleak-test-pprof-XXXXXX";

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	CHECK(f, "fopen %s", path);
	CHECK(fwrite(data, 1, len, f) == len && !fclose(f), "write %s", path);
}

/* Writes R's profile to PATH; returns report_write_pprof()'s result. */
static int profile_write(const char *path, const struct report *r, unsigned int top)
{
	FILE *f = fopen(path, "wb");
	int err, err2;

	CHECK(f, "fopen %s", path);
	err = report_write_pprof(f, r, top);
	err2 = fclose(f);
	CHECK(!err2, "fclose %s", path);
	return err;
}

/* Writes R's profile and runs the checker in MODE on it. */
static void check_profile(const struct report *r, unsigned int top, const char *mode)
{
	char *script, *data, *cmd;
	int err, status;

	CHECK(asprintf(&script, "%s/check.py", tmpdir) > 0, "asprintf");
	CHECK(asprintf(&data, "%s/%s.pb.gz", tmpdir, mode) > 0, "asprintf");
	write_file(script, checker_py, strlen(checker_py));
	err = profile_write(data, r, top);
	CHECK(!err, "report_write_pprof (%s) returned %d", mode, err);
	CHECK(asprintf(&cmd, "python3 %s %s %s '%s' %#llx %#" PRIx64, script, data, mode, exe_path,
		       (unsigned long long)EXE_BIAS, exe_elf) > 0, "asprintf");
	fflush(stdout);
	status = system(cmd);
	CHECK(status == 0, "python checker failed (status %d) on %s; profile kept in %s", status,
	      cmd, data);
	unlink(script);
	unlink(data);
	free(script);
	free(data);
	free(cmd);
}

static void test_profile(void)
{
	struct report_stack stacks[3];
	struct report r;

	report_build(&r, stacks, N(stacks));
	check_profile(&r, 0, "full");
	check_profile(&r, 2, "top2");
	/* The writer does not reorder the caller's array. */
	CHECK(stacks[0].bytes == 24 && stacks[2].bytes == 4096, "report modified");
}

static void test_empty(void)
{
	struct report r = { .pid = 1, .unwind = "fp", .duration_s = NAN, .timestamp = 1700000000 };

	check_profile(&r, 0, "empty");
}

/* A leak check in a tree of two processes and a third dwleak could not
 * trace: a sample per stack and kind, labelled leak_kind, pid and
 * command (and comm where the process has one), and a comment naming what
 * is missing. */
static void test_kinds(void)
{
	struct report_process procs[] = {
		{ .pid = 1234, .command = "/bin/sh", .state = REPORT_PROCESS_ENDED },
		{ .pid = 1235, .ppid = 1234, .command = "/path/seed", .comm = "seed",
		  .state = REPORT_PROCESS_ENDED },
		{ .pid = 1236, .ppid = 1234, .command = "/bin/busybox sh", .state = REPORT_PROCESS_ENDED,
		  .reason = "no object it maps defines malloc" },
	};
	struct report_stack stacks[3];
	struct report r;

	report_build(&r, stacks, N(stacks));
	r.nstacks = 2; /* the exe's stack and the seed stack */
	r.leak_check.present = true;
	stacks[0].pid = 1234;
	stacks[0].command = "/bin/sh";
	stacks[0].has_leak_kinds = true;
	stacks[0].leak_kinds[REPORT_LEAK_POSSIBLY_LOST] = (struct report_leak_count){ 24, 3 };
	stacks[1].pid = 1235;
	stacks[1].command = "/path/seed";
	stacks[1].has_leak_kinds = true;
	stacks[1].leak_kinds[REPORT_LEAK_DEFINITELY_LOST] = (struct report_leak_count){ 600, 15 };
	stacks[1].leak_kinds[REPORT_LEAK_REACHABLE] = (struct report_leak_count){ 360, 9 };
	r.processes = procs;
	r.nprocesses = N(procs);
	report_totals_from_stacks(&r);
	check_profile(&r, 0, "kinds");
}

/* report_pprof_encode() gives the bytes report_write_pprof() writes. */
static void test_encode_memory(void)
{
	struct report_stack stacks[3];
	struct report r;
	uint8_t *mem = NULL, *file = NULL;
	size_t memlen = 0, filelen = 0;
	FILE *f;

	report_build(&r, stacks, N(stacks));
	CHECK(report_pprof_encode(&r, 0, &mem, &memlen) == 0 && mem && memlen > 20, "report_pprof_encode");
	f = open_memstream((char **)&file, &filelen);
	CHECK(f, "open_memstream");
	CHECK(report_write_pprof(f, &r, 0) == 0, "report_write_pprof");
	CHECK(fclose(f) == 0, "fclose");
	EXPECT(memlen == filelen && !memcmp(mem, file, memlen), "memory (%zu bytes) and file (%zu bytes) differ",
	       memlen, filelen);
	free(mem);
	free(file);
}

/* A stream that fails: -EIO, not a crash or a short file reported as done. */
static void test_io_error(void)
{
	struct report_stack stacks[3];
	struct report r;
	FILE *f = fopen("/dev/full", "wb");

	if (!f)
		return;
	report_build(&r, stacks, N(stacks));
	CHECK(report_write_pprof(f, &r, 0) == -EIO, "write to /dev/full did not fail");
	fclose(f);
}

/* --write FILE [MODULE ELF_ADDR...]: the profile tests/pprof_read.sh reads. */
static int write_mode(int argc, char **argv)
{
	struct report_stack stacks[4];
	struct report_frame *extra = NULL;
	struct report r;
	int i, err;

	exe_init();
	report_build(&r, stacks, N(stacks));
	if (argc > 4) {
		int n = argc - 4;

		extra = calloc(n, sizeof(*extra));
		CHECK(extra, "calloc");
		for (i = 0; i < n; i++) {
			uint64_t elf = strtoull(argv[4 + i], NULL, 0);

			extra[i] = (struct report_frame){ .address = 0x555555554000ull + elf,
							  .elf_address = elf, .module = argv[3] };
		}
		stacks[3] = (struct report_stack){
			.bytes = 280, .allocations = 7, .allocator = "malloc",
			.frames = extra, .nframes = n,
			.oldest_age_s = NAN, .growth_bytes_per_s = NAN,
		};
		r.nstacks = 4;
		report_totals_from_stacks(&r);
	}
	err = profile_write(argv[2], &r, 0);
	free(extra);
	if (err) {
		fprintf(stderr, "test_pprof: report_write_pprof: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "--write"))
		return write_mode(argc, argv);
	if (argc != 1) {
		fprintf(stderr, "usage: test_pprof [--write FILE [MODULE ELF_ADDR...]]\n");
		return 2;
	}
	check_python3("command -v python3");
	CHECK(mkdtemp(tmpdir), "mkdtemp");
	exe_init();

	test_profile();
	test_kinds();
	test_empty();
	test_io_error();
	test_encode_memory();

	rmdir(tmpdir);
	if (check_failures)
		return 1;
	printf("test_pprof: ok\n");
	return 0;
}
