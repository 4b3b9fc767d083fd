# dwleak's build.  Every source list is a wildcard, so a new file in tables/,
# unwinder/, cli/, bpf/ or tests/unit/ is built without editing this file.
#
#   make               ./dwleak (+ build/libtables.a, build/libunwinder.a, BPF skeletons)
#   make check         everything, ASan/UBSan builds, testdata, then tests/run.sh
#   make fuzz-smoke    libFuzzer on the table compiler for FUZZ_SECONDS (20)
#   make bench-tables  build and run bench/bench_tables.c (BENCH_ARGS=...)
#   make bench         bench-tables, then every tool compared (bench/results.md; root)
#   make testdata      only the test programs (build/testdata/)
#   make demo          the README's demo: trace the seed leak program
#   make clean

ifeq ($(origin CC),default)
CC := gcc
endif
CLANG ?= clang
BPFTOOL ?= bpftool
AR ?= ar

BUILD := build
ASAN := $(BUILD)/asan

# zlib: SHF_COMPRESSED sections.  libbpf joins once installed (it is after .ci/deps.sh).
PKGS := libelf libdw libzstd zlib $(shell pkg-config --exists libbpf 2>/dev/null && echo libbpf)
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
# libstdc++: __cxa_demangle for C++ names in reports.
LDLIBS := $(shell pkg-config --libs $(PKGS)) -lpthread -lstdc++ -lm

CFLAGS := -O2 -g -Wall -Wextra -Werror -std=gnu11
INCLUDES := -I tables -I unwinder -I bpf -I $(BUILD)
CPPFLAGS := $(INCLUDES) $(PKG_CFLAGS)
DEPFLAGS = -MMD -MP -MF $(@:.o=.d)
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
BPF_CFLAGS := -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_x86 -I $(BUILD) -I bpf -I tables -I unwinder
FUZZ_FLAGS := -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_SECONDS ?= 20

