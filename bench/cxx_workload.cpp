// A C++ program for the macro benchmark (bench/run_macro_bench.sh) that
// mixes computation with std::string / std::vector / std::map churn, as a
// service would: parse-ish string building, an ordered index, sorting, and
// some number crunching between allocations.  Deterministic (own LCG).
//
// usage: cxx_workload [SCALE]   (default 30; about 3 s on the bench VM)
// Prints one line: "cxx_workload: scale=N checksum=C elapsed_s=T", T the
// time main took (CLOCK_MONOTONIC; a tracer's attach and report are not in it).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <time.h>
#include <vector>

static uint64_t lcg_state = 42;

static uint32_t rnd() {
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return uint32_t(lcg_state >> 33);
}

// Pure computation: no allocation at all.
static double crunch(int n) {
    double acc = 0;
    for (int i = 1; i <= n; i++)
        acc += std::sin(i * 0.001) * std::sqrt(double(i)) / (1.0 + (i & 7));
    return acc;
}

static std::string make_name(uint32_t v) {
    std::string s = "customer-";
    s += std::to_string(v);
    if (v & 1)
        s += "-with-a-longer-suffix-that-does-not-fit-sso";
    return s;
}

static uint64_t one_round() {
    uint64_t sum = 0;
    // an ordered index: map<string, vector<int>> churn
    std::map<std::string, std::vector<int>> index;
    for (int i = 0; i < 3000; i++) {
        auto &v = index[make_name(rnd() % 1500)];
        v.push_back(int(rnd() % 1000));
    }
    for (auto it = index.begin(); it != index.end();) {
        sum += it->first.size() + it->second.size();
        if (it->second.size() < 2)
            it = index.erase(it);
        else
            ++it;
    }
    // vector of strings, built, sorted, joined
    std::vector<std::string> lines;
    lines.reserve(1000);
    for (int i = 0; i < 1000; i++) {
        std::string line = make_name(rnd());
        line += ',';
        line += std::to_string(rnd() % 100000);
        lines.push_back(std::move(line));
    }
    std::sort(lines.begin(), lines.end());
    std::string joined;
    for (auto &l : lines) {
        joined += l;
        joined += '\n';
    }
    sum += joined.size() + (unsigned char)lines[0][9];
    // numeric vectors grown one element at a time
    std::vector<std::vector<double>> rows;
    for (int r = 0; r < 200; r++) {
        std::vector<double> row;
        for (int c = 0; c < 50; c++)
            row.push_back(double(rnd() % 1000) / 7.0);
        std::sort(row.begin(), row.end());
        rows.push_back(std::move(row));
    }
    for (auto &row : rows)
        sum += uint64_t(row[25]);
    // computation that does not allocate
    sum += uint64_t(crunch(10000000));
    return sum;
}

static double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double t0 = now_s();
    int scale = argc > 1 ? std::atoi(argv[1]) : 30;
    uint64_t checksum = 0;
    for (int i = 0; i < scale; i++)
        checksum += one_round();
    std::printf("cxx_workload: scale=%d checksum=%llu elapsed_s=%.3f\n", scale,
                (unsigned long long)checksum, now_s() - t0);
    return 0;
}
