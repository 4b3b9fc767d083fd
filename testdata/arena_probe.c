/* glibc's arenas as mallinfo2() sees them, for tests/unit/test_alloc_state.c:
 * allocates in the main arena and in a second thread's own arena (with a
 * block freed in each, so bins and top are in use), then prints
 * "arenas" then "ready ARENA KEEPCOST TP BLOCK" (mallinfo2's bytes the arenas hold
 * from the system, summed, and the main arena's top chunk; its thread pointer and a
 * block it holds, in hex) and waits for a line on
 * stdin before it exits. */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *in_thread(void *arg)
{
	char *a = malloc(3000), *b = malloc(72);

	(void)arg;
	memset(a, 1, 3000);
	free(a); /* into its arena's unsorted bin */
	return b;
}

int main(void)
{
	char *keep[64], line[16];
	struct mallinfo2 mi;
	pthread_t t;
	void *from_thread;
	int i;

	setvbuf(stdin, NULL, _IONBF, 0); /* its buffer would come from the arena after mallinfo2 */
	for (i = 0; i < 64; i++)
		keep[i] = malloc((size_t)(16 + 40 * i));
	for (i = 0; i < 64; i += 3)
		free(keep[i]);
	if (pthread_create(&t, NULL, in_thread, NULL) || pthread_join(t, &from_thread))
		return 1;
	/* stdout's buffer is allocated at its first use: before mallinfo2 */
	printf("arenas\n");
	mi = mallinfo2();
	printf("ready %zu %zu %lx %lx\n", mi.arena, mi.keepcost, (unsigned long)__builtin_thread_pointer(),
	       (unsigned long)keep[1]);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	free(from_thread);
	return keep[1] == NULL;
}
