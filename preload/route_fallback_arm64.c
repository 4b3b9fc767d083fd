/* What route.c gives the rest of the library, on arm64, where dwleak does
 * not yet load the library into a running process (target/inject.c is
 * x86_64's, and so are route.c's relocation types and route_dl.S's
 * stubs): no pass ever runs, and the injector's entry answers that it is
 * not built (the library is loaded with LD_PRELOAD there, whose binding
 * needs no routing). */
#include <errno.h>

#include "interpose.h"

/* The control block's injected flag is never set on arm64, so a route
 * request has nothing to do. */
void route_requested(uintptr_t ra)
{
	(void)ra;
}

VISIBLE int dwleak_injected_start(void)
{
	return -ENOSYS;
}
