/* Routing for a library loaded late: when dwleak injects the library into
 * a running process (target/inject.c), nothing binds to its wrappers, so
 * dwleak_injected_start rewrites, in every loaded object, the GOT slots
 * (R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT, R_X86_64_64) of the functions it
 * interposes so that they lead to its wrappers, libc's own included (glibc
 * calls malloc through its GOT so that interposers see strdup, fopen...).
 * dlopen's and dlmopen's slots lead to stubs (route_dl.S) that route what
 * they loaded once they return; prctl's and syscall's to seccomp_guard.c's
 * wrappers, which see a seccomp filter go in.  A slot is rewritten only
 * when it leads to the very definition the library forwards to (or,
 * lazily bound, back into its own object's PLT): an object bound
 * elsewhere on purpose stays as it is, and is counted.
 *
 * Why this is safe with the program's threads running:
 * - a slot is written with one aligned 8-byte store: a thread calling
 *   through it meanwhile gets the old definition or the wrapper, both
 *   right (the wrapper forwards to the old one);
 * - every write happens inside dl_iterate_phdr's callback, under the
 *   loader's list lock, so no object is unmapped under it (dlclose takes
 *   that lock to take an object off the list before it unmaps it);
 * - an object being relocated by another thread's dlopen is left alone:
 *   its slots not yet relocated do not hold the definition (left, and
 *   counted as deferred), and one whose RELRO pages are still writable
 *   (the loader protects them once relocation is done) is deferred
 *   whole: restoring PROT_READ under the loader's feet would fault its
 *   next write, and a write of ours could race its mprotect;
 * - RELRO pages known read-only are made writable for the stores and
 *   read-only again: nobody else writes them any more.
 * How RELRO's state is known without /proc: FUTEX_WAKE_OP adds 0 to a
 * word atomically (the value never changes, a concurrent reader never
 * sees a torn one) and fails with EFAULT when the page is not writable.
 *
 * Allocates nothing; makes system calls (futex, mprotect) and one call
 * into the loader (dl_iterate_phdr); safe inside an allocation. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose.h"

#define PAGE 4096u

/* The functions routed besides the allocator's: dlopen and dlmopen,
 * whose slots lead to route_dl.S's stubs, and prctl and syscall, whose
 * slots lead to seccomp_guard.c's (a seccomp filter going in stops the
 * walk in the process first, as under LD_PRELOAD). */
enum { DL_OPEN, DL_MOPEN, GUARD_PRCTL, GUARD_SYSCALL, EXTRA_COUNT };

static const struct fn_info extra_fns[EXTRA_COUNT] = {
	[DL_OPEN] = { "dlopen", 0, 0 },
	[DL_MOPEN] = { "dlmopen", 0, 0 },
	[GUARD_PRCTL] = { "prctl", 0, 0 },
	[GUARD_SYSCALL] = { "syscall", 0, 0 },
};

/* Their real definitions (route_dl.S jumps to dlopen's and dlmopen's). */
void *route_extra_real[EXTRA_COUNT];

/* What their slots lead to. */
extern const char route_dlopen_stub[], route_dlmopen_stub[];
static const void *const extra_to[EXTRA_COUNT] = {
	[DL_OPEN] = route_dlopen_stub,
	[DL_MOPEN] = route_dlmopen_stub,
	[GUARD_PRCTL] = (const void *)seccomp_guard_prctl,
	[GUARD_SYSCALL] = (const void *)seccomp_guard_syscall,
};

/* One pass's counts (published into the control block at its end). */
struct pass {
	uint32_t objects, deferred, unreadable, elsewhere, failed;
	uint64_t slots;
	uint32_t name_hash[F_COUNT + EXTRA_COUNT];
};

/* One object as mapped: its span, its executable and writable segments,
 * its RELRO pages, and what its dynamic section says. */
struct object {
	uintptr_t bias, lo, hi;
	uintptr_t relro_lo, relro_hi; /* pages the loader makes read-only after relocation */
	struct { uintptr_t lo, hi; } exec[4], write[4];
	int nexec, nwrite;
	const ElfW(Sym) *symtab;
	const char *strtab;
	size_t strsz;
	const ElfW(Rela) *rel[2]; /* DT_JMPREL, DT_RELA */
	size_t nrel[2];
	bool bind_now;
};

