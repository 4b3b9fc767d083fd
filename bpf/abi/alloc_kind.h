/* The allocator functions dwleak tells apart: one list, shared by the
 * kernel program (attach cookies, records), the allocator detection in
 * target/ and the reports.  Each entry: the enum name, the public name
 * reports print, and whether a call of it frees (entry-only probe). */
#ifndef DWLEAK_ALLOC_KIND_H
#define DWLEAK_ALLOC_KIND_H

/* X(enum, name, frees) */
#define ALLOC_KIND_LIST(X)                                                                      \
	X(ALLOC_MALLOC, "malloc", 0)                                                            \
	X(ALLOC_CALLOC, "calloc", 0)                                                            \
	X(ALLOC_REALLOC, "realloc", 0)                                                          \
	X(ALLOC_REALLOCARRAY, "reallocarray", 0)                                                \
	X(ALLOC_POSIX_MEMALIGN, "posix_memalign", 0)                                            \
	X(ALLOC_ALIGNED_ALLOC, "aligned_alloc", 0)                                              \
	X(ALLOC_MEMALIGN, "memalign", 0)                                                        \
	X(ALLOC_VALLOC, "valloc", 0)                                                            \
	X(ALLOC_PVALLOC, "pvalloc", 0)                                                          \
	X(ALLOC_FREE, "free", 1)                                                                \
	/* operator new, every variant: size is the first argument */                          \
	X(ALLOC_NEW, "operator new", 0)                                                         \
	X(ALLOC_NEW_ARRAY, "operator new[]", 0)                                                 \
	/* operator delete / delete[], every variant: free-like */                             \
	X(ALLOC_DELETE, "operator delete", 1)                                                   \
	/* jemalloc mallocx(size, flags) */                                                     \
	X(ALLOC_MALLOCX, "mallocx", 0)                                                          \
	/* jemalloc rallocx(ptr, size, flags): moves like realloc */                            \
	X(ALLOC_RALLOCX, "rallocx", 0)                                                          \
	/* jemalloc xallocx(ptr, size, extra, flags): resizes in place */                       \
	X(ALLOC_XALLOCX, "xallocx", 0)                                                          \
	/* jemalloc sdallocx(ptr, size, flags): free-like */                                    \
	X(ALLOC_SDALLOCX, "sdallocx", 1)                                                        \
	/* jemalloc dallocx(ptr, flags): free-like */                                           \
	X(ALLOC_DALLOCX, "dallocx", 1)                                                          \
	/* --mmap: an anonymous mmap made outside the allocator */                              \
	X(ALLOC_MMAP, "mmap", 0)

#define ALLOC_KIND_ENUM(e, name, frees) e,
enum alloc_kind {
	ALLOC_KIND_LIST(ALLOC_KIND_ENUM)
	ALLOC_KIND_COUNT,
};
#undef ALLOC_KIND_ENUM

#endif
