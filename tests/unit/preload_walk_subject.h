/* tests/unit/preload_walk_subject.c's calls (see there). */
#ifndef DWLEAK_TEST_PRELOAD_WALK_SUBJECT_H
#define DWLEAK_TEST_PRELOAD_WALK_SUBJECT_H

/* DEPTH frames of recursion, then HERE(ARG); returns a sum. */
int subject_recurse(int depth, void (*here)(void *), void *arg);

/* DEPTH frames, then libc's qsort, whose first call of the comparator
 * calls HERE(ARG). */
int subject_qsort(int depth, void (*here)(void *), void *arg);

/* DEPTH frames, then raise(SIG): the handler runs on top of libc. */
int subject_raise(int depth, int sig);

#endif