static bool in_span(uintptr_t lo, uintptr_t hi, uintptr_t a, size_t len)
{
	return a >= lo && a <= hi && len <= hi - a;
}

static bool in_object(const struct object *o, const void *p, size_t len)
{
	return in_span(o->lo, o->hi, (uintptr_t)p, len);
}

static bool in_exec(const struct object *o, uintptr_t a)
{
	int i;

	for (i = 0; i < o->nexec; i++)
		if (a >= o->exec[i].lo && a < o->exec[i].hi)
			return true;
	return false;
}

static bool in_write(const struct object *o, uintptr_t a)
{
	int i;

	for (i = 0; i < o->nwrite; i++)
		if (in_span(o->write[i].lo, o->write[i].hi, a, 8))
			return true;
	return false;
}

/* A d_ptr as an address: glibc rewrites the dynamic section of objects it
 * relocates in place, except where it is read-only (see resolve.c's
 * dyn_addr, the same reasoning). */
static uintptr_t dyn_addr(const struct object *o, ElfW(Addr) v)
{
	return v >= o->lo && v < o->hi ? v : o->bias + v;
}

/* Reads what routing needs of the object INFO describes.  Returns false
 * when its dynamic section cannot be read within its own span. */
static bool object_read(const struct dl_phdr_info *info, struct object *o)
{
	const ElfW(Dyn) *dyn = NULL, *end;
	ElfW(Addr) symtab = 0, strtab = 0, jmprel = 0, rela = 0;
	size_t ndyn = 0, pltrelsz = 0, relasz = 0, relaent = sizeof(ElfW(Rela));
	ElfW(Sxword) pltrel = DT_RELA;
	int i;

	memset(o, 0, sizeof(*o));
	o->bias = info->dlpi_addr;
	o->lo = UINTPTR_MAX;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = o->bias + ph->p_vaddr, hi = lo + ph->p_memsz;

		if (ph->p_type == PT_LOAD) {
			o->lo = lo < o->lo ? lo : o->lo;
			o->hi = hi > o->hi ? hi : o->hi;
			if ((ph->p_flags & PF_X) && o->nexec < 4)
				o->exec[o->nexec].lo = lo, o->exec[o->nexec++].hi = hi;
			if ((ph->p_flags & PF_W) && o->nwrite < 4)
				o->write[o->nwrite].lo = lo, o->write[o->nwrite++].hi = hi;
		} else if (ph->p_type == PT_DYNAMIC) {
			dyn = (const ElfW(Dyn) *)lo;
			ndyn = ph->p_memsz / sizeof(*dyn);
		} else if (ph->p_type == PT_GNU_RELRO) {
			/* the loader's _dl_protect_relro: whole pages, the end rounded down */
			o->relro_lo = lo & ~(uintptr_t)(PAGE - 1);
			o->relro_hi = hi & ~(uintptr_t)(PAGE - 1);
		}
	}
	if (!dyn || o->lo >= o->hi || !in_object(o, dyn, ndyn * sizeof(*dyn)))
		return false;
	for (end = dyn + ndyn; dyn < end && dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			symtab = dyn->d_un.d_ptr;
			break;
		case DT_STRTAB:
			strtab = dyn->d_un.d_ptr;
			break;
		case DT_STRSZ:
			o->strsz = dyn->d_un.d_val;
			break;
		case DT_JMPREL:
			jmprel = dyn->d_un.d_ptr;
			break;
		case DT_PLTRELSZ:
			pltrelsz = dyn->d_un.d_val;
			break;
		case DT_PLTREL:
			pltrel = dyn->d_un.d_val;
			break;
		case DT_RELA:
			rela = dyn->d_un.d_ptr;
			break;
		case DT_RELASZ:
			relasz = dyn->d_un.d_val;
			break;
		case DT_RELAENT:
			relaent = dyn->d_un.d_val;
			break;
		case DT_FLAGS:
			o->bind_now |= (dyn->d_un.d_val & DF_BIND_NOW) != 0;
			break;
		case DT_FLAGS_1:
			o->bind_now |= (dyn->d_un.d_val & DF_1_NOW) != 0;
			break;
		}
	}
	if (!symtab || !strtab || relaent != sizeof(ElfW(Rela)))
		return false;
	o->symtab = (const ElfW(Sym) *)dyn_addr(o, symtab);
	o->strtab = (const char *)dyn_addr(o, strtab);
	if (!in_object(o, o->strtab, o->strsz))
		return false;
	if (jmprel && pltrel == DT_RELA) {
		o->rel[0] = (const ElfW(Rela) *)dyn_addr(o, jmprel);
		o->nrel[0] = pltrelsz / sizeof(ElfW(Rela));
	}
	if (rela) {
		o->rel[1] = (const ElfW(Rela) *)dyn_addr(o, rela);
		o->nrel[1] = relasz / sizeof(ElfW(Rela));
	}
	for (i = 0; i < 2; i++)
		if (o->rel[i] && !in_object(o, o->rel[i], o->nrel[i] * sizeof(ElfW(Rela))))
			return false;
	return true;
}

