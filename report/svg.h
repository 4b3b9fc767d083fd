/* The svg report format: a self-contained interactive flame graph of the
 * outstanding bytes of a report, drawn by dwleak itself (no external script). */
#ifndef DWLEAK_SVG_H
#define DWLEAK_SVG_H

#include <stdio.h>

#include "report.h"

/*
 * Writes R to F as one SVG document: a flame graph (the outermost frame at
 * the bottom, callees stacked above their callers) whose widths are
 * outstanding bytes, with a title (pid, command, totals), a colour legend,
 * hover details, click-to-zoom and a search box run by a small inline script.
 * Frames sharing the same chain of callers are merged; inlined frames are
 * boxes of their own, drawn in italics.  A report with no outstanding bytes
 * gives a small SVG that says so.
 *
 * TOP has the meaning of the other writers: at most TOP stacks (0 = all), in
 * report_sort() order, are drawn; the bytes of the others are kept in one
 * "[N more stacks]" box so every width stays a share of all the bytes.
 * Boxes narrower than 0.1 px are left out; their bytes stay in the parent.
 *
 * R and its strings are only read.  Nothing is written before the graph is
 * built, so -ENOMEM leaves F untouched.
 * Returns 0, -ENOMEM, or -EIO when F reports an error.
 */
int report_write_svg(FILE *f, const struct report *r, unsigned int top);

#endif
