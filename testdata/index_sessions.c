/* Blocks allocated under one dwleak session and freed while none listens
 * (tests/leak_check.sh, part j): SIGUSR1 allocates 10 blocks of 1000
 * bytes kept in a global array, SIGUSR2 frees them and clears the array;
 * each says so on stdout.  A second sampled leak check must not find the
 * freed blocks in the preload library's index: the library starts a new
 * index for each session, since the one before missed every free made
 * while nobody listened. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 10

static void *volatile kept[N];
static volatile sig_atomic_t want_alloc, want_free;

static void on_usr1(int sig)
{
	(void)sig;
	want_alloc = 1;
}

static void on_usr2(int sig)
{
	(void)sig;
	want_free = 1;
}

static void say(const char *s)
{
	if (write(1, s, strlen(s)) < 0)
		_exit(3);
}

int main(void)
{
	int i;

	signal(SIGUSR1, on_usr1);
	signal(SIGUSR2, on_usr2);
	say("waiting\n");
	for (;;) {
		if (want_alloc) {
			want_alloc = 0;
			for (i = 0; i < N; i++) {
				kept[i] = malloc(1000);
				memset(kept[i], 0x11, 1000);
			}
			say("allocated\n");
		}
		if (want_free) {
			want_free = 0;
			for (i = 0; i < N; i++) {
				free(kept[i]);
				kept[i] = NULL;
			}
			say("freed\n");
		}
		usleep(2000);
	}
}
