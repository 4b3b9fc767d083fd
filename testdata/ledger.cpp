// The ledger program (issue 5): 4 threads allocate and free through a
// random but seeded mix of the whole malloc family and the C++ operators,
// each call from its own call site (a noipa function site_*), and keep a
// ledger of what is still outstanding per site: bytes as REQUESTED and the
// number of allocations.  realloc/reallocarray move the accounting: the
// new block belongs to the realloc site, the old one leaves its site.
// At the sync point (all threads joined) the ledger is written as JSON to
// --ledger FILE and the program exits without freeing anything outstanding.
//
//   --ledger FILE   where to write the ledger (default: stdout)
//   --ops N         operations per thread (default 2000)
//   --threads T     threads (default 4); thread i uses seed 1234 + i
//   --go-file PATH  wait until PATH exists before starting (dwleak -p
//                   attaches meanwhile)
//
// Allocator semantics that differ are handled by what the call returns:
//   malloc(0) returns a unique pointer under glibc, tcmalloc and jemalloc;
//     it is counted as 1 allocation of 0 bytes (a NULL result as nothing).
//   realloc(p, 0): glibc and gperftools free p and return NULL; jemalloc 5.3
//     follows opt.zero_realloc ("free" by default on Linux, "alloc" returns
//     a minimal block).  A NULL result is counted as p freed; a non-NULL one
//     as a new 0-byte allocation of the site (and p gone).
// The allocator in use (which object defines malloc, via dladdr) is written
// to the ledger as "allocator" for the record.
#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#define SITE extern "C" __attribute__((noipa))

// Keeps the compiler from turning the allocator call into a tail call (the
// site's frame must be in the stack) or from eliding it; the tag makes each
// site's code distinct.
static inline void keep(void *p, int tag) {
    asm volatile("" : : "r"(p), "r"(tag) : "memory");
}

struct Node {
    long a, b, c, d, e, f;  // 48 bytes, trivially destructible (no array cookie)
};

// --- C allocation sites ---
SITE void *site_malloc_a(size_t n) { void *p = malloc(n); keep(p, 1); return p; }
SITE void *site_malloc_b(size_t n) { void *p = malloc(n); keep(p, 2); return p; }
SITE void *site_malloc_zero(void) { void *p = malloc(0); keep(p, 3); return p; }
SITE void *site_calloc_a(size_t k, size_t n) { void *p = calloc(k, n); keep(p, 4); return p; }
SITE void *site_calloc_b(size_t k, size_t n) { void *p = calloc(k, n); keep(p, 5); return p; }
SITE void *site_realloc_grow(void *o, size_t n) { void *p = realloc(o, n); keep(p, 6); return p; }
SITE void *site_realloc_shrink(void *o, size_t n) { void *p = realloc(o, n); keep(p, 7); return p; }
SITE void *site_realloc_zero(void *o) { void *p = realloc(o, 0); keep(p, 8); return p; }
SITE void *site_realloc_null(size_t n) { void *p = realloc(nullptr, n); keep(p, 9); return p; }
SITE void *site_reallocarray_a(void *o, size_t k, size_t n) {
    void *p = reallocarray(o, k, n);
    keep(p, 10);
    return p;
}
SITE void *site_posix_memalign_a(size_t al, size_t n) {
    void *p = nullptr;
    if (posix_memalign(&p, al, n))
        p = nullptr;
    keep(p, 11);
    return p;
}
SITE void *site_aligned_alloc_a(size_t al, size_t n) { void *p = aligned_alloc(al, n); keep(p, 12); return p; }
SITE void *site_memalign_a(size_t al, size_t n) { void *p = memalign(al, n); keep(p, 13); return p; }

