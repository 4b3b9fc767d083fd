/* The definitions the interposed functions forward to, found by reading
 * the loaded objects' dynamic symbol tables where they are mapped.  The
 * first lookup runs inside the process's first allocation, wherever that
 * is (a constructor inside newlocale(), under the locale lock; a signal
 * handler inside dlopen; a fork child): dlsym, dladdr, dlopen and dlerror
 * take the loader's and gettext's locks and allocate, so none is called. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

#include "interpose.h"

_Static_assert(F_COUNT <= NEXT_DEFS_MAX, "the interposed functions fit one lookup");
_Static_assert(sizeof(ElfW(Sym)) == sizeof(Elf64_Sym), "x86-64 only: symbols read with ELF64_ST_*");

/* ELF symbol versioning (glibc's dl-lookup.c reads versym the same way):
 * index 0 (local) and 1 (global) mean "no version"; the top bit hides a
 * version from lookups that name none (dlsym's), which see the default
 * version (name@@VERSION) only. */
#define VERSYM_INDEX 0x7fff
#define VERSYM_HIDDEN 0x8000
#define VERSYM_FIRST_DEFINED 2

/* One loaded object's dynamic symbol table, as mapped.  Every pointer
 * lies in [lo, hi), the span of its PT_LOAD segments; a table that does
 * not is not read. */
struct dynsyms {
	uintptr_t bias, lo, hi;
	const ElfW(Sym) *symtab;
	const char *strtab;
	size_t strsz;
	const uint32_t *gnu_hash;  /* DT_GNU_HASH, or NULL */
	const uint32_t *sysv_hash; /* DT_HASH, or NULL */
	const ElfW(Half) *versym;  /* DT_VERSYM, or NULL: no versions */
	const char *name;	   /* dlpi_name: "" for the program */
};

static bool in_object(const struct dynsyms *d, const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p;

	return a >= d->lo && a <= d->hi && len <= d->hi - a;
}

/*
 * A d_ptr of the dynamic section as an address.  glibc rewrites the
 * dynamic section of an object it loads in place, turning each d_ptr into
 * an address (elf_get_dynamic_info), but not where that section is
 * read-only (the vDSO's, and objects whose PT_DYNAMIC is not writable):
 * there it stays an offset from the load bias.  An offset is smaller than
 * the object, and the object is mapped above it (bias > 0 for anything
 * position independent); a value inside the mapping is therefore already
 * an address (for a fixed-address program, bias 0, both readings agree).
 */
static const void *dyn_addr(const struct dynsyms *d, ElfW(Addr) v)
{
	return (const void *)(v >= d->lo && v < d->hi ? v : d->bias + v);
}

/* Reads the dynamic symbol table of the object INFO describes into *D.
 * Returns false when it has none this code can read (D's range is set
 * even then). */
static bool dynsyms_read(const struct dl_phdr_info *info, struct dynsyms *d)
{
	const ElfW(Dyn) *dyn = NULL, *end;
	size_t dyn_count = 0;
	ElfW(Addr) symtab = 0, strtab = 0, gnu = 0, sysv = 0, versym = 0;
	int i;

	*d = (struct dynsyms){ .bias = info->dlpi_addr, .lo = UINTPTR_MAX, .name = info->dlpi_name };
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD) {
			if (d->bias + ph->p_vaddr < d->lo)
				d->lo = d->bias + ph->p_vaddr;
			if (d->bias + ph->p_vaddr + ph->p_memsz > d->hi)
				d->hi = d->bias + ph->p_vaddr + ph->p_memsz;
		} else if (ph->p_type == PT_DYNAMIC) {
			dyn = (const ElfW(Dyn) *)(d->bias + ph->p_vaddr);
			dyn_count = ph->p_memsz / sizeof(*dyn);
		}
	}
	if (!dyn || d->lo >= d->hi || !in_object(d, dyn, dyn_count * sizeof(*dyn)))
		return false;
	for (end = dyn + dyn_count; dyn < end && dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			symtab = dyn->d_un.d_ptr;
			break;
		case DT_STRTAB:
			strtab = dyn->d_un.d_ptr;
			break;
		case DT_STRSZ:
			d->strsz = dyn->d_un.d_val;
			break;
		case DT_GNU_HASH:
			gnu = dyn->d_un.d_ptr;
			break;
		case DT_HASH:
			sysv = dyn->d_un.d_ptr;
			break;
		case DT_VERSYM:
			versym = dyn->d_un.d_ptr;
			break;
		}
	}
	if (!symtab || !strtab || (!gnu && !sysv))
		return false;
	d->symtab = dyn_addr(d, symtab);
	d->strtab = dyn_addr(d, strtab);
	d->gnu_hash = gnu ? dyn_addr(d, gnu) : NULL;
	d->sysv_hash = sysv ? dyn_addr(d, sysv) : NULL;
	d->versym = versym ? dyn_addr(d, versym) : NULL;
	if (d->gnu_hash && !in_object(d, d->gnu_hash, 4 * sizeof(uint32_t)))
		d->gnu_hash = NULL;
	if (d->sysv_hash && !in_object(d, d->sysv_hash, 2 * sizeof(uint32_t)))
		d->sysv_hash = NULL;
	return in_object(d, d->symtab, sizeof(ElfW(Sym))) && in_object(d, d->strtab, d->strsz) &&
	       (d->gnu_hash || d->sysv_hash);
}