TABLES_SRCS := $(wildcard tables/*.c)
UNWINDER_SRCS := $(wildcard unwinder/*.c)
# The user side of a BPF concern may sit next to it as bpf/x.c.
CLI_SRCS := $(strip $(wildcard cli/*.c) $(filter-out %.bpf.c,$(wildcard bpf/*.c)))
BPF_SRCS := $(wildcard bpf/*.bpf.c)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)

objs = $(patsubst %.c,$(1)/%.o,$(2))
SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(BPF_SRCS))
LIBS := $(BUILD)/libunwinder.a $(BUILD)/libtables.a
ASAN_LIBS := $(ASAN)/libunwinder.a $(ASAN)/libtables.a
# Unit tests link the cli modules too (everything but main).
ASAN_CLI_LIB := $(ASAN)/libcli.a
UNIT_BINS := $(patsubst tests/unit/%.c,$(ASAN)/tests/%,$(UNIT_SRCS))

# Until cli/ has sources there is no dwleak to link; everything else builds.
DWLEAK := $(if $(CLI_SRCS),dwleak)
ASAN_DWLEAK := $(if $(CLI_SRCS),$(ASAN)/dwleak)
# Until tables/ has sources the fuzzer has nothing to call; its test skips.
FUZZER := $(if $(TABLES_SRCS),$(BUILD)/fuzz/fuzz_tables)

all: $(LIBS) $(SKELS) $(DWLEAK)
ifeq ($(CLI_SRCS),)
	@echo "note: no cli/*.c yet, ./dwleak not built"
endif

# --- Release build ---

$(BUILD)/%.o: %.c | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

# An archive with no members is valid; the rm keeps deleted sources out.
$(BUILD)/libtables.a: $(call objs,$(BUILD),$(TABLES_SRCS))
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^
$(BUILD)/libunwinder.a: $(call objs,$(BUILD),$(UNWINDER_SRCS))
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

dwleak: $(call objs,$(BUILD),$(CLI_SRCS)) $(LIBS)
	$(CC) $(CFLAGS) -o $@ $(call objs,$(BUILD),$(CLI_SRCS)) $(LIBS) $(LDLIBS)

# --- BPF: vmlinux.h from the running kernel, objects, skeletons ---

$(BUILD)/vmlinux.h:
	@mkdir -p $(@D)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp
	mv $@.tmp $@

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(BUILD)/vmlinux.h
	$(CLANG) $(BPF_CFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

# The skeleton is named after the object: bpf/x.bpf.c gives struct x_bpf.
$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@.tmp
	mv $@.tmp $@

# --- ASan/UBSan build for the tests ---

$(ASAN)/%.o: %.c | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ASAN_FLAGS) $(DEPFLAGS) -c $< -o $@

$(ASAN)/libtables.a: $(call objs,$(ASAN),$(TABLES_SRCS))
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^
$(ASAN)/libunwinder.a: $(call objs,$(ASAN),$(UNWINDER_SRCS))
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

$(ASAN)/dwleak: $(call objs,$(ASAN),$(CLI_SRCS)) $(ASAN_LIBS)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -o $@ $(call objs,$(ASAN),$(CLI_SRCS)) $(ASAN_LIBS) $(LDLIBS)

# Each tests/unit/test_NAME.c is one test program.
$(ASAN_CLI_LIB): $(call objs,$(ASAN),$(filter-out cli/main.c,$(CLI_SRCS)))
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

$(ASAN)/tests/%: tests/unit/%.c $(ASAN_CLI_LIB) $(ASAN_LIBS) | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ASAN_FLAGS) -I cli -MMD -MP -MF $@.d -o $@ $< $(ASAN_CLI_LIB) $(ASAN_LIBS) $(LDLIBS)

# --- Test programs ---

testdata:
	+$(MAKE) -C testdata OUT=$(CURDIR)/$(BUILD)/testdata

# --- Fuzzing: the table compiler on arbitrary bytes ---

$(BUILD)/fuzz/fuzz_tables: tests/fuzz/fuzz_tables.c $(TABLES_SRCS) $(wildcard tables/*.h)
	@mkdir -p $(@D)
	$(CLANG) $(CPPFLAGS) $(FUZZ_FLAGS) -Wall -Wextra -std=gnu11 -o $@ \
		tests/fuzz/fuzz_tables.c $(TABLES_SRCS) $(LDLIBS)

# Seed corpus: small real ELF files and damaged copies of them.
$(BUILD)/fuzz/seeds/.done: tests/fuzz/make_corpus.sh testdata
	bash tests/fuzz/make_corpus.sh $(BUILD)/fuzz/seeds $(BUILD)/testdata
	touch $@

fuzz-build: $(FUZZER) $(BUILD)/fuzz/seeds/.done

fuzz-smoke: fuzz-build
	ROOT=$(CURDIR) BUILD=$(CURDIR)/$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz_smoke.sh

# --- Tests ---

check-build: all $(ASAN_LIBS) $(ASAN_DWLEAK) $(UNIT_BINS) testdata fuzz-build

check: check-build
	ROOT=$(CURDIR) BUILD=$(CURDIR)/$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/run.sh

# --- Benchmarks ---

$(BUILD)/bench/bench_tables: bench/bench_tables.c $(BUILD)/libtables.a
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(BUILD)/libtables.a $(LDLIBS)

bench-tables: $(BUILD)/bench/bench_tables testdata
	$(BUILD)/bench/bench_tables $(BENCH_ARGS)

# malloc(64)+free ns/pair: bare, the uprobe floor, dwleak (dwarf, fp,
# sampled), bpftrace ustack, heaptrack, valgrind (needs root; ~2 minutes).
# Built with frame pointers so the bpftrace FP tracer gets its best case.
$(BUILD)/bench/malloc_bench: bench/malloc_bench.c
	@mkdir -p $(@D)
	$(CC) -O2 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -pthread -o $@ $<

# The macro benchmark's C++ workload and the wall-clock wrapper.
$(BUILD)/bench/cxx_workload: bench/cxx_workload.cpp
	@mkdir -p $(@D)
	$(CXX) -O2 -g -Wall -Wextra -Werror -o $@ $<

$(BUILD)/bench/walltime: bench/walltime.c
	@mkdir -p $(@D)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $<

# The own-floor loader (empty programs, and the exact-accounting minimum,
# at dwleak's own probe sites) and the per-operation cost loader.
$(BUILD)/bench/%.bpf.o: bench/%.bpf.c $(BUILD)/vmlinux.h
	@mkdir -p $(@D)
	$(CLANG) -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_x86 -I $(BUILD) -I bench -c -o $@ $<

BENCH_LOADER_SRCS := cli/attach.c unwinder/elf_symbols.c
$(BUILD)/bench/uprobe_floor $(BUILD)/bench/op_cost: $(BUILD)/bench/%: bench/%.c $(BENCH_LOADER_SRCS) \
		cli/attach.h bench/op_cost.h $(BUILD)/bench/%.bpf.o
	$(CC) -O2 -Wall -Wextra -Werror -I cli -I unwinder -I bench $(shell pkg-config --cflags libbpf libelf) -o $@ \
		$< $(BENCH_LOADER_SRCS) $(shell pkg-config --libs libbpf libelf) -lpthread

BENCH_PROGS := $(BUILD)/bench/malloc_bench $(BUILD)/bench/cxx_workload $(BUILD)/bench/walltime \
	$(BUILD)/bench/uprobe_floor $(BUILD)/bench/op_cost
BENCH_ENV := ROOT=$(CURDIR) BUILD=$(CURDIR)/$(BUILD) DWLEAK=$(CURDIR)/dwleak

bench-malloc: $(BUILD)/bench/malloc_bench $(DWLEAK)
	$(BENCH_ENV) MALLOC_BENCH=$(CURDIR)/$(BUILD)/bench/malloc_bench bash bench/run_malloc_bench.sh

# The comparison batch: micro, macro (python3.11, C++), attach latency and map
# memory, stack quality, the cost of each BPF operation; writes
# bench/results.md (needs root; ~13 minutes).
bench-all: $(BENCH_PROGS) $(DWLEAK) testdata
	$(BENCH_ENV) bash bench/run_all.sh

# bench-all after bench-tables, also with -j
bench: bench-tables
	+$(MAKE) bench-all

.PHONY: bench-malloc bench-all

clean:
	rm -rf $(BUILD) dwleak

# The README's demo: the seed article's leak, traced from its first
# instruction, with the frames frame-pointer tools lose.
demo: all testdata
	./dwleak -t 3 -- $(BUILD)/testdata/seed_O2 --iterations 30 --interval-ms 50

.PHONY: all testdata fuzz-build fuzz-smoke check-build check bench-tables bench clean demo
.DELETE_ON_ERROR:
# Keep intermediates (BPF objects, vmlinux.h) instead of deleting them.
.SECONDARY:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
