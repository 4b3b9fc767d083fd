/* Where the preload library is: the one lookup `dwleak preload` prints,
 * `dwleak -- CMD` preloads and `dwleak -p` injects. */
#ifndef DWLEAK_PRELOAD_PATH_H
#define DWLEAK_PRELOAD_PATH_H

/*
 * The absolute path of libdwleak-preload.so, malloc'd into *OUT: the file
 * $DWLEAK_PRELOAD_LIB names when set, else the first that exists of
 * DIR/libdwleak-preload.so, DIR/build/libdwleak-preload.so (dwleak run
 * from its source tree), DIR/../libdwleak-preload.so (the ASan build in
 * build/asan/), DIR/../lib/TUPLE/dwleak/libdwleak-preload.so (installed
 * by `make install` or the Debian package: /usr/bin/dwleak finds
 * /usr/lib/x86_64-linux-gnu/dwleak/, a path that stays the same across
 * upgrades) and DIR/../lib/dwleak/libdwleak-preload.so (an install
 * without the multiarch tuple), DIR being the directory of dwleak's own
 * executable with links resolved.  Returns 0, -ENOENT (none found; *OUT
 * then NULL) or -ENOMEM.
 */
int preload_library_path(char **out);

#endif