/* The hash functions of the two tables (the ELF gABI's, and GNU's: h * 33
 * + c from 5381). */
static uint32_t gnu_hash_of(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

static uint32_t sysv_hash_of(const char *s)
{
	uint32_t h = 0, top;

	for (; *s; s++) {
		h = (h << 4) + (unsigned char)*s;
		top = h & 0xf0000000;
		h ^= top >> 24;
		h &= ~top;
	}
	return h;
}

/* The best definition of a name seen so far in one object, as dlsym
 * (RTLD_NEXT) picks it: an unversioned one at once, else the default
 * version (never a hidden one). */
struct pick {
	const ElfW(Sym) *sym;
	bool final;
};

/* Considers symbol I of D for NAME. */
static void consider(const struct dynsyms *d, uint32_t i, const char *name, struct pick *p)
{
	const ElfW(Sym) *s = &d->symtab[i];
	unsigned type, bind;
	ElfW(Half) v;

	if (!in_object(d, s, sizeof(*s)) || s->st_name >= d->strsz || strcmp(d->strtab + s->st_name, name))
		return;
	type = ELF64_ST_TYPE(s->st_info);
	bind = ELF64_ST_BIND(s->st_info);
	if (s->st_shndx == SHN_UNDEF || s->st_shndx == SHN_ABS || !s->st_value ||
	    (type != STT_FUNC && type != STT_GNU_IFUNC) ||
	    (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE))
		return;
	if (!d->versym || !in_object(d, &d->versym[i], sizeof(*d->versym)) ||
	    (d->versym[i] & VERSYM_INDEX) < VERSYM_FIRST_DEFINED) {
		*p = (struct pick){ s, true };
		return;
	}
	v = d->versym[i];
	if (!(v & VERSYM_HIDDEN) && !p->sym)
		p->sym = s;
}

/* NAME (GNU hash H) in D's GNU hash table: its bloom filter, then the
 * chain of H's bucket (entries of one bucket are consecutive; the low
 * bit of a chain word marks the last). */
static void lookup_gnu(const struct dynsyms *d, const char *name, uint32_t h, struct pick *p)
{
	const uint32_t *t = d->gnu_hash, *buckets, *chain;
	uint32_t nbuckets = t[0], symoffset = t[1], bloom_size = t[2], shift = t[3], i, word_bits;
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)(t + 4);
	ElfW(Addr) word;

	word_bits = 8 * sizeof(word);
	if (!nbuckets || !bloom_size || (bloom_size & (bloom_size - 1)) || shift >= 32)
		return;
	buckets = (const uint32_t *)(bloom + bloom_size);
	chain = buckets + nbuckets;
	if (!in_object(d, bloom, (size_t)bloom_size * sizeof(*bloom) + (size_t)nbuckets * sizeof(*buckets)))
		return;
	word = bloom[(h / word_bits) & (bloom_size - 1)];
	if (!((word >> (h % word_bits)) & (word >> ((h >> shift) % word_bits)) & 1))
		return;
	i = buckets[h % nbuckets];
	if (i < symoffset)
		return;
	for (; !p->final && in_object(d, &chain[i - symoffset], sizeof(*chain)); i++) {
		uint32_t h2 = chain[i - symoffset];

		if ((h2 | 1) == (h | 1))
			consider(d, i, name, p);
		if (h2 & 1)
			break;
	}
}

