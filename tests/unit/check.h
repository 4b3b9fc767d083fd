/* The unit tests' assertion: CHECK(cond, fmt, ...) prints where it failed
 * and why, and exits 1.  One header so every test reports the same way. */
#ifndef DWLEAK_TEST_CHECK_H
#define DWLEAK_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                 \
			fputc('\n', stderr);                                          \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

#endif
