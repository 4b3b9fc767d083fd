/* The svg writer's old header name, kept only for cli/trace.c until it
 * includes write.h (the format table) or svg.h; then this file goes. */
#ifndef DWLEAK_FLAMEGRAPH_H
#define DWLEAK_FLAMEGRAPH_H

#include "svg.h"

#endif