/* NAME in D's SysV hash table (objects linked with --hash-style=sysv). */
static void lookup_sysv(const struct dynsyms *d, const char *name, struct pick *p)
{
	const uint32_t *t = d->sysv_hash, *bucket = t + 2, *chain;
	uint32_t nbucket = t[0], nchain = t[1], i, steps;

	chain = bucket + nbucket;
	if (!nbucket || !in_object(d, bucket, ((size_t)nbucket + nchain) * sizeof(*bucket)))
		return;
	for (i = bucket[sysv_hash_of(name) % nbucket], steps = 0; i && i < nchain && steps < nchain && !p->final;
	     i = chain[i], steps++)
		consider(d, i, name, p);
}

/* NAME's definition in D, or NULL. */
static const ElfW(Sym) *dynsyms_lookup(const struct dynsyms *d, const char *name, uint32_t gnu_hash)
{
	struct pick p = { NULL, false };

	if (d->gnu_hash)
		lookup_gnu(d, name, gnu_hash, &p);
	else
		lookup_sysv(d, name, &p);
	return p.sym;
}

static bool base_is(const char *path, const char *prefix)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	b = b ? b + 1 : path;
	return b && !strncmp(b, prefix, strlen(prefix));
}

/* A definition found, before its IFUNC resolver (if any) ran. */
struct found {
	uintptr_t addr;
	uint32_t len;
	bool ifunc;
	bool cxx_runtime;
};

/* One walk of the loaded objects: the functions in WANT, first
 * definition after this library (AFTER: those found there), else first
 * before it. */
struct search {
	const struct fn_info *fn;
	int n;
	uint32_t want, after, before;
	bool past_self;
	uint64_t *loads; /* see next_defs_find */
	uint32_t hash[NEXT_DEFS_MAX];
	struct found found[NEXT_DEFS_MAX];
};

static int search_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct search *s = arg;
	struct dynsyms d;
	bool readable;
	int f;

	if (s->loads) {
		/* the first object: the count is the same in each */
		bool known = size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds);
		bool same = known && info->dlpi_adds == *s->loads;

		if (known)
			*s->loads = info->dlpi_adds;
		s->loads = NULL;
		if (same) {
			s->want = 0;
			return 1;
		}
	}
	readable = dynsyms_read(info, &d);
	if ((uintptr_t)__ehdr_start >= d.lo && (uintptr_t)__ehdr_start < d.hi) {
		s->past_self = true;
		return 0;
	}
	if (!readable)
		return 0;
	for (f = 0; f < s->n; f++) {
		const ElfW(Sym) *sym;
		uint32_t bit = 1u << f;

		if (!(s->want & bit) || (s->after & bit) || (!s->past_self && (s->before & bit)))
			continue;
		sym = dynsyms_lookup(&d, s->fn[f].sym, s->hash[f]);
		if (!sym)
			continue;
		s->found[f] = (struct found){
			.addr = d.bias + sym->st_value,
			.len = sym->st_size <= UINT32_MAX ? (uint32_t)sym->st_size : 0,
			.ifunc = ELF64_ST_TYPE(sym->st_info) == STT_GNU_IFUNC,
			.cxx_runtime = base_is(d.name, "libstdc++.so") || base_is(d.name, "libc++.so"),
		};
		*(s->past_self ? &s->after : &s->before) |= bit;
	}
	return s->past_self && (s->after & s->want) == s->want;
}

uint32_t next_defs_find(const struct fn_info *fn, int n, uint32_t want, struct next_def *out, uint64_t *loads)
{
	struct search s = { .fn = fn, .n = n, .want = want & (uint32_t)((1ull << n) - 1), .loads = loads };
	uint32_t got;
	int f;

	for (f = 0; f < n; f++)
		if (s.want & (1u << f))
			s.hash[f] = gnu_hash_of(fn[f].sym);
	/* The one call into the loader: it takes the list lock (recursive:
	 * a signal handler interrupting this thread inside the loader, or a
	 * lookup nested in our own, takes it again), allocates nothing, and
	 * reads each object's TLS block without a lock (dlpi_tls_data). */
	dl_iterate_phdr(search_object, &s);
	got = (s.after | s.before) & s.want;
	for (f = 0; f < n; f++) {
		const struct found *x = &s.found[f];

		if (!(got & (1u << f)))
			continue;
		/* An IFUNC's resolver picks the function, called as glibc
		 * calls it on x86-64 (no arguments), after the walk: not under
		 * the loader's lock.  Its st_size is the resolver's, so the
		 * function's extent is unknown. */
		out[f] = (struct next_def){
			.fn = x->ifunc ? ((void *(*)(void))x->addr)() : (void *)x->addr,
			.len = x->ifunc ? 0 : x->len,
			.cxx_runtime = x->cxx_runtime,
		};
		if (!out[f].fn)
			got &= ~(1u << f);
	}
	return got;
}