// --- C++ allocation sites ---
SITE void *site_new_a(void) { Node *p = new Node(); keep(p, 14); return p; }
SITE void *site_new_b(size_t n) { void *p = ::operator new(n); keep(p, 15); return p; }
SITE void *site_new_array_a(size_t n) { char *p = new char[n]; keep(p, 16); return p; }
SITE void *site_new_array_b(size_t k) { int *p = new int[k]; keep(p, 17); return p; }
SITE void *site_new_nothrow_a(size_t n) { char *p = new (std::nothrow) char[n]; keep(p, 18); return p; }
SITE void *site_new_aligned_a(size_t n) {
    void *p = ::operator new(n, std::align_val_t(64));
    keep(p, 19);
    return p;
}

// How a block is given back.
enum Kind { K_C, K_NEW_NODE, K_NEW_RAW, K_NEW_ARR_CHAR, K_NEW_ARR_INT, K_NEW_ALIGNED };

struct Block {
    void *p;
    size_t size;  // requested bytes
    const char *site;
    Kind kind;
};

static void release(const Block &b, std::mt19937 &rng) {
    switch (b.kind) {
    case K_C:
        free(b.p);
        break;
    case K_NEW_NODE:
        delete static_cast<Node *>(b.p);  // sized delete (-fsized-deallocation)
        break;
    case K_NEW_RAW:
        if (rng() & 1)
            ::operator delete(b.p);
        else
            ::operator delete(b.p, b.size);
        break;
    case K_NEW_ARR_CHAR:
        delete[] static_cast<char *>(b.p);
        break;
    case K_NEW_ARR_INT:
        delete[] static_cast<int *>(b.p);
        break;
    case K_NEW_ALIGNED:
        ::operator delete(b.p, std::align_val_t(64));
        break;
    }
}

struct Thread {
    unsigned seed;
    long ops;
    std::vector<Block> live;
    long calls = 0;
};

static size_t pick_size(std::mt19937 &rng) {
    return 1 + rng() % 5000;
}

static size_t pick_align(std::mt19937 &rng) {
    static const size_t al[] = {16, 32, 64, 128, 256, 4096};
    return al[rng() % (sizeof(al) / sizeof(al[0]))];
}

