// Interface of the seed's leaking library (seed_leak_lib.cpp, or
// seed_malloc_lib.cpp for the malloc variant).
#ifndef DWLEAK_SEED_LEAK_LIB_H
#define DWLEAK_SEED_LEAK_LIB_H

namespace LeakLib {
extern long iterations;  // allocations before returning; 0 = forever
extern long interval_ms; // pause between allocations
extern long delay_ms;    // pause before the first allocation
void slowMemoryLeak();
void pause_ms(long ms);
}

#endif