/* GNU's hash of a symbol name (h * 33 + c from 5381), to compare names
 * cheaply; and the same bounded to the object's string table. */
static uint32_t hash_name(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

/* The function the symbol of relocation R names, among the interposed
 * (0..F_COUNT-1) and dlopen, dlmopen (F_COUNT + DL_*); -1 for others. */
static int fn_of(const struct object *o, const ElfW(Rela) *r, const struct pass *p)
{
	size_t sym = ELF64_R_SYM(r->r_info), max;
	const ElfW(Sym) *s = &o->symtab[sym];
	const char *name;
	uint32_t h = 5381;
	size_t i;
	int f;

	if (!sym || !in_object(o, s, sizeof(*s)) || s->st_name >= o->strsz)
		return -1;
	name = o->strtab + s->st_name;
	max = o->strsz - s->st_name;
	for (i = 0; i < max && name[i]; i++)
		h = h * 33 + (unsigned char)name[i];
	if (i == max)
		return -1; /* not terminated inside the table */
	for (f = 0; f < F_COUNT + EXTRA_COUNT; f++)
		if (p->name_hash[f] == h && !strcmp(name, f < F_COUNT ? fns[f].sym : extra_fns[f - F_COUNT].sym))
			return f;
	return -1;
}

/* Whether the page holding A is writable now (see the top of the file). */
static bool page_writable(uintptr_t a)
{
	static uint32_t dummy;
	int saved = errno;
	long r = syscall(SYS_futex, &dummy, FUTEX_WAKE_OP_PRIVATE, 0, (void *)0, (void *)a,
			 FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0));

	errno = saved;
	return r >= 0;
}

/* A slot to write: where, and what. */
struct write {
	uintptr_t *slot;
	uintptr_t to;
	bool counted; /* an interposed function's slot (dlopen's are not counted) */
};

#define WRITES_MAX 128

/* Stores the batch W[0..N) of object O, RELRO made writable around it
 * when some slot lies there (RELRO: whether one does).  Returns false
 * when the object must wait for a later pass (its RELRO still writable:
 * being relocated). */
static bool writes_flush(const struct object *o, struct write *w, size_t n, bool relro, struct pass *p)
{
	int saved = errno;
	size_t i;

	if (!n)
		return true;
	if (relro) {
		if (page_writable(o->relro_lo))
			return false;
		if (mprotect((void *)o->relro_lo, o->relro_hi - o->relro_lo, PROT_READ | PROT_WRITE)) {
			p->failed += (uint32_t)n;
			errno = saved;
			return true;
		}
	}
	for (i = 0; i < n; i++) {
		__atomic_store_n(w[i].slot, w[i].to, __ATOMIC_RELEASE);
		p->slots += w[i].counted;
	}
	if (relro)
		mprotect((void *)o->relro_lo, o->relro_hi - o->relro_lo, PROT_READ);
	errno = saved;
	return true;
}

/* What slot S of relocation R (of function F) should become; 0 to leave
 * it.  Counts what it finds in P; *DEFER is set for a slot not relocated
 * yet (its object is being loaded). */
