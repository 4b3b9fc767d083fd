# dwleak's build.  Every source list is a wildcard, so a new file in a layer
# (tables/, target/, unwinder/, bpf/, report/, leakcheck/, session/, cli/) or tests/unit/ is built
# without editing this file.
#
#   make               ./dwleak (+ build/libdwleak_<layer>.a, BPF skeletons)
#   make check         everything, ASan/UBSan builds, testdata, then tests/run.sh
#   make fuzz-smoke    libFuzzer on the table compiler for FUZZ_SECONDS (20), on
#                      the cache entry decoder for FUZZ_CACHE_SECONDS (10), on
#                      the USDT notes and symbols of target files for
#                      FUZZ_OBJECTS_SECONDS (10), and on what the agent parses
#                      for FUZZ_AGENT_SECONDS (5)
#   make bench-tables  build and run bench/bench_tables.c (BENCH_ARGS=...)
#   make bench         bench-tables, then every tool compared (bench/results.md; root)
#   make bench-leakcheck  only the leak check's pause next to LSan's and memcheck's
#   make bench-agent   only dwleak agent's benchmarks
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

# zlib: SHF_COMPRESSED sections.  nettle: SHA-256 of the CFI a cached table
# was compiled from (its cache key; SHA-NI where the CPU has it, no global
# state or config files).  libbpf joins once installed (it is after .ci/deps.sh).
# libmicrohttpd: the agent's HTTP server (agent/http.c).
PKGS := libelf libdw libzstd zlib nettle libmicrohttpd $(shell pkg-config --exists libbpf 2>/dev/null && echo libbpf)
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
# libiberty (a static archive, libiberty-dev): cplus_demangle for the C++
# and Rust names in reports.
LDLIBS := $(shell pkg-config --libs $(PKGS)) -liberty -lpthread -lm

CFLAGS := -O2 -g -Wall -Wextra -Werror -std=gnu11
DEPFLAGS = -MMD -MP -MF $(@:.o=.d)
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
FUZZ_FLAGS := -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_SECONDS ?= 20
FUZZ_CACHE_SECONDS ?= 10
FUZZ_OBJECTS_SECONDS ?= 10

# --- Layers (ARCHITECTURE.md): one folder, one static library, and the
# include list of the layers it may use, so that an include against the
# arrows does not compile.  Two folders hold headers only: bpf/abi/, the
# contract between the kernel program, user space and the preload library,
# and base/ (constants), which is below every layer: each list ends with it.
LAYERS := tables target unwinder bpf report leakcheck session agent cli
INC_base := -I base
INC_abi := -I bpf/abi $(INC_base)
INC_tables := -I tables $(INC_base)
INC_target := -I target -I bpf/abi $(INC_base)
INC_unwinder := -I unwinder -I tables -I target -I bpf/abi $(INC_base)
INC_bpf := -I bpf -I bpf/abi -I unwinder -I target -I tables -I $(BUILD) $(INC_base)
INC_report := -I report $(INC_base)
# The leak check's algorithm: a leaf over blocks and memory it is handed.
INC_leakcheck := -I leakcheck $(INC_base)
# The agent's parts that need no live session: HTTP, metrics, targets,
# the exec/exit/OOM watcher (bpf/watch.c), the bounded stack table.
INC_agent := -I agent -I report -I target -I bpf -I bpf/abi $(INC_base)
# The live session: the processes, their ledgers, the programs, reports.
INC_session := -I session -I bpf -I bpf/abi -I unwinder -I target -I tables -I report -I leakcheck -I $(BUILD) $(INC_base)
INC_cli := -I cli -I agent -I session -I bpf -I bpf/abi -I unwinder -I target -I tables -I report -I leakcheck -I $(BUILD) $(INC_base)
# The include list of source file $(1): its folder's.
layer_inc = $(INC_$(firstword $(subst /, ,$(1))))
# The preload library's (see its rules below).
INC_preload := -I preload -I bpf/abi $(INC_base)
# Link order: each library before the ones it uses.
LINK_LAYERS := cli agent session bpf unwinder report leakcheck target tables

