// The leaking program from the seed article (main -> caller ->
// LeakLib::slowMemoryLeak), with options so a test run can end:
//   --iterations N   allocations before returning (default 0 = forever)
//   --interval-ms M  pause between allocations (default 1000, as in the article)
//   --delay-ms D     pause before the first allocation (time to attach)
// The same options can come from DWLEAK_SEED_ITERATIONS / _INTERVAL_MS / _DELAY_MS.
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "seed_leak_lib.h"

// Kept a separate function as in the article; gcc -O2 inlines it into main.
int caller() {
    std::cout << "In caller" << std::endl;
    LeakLib::slowMemoryLeak();
    return 0;
}

static long env_long(const char *name, long def) {
    const char *v = std::getenv(name);
    return v && *v ? std::strtol(v, nullptr, 10) : def;
}

static int usage(const char *prog) {
    std::cerr << "usage: " << prog
              << " [--iterations N] [--interval-ms M] [--delay-ms D]" << std::endl;
    return 2;
}

int main(int argc, char **argv) {
    LeakLib::iterations = env_long("DWLEAK_SEED_ITERATIONS", 0);
    LeakLib::interval_ms = env_long("DWLEAK_SEED_INTERVAL_MS", 1000);
    LeakLib::delay_ms = env_long("DWLEAK_SEED_DELAY_MS", 0);
    for (int i = 1; i < argc; i++) {
        long *dst;
        if (!std::strcmp(argv[i], "--iterations"))
            dst = &LeakLib::iterations;
        else if (!std::strcmp(argv[i], "--interval-ms"))
            dst = &LeakLib::interval_ms;
        else if (!std::strcmp(argv[i], "--delay-ms"))
            dst = &LeakLib::delay_ms;
        else
            return usage(argv[0]);
        if (++i == argc)
            return usage(argv[0]);
        *dst = std::strtol(argv[i], nullptr, 10);
    }
    std::cout << "Starting slow memory leak program..." << std::endl;
    caller();
    return 0;
}