static uintptr_t slot_target(const struct object *o, const ElfW(Rela) *r, int f, uintptr_t v, struct pass *p,
			     bool *defer)
{
	unsigned type = ELF64_R_TYPE(r->r_info);
	const void *def, *to;

	if (f < F_COUNT) {
		def = __atomic_load_n(&next[f].fn, __ATOMIC_ACQUIRE);
		to = wrappers[f];
	} else {
		def = route_extra_real[f - F_COUNT];
		to = extra_to[f - F_COUNT];
	}
	if (v == (uintptr_t)to) {
		p->slots += f < F_COUNT;
		return 0;
	}
	if (type == R_X86_64_64 && r->r_addend)
		return 0; /* a pointer into the function, not to it */
	if (def && v == (uintptr_t)def)
		return (uintptr_t)to;
	/* bound lazily and not called yet: the slot leads back into the
	 * object's own PLT (the definition may be there too: libc's malloc) */
	if (type == R_X86_64_JUMP_SLOT && !o->bind_now && def && in_exec(o, v))
		return (uintptr_t)to;
	/* not relocated yet (an offset, not an address; or 0): the object
	 * is being loaded by another thread */
	if (!v || (o->bias && v < o->hi - o->lo)) {
		*defer = true;
		return 0;
	}
	if (f < F_COUNT)
		p->elsewhere++;
	return 0;
}

/* The dynamic linker's text, once its own allocator pointers lead to the
 * library: a call from there may hold the loader's locks while it changes
 * the list of objects, so no routing pass starts inside it (route_check). */
static uintptr_t ldso_lo, ldso_hi;

/*
 * The dynamic linker allocates (link maps, DTVs, TLS blocks of dlopen'ed
 * objects, dlerror's strings) through pointers of its own, __rtld_malloc,
 * __rtld_calloc, __rtld_realloc and __rtld_free, set once libc is loaded
 * to what the lookup of "malloc" and friends found, and then made
 * read-only with its RELRO: no relocation names them, and its symbol
 * table is stripped.  A program started with LD_PRELOAD has them lead to
 * the library; here they lead to libc's, so the linker's blocks, and the
 * frees of blocks a program's thread then hands back, would pass by it.
 * They are found by value: a word of the linker's writable or RELRO data
 * that holds exactly the address of the definition the library forwards
 * to for malloc, calloc, realloc or free (no other data of the linker
 * holds a function of libc's) is such a pointer, and now leads to the
 * wrapper.
 */
static void ldso_route(const struct object *o, struct pass *p)
{
	static const int fs[] = { F_MALLOC, F_CALLOC, F_REALLOC, F_FREE };
	struct write w[WRITES_MAX];
	uintptr_t spans[5][2], a, v;
	size_t n = 0, ns = 0, i, k;
	bool relro = false;
	int j;

	for (j = 0; j < o->nexec; j++)
		if (o->exec[j].lo >= o->lo) {
			ldso_lo = o->exec[j].lo;
			ldso_hi = o->exec[j].hi;
		}
	if (o->relro_hi > o->relro_lo)
		spans[ns][0] = o->relro_lo, spans[ns++][1] = o->relro_hi;
	for (j = 0; j < o->nwrite; j++)
		spans[ns][0] = o->write[j].lo, spans[ns++][1] = o->write[j].hi;
	for (i = 0; i < ns; i++) {
		for (a = (spans[i][0] + 7) & ~(uintptr_t)7; a + 8 <= spans[i][1] && n < WRITES_MAX; a += 8) {
			v = __atomic_load_n((uintptr_t *)a, __ATOMIC_RELAXED);
			for (k = 0; k < sizeof(fs) / sizeof(fs[0]); k++) {
				const void *def = __atomic_load_n(&next[fs[k]].fn, __ATOMIC_ACQUIRE);

				if (def && v == (uintptr_t)def) {
					relro |= a >= o->relro_lo && a < o->relro_hi;
					w[n++] = (struct write){ (uintptr_t *)a, (uintptr_t)wrappers[fs[k]], true };
				} else if (v == (uintptr_t)wrappers[fs[k]]) {
					p->slots++; /* routed by an earlier pass */
				}
			}
		}
	}
	p->deferred += !writes_flush(o, w, n, relro, p);
}

