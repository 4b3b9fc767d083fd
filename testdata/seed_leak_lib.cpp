// The article's leak: new int[10] (40 bytes) per iteration, never freed.
#include <time.h>

#include "seed_leak_lib.h"

namespace LeakLib {
long iterations;
long interval_ms = 1000;
long delay_ms;

void pause_ms(long ms) {
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

void slowMemoryLeak() {
    int arrSize = 10;
    pause_ms(delay_ms);
    for (long n = 0; iterations == 0 || n < iterations; n++) {
        int *p = new int[arrSize];
        for (int i = 0; i < arrSize; ++i) {
            p[i] = i; // Assign values to occupy physical memory
        }
        // Keep the optimiser from eliding the allocation (clang would).
        asm volatile("" : : "r"(p) : "memory");
        pause_ms(interval_ms);
    }
}
}
