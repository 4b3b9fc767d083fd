/* oracle_freed: freed memory that still holds pointers, for
 * tests/oracle_memcheck.sh.  A freed block is no longer memory of the
 * program: memcheck never scans it (its freed blocks are out of reach),
 * so whatever only a freed block pointed to is lost.  glibc keeps a freed
 * chunk's bytes as they were, but for the few words its free lists write
 * (tcache: the first 16 bytes; fastbins: 8; unsorted and the other bins:
 * 16, or 32 in a large bin; the top chunk: its 16-byte header), so the
 * stale pointers below stay readable in the process until exit.
 *
 * Each site_* frees a parent whose words past the allocator's ones point
 * to children that stay allocated:
 *
 *   site_tcache    parent 64 B   -> tcache          child 32 B (holds a
 *                                                    grandchild of 16 B)
 *   site_array     array 128 B   -> tcache          14 blocks of 48 B
 *   site_fastbin   parent 96 B   -> fastbin (its    child 64 B
 *                  tcache bin filled by 7 fillers of 96 B, freed first)
 *   site_unsorted  parent 2000 B -> unsorted bin    children 80 B, 112 B
 *                  (a guard of 16 B after it, kept in a global, stops it
 *                  from merging into the top chunk)
 *   site_large     array 40000 B -> unsorted bin    4 blocks of 80 B
 *                  (sorted into a large bin on the next malloc)
 *   site_mmapped   parent 300000 B -> munmapped     child 144 B (the only
 *                  case where the stale pointer is gone from the process;
 *                  its malloc also moves site_fastbin's parent from its
 *                  fastbin to the unsorted bin: malloc_consolidate)
 *   site_top       parent 5000 B -> merged into the top chunk (the last
 *                  chunk before it)                child 96 B
 *
 * Every child's size is a multiple of 16, so that no allocator pointer to
 * the chunk after it (a free list's, the top's) lands inside it: that is
 * oracle_sizes's case; here only the freed parents' words point to them.
 * The frees run in that order; nothing is allocated after site_top.
 * memcheck (--run-libc-freeres=no --run-cxx-freeres=no): definitely lost
 * 32 + 14 x 48 + 64 + 80 + 112 + 4 x 80 + 144 + 96 = 1,520 bytes in 24
 * blocks, indirectly lost 16 bytes in 1 block (the grandchild), still
 * reachable 16 bytes (the guard), nothing possibly lost.  The program
 * prints nothing and exits 0.  -O0, like the other oracle programs. */
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

typedef void *volatile slot;

slot g_guard; /* keeps site_unsorted's parent off the top chunk */

/* Overwrites the dead stack below the caller, where the sites' frames
 * left copies of the pointers they handled. */
static NOINLINE void scrub_stack(void)
{
	volatile char buf[16384];

	memset((char *)buf, 0, sizeof(buf));
}

/* A parent of SIZE bytes, zeroed, whose words from FIRST on get the
 * children of the sizes in CHILD (0-terminated). */
static NOINLINE slot *parent_with(size_t size, int first, const size_t *child)
{
	slot *p = malloc(size);
	int i;

	memset((void *)p, 0, size);
	for (i = 0; child[i]; i++)
		p[first + i] = malloc(child[i]);
	return p;
}

static NOINLINE void site_tcache(void)
{
	static const size_t child[] = { 32, 0 };
	slot *p = parent_with(64, 3, child);

	/* the child holds the grandchild: lost with it, indirectly */
	*(slot *)p[3] = malloc(16);
	free((void *)p);
}

static NOINLINE void site_array(void)
{
	static const size_t child[] = { 48, 48, 48, 48, 48, 48, 48, 48, 48, 48, 48, 48, 48, 48, 0 };

	free((void *)parent_with(128, 2, child));
}

static NOINLINE void site_fastbin(void)
{
	static const size_t child[] = { 64, 0 };
	void *filler[7];
	slot *p = parent_with(96, 4, child);
	int i;

	for (i = 0; i < 7; i++)
		filler[i] = malloc(96);
	for (i = 0; i < 7; i++)
		free(filler[i]); /* tcache's bin for this size is full now */
	free((void *)p);
}

static NOINLINE void site_unsorted(void)
{
	static const size_t child[] = { 80, 112, 0 };
	slot *p = parent_with(2000, 4, child);

	g_guard = malloc(16);
	free((void *)p);
}

static NOINLINE void site_large(void)
{
	static const size_t child[] = { 80, 80, 80, 80, 0 };

	free((void *)parent_with(40000, 6, child));
}

static NOINLINE void site_mmapped(void)
{
	static const size_t child[] = { 144, 0 };

	free((void *)parent_with(300000, 4, child));
}

static NOINLINE void site_top(void)
{
	static const size_t child[] = { 96, 0 };
	slot *p;

	/* the child first, so that the parent is the chunk before the top */
	void *c = malloc(child[0]);

	p = malloc(5000);
	memset((void *)p, 0, 5000);
	p[4] = c;
	c = NULL;
	free((void *)p);
}

int main(void)
{
	site_tcache();
	site_array();
	site_fastbin();
	site_unsorted();
	site_large();
	site_mmapped();
	site_top();
	scrub_stack();
	return 0;
}