/* Routes one object's slots. */
static void object_route(const struct object *o, struct pass *p)
{
	struct write w[WRITES_MAX];
	size_t n = 0, t, i;
	bool relro = false, defer = false;

	for (t = 0; t < 2 && !defer; t++) {
		for (i = 0; i < o->nrel[t] && !defer; i++) {
			const ElfW(Rela) *r = &o->rel[t][i];
			unsigned type = ELF64_R_TYPE(r->r_info);
			uintptr_t a = o->bias + r->r_offset, to;
			int f;

			if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT && type != R_X86_64_64)
				continue;
			if ((a & 7) || !in_object(o, (void *)a, 8) || (f = fn_of(o, r, p)) < 0)
				continue;
			to = slot_target(o, r, f, __atomic_load_n((uintptr_t *)a, __ATOMIC_ACQUIRE), p, &defer);
			if (!to)
				continue;
			if (a >= o->relro_lo && a < o->relro_hi) {
				relro = true;
			} else if (!in_write(o, a)) {
				p->failed += f < F_COUNT;
				continue;
			}
			w[n++] = (struct write){ (uintptr_t *)a, to, f < F_COUNT };
			if (n == WRITES_MAX) {
				defer = !writes_flush(o, w, n, relro, p);
				n = 0;
				relro = false;
			}
		}
	}
	if (!defer)
		defer = !writes_flush(o, w, n, relro, p);
	p->deferred += defer;
}

static int object_visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct pass *p = arg;
	struct object o;
	bool readable;

	(void)size;
	readable = object_read(info, &o);
	if ((uintptr_t)__ehdr_start >= o.lo && (uintptr_t)__ehdr_start < o.hi)
		return 0; /* this library */
	if (!readable) {
		/* the vDSO and objects without relocations have nothing to route */
		p->objects++;
		if (info->dlpi_name && *info->dlpi_name && !strstr(info->dlpi_name, "linux-vdso"))
			p->unreadable++;
		return 0;
	}
	p->objects++;
	object_route(&o, p);
	if (info->dlpi_addr && info->dlpi_addr == getauxval(AT_BASE))
		ldso_route(&o, p); /* the dynamic linker (AT_BASE: the interpreter's base) */
	return 0;
}

static int routing; /* a pass is under way */

int route_all(void)
{
	struct pass p = { 0 };
	int busy = 0, f;

	if (!__atomic_compare_exchange_n(&routing, &busy, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return -EBUSY;
	for (f = 0; f < F_COUNT + EXTRA_COUNT; f++)
		p.name_hash[f] = hash_name(f < F_COUNT ? fns[f].sym : extra_fns[f - F_COUNT].sym);
	dl_iterate_phdr(object_visit, &p);
	__atomic_store_n(&ctl.route_objects, p.objects, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl.route_deferred, p.deferred, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl.route_unreadable, p.unreadable, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl.route_elsewhere, p.elsewhere, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl.route_failed, p.failed, __ATOMIC_RELAXED);
	__atomic_store_n(&ctl.route_slots, p.slots, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ctl.route_passes, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&routing, 0, __ATOMIC_RELEASE);
	return 0;
}

void route_requested(uintptr_t ra)
{
	uint32_t want = __atomic_load_n(&ctl.route_request, __ATOMIC_ACQUIRE);

	if (!__atomic_load_n(&ctl.injected, __ATOMIC_RELAXED) || in_fork_child)
		return;
	if (ra >= ldso_lo && ra < ldso_hi)
		return; /* the linker's own call: maybe under its list lock, changing the list */
	if (!route_all())
		__atomic_store_n(&ctl.route_done, want, __ATOMIC_RELEASE);
}

/* --- dlopen and dlmopen (route_dl.S) ---
 * An object a dlopen loads binds its allocator calls to libc's: they
 * must be routed once it returns.  But dlopen looks at its return address
 * to know who calls it (the caller's RPATH/RUNPATH, $ORIGIN and namespace),
 * so a wrapper that called it would change what it loads.  The stubs
 * therefore jump to it with the caller's own return address replaced by
 * the address of the caller's call instruction, which lies in the same
 * object: dlopen sees the same caller; when it returns, that instruction
 * runs again and reaches the stub once more, with the same stack pointer
 * and return address: the stub then routes and returns the handle.  Only
 * a call instruction known to lead back here is used so (a direct call to
 * a PLT entry that jumps through a slot holding the stub, or a call
 * through such a slot); any other call is passed on unchanged, its
 * objects routed at the next pass. */

#define DL_NEST_MAX 4

struct dl_pending {
	uintptr_t *ret_slot; /* where the caller's return address is */
	uintptr_t ret;	     /* that return address */
};

static __thread struct dl_pending dl_pending[DL_NEST_MAX] __attribute__((tls_model("initial-exec")));
static __thread unsigned dl_depth __attribute__((tls_model("initial-exec")));

/* The object that holds address A (its span and segments), for reading
 * around a call site safely. */
struct find_object {
	uintptr_t a;
	struct object o;
	bool found;
};

static int find_visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find_object *fo = arg;
	int i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && fo->a - lo < ph->p_memsz) {
			fo->found = true;
			object_read(info, &fo->o);
			return 1;
		}
	}
	return 0;
}

