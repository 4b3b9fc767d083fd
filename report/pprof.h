/* The leak report as a pprof profile (gzip-compressed profile.proto), the
 * format pprof, Parca and Grafana Pyroscope read. */
#ifndef DWLEAK_PPROF_H
#define DWLEAK_PPROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report.h"

/*
 * Writes R to F as a gzip-compressed perftools.profiles.Profile, showing at
 * most TOP stacks (0 = all) in the order report_sort() gives, without
 * modifying R.  F must be open for binary output; the whole profile is built
 * and compressed in memory first, so an error other than -EIO leaves F
 * untouched.
 *
 * The profile follows pprof's heap convention: sample types
 * [inuse_objects/count, inuse_space/bytes] (inuse_space is the default),
 * one sample per stack with values [allocations, bytes] and locations
 * innermost first.  A frame and the inlined frames before it that share its
 * address become one Location with one Line each, innermost first.  A frame
 * without a function becomes a Location with only an address and a mapping.
 *
 * Mappings are one per (module, load bias).  Their bounds and file offset
 * are those of the module's PT_LOAD segment holding the frames, read from
 * the module's path when it still exists and its build id matches, so that
 * pprof's own symbolization (`-symbolize=force`, or a mapping where dwleak
 * named no frame) maps addresses back to the right ELF address; otherwise
 * they are approximated from the frames (see mapping_approximate() in
 * pprof.c).  A mapping where dwleak named any frame is marked as having
 * functions, so pprof keeps dwleak's names.
 *
 * Returns 0, -ENOMEM, -EIO when F reports an error, or -EPROTO when zlib
 * fails.
 */
int report_write_pprof(FILE *f, const struct report *r, unsigned int top);

/*
 * The same bytes report_write_pprof() writes, in memory (the agent's
 * /debug/pprof/heap): sets *OUT to a malloc'd buffer of *LEN bytes, which
 * the caller frees.  Samples of a stack that names its process (a pid or a
 * command) carry the labels pid and command, and comm when R's processes
 * give that pid one.  Returns 0, -ENOMEM or -EPROTO (zlib failed); on an
 * error *OUT is NULL and *LEN 0.
 */
int report_pprof_encode(const struct report *r, unsigned int top, uint8_t **out, size_t *len);

#endif