SRCS_tables := $(wildcard tables/*.c)
SRCS_target := $(wildcard target/*.c)
SRCS_unwinder := $(wildcard unwinder/*.c)
SRCS_bpf := $(filter-out %.bpf.c,$(wildcard bpf/*.c))
SRCS_report := $(wildcard report/*.c)
SRCS_leakcheck := $(wildcard leakcheck/*.c)
SRCS_session := $(wildcard session/*.c)
SRCS_agent := $(wildcard agent/*.c)
SRCS_cli := $(filter-out cli/main.c,$(wildcard cli/*.c))
TABLES_SRCS := $(SRCS_tables)
BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_CFLAGS := -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_x86 -I $(BUILD) -I bpf -I bpf/abi -I tables $(INC_base)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
# The preload library (see its rules below).
PRELOAD_LIB := $(BUILD)/libdwleak-preload.so
PRELOAD_SRCS := $(wildcard preload/*.c) $(wildcard preload/*.S)
PRELOAD_OBJS := $(patsubst preload/%,$(BUILD)/preload/%.o,$(PRELOAD_SRCS))

# Every header but the kernel program's parts, each checked alone (below).
HEADERS := $(filter-out %.bpf.h,$(foreach d,$(LAYERS) bpf/abi base preload,$(wildcard $(d)/*.h)))

objs = $(patsubst %.c,$(1)/%.o,$(2))
HEADER_CHECKS := $(patsubst %.h,$(BUILD)/headers/%.ok,$(HEADERS))
SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(BPF_SRCS))
LIBS := $(foreach l,$(LINK_LAYERS),$(BUILD)/libdwleak_$(l).a)
ASAN_LIBS := $(foreach l,$(LINK_LAYERS),$(ASAN)/libdwleak_$(l).a)
UNIT_BINS := $(patsubst tests/unit/%.c,$(ASAN)/tests/%,$(UNIT_SRCS))
FUZZERS := $(BUILD)/fuzz/fuzz_tables $(BUILD)/fuzz/fuzz_cache $(BUILD)/fuzz/fuzz_objects $(BUILD)/fuzz/fuzz_memory \
	$(BUILD)/fuzz/fuzz_agent

all: $(LIBS) $(SKELS) dwleak $(PRELOAD_LIB) $(HEADER_CHECKS)

# --- Release build ---

$(BUILD)/%.o: %.c | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(call layer_inc,$<) $(PKG_CFLAGS) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

# One archive per layer, release and ASan/UBSan.  An archive with no
# members is valid; the rm keeps deleted sources out.
define layer_lib
$(1)/libdwleak_$(2).a: $$(call objs,$(1),$$(SRCS_$(2)))
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call layer_lib,$(BUILD),$(l)))$(eval $(call layer_lib,$(ASAN),$(l))))

dwleak: $(BUILD)/cli/main.o $(LIBS)
	$(CC) $(CFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

# --- Headers: each one compiles alone with its folder's include list.  A
# header is otherwise compiled only inside the files that include it, with
# their lists, which may find what its own layer must not include (a
# bpf/abi/ header including a tables/ one compiles in every layer that may
# include both); here that fails.  It also keeps every header whole.
# (*.bpf.h are parts of the kernel program's one translation unit.)
# bpf/abi/ is inside bpf/ but has a list of its own.
header_inc = $(if $(filter bpf/abi/%,$(1)),$(INC_abi),$(call layer_inc,$(1)))

$(BUILD)/headers/%.ok: %.h
	@mkdir -p $(@D)
	$(CC) $(call header_inc,$<) $(PKG_CFLAGS) $(CFLAGS) -fsyntax-only -MMD -MP -MF $(@:.ok=.d) -MT $@ -x c $<
	@touch $@

# --- The preload library (preload/): its own shared object, which links
# nothing of dwleak's (libc only; bpf/abi/ gives it the site contract and
# the allocator kinds, base/ the page size).  -fvisibility=hidden: only the interposed functions
# and the control block are exported.  -ffixed-rbp: no code of it ever
# changes rbp, so at a site rbp is still the caller's, which the walk that
# starts in the caller's frame needs (tests/preload_transparency.sh checks
# the object for any write to rbp).  Not built with ASan/UBSan: it becomes
# the malloc of the programs it is loaded into; its sampler and set are
# unit-tested with them (test_preload_*).

PRELOAD_CFLAGS := -O2 -g -Wall -Wextra -Werror -std=gnu11 -fPIC -fvisibility=hidden -ffixed-rbp \
	-fno-plt -fasynchronous-unwind-tables $(INC_preload)
# The sampler, the set and the symbol lookup, which need nothing of the
# rest of the library, also linked into their unit tests.
PRELOAD_CORE_SRCS := preload/sample.c preload/ptrset.c preload/resolve.c

$(BUILD)/preload/%.c.o: preload/%.c
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

$(BUILD)/preload/%.S.o: preload/%.S
	@mkdir -p $(@D)
	$(CC) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

# -z now: every symbol bound at load, so no lazy binding runs inside malloc.
$(PRELOAD_LIB): $(PRELOAD_OBJS)
	$(CC) -shared -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined -o $@ $^

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

# Instructions per BPF program and global function (symbol size / 8): a
# change to the kernel side that only moves code keeps every count.
bpf-insns: $(BPF_OBJS)
	@for o in $^; do \
		echo "$$o:"; \
		llvm-objdump -t $$o | while read -r _ _ type sec size name; do \
			[ "$$type" = F ] && printf '  %-20s %-18s %6d\n' "$$name" "$$sec" $$((0x$$size / 8)); \
		done; \
	done; true

# --- ASan/UBSan build for the tests ---

$(ASAN)/%.o: %.c | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(call layer_inc,$<) $(PKG_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) $(DEPFLAGS) -c $< -o $@

$(ASAN)/dwleak: $(ASAN)/cli/main.o $(ASAN_LIBS)
	$(CC) $(CFLAGS) $(ASAN_FLAGS) -o $@ $< $(ASAN_LIBS) $(LDLIBS)

# Each tests/unit/test_NAME.c is one test program; it may use every layer.
$(ASAN)/tests/%: tests/unit/%.c $(ASAN_LIBS) | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(INC_cli) $(PKG_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -MF $@.d -o $@ $< $(ASAN_LIBS) $(LDLIBS)

# tests/unit/test_preload_NAME.c: the preload library's parts that stand
# alone (the sampler, the set, the symbol lookup), with ASan/UBSan.
$(ASAN)/tests/test_preload_%: tests/unit/test_preload_%.c $(PRELOAD_CORE_SRCS) $(wildcard preload/*.h)
	@mkdir -p $(@D)
	$(CC) $(INC_preload) -I tests/unit $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -MF $@.d -o $@ $< \
		$(PRELOAD_CORE_SRCS) -lpthread -lm -ldl

# --- Test programs ---

# The agent/ layer's test driver (HTTP with a fake data source, the
# watcher, the targets) for tests/agent_*.sh: ASan/UBSan for the tests,
# and a release build for measuring scrape times.
AGENT_TOOLS := $(ASAN)/tests/agent_tool $(BUILD)/tests/agent_tool
$(ASAN)/tests/agent_tool: tests/agent/agent_tool.c $(ASAN_LIBS) | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(INC_cli) $(PKG_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -MF $@.d -o $@ $< $(ASAN_LIBS) $(LDLIBS)

$(BUILD)/tests/agent_tool: tests/agent/agent_tool.c $(LIBS) | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(INC_cli) $(PKG_CFLAGS) $(CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(LIBS) $(LDLIBS)

testdata:
	+$(MAKE) -C testdata OUT=$(CURDIR)/$(BUILD)/testdata

# --- Fuzzing: the table compiler and the cache entry decoder on arbitrary bytes ---

# tests/fuzz/fuzz_NAME.c is one fuzzer over the whole tables/ layer.
$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(TABLES_SRCS) $(wildcard tables/*.h)
	@mkdir -p $(@D)
	$(CLANG) $(INC_tables) $(PKG_CFLAGS) $(FUZZ_FLAGS) -Wall -Wextra -std=gnu11 -o $@ \
		$< $(TABLES_SRCS) $(LDLIBS)

# fuzz_objects: what target/ reads from a traced process's files (USDT
# notes, symbols), files any user may plant.
TARGET_FUZZ_SRCS := target/usdt.c target/elf_symbols.c
$(BUILD)/fuzz/fuzz_objects: tests/fuzz/fuzz_objects.c $(TARGET_FUZZ_SRCS) target/usdt.h target/elf_symbols.h
	@mkdir -p $(@D)
	$(CLANG) $(INC_target) $(PKG_CFLAGS) $(FUZZ_FLAGS) -Wall -Wextra -std=gnu11 -o $@ \
		$< $(TARGET_FUZZ_SRCS) $(LDLIBS)

# fuzz_memory: what target/ reads of a traced process's memory to tell the
# allocator's bookkeeping from the program's (glibc's arenas).
MEMORY_FUZZ_SRCS := target/alloc_state.c target/proc_maps.c target/proc_mem.c
$(BUILD)/fuzz/fuzz_memory: tests/fuzz/fuzz_memory.c $(MEMORY_FUZZ_SRCS) target/alloc_state.h target/proc_maps.h target/proc_mem.h
	@mkdir -p $(@D)
	$(CLANG) $(INC_target) $(FUZZ_FLAGS) -Wall -Wextra -std=gnu11 -o $@ $< $(MEMORY_FUZZ_SRCS)

# fuzz_agent: what the agent parses from others (cgroup files and the
# mount table, /proc/PID/stat, HTTP parameters, label values, tokens);
# http.c and metrics.c need the report layer and libmicrohttpd.
AGENT_FUZZ_SRCS := agent/targets.c agent/metrics.c agent/http.c $(SRCS_report)
$(BUILD)/fuzz/fuzz_agent: tests/fuzz/fuzz_agent.c $(AGENT_FUZZ_SRCS) $(wildcard agent/*.h report/*.h)
	@mkdir -p $(@D)
	$(CLANG) $(INC_agent) $(PKG_CFLAGS) $(FUZZ_FLAGS) -Wall -Wextra -std=gnu11 -o $@ $< $(AGENT_FUZZ_SRCS) $(LDLIBS)

$(BUILD)/fuzz/agent_seeds/.done: tests/fuzz/make_agent_corpus.sh
	bash tests/fuzz/make_agent_corpus.sh $(BUILD)/fuzz/agent_seeds
	touch $@

$(BUILD)/fuzz/memory_seeds/.done: tests/fuzz/make_memory_corpus.py
	python3 tests/fuzz/make_memory_corpus.py $(BUILD)/fuzz/memory_seeds
	touch $@

# Seed corpora: small real ELF files and damaged copies of them; real cache
# entries (written by ./dwleak tables) and damaged copies of those.
$(BUILD)/fuzz/seeds/.done: tests/fuzz/make_corpus.sh testdata
	bash tests/fuzz/make_corpus.sh $(BUILD)/fuzz/seeds $(BUILD)/testdata
	touch $@

$(BUILD)/fuzz/cache_seeds/.done: tests/fuzz/make_cache_corpus.sh dwleak testdata
	bash tests/fuzz/make_cache_corpus.sh $(BUILD)/fuzz/cache_seeds $(CURDIR)/dwleak $(BUILD)/testdata
	touch $@

# the same ELF seeds, with the preload library (the one object with notes)
$(BUILD)/fuzz/object_seeds/.done: tests/fuzz/make_corpus.sh testdata $(PRELOAD_LIB)
	bash tests/fuzz/make_corpus.sh $(BUILD)/fuzz/object_seeds $(BUILD)/testdata $(PRELOAD_LIB)
	touch $@

fuzz-build: $(FUZZERS) $(BUILD)/fuzz/seeds/.done $(BUILD)/fuzz/cache_seeds/.done $(BUILD)/fuzz/object_seeds/.done \
	$(BUILD)/fuzz/memory_seeds/.done $(BUILD)/fuzz/agent_seeds/.done

fuzz-smoke: fuzz-build
	ROOT=$(CURDIR) BUILD=$(CURDIR)/$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) \
		FUZZ_CACHE_SECONDS=$(FUZZ_CACHE_SECONDS) FUZZ_OBJECTS_SECONDS=$(FUZZ_OBJECTS_SECONDS) \
		bash tests/fuzz_smoke.sh

# --- Tests ---

check-build: all $(ASAN_LIBS) $(ASAN)/dwleak $(UNIT_BINS) $(AGENT_TOOLS) testdata fuzz-build \
	$(BUILD)/bench/leakcheck_bench $(BUILD)/bench/leakcheck_bench_lsan

check: check-build
	ROOT=$(CURDIR) BUILD=$(CURDIR)/$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) \
		FUZZ_CACHE_SECONDS=$(FUZZ_CACHE_SECONDS) FUZZ_OBJECTS_SECONDS=$(FUZZ_OBJECTS_SECONDS) \
		bash tests/run.sh

# --- Benchmarks ---

$(BUILD)/bench/bench_tables: bench/bench_tables.c $(BUILD)/libdwleak_tables.a
	@mkdir -p $(@D)
	$(CC) $(INC_tables) $(PKG_CFLAGS) $(CFLAGS) -MMD -MP -MF $@.d -o $@ $< $(BUILD)/libdwleak_tables.a $(LDLIBS)

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

BENCH_LOADER_SRCS := bpf/attach.c target/elf_symbols.c
$(BUILD)/bench/uprobe_floor $(BUILD)/bench/op_cost: $(BUILD)/bench/%: bench/%.c $(BENCH_LOADER_SRCS) \
		bpf/attach.h bench/op_cost.h $(BUILD)/bench/%.bpf.o
	$(CC) -O2 -Wall -Wextra -Werror -I bpf -I target -I bench $(shell pkg-config --cflags libbpf libelf) -o $@ \
		$< $(BENCH_LOADER_SRCS) $(shell pkg-config --libs libbpf libelf) -lpthread

# The leak check's cost (issue 15): dwleak's scanner and memcheck's check
# from one program, LeakSanitizer's from the same source built with clang.
$(BUILD)/bench/leakcheck_bench: bench/leakcheck_bench.c $(BUILD)/libdwleak_leakcheck.a $(BUILD)/libdwleak_target.a
	@mkdir -p $(@D)
	$(CC) $(INC_leakcheck) $(INC_target) $(CFLAGS) -MMD -MP -MF $@.d -o $@ $< \
		$(BUILD)/libdwleak_leakcheck.a $(BUILD)/libdwleak_target.a -lpthread

$(BUILD)/bench/leakcheck_bench_lsan: bench/leakcheck_bench.c
	@mkdir -p $(@D)
	$(CLANG) -O2 -g -fsanitize=leak -DLEAKCHECK_BENCH_LSAN -Wall -Wextra -Werror -o $@ $< -lpthread

bench-leakcheck: $(BUILD)/bench/leakcheck_bench $(BUILD)/bench/leakcheck_bench_lsan dwleak
	$(BENCH_ENV) bash bench/run_leakcheck_bench.sh

BENCH_PROGS := $(BUILD)/bench/malloc_bench $(BUILD)/bench/cxx_workload $(BUILD)/bench/walltime \
	$(BUILD)/bench/uprobe_floor $(BUILD)/bench/op_cost \
	$(BUILD)/bench/leakcheck_bench $(BUILD)/bench/leakcheck_bench_lsan
BENCH_ENV := ROOT=$(CURDIR) BUILD=$(CURDIR)/$(BUILD) DWLEAK=$(CURDIR)/dwleak

bench-malloc: $(BUILD)/bench/malloc_bench dwleak
	$(BENCH_ENV) MALLOC_BENCH=$(CURDIR)/$(BUILD)/bench/malloc_bench bash bench/run_malloc_bench.sh

# dwleak agent's benchmarks alone (issue 23): a traced workload's cost, 200
# processes idle, a scrape of 10,000 stacks, a 10-minute soak; writes
# build/bench/agent_bench.md (needs root; ~40 minutes).
bench-agent: $(BUILD)/bench/cxx_workload $(BUILD)/bench/walltime dwleak testdata
	$(BENCH_ENV) bash bench/run_agent_bench.sh

# The comparison batch: micro, macro (python3.11, C++), attach latency and map
# memory, stack quality, the cost of each BPF operation, the leak check's
# pause, the agent; writes bench/results.md (needs root; ~1 hour).
bench-all: $(BENCH_PROGS) dwleak testdata
	$(BENCH_ENV) bash bench/run_all.sh

# bench-all after bench-tables, also with -j
bench: bench-tables
	+$(MAKE) bench-all

.PHONY: bench-malloc bench-leakcheck bench-agent bench-all

clean:
	rm -rf $(BUILD) dwleak

# The README's demo: the seed article's leak, traced from its first
# instruction, with the frames frame-pointer tools lose.
demo: all testdata
	./dwleak -t 3 -- $(BUILD)/testdata/seed_O2 --iterations 30 --interval-ms 50

.PHONY: all bpf-insns testdata fuzz-build fuzz-smoke check-build check bench-tables bench clean demo
.DELETE_ON_ERROR:
# Keep intermediates (BPF objects, vmlinux.h) instead of deleting them.
.SECONDARY:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