/* Whether the slot at S lies in O's writable memory and holds STUB. */
static bool slot_holds(const struct object *o, uintptr_t s, const void *stub)
{
	return !(s & 7) && (in_write(o, s) || in_span(o->relro_lo, o->relro_hi, s, 8)) &&
	       *(const uintptr_t *)s == (uintptr_t)stub;
}

/* The call instruction that returned to RET, if running it again leads to
 * STUB; else 0. */
static uintptr_t call_site(uintptr_t ret, const void *stub)
{
	struct find_object fo = { .a = ret - 1 };
	const uint8_t *c;
	int32_t d;

	dl_iterate_phdr(find_visit, &fo);
	if (!fo.found || !in_exec(&fo.o, ret - 6))
		return 0;
	c = (const uint8_t *)ret;
	if (c[-6] == 0xff && c[-5] == 0x15) { /* call *disp32(%rip) */
		memcpy(&d, c - 4, 4);
		return slot_holds(&fo.o, ret + (intptr_t)d, stub) ? ret - 6 : 0;
	}
	if (c[-5] == 0xe8) { /* call rel32, to a PLT entry: [endbr64] [bnd] jmp *disp32(%rip) */
		uintptr_t t;
		const uint8_t *e;

		memcpy(&d, c - 4, 4);
		t = ret + (intptr_t)d;
		if (!in_exec(&fo.o, t) || !in_exec(&fo.o, t + 11))
			return 0;
		e = (const uint8_t *)t;
		if (e[0] == 0xf3 && e[1] == 0x0f && e[2] == 0x1e && e[3] == 0xfa)
			e += 4;
		if (e[0] == 0xf2)
			e++;
		if (e[0] != 0xff || e[1] != 0x25)
			return 0;
		memcpy(&d, e + 2, 4);
		return slot_holds(&fo.o, (uintptr_t)(e + 6) + (intptr_t)d, stub) ? ret - 5 : 0;
	}
	return 0;
}

/* Called by the stubs with RET_SLOT, where the caller's return address
 * is, and WHICH (DL_OPEN, DL_MOPEN).  Returns the function to jump to
 * (the return address possibly replaced, see above), or NULL when this is
 * the return of one sent on: the stub then returns to the caller. */
void *route_dl_enter(uintptr_t *ret_slot, int which)
{
	int saved = errno, tries;
	uintptr_t x;

	if (dl_depth && dl_pending[dl_depth - 1].ret_slot == ret_slot && dl_pending[dl_depth - 1].ret == *ret_slot) {
		dl_depth--;
		/* not inside an allocation: a pass under way in another thread
		 * (which may have begun before this load) is waited for */
		for (tries = 0; route_all() == -EBUSY && tries < 1000; tries++)
			sched_yield();
		errno = saved;
		return NULL;
	}
	/* calls left by a longjmp out of a constructor: deeper than this one */
	while (dl_depth && dl_pending[dl_depth - 1].ret_slot < ret_slot)
		dl_depth--;
	x = dl_depth < DL_NEST_MAX ? call_site(*ret_slot, extra_to[which]) : 0;
	if (x) {
		dl_pending[dl_depth++] = (struct dl_pending){ ret_slot, *ret_slot };
		*ret_slot = x;
	}
	errno = saved;
	return route_extra_real[which];
}

/* --- The entry target/inject.c calls (bpf/abi/preload.h) --- */

VISIBLE int dwleak_injected_start(void)
{
	struct next_def def[EXTRA_COUNT];
	uint32_t got;
	int f;

	if (!next_of(F_MALLOC))
		return -EAGAIN; /* cannot happen: the constructor resolved them */
	for (f = 0; f < F_COUNT; f++)
		next_of(f); /* the C++ operators too, when a C++ runtime is loaded */
	got = next_defs_find(extra_fns, EXTRA_COUNT, (1u << EXTRA_COUNT) - 1, def, NULL);
	for (f = 0; f < EXTRA_COUNT; f++)
		route_extra_real[f] = (got & (1u << f)) ? def[f].fn : NULL;
	__atomic_store_n(&ctl.injected, 1, __ATOMIC_RELEASE);
	return route_all();
}