__attribute__((noipa)) static void worker(Thread *t) {
    std::mt19937 rng(t->seed);
    std::vector<Block> &live = t->live;
    live.reserve(t->ops + 1);
    for (long op = 0; op < t->ops; op++) {
        unsigned r = rng() % 100;
        // About a third frees once there is something to free.
        if (r < 33 && !live.empty()) {
            size_t i = rng() % live.size();
            release(live[i], rng);
            live[i] = live.back();
            live.pop_back();
            t->calls++;
            continue;
        }
        // Reallocations of a random block from the C family.
        if (r < 48) {
            std::vector<size_t> cands;
            for (size_t i = 0; i < live.size(); i++)
                if (live[i].kind == K_C)
                    cands.push_back(i);
            if (!cands.empty()) {
                size_t i = cands[rng() % cands.size()];
                Block &b = live[i];
                unsigned how = rng() % 4;
                void *np;
                size_t nsize;
                const char *site;
                if (how == 0) {
                    nsize = b.size + 1 + rng() % 2000;
                    np = site_realloc_grow(b.p, nsize);
                    site = "site_realloc_grow";
                } else if (how == 1) {
                    nsize = b.size > 1 ? 1 + rng() % (b.size - 1) : 1;
                    np = site_realloc_shrink(b.p, nsize);
                    site = "site_realloc_shrink";
                } else if (how == 2) {
                    nsize = 0;
                    np = site_realloc_zero(b.p);
                    site = "site_realloc_zero";
                } else {
                    size_t k = 1 + rng() % 50, n = 1 + rng() % 100;
                    nsize = k * n;
                    np = site_reallocarray_a(b.p, k, n);
                    site = "site_reallocarray_a";
                }
                t->calls++;
                if (np == nullptr && nsize != 0) {
                    std::fprintf(stderr, "ledger: %s(%zu) failed\n", site, nsize);
                    std::exit(1);
                }
                if (np == nullptr) {  // realloc(p, 0) freed p
                    live[i] = live.back();
                    live.pop_back();
                } else {
                    b = Block{np, nsize, site, K_C};
                }
                continue;
            }
        }
        // A fresh allocation from one of the sites.
        Block b{nullptr, 0, nullptr, K_C};
        size_t n = pick_size(rng), k, al;
        switch (rng() % 19) {
        case 0:
        case 1:
            b = {site_malloc_a(n), n, "site_malloc_a", K_C};
            break;
        case 2:
            b = {site_malloc_b(n), n, "site_malloc_b", K_C};
            break;
        case 3:
            b = {site_malloc_zero(), 0, "site_malloc_zero", K_C};
            break;
        case 4:
            k = 1 + rng() % 20;
            n = 1 + rng() % 250;
            b = {site_calloc_a(k, n), k * n, "site_calloc_a", K_C};
            break;
        case 5:
            k = 1 + rng() % 5;
            b = {site_calloc_b(k, n), k * n, "site_calloc_b", K_C};
            break;
        case 6:
            b = {site_realloc_null(n), n, "site_realloc_null", K_C};
            break;
        case 7:
            k = 1 + rng() % 40;
            n = 1 + rng() % 120;
            b = {site_reallocarray_a(nullptr, k, n), k * n, "site_reallocarray_a", K_C};
            break;
        case 8:
            al = pick_align(rng);
            b = {site_posix_memalign_a(al, n), n, "site_posix_memalign_a", K_C};
            break;
        case 9:
            al = pick_align(rng);
            b = {site_aligned_alloc_a(al, n), n, "site_aligned_alloc_a", K_C};
            break;
        case 10:
            al = pick_align(rng);
            b = {site_memalign_a(al, n), n, "site_memalign_a", K_C};
            break;
        case 11:
        case 12:
            b = {site_new_a(), sizeof(Node), "site_new_a", K_NEW_NODE};
            break;
        case 13:
            b = {site_new_b(n), n, "site_new_b", K_NEW_RAW};
            break;
        case 14:
        case 15:
            b = {site_new_array_a(n), n, "site_new_array_a", K_NEW_ARR_CHAR};
            break;
        case 16:
            k = 1 + rng() % 1200;
            b = {site_new_array_b(k), k * sizeof(int), "site_new_array_b", K_NEW_ARR_INT};
            break;
        case 17:
            b = {site_new_nothrow_a(n), n, "site_new_nothrow_a", K_NEW_ARR_CHAR};
            break;
        default:
            b = {site_new_aligned_a(n), n, "site_new_aligned_a", K_NEW_ALIGNED};
            break;
        }
        t->calls++;
        if (b.p == nullptr) {
            if (b.size == 0)
                continue;  // malloc(0) may return NULL: nothing outstanding
            std::fprintf(stderr, "ledger: %s(%zu) failed\n", b.site, b.size);
            std::exit(1);
        }
        live.push_back(b);
    }
}

static const char *const SITES[] = {
    "site_malloc_a", "site_malloc_b", "site_malloc_zero", "site_calloc_a", "site_calloc_b",
    "site_realloc_grow", "site_realloc_shrink", "site_realloc_zero", "site_realloc_null",
    "site_reallocarray_a", "site_posix_memalign_a", "site_aligned_alloc_a", "site_memalign_a",
    "site_new_a", "site_new_b", "site_new_array_a", "site_new_array_b", "site_new_nothrow_a",
    "site_new_aligned_a",
};

// The first object in lookup order (dl_iterate_phdr's order) that defines
// malloc itself, passing over dwleak's preload library, which only
// forwards each call to the next definition: the allocator that serves.
static int first_malloc(struct dl_phdr_info *info, size_t, void *arg) {
    std::string *out = static_cast<std::string *>(arg);
    const char *name = info->dlpi_name;
    if (!out->empty() || !name || !*name || std::strstr(name, "libdwleak-preload"))
        return 0;
    void *h = dlopen(name, RTLD_NOLOAD | RTLD_LAZY);
    void *m = h ? dlsym(h, "malloc") : nullptr;
    Dl_info at;
    if (m && dladdr(m, &at) && at.dli_fname && !std::strcmp(at.dli_fname, name))
        *out = name;
    if (h)
        dlclose(h);
    return 0;
}

