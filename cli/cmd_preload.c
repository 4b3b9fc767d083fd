/* `dwleak preload`: the path the lookup of target/preload_path.c finds. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_preload.h"
#include "options.h"
#include "preload.h"
#include "preload_path.h"

static const char preload_usage[] =
	"Usage: dwleak preload\n"
	"\n"
	"Prints the absolute path of libdwleak-preload.so.  A process started with it,\n"
	"  LD_PRELOAD=$(dwleak preload) ./server\n"
	"(or Environment=LD_PRELOAD=... in a systemd unit) carries dwleak's probe sites:\n"
	"while no dwleak is attached they cost a test and a jump per call; `dwleak -p PID`\n"
	"then uses them instead of trapping the allocator, at a fraction of the cost.\n"
	"`dwleak -- CMD` preloads it by default (--no-preload: not).\n"
	"\n"
	"The library is the one beside the dwleak that runs: in a build tree, build/;\n"
	"installed, PREFIX/lib/TUPLE/dwleak/ (the Debian package's\n"
	"/usr/lib/x86_64-linux-gnu/dwleak/libdwleak-preload.so, a path that stays the\n"
	"same across upgrades).  DWLEAK_PRELOAD_LIB=FILE uses FILE instead.\n"
	"\n"
	"  -h, --help            show this help\n"
	"\n"
	"Exit status: 0 success, 2 no library found or an argument given.\n";

int cmd_preload(int argc, char **argv)
{
	char *path;
	int err;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		fputs(preload_usage, stdout);
		return 0;
	}
	if (argc > 1)
		return usage_error("dwleak preload", "takes no argument ('%s')", argv[1]);
	err = preload_library_path(&path);
	if (err) {
		fprintf(stderr, "dwleak: %s\n",
			err == -ENOMEM ? "out of memory"
				       : "cannot find " DWLEAK_PRELOAD_NAME " beside dwleak, nor installed with it "
					 "(build it with make, install it with make install or the Debian package, "
					 "or set DWLEAK_PRELOAD_LIB)");
		return EXIT_USAGE;
	}
	printf("%s\n", path);
	free(path);
	return 0;
}