// Which object defines the malloc this program calls.
static std::string allocator_name() {
    Dl_info info;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    if (!m || !dladdr(m, &info) || !info.dli_fname)
        return "unknown";
    std::string f = info.dli_fname;
    if (f.find("libdwleak-preload") != std::string::npos) {
        f.clear();
        dl_iterate_phdr(first_malloc, &f);
    }
    if (f.find("tcmalloc") != std::string::npos)
        return "tcmalloc";
    if (f.find("jemalloc") != std::string::npos)
        return "jemalloc";
    if (f.find("mimalloc") != std::string::npos)
        return "mimalloc";
    if (f.find("libc.so") != std::string::npos)
        return "glibc";
    return f.empty() ? "unknown" : f;
}

static int usage(const char *prog) {
    std::fprintf(stderr, "usage: %s [--ledger FILE] [--ops N] [--threads T] [--go-file PATH]\n", prog);
    return 2;
}

int main(int argc, char **argv) {
    const char *out = nullptr, *go = nullptr;
    long ops = 2000, nthreads = 4;
    for (int i = 1; i < argc; i++) {
        if (i + 1 == argc)
            return usage(argv[0]);
        if (!std::strcmp(argv[i], "--ledger"))
            out = argv[++i];
        else if (!std::strcmp(argv[i], "--ops"))
            ops = std::strtol(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--threads"))
            nthreads = std::strtol(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--go-file"))
            go = argv[++i];
        else
            return usage(argv[0]);
    }
    if (ops < 0 || nthreads < 1 || nthreads > 64)
        return usage(argv[0]);
    while (go && access(go, F_OK))
        usleep(10000);

    std::vector<Thread> ts(nthreads);
    for (long i = 0; i < nthreads; i++) {
        ts[i].seed = 1234 + (unsigned)i;
        ts[i].ops = ops;
    }
    {
        std::vector<std::thread> th;
        th.reserve(nthreads);
        for (long i = 0; i < nthreads; i++)
            th.emplace_back(worker, &ts[i]);
        for (auto &x : th)
            x.join();
    }

    // The sync point: every thread joined; the ledger is what is live.
    std::map<std::string, std::pair<unsigned long, unsigned long>> ledger;
    for (const char *s : SITES)
        ledger[s] = {0, 0};
    unsigned long bytes = 0, count = 0, calls = 0;
    for (auto &t : ts) {
        calls += t.calls;
        for (auto &b : t.live) {
            ledger[b.site].first += b.size;
            ledger[b.site].second++;
            bytes += b.size;
            count++;
        }
    }
    FILE *f = out ? std::fopen(out, "w") : stdout;
    if (!f) {
        std::perror(out);
        return 1;
    }
    std::fprintf(f, "{\n  \"allocator\": \"%s\",\n  \"threads\": %ld,\n  \"ops_per_thread\": %ld,\n"
                    "  \"calls\": %lu,\n  \"outstanding_bytes\": %lu,\n  \"outstanding_allocations\": %lu,\n"
                    "  \"sites\": {",
                 allocator_name().c_str(), nthreads, ops, calls, bytes, count);
    bool first = true;
    for (auto &e : ledger) {
        std::fprintf(f, "%s\n    \"%s\": {\"bytes\": %lu, \"allocations\": %lu}", first ? "" : ",",
                     e.first.c_str(), e.second.first, e.second.second);
        first = false;
    }
    std::fprintf(f, "\n  }\n}\n");
    if (f != stdout)
        std::fclose(f);
    // Exit without freeing what is outstanding: that is the leak to find.
    return 0;
}
