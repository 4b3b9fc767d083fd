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
#   make bench-blockset  only the preload library's index of live blocks (no root)
#   make bench-walk    only the preload library's stack walks (no root)
#   make bench-walk-ring  only the preload library's rings of walked records (no root)
#   make testdata      only the test programs (build/testdata/)
#   make demo          the README's demo: trace the seed leak program
#   make man           dwleak(1) from --help (build/man/dwleak.1)
#   make install       prefix=/usr/local, DESTDIR: dwleak, the preload library,
#                      the man page, the bash completion, the default suppressions,
#                      the agent's systemd unit
#   make deb           the Debian package, ./dwleak_VERSION_amd64.deb (lintian-checked)
#   make clean

ifeq ($(origin CC),default)
CC := gcc
endif
CLANG ?= clang
BPFTOOL ?= bpftool
AR ?= ar
PKG_CONFIG := pkg-config
# The kernel program's target (libbpf's __TARGET_ARCH_*).
BPF_ARCH := x86

# CROSS=arm64: dwleak itself built for arm64 with Debian's cross compiler
# against the arm64 -dev packages (multiarch), its kernel program against
# the BTF of Debian's arm64 kernel (issue 26).  `make ARCH=arm64` runs
# this build in build/arm64/tool; vm/check_arm64.sh runs what it makes in
# the arm64 guest.
# Debian's cross compilers and the arm64 -dev packages' pkg-config files.
ARM64_CC ?= aarch64-linux-gnu-gcc
ARM64_CXX ?= aarch64-linux-gnu-g++
ARM64_PKG_CONFIG := PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig pkg-config
ifeq ($(CROSS),arm64)
CC := $(ARM64_CC)
PKG_CONFIG := $(ARM64_PKG_CONFIG)
BPF_ARCH := arm64
endif

BUILD := build
ASAN := $(BUILD)/asan
# Files the build writes for the sources to include, one folder per layer
# (each layer's include list names its own).
GEN := $(BUILD)/gen

# --- The version, written in ONE place: the first entry of debian/changelog
# (a release is a changelog entry; the package gets the same string).
# `dwleak --version` adds the commit when built from a git checkout; `make
# deb` builds in a copy without .git and passes it in DWLEAK_COMMIT.
VERSION := $(shell head -n 1 debian/changelog | cut -d'(' -f2 | cut -d')' -f1)
ifndef DWLEAK_COMMIT
DWLEAK_COMMIT := $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && \
	{ git diff --quiet HEAD 2>/dev/null || c=$$c-dirty; } && echo $$c)
endif
# The release date, for what the build writes dated (the man page): the
# same bytes from the same sources (reproducible builds).
ifndef SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH := $(shell date -d "$$(sed -n 's/^ -- .*>  //p' debian/changelog | head -n 1)" +%s)
endif
export SOURCE_DATE_EPOCH

# zlib: SHF_COMPRESSED sections.  nettle: SHA-256 of the CFI a cached table
# was compiled from (its cache key; SHA-NI where the CPU has it, no global
# state or config files).  libdebuginfod: the progress and bound of the
# lookups libdwfl makes through it (report/symbolize.c).  libbpf joins once
# installed (it is after .ci/deps.sh).
# libmicrohttpd: the agent's HTTP server (agent/http.c).
PKGS := libelf libdw libzstd zlib nettle libdebuginfod libmicrohttpd $(shell $(PKG_CONFIG) --exists libbpf 2>/dev/null && echo libbpf)
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS))
# libiberty (a static archive, libiberty-dev): cplus_demangle for the C++
# and Rust names in reports.
LDLIBS := $(shell $(PKG_CONFIG) --libs $(PKGS)) -liberty -lpthread -lm

# The flags a distribution's build passes in the environment (dpkg-buildflags:
# -ffile-prefix-map, -fstack-protector-strong, _FORTIFY_SOURCE, -z relro -z now)
# go into what is shipped, dwleak and the preload library, after ours; taken
# before CFLAGS is set below, and empty in a plain `make`.
ENV_CFLAGS := $(if $(filter environment,$(origin CFLAGS)),$(CFLAGS))
ENV_CPPFLAGS := $(if $(filter environment,$(origin CPPFLAGS)),$(CPPFLAGS))
ENV_LDFLAGS := $(if $(filter environment,$(origin LDFLAGS)),$(LDFLAGS))
CFLAGS := -O2 -g -Wall -Wextra -Werror -std=gnu11
# What is shipped is hardened in every build, so the tests run what a
# package holds: a stack canary, checked libc calls, the GOT read-only.
HARDEN_CFLAGS := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -Wformat -Werror=format-security
HARDEN_LDFLAGS := -Wl,-z,relro -Wl,-z,now
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
# and base/ (constants, the unwind tables' format), which is below every
# layer: each list ends with it.
LAYERS := tables target unwinder bpf report leakcheck session agent cli
INC_base := -I base
INC_abi := -I bpf/abi $(INC_base)
INC_tables := -I tables $(INC_base)
INC_target := -I target -I bpf/abi $(INC_base)
INC_unwinder := -I unwinder -I tables -I target -I bpf/abi $(INC_base)
INC_bpf := -I bpf -I bpf/abi -I unwinder -I target -I tables -I $(BUILD) $(INC_base)
INC_report := -I report -I $(GEN)/report $(INC_base)
# The leak check's algorithm: a leaf over blocks and memory it is handed.
INC_leakcheck := -I leakcheck $(INC_base)
# The agent's parts that need no live session: HTTP, metrics, targets,
# the exec/exit/OOM watcher (bpf/watch.c), the bounded stack table.
INC_agent := -I agent -I report -I target -I bpf -I bpf/abi $(INC_base)
# The live session: the processes, their ledgers, the programs, reports.
INC_session := -I session -I bpf -I bpf/abi -I unwinder -I target -I tables -I report -I leakcheck -I $(BUILD) $(INC_base)
INC_cli := -I cli -I $(GEN)/cli -I agent -I session -I bpf -I bpf/abi -I unwinder -I target -I tables -I report -I leakcheck -I $(BUILD) $(INC_base)
# The include list of source file $(1): its folder's.
layer_inc = $(INC_$(firstword $(subst /, ,$(1))))
# The preload library's (see its rules below).
INC_preload := -I preload -I bpf/abi $(INC_base)
# Link order: each library before the ones it uses.
LINK_LAYERS := cli agent session bpf unwinder report leakcheck target tables

SRCS_tables := $(wildcard tables/*.c)
# Sources for one machine: x86_64's code that runs inside a process
# (loading the library into it, its copy-on-write snapshot, the library's
# routing of a process it was loaded into late), and what an arm64 build
# has instead (answers that it is not there yet).
X86_64_ONLY_SRCS := target/inject.c target/cave.c target/inject_safe.c target/snapshot.c target/inject_cave.S \
	target/snapshot_cave.S preload/route.c preload/route_dl.S
ARM64_ONLY_SRCS := target/arch_fallback_arm64.c preload/route_fallback_arm64.c
OTHER_ARCH_SRCS := $(if $(filter arm64,$(CROSS)),$(X86_64_ONLY_SRCS),$(ARM64_ONLY_SRCS))
SRCS_target := $(filter-out $(OTHER_ARCH_SRCS),$(wildcard target/*.c) $(wildcard target/*.S))
SRCS_unwinder := $(wildcard unwinder/*.c)
SRCS_bpf := $(filter-out %.bpf.c,$(wildcard bpf/*.c))
SRCS_report := $(wildcard report/*.c)
SRCS_leakcheck := $(wildcard leakcheck/*.c)
SRCS_session := $(wildcard session/*.c)
SRCS_agent := $(wildcard agent/*.c)
SRCS_cli := $(filter-out cli/main.c,$(wildcard cli/*.c))
TABLES_SRCS := $(SRCS_tables)
BPF_SRCS := $(wildcard bpf/*.bpf.c)
# The kernel program: its parts, the ABI and base/ (the unwind tables'
# format is base/unwind_format.h: it reaches no user-side layer).
BPF_CFLAGS := -O2 -g -Wall -Werror -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -I $(BUILD) -I bpf -I bpf/abi $(INC_base)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
# The preload library (see its rules below).
PRELOAD_LIB := $(BUILD)/libdwleak-preload.so
PRELOAD_SRCS := $(filter-out $(OTHER_ARCH_SRCS),$(wildcard preload/*.c) $(wildcard preload/*.S))
PRELOAD_OBJS := $(patsubst preload/%,$(BUILD)/preload/%.o,$(PRELOAD_SRCS))

# Every header but the kernel program's parts, each checked alone (below).
HEADERS := $(filter-out %.bpf.h,$(foreach d,$(LAYERS) bpf/abi base preload,$(wildcard $(d)/*.h)))

objs = $(patsubst %.S,$(1)/%.o,$(patsubst %.c,$(1)/%.o,$(2)))
HEADER_CHECKS := $(patsubst %.h,$(BUILD)/headers/%.ok,$(HEADERS))
SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(BPF_SRCS))
LIBS := $(foreach l,$(LINK_LAYERS),$(BUILD)/libdwleak_$(l).a)
ASAN_LIBS := $(foreach l,$(LINK_LAYERS),$(ASAN)/libdwleak_$(l).a)
UNIT_BINS := $(patsubst tests/unit/%.c,$(ASAN)/tests/%,$(UNIT_SRCS))
FUZZERS := $(BUILD)/fuzz/fuzz_tables $(BUILD)/fuzz/fuzz_cache $(BUILD)/fuzz/fuzz_objects $(BUILD)/fuzz/fuzz_memory \
	$(BUILD)/fuzz/fuzz_agent $(BUILD)/fuzz/fuzz_seccomp $(BUILD)/fuzz/fuzz_blockset $(BUILD)/fuzz/fuzz_walk \
	$(BUILD)/fuzz/fuzz_walk_ring

# `make ARCH=arm64` builds dwleak for arm64 and the arm64 guest's programs
# (below); plain `make` the x86_64 tool.
ifeq ($(ARCH),arm64)
all: arm64
else
all: $(LIBS) $(SKELS) dwleak $(PRELOAD_LIB) $(HEADER_CHECKS)
endif

# --- Release build ---

$(BUILD)/%.o: %.c | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(call layer_inc,$<) $(PKG_CFLAGS) $(CFLAGS) $(HARDEN_CFLAGS) $(ENV_CPPFLAGS) $(ENV_CFLAGS) $(DEPFLAGS) \
		-c $< -o $@

# Code a layer copies into another process (target/inject_cave.S): assembled
# with the layer's includes.
$(BUILD)/%.o: %.S
	@mkdir -p $(@D)
	$(CC) $(call layer_inc,$<) $(DEPFLAGS) -c $< -o $@

# One archive per layer, release and ASan/UBSan.  An archive with no
# members is valid; the rm keeps deleted sources out.
define layer_lib
$(1)/libdwleak_$(2).a: $$(call objs,$(1),$$(SRCS_$(2)))
	@mkdir -p $$(@D)
	rm -f $$@ && $$(AR) rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call layer_lib,$(BUILD),$(l)))$(eval $(call layer_lib,$(ASAN),$(l))))

# the tool: ./dwleak, or BUILD/dwleak when cross-built
DWLEAK_BIN := $(if $(CROSS),$(BUILD)/dwleak,dwleak)
$(DWLEAK_BIN): $(BUILD)/cli/main.o $(LIBS)
	$(CC) $(CFLAGS) $(ENV_CFLAGS) $(HARDEN_LDFLAGS) $(ENV_LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

# --- Generated sources ---

ifeq ($(VERSION),)
$(error no version: debian/changelog's first line should read "dwleak (VERSION) ...")
endif

# cli/cmd_trace.c's --version, from debian/changelog and git; rewritten only
# when it changes, so a build of the same commit recompiles nothing.
$(GEN)/cli/version.h: FORCE
	@mkdir -p $(@D)
	@printf '/* Written by the Makefile from debian/changelog and git: do not edit. */\n#define DWLEAK_VERSION "%s"\n#define DWLEAK_COMMIT "%s"\n' \
		'$(VERSION)' '$(DWLEAK_COMMIT)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/cli/cmd_trace.o $(ASAN)/cli/cmd_trace.o: $(GEN)/cli/version.h

# Where `make install` puts the preload library, PREFIX/lib/TUPLE/dwleak/,
# is where target/preload_path.c looks beside PREFIX/bin/dwleak.
MULTIARCH := $(or $(shell $(CC) -print-multiarch 2>/dev/null),x86_64-linux-gnu)
$(BUILD)/target/preload_path.o $(ASAN)/target/preload_path.o: CFLAGS += -DDWLEAK_MULTIARCH='"$(MULTIARCH)"'

# report/suppress.c's default rules: report/default.supp as one C string
# literal.  The file itself is installed too (/usr/share/dwleak/), for
# users to start their own rules from; dwleak reads no copy at run time.
$(GEN)/report/default_supp.inc: report/default.supp
	@mkdir -p $(@D)
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@.tmp
	mv $@.tmp $@
$(BUILD)/report/suppress.o $(ASAN)/report/suppress.o: $(GEN)/report/default_supp.inc

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

# On arm64 x29 is the frame pointer the walks start from: kept the same
# way (GCC allocates x29 to nothing there; the flags make it certain).
PRELOAD_FP_FLAGS := $(if $(filter arm64,$(CROSS)),-ffixed-x29 -fomit-frame-pointer,-ffixed-rbp)
PRELOAD_CFLAGS := -O2 -g -Wall -Wextra -Werror -std=gnu11 -fPIC -fvisibility=hidden $(PRELOAD_FP_FLAGS) \
	-fno-plt -fasynchronous-unwind-tables $(INC_preload)
# The sampler, the sets and the symbol lookup, which need nothing of the
# rest of the library, also linked into their unit tests.
PRELOAD_CORE_SRCS := preload/sample.c preload/ptrset.c preload/blockset.c preload/resolve.c

$(BUILD)/preload/%.c.o: preload/%.c
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) $(HARDEN_CFLAGS) $(ENV_CPPFLAGS) $(ENV_CFLAGS) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

$(BUILD)/preload/%.S.o: preload/%.S
	@mkdir -p $(@D)
	$(CC) -MMD -MP -MF $(@:.o=.d) -c $< -o $@

# -z now: every symbol bound at load, so no lazy binding runs inside malloc.
$(PRELOAD_LIB): $(PRELOAD_OBJS)
	$(CC) -shared $(HARDEN_LDFLAGS) $(ENV_LDFLAGS) -Wl,--no-undefined -o $@ $^

# --- BPF: vmlinux.h from the running kernel, objects, skeletons ---

ifeq ($(CROSS),arm64)
# The arm64 kernel's types, from the BTF inside Debian's arm64 kernel image
# (the linux-image-*-arm64 package .ci/deps.sh downloads), found there by
# vm/btf_extract.c: the same bytes the booted kernel has in
# /sys/kernel/btf/vmlinux, so no arm64 machine is needed to build.
ARM64_KERNEL_DEB ?= $(lastword $(sort $(wildcard /var/cache/dwleak/debs/linux-image-*-arm64_*_arm64.deb)))
HOSTCC ?= gcc
$(BUILD)/vmlinux.btf: vm/btf_extract.c $(ARM64_KERNEL_DEB)
	@mkdir -p $(@D)
	@test -n "$(ARM64_KERNEL_DEB)" || { echo "no arm64 kernel package in /var/cache/dwleak/debs: run .ci/deps.sh"; exit 1; }
	$(HOSTCC) -O2 -Wall -Wextra -Werror -o $(BUILD)/btf_extract $<
	dpkg-deb --fsys-tarfile $(ARM64_KERNEL_DEB) | tar -xO --wildcards './boot/vmlinuz-*' > $@.image
	$(BUILD)/btf_extract $@.image $@
	rm -f $@.image
$(BUILD)/vmlinux.h: $(BUILD)/vmlinux.btf
	$(BPFTOOL) btf dump file $< format c > $@.tmp
	mv $@.tmp $@
else
$(BUILD)/vmlinux.h:
	@mkdir -p $(@D)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp
	mv $@.tmp $@
endif

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

$(ASAN)/%.o: %.S
	@mkdir -p $(@D)
	$(CC) $(call layer_inc,$<) $(DEPFLAGS) -c $< -o $@

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
# test_preload_walk: the library's walks (preload/walk.c) on the test's
# own stack, with the tables dwleak compiles for its objects (every layer,
# as the other tests may), through code built without frame pointers or
# sanitizers (tests/unit/preload_walk_subject.c), as most code is.
$(ASAN)/tests/preload_walk_subject.o: tests/unit/preload_walk_subject.c tests/unit/preload_walk_subject.h
	@mkdir -p $(@D)
	$(CC) -O2 -g -fomit-frame-pointer -fasynchronous-unwind-tables -Wall -Wextra -Werror -std=gnu11 -c -o $@ $<
$(ASAN)/tests/test_preload_walk: tests/unit/test_preload_walk.c preload/walk.c preload/walk.h \
		$(ASAN)/tests/preload_walk_subject.o $(ASAN_LIBS) | $(SKELS)
	@mkdir -p $(@D)
	$(CC) -I preload $(INC_cli) $(PKG_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -MF $@.d -o $@ $< preload/walk.c \
		$(ASAN)/tests/preload_walk_subject.o $(ASAN_LIBS) $(LDLIBS)
# test_unwinder_image: the image unwinder_image_build makes of a stopped
# child, walked by the library's walk (preload/walk.c) as test_preload_walk.
$(ASAN)/tests/test_unwinder_image: tests/unit/test_unwinder_image.c preload/walk.c preload/walk.h $(ASAN_LIBS) \
		| $(SKELS)
	@mkdir -p $(@D)
	$(CC) -I preload $(INC_cli) $(PKG_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -MF $@.d -o $@ $< preload/walk.c \
		$(ASAN_LIBS) $(LDLIBS)
# test_preload_blockset includes dwleak's decoder of the set, to read back
# what it built (one -MF per command keeps only the last source's list).
$(ASAN)/tests/test_preload_blockset: target/blockset_read.c target/blockset_read.h bpf/abi/blockset_abi.h
# test_walk_ring: the library's rings (preload/walk_ring.c) and dwleak's
# reader (target/walk_ring_read.c), both included by the test.
$(ASAN)/tests/test_walk_ring: tests/unit/test_walk_ring.c preload/walk_ring.c preload/walk_ring.h \
		target/walk_ring_read.c target/walk_ring_read.h bpf/abi/walk_ring_abi.h
	@mkdir -p $(@D)
	$(CC) -I preload $(INC_target) -I tests/unit $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -MF $@.d -o $@ $< -lpthread

# test_proc_rings: the session's drain of the rings (session/proc_rings.c,
# in the layers) fed by the library's writer (preload/walk_ring.c, included
# by the test).
$(ASAN)/tests/test_proc_rings: tests/unit/test_proc_rings.c preload/walk_ring.c preload/walk_ring.h $(ASAN_LIBS) \
		| $(SKELS)
	@mkdir -p $(@D)
	$(CC) -I preload $(INC_cli) $(PKG_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -MF $@.d -o $@ $< $(ASAN_LIBS) \
		$(LDLIBS)

# test_preload_rings: the library's walk in the process, end to end in one
# process.  Not ASan/UBSan: it runs itself again with the library
# preloaded, which becomes its malloc; frame pointers for the FP walk, and
# -rdynamic so that dladdr names its functions.  The release layers give it
# the image and dwleak's reader of the rings.
$(ASAN)/tests/test_preload_rings: tests/unit/test_preload_rings.c $(LIBS) $(PRELOAD_LIB) | $(SKELS)
	@mkdir -p $(@D)
	$(CC) $(INC_cli) -I tests/unit $(PKG_CFLAGS) $(CFLAGS) -fno-omit-frame-pointer -rdynamic -MMD -MP -MF $@.d \
		-o $@ $< $(LIBS) $(LDLIBS) -ldl

# The injector's driver (tests/inject.sh, the inject benchmark): target/
# and its library, with ASan/UBSan; tests/tools/NAME.c is one program.
$(BUILD)/tests/%: tests/tools/%.c $(ASAN)/libdwleak_target.a
	@mkdir -p $(@D)
	$(CC) $(INC_target) $(PKG_CFLAGS) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -MF $@.d -o $@ $< \
		$(ASAN)/libdwleak_target.a $(LDLIBS)

TOOLS := $(patsubst tests/tools/%.c,$(BUILD)/tests/%,$(wildcard tests/tools/*.c))

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
$(BUILD)/fuzz/fuzz_agent: tests/fuzz/fuzz_agent.c $(AGENT_FUZZ_SRCS) $(wildcard agent/*.h report/*.h) \
		$(GEN)/report/default_supp.inc
	@mkdir -p $(@D)
	$(CLANG) $(INC_agent) -I $(GEN)/report $(PKG_CFLAGS) $(FUZZ_FLAGS) -Wall -Wextra -std=gnu11 -o $@ $< $(AGENT_FUZZ_SRCS) $(LDLIBS)

$(BUILD)/fuzz/agent_seeds/.done: tests/fuzz/make_agent_corpus.sh
	bash tests/fuzz/make_agent_corpus.sh $(BUILD)/fuzz/agent_seeds
	touch $@

# fuzz_seccomp: what the injector reads of a process's seccomp filters.
SECCOMP_FUZZ_SRCS := target/seccomp_eval.c target/inject_safe.c
$(BUILD)/fuzz/fuzz_seccomp: tests/fuzz/fuzz_seccomp.c $(SECCOMP_FUZZ_SRCS) target/seccomp_eval.h target/inject_safe.h
	@mkdir -p $(@D)
	$(CLANG) $(INC_target) $(FUZZ_FLAGS) -Wall -Wextra -std=gnu11 -o $@ $< $(SECCOMP_FUZZ_SRCS)

$(BUILD)/fuzz/seccomp_seeds/.done: tests/fuzz/make_seccomp_corpus.py
	python3 tests/fuzz/make_seccomp_corpus.py $(BUILD)/fuzz/seccomp_seeds
	touch $@

# fuzz_blockset: the preload library's index of live blocks, as dwleak
# decodes it out of a process's memory.
BLOCKSET_FUZZ_SRCS := target/blockset_read.c
$(BUILD)/fuzz/fuzz_blockset: tests/fuzz/fuzz_blockset.c $(BLOCKSET_FUZZ_SRCS) target/blockset_read.h bpf/abi/blockset_abi.h
	@mkdir -p $(@D)
	$(CLANG) $(INC_target) $(FUZZ_FLAGS) -Wall -Wextra -std=gnu11 -o $@ $< $(BLOCKSET_FUZZ_SRCS)

# Its seeds (control word 3: the fuzzer makes the header valid): an index
# of no level, and one whose level 0 (at 0x400) holds one block.
$(BUILD)/fuzz/blockset_seeds/.done:
	@mkdir -p $(@D)
	{ printf '\003\000\000\000\000\000\000\000'; head -c 1024 /dev/zero; } > $(@D)/empty
	{ printf '\003\000\000\000\000\000\000\000'; head -c 64 /dev/zero; printf '\000\004\000\000\000\000\000\000'; \
		head -c 952 /dev/zero; printf '\000\000\001\000\000\000\000\000\020\000\000\000\000\000\000\000'; \
		head -c 240 /dev/zero; } > $(@D)/one_block
	touch $@

# fuzz_walk_ring: the preload library's rings of walked records, as dwleak
# drains them out of a process's memory.
WALK_RING_FUZZ_SRCS := target/walk_ring_read.c
$(BUILD)/fuzz/fuzz_walk_ring: tests/fuzz/fuzz_walk_ring.c $(WALK_RING_FUZZ_SRCS) target/walk_ring_read.h \
		bpf/abi/walk_ring_abi.h
	@mkdir -p $(@D)
	$(CLANG) $(INC_target) $(FUZZ_FLAGS) -Wall -Wextra -std=gnu11 -o $@ $< $(WALK_RING_FUZZ_SRCS)

$(BUILD)/fuzz/walk_ring_seeds/.done: tests/fuzz/make_walk_ring_corpus.py
	python3 tests/fuzz/make_walk_ring_corpus.py $(BUILD)/fuzz/walk_ring_seeds
	touch $@

# fuzz_walk: the preload library's walks (preload/walk.c) and the image
# check over arbitrary images and stacks, the builder (tables/table_image.c)
# making images that must pass it.
WALK_FUZZ_SRCS := preload/walk.c tables/table_image.c
$(BUILD)/fuzz/fuzz_walk: tests/fuzz/fuzz_walk.c $(WALK_FUZZ_SRCS) preload/walk.h tables/table_image.h \
		base/unwind_image.h bpf/abi/unwind_step.h
	@mkdir -p $(@D)
	$(CLANG) -I preload -I tables -I bpf/abi $(INC_base) $(FUZZ_FLAGS) -Wall -Wextra -std=gnu11 -o $@ $< $(WALK_FUZZ_SRCS)

# Its seeds (the control block, 56 bytes, first): a table of one page
# and rule built into an image, the stack zeros; the same with the rule
# cache's 16 slots from the input (CTL_CACHE), zeros; a raw image of
# zeros with its header made valid.
$(BUILD)/fuzz/walk_seeds/.done:
	@mkdir -p $(@D)
	{ printf '\001\000\000\000\000\000\000\000\001\000\001\000\001\000\000\000'; head -c 40 /dev/zero; \
		printf '\000\000\000\000\001\000\000\000\000\000\000\000'; \
		printf '\010\000\000\000\000\000\000\000\000\000\000\000\001\000\000\000'; head -c 4096 /dev/zero; } > $(@D)/built
	{ printf '\041\000\000\000\000\000\000\000\001\000\001\000\001\000\000\000'; head -c 40 /dev/zero; \
		printf '\000\000\000\000\001\000\000\000\000\000\000\000'; \
		printf '\010\000\000\000\000\000\000\000\000\000\000\000\001\000\000\000'; head -c 4224 /dev/zero; } \
		> $(@D)/built_cache
	{ printf '\002\000\000\000\000\002\000\000'; head -c 48 /dev/zero; head -c 512 /dev/zero; \
		head -c 4096 /dev/zero; } > $(@D)/raw
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
	$(BUILD)/fuzz/memory_seeds/.done $(BUILD)/fuzz/agent_seeds/.done $(BUILD)/fuzz/seccomp_seeds/.done \
	$(BUILD)/fuzz/blockset_seeds/.done $(BUILD)/fuzz/walk_seeds/.done $(BUILD)/fuzz/walk_ring_seeds/.done

fuzz-smoke: fuzz-build
	ROOT=$(CURDIR) BUILD=$(CURDIR)/$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) \
		FUZZ_CACHE_SECONDS=$(FUZZ_CACHE_SECONDS) FUZZ_OBJECTS_SECONDS=$(FUZZ_OBJECTS_SECONDS) \
		bash tests/fuzz_smoke.sh

# --- Tests ---

check-build: all man $(ASAN_LIBS) $(ASAN)/dwleak $(UNIT_BINS) $(AGENT_TOOLS) $(TOOLS) testdata fuzz-build \
	$(BUILD)/bench/leakcheck_bench $(BUILD)/bench/leakcheck_bench_lsan

check: check-build
	ROOT=$(CURDIR) BUILD=$(CURDIR)/$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) \
		FUZZ_CACHE_SECONDS=$(FUZZ_CACHE_SECONDS) FUZZ_OBJECTS_SECONDS=$(FUZZ_OBJECTS_SECONDS) \
		bash tests/run.sh

# --- arm64 (issue 26; README "arm64") ---
# dwleak for arm64 (below: build/arm64/tool, dwleak and its preload library),
# the tables/ layer with a driver that compiles and verifies tables against
# libdw natively in the arm64 guest, and the guest's test programs.
# Cross-compiled with Debian's gcc-aarch64-linux-gnu against the arm64
# -dev packages (multiarch; vm/arm64.sh deps installs them).  What runs
# x86_64 code inside a process (injection, the snapshot) is x86_64's still.
ARM64 := $(BUILD)/arm64
ARM64_PKGS := libelf libdw libzstd zlib nettle
# vm/'s programs over the tables/ layer: tables_verify, and walk_a64 (the
# aarch64 walk step through ptrace, checked against gdb in the guest).
$(ARM64)/tables_verify $(ARM64)/walk_a64: $(ARM64)/%: vm/%.c bpf/abi/unwind_step_a64.h $(TABLES_SRCS) \
		$(wildcard tables/*.h base/*.h)
	@mkdir -p $(@D)
	$(ARM64_CC) $(INC_tables) -I bpf/abi $$($(ARM64_PKG_CONFIG) --cflags $(ARM64_PKGS)) $(CFLAGS) -o $@ \
		$< $(TABLES_SRCS) $$($(ARM64_PKG_CONFIG) --libs $(ARM64_PKGS))

# A program that stops itself deep in a call chain through libc (qsort's
# callback), built as Debian builds: no frame pointers; and the same with
# its return addresses signed (paciasp/autiasp): the guest CPU (qemu -cpu
# max) has pointer authentication, so the saved ones carry codes the walk
# must strip.
ARM64_STOP_CFLAGS := -O2 -g -fomit-frame-pointer -fasynchronous-unwind-tables -Wall -Wextra -Werror
$(ARM64)/stop_deep: vm/stop_deep.c
	@mkdir -p $(@D)
	$(ARM64_CC) $(ARM64_STOP_CFLAGS) -o $@ $<
$(ARM64)/stop_deep_pac: vm/stop_deep.c
	@mkdir -p $(@D)
	$(ARM64_CC) $(ARM64_STOP_CFLAGS) -mbranch-protection=standard -o $@ $<

# The seed built as testdata's seed_O2 (-O2 -fomit-frame-pointer), and a
# preload library whose malloc stops it at the seed's 40-byte new int[10].
$(ARM64)/seed_O2: testdata/seed_main.cpp testdata/seed_leak_lib.cpp testdata/seed_leak_lib.h
	@mkdir -p $(@D)
	$(ARM64_CXX) -Wall -Wextra -Werror -O2 -g -fomit-frame-pointer -o $@ testdata/seed_main.cpp testdata/seed_leak_lib.cpp
# the same with its return addresses signed (pointer authentication)
$(ARM64)/seed_O2_pac: testdata/seed_main.cpp testdata/seed_leak_lib.cpp testdata/seed_leak_lib.h
	@mkdir -p $(@D)
	$(ARM64_CXX) -Wall -Wextra -Werror -O2 -g -fomit-frame-pointer -mbranch-protection=standard -o $@ \
		testdata/seed_main.cpp testdata/seed_leak_lib.cpp
# seed_O2 split as testdata splits it: stripped, its symbols in a debug
# file found by .gnu_debuglink (the frames must resolve through it)
$(ARM64)/seed_O2_stripped $(ARM64)/seed_O2_stripped.debug &: $(ARM64)/seed_O2
	aarch64-linux-gnu-objcopy --only-keep-debug $< $(ARM64)/seed_O2_stripped.debug
	aarch64-linux-gnu-strip --strip-all -o $(ARM64)/seed_O2_stripped $<
	cd $(ARM64) && aarch64-linux-gnu-objcopy --add-gnu-debuglink=seed_O2_stripped.debug seed_O2_stripped
# testdata's leak_kinds as x86_64's is built (testdata/Makefile): every
# leak kind at a site of its own, for --leak-check in the guest
$(ARM64)/leak_kinds: testdata/leak_kinds.c
	@mkdir -p $(@D)
	$(ARM64_CC) -Wall -Wextra -Werror -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -pthread -o $@ $<
# testdata's mmap_ledger (its own anonymous mappings, for --mmap: the
# memory system calls' probe, arm64's numbers and registers)
$(ARM64)/mmap_ledger: testdata/mmap_ledger.c
	@mkdir -p $(@D)
	$(ARM64_CC) -Wall -Wextra -Werror -O2 -g -fno-optimize-sibling-calls -o $@ $<
# testdata's ledger (4 threads, the whole malloc family and the C++
# operators from 19 sites, its own ledger of what is outstanding): the
# preload library's exact ledgers in the guest, under four allocators
$(ARM64)/ledger: testdata/ledger.cpp
	@mkdir -p $(@D)
	$(ARM64_CXX) -Wall -Wextra -Werror -std=c++17 -O2 -g -fomit-frame-pointer -pthread -o $@ $< -ldl
# testdata's preload_probe (what a program observes of its allocator:
# errno, edge cases, fork from threads, a handler's allocation, dlopen of
# libdlleak.so beside it, syscall() and prctl(), a seccomp filter): the
# preload library changes none of it on arm64 either
$(ARM64)/preload_probe: testdata/preload_probe.cpp $(ARM64)/libdlleak.so
	@mkdir -p $(@D)
	$(ARM64_CXX) -Wall -Wextra -Werror -std=c++17 -O2 -g -pthread -o $@ $< -ldl
$(ARM64)/libdlleak.so: testdata/dlleak.c testdata/args.c
	@mkdir -p $(@D)
	$(ARM64_CC) -Wall -Wextra -Werror -O2 -g -fPIC -shared -o $@ $^
# testdata's signal_leak: mallocs inside signal handlers, so every walk
# crosses the kernel's signal frame (arm64: the vdso's sigreturn
# trampoline, which has no CFI there)
$(ARM64)/signal_leak: testdata/signal_leak.c testdata/args.c
	@mkdir -p $(@D)
	$(ARM64_CC) -Wall -Wextra -Werror -O2 -g -fno-omit-frame-pointer -o $@ $^
$(ARM64)/stop_at_malloc.so: vm/stop_at_malloc.c
	@mkdir -p $(@D)
	$(ARM64_CC) -O2 -g -fPIC -shared -Wall -Wextra -Werror -o $@ $<

# dwleak itself for arm64 and its preload library: the same Makefile with
# CROSS=arm64, in a build tree of its own (the kernel program against the
# arm64 kernel's BTF).
$(ARM64)/tool/dwleak $(ARM64)/tool/libdwleak-preload.so &: FORCE
	+$(MAKE) CROSS=arm64 BUILD=$(ARM64)/tool $(ARM64)/tool/dwleak $(ARM64)/tool/libdwleak-preload.so

arm64: $(ARM64)/tables_verify $(ARM64)/walk_a64 $(ARM64)/stop_deep $(ARM64)/stop_deep_pac $(ARM64)/seed_O2 \
	$(ARM64)/stop_at_malloc.so $(ARM64)/leak_kinds $(ARM64)/seed_O2_stripped $(ARM64)/seed_O2_pac $(ARM64)/mmap_ledger \
	$(ARM64)/ledger $(ARM64)/preload_probe $(ARM64)/libdlleak.so $(ARM64)/signal_leak \
	$(ARM64)/tool/dwleak $(ARM64)/tool/libdwleak-preload.so

# Boots Debian's arm64 kernel in qemu (vm/arm64.sh; the first run builds
# the machine, ~15 minutes) and runs vm/check_arm64.sh there.
check-arm64:
	vm/arm64.sh deps
	+$(MAKE) ARCH=arm64 arm64
	vm/arm64.sh run 'bash vm/check_arm64.sh'

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
	$(CC) -O2 -Wall -Wextra -Werror -I bpf -I target -I bench $(INC_base) $(shell pkg-config --cflags libbpf libelf) -o $@ \
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
	$(BUILD)/bench/leakcheck_bench $(BUILD)/bench/leakcheck_bench_lsan $(BUILD)/bench/walk_bench
BENCH_ENV := ROOT=$(CURDIR) BUILD=$(CURDIR)/$(BUILD) DWLEAK=$(CURDIR)/dwleak

# The preload library's index of live blocks (issue 24): ns per
# insert+remove pair, 1 and 4 threads, next to malloc+free in the same run;
# compiled with the library's flags.
$(BUILD)/bench/blockset_bench: bench/blockset_bench.c preload/blockset.c preload/blockset.h bpf/abi/blockset_abi.h
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) -o $@ $< preload/blockset.c -lpthread

# The per-thread rings of walked records (issue 24): ns per record of 20
# frames, 1 and 2 writers, a reader draining; preload/walk_ring.c compiled
# with the library's flags, dwleak's reader with its own.
$(BUILD)/bench/walk_ring_bench: bench/walk_ring_bench.c preload/walk_ring.c preload/walk_ring.h \
		target/walk_ring_read.c target/walk_ring_read.h bpf/abi/walk_ring_abi.h
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) -c -o $(BUILD)/bench/walk_ring.o preload/walk_ring.c
	$(CC) -I preload $(INC_target) $(CFLAGS) -o $@ $< $(BUILD)/bench/walk_ring.o target/walk_ring_read.c -lpthread

bench-walk-ring: $(BUILD)/bench/walk_ring_bench
	$(BUILD)/bench/walk_ring_bench $(BENCH_ARGS)

# A stack walk made in the process (issue 24): ns per walk, DWARF over
# the unwind image and frame pointers, at 10 and 20 frames; preload/walk.c
# compiled with the library's flags, the image made by unwinder/ and
# tables/ (no root).
WALK_BENCH_LIBS := $(BUILD)/libdwleak_unwinder.a $(BUILD)/libdwleak_target.a $(BUILD)/libdwleak_tables.a
$(BUILD)/bench/walk.o: preload/walk.c preload/walk.h bpf/abi/unwind_step.h base/unwind_image.h
	@mkdir -p $(@D)
	$(CC) $(PRELOAD_CFLAGS) -c -o $@ $<
$(BUILD)/bench/walk_bench: bench/walk_bench.c $(BUILD)/bench/walk.o $(WALK_BENCH_LIBS)
	$(CC) -I preload $(INC_unwinder) $(PKG_CFLAGS) -O2 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -std=gnu11 \
		-o $@ $< $(BUILD)/bench/walk.o $(WALK_BENCH_LIBS) $(LDLIBS)

bench-walk: $(BUILD)/bench/walk_bench
	$(BUILD)/bench/walk_bench $(BENCH_ARGS)

bench-blockset: $(BUILD)/bench/blockset_bench
	$(BUILD)/bench/blockset_bench $(BENCH_ARGS)

bench-malloc: $(BUILD)/bench/malloc_bench dwleak
	$(BENCH_ENV) MALLOC_BENCH=$(CURDIR)/$(BUILD)/bench/malloc_bench bash bench/run_malloc_bench.sh

# dwleak agent's benchmarks alone (issue 23): a traced workload's cost, 200
# processes idle, a scrape of 10,000 stacks, a 10-minute soak; writes
# build/bench/agent_bench.md (needs root; ~40 minutes).
bench-agent: $(BUILD)/bench/cxx_workload $(BUILD)/bench/walltime dwleak testdata
	$(BENCH_ENV) bash bench/run_agent_bench.sh

# The comparison batch: micro, macro (python3.11, C++), attach latency and map
# memory, stack quality, the cost of each BPF operation, the leak check's
# pause, injection, redis, the agent; writes bench/results.md (needs root; ~1 hour).
bench-all: $(BENCH_PROGS) $(TOOLS) dwleak testdata
	$(BENCH_ENV) bash bench/run_all.sh

# bench-all after bench-tables, also with -j
bench: bench-tables
	+$(MAKE) bench-all

.PHONY: bench-malloc bench-leakcheck bench-agent bench-blockset bench-walk bench-walk-ring bench-all

clean:
	rm -rf $(BUILD) dwleak dwleak_*.deb

# --- The man page, installing, the Debian package ---

# dwleak(1), written by help2man from `dwleak --help` and each command's
# --help (man/dwleak-help.sh puts them together) with the sections --help
# has no room for (man/dwleak.h2m): the options have one source, and
# tests/man_page.sh checks the page lists exactly the options --help does.
MAN_PAGE := $(BUILD)/man/dwleak.1

man: $(MAN_PAGE)

$(MAN_PAGE): dwleak man/dwleak-help.sh man/dwleak.h2m debian/changelog
	@mkdir -p $(@D)
	DWLEAK=./dwleak help2man --no-info --section=1 --manual='User Commands' --source='dwleak $(VERSION)' \
		--include=man/dwleak.h2m --output=$@.tmp man/dwleak-help.sh
	mv $@.tmp $@

# make install [prefix=/usr/local] [DESTDIR=...]: the preload library goes
# where target/preload_path.c looks beside PREFIX/bin/dwleak.
prefix ?= /usr/local
BINDIR = $(DESTDIR)$(prefix)/bin
PKGLIBDIR = $(DESTDIR)$(prefix)/lib/$(MULTIARCH)/dwleak
PKGDATADIR = $(DESTDIR)$(prefix)/share/dwleak
MAN1DIR = $(DESTDIR)$(prefix)/share/man/man1
# where bash-completion looks for a command's completion, loaded on first use
BASHCOMPDIR = $(DESTDIR)$(prefix)/share/bash-completion/completions
# the agent's systemd unit (dist/dwleak-agent.service, its ExecStart and
# comments pointed at PREFIX); systemd looks in /usr/local/lib/systemd/system
# too.  The Debian package sets it to /lib/systemd/system.
SYSTEMDUNITDIR ?= $(prefix)/lib/systemd/system

install: all man
	install -d $(BINDIR) $(PKGLIBDIR) $(PKGDATADIR) $(MAN1DIR) $(BASHCOMPDIR)
	install -m 755 dwleak $(BINDIR)/dwleak
	install -m 644 $(PRELOAD_LIB) $(PKGLIBDIR)/libdwleak-preload.so
	install -m 644 report/default.supp $(PKGDATADIR)/default.supp
	install -m 644 $(MAN_PAGE) $(MAN1DIR)/dwleak.1
	install -m 644 completion/dwleak $(BASHCOMPDIR)/dwleak
	install -d $(DESTDIR)$(SYSTEMDUNITDIR)
	sed -e 's|/usr/local/bin/dwleak|$(prefix)/bin/dwleak|' \
		-e 's|/usr/local/lib/x86_64-linux-gnu/dwleak/|$(prefix)/lib/$(MULTIARCH)/dwleak/|' \
		dist/dwleak-agent.service > $(DESTDIR)$(SYSTEMDUNITDIR)/dwleak-agent.service
	chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/dwleak-agent.service

uninstall:
	rm -f $(BINDIR)/dwleak $(PKGLIBDIR)/libdwleak-preload.so $(PKGDATADIR)/default.supp \
		$(MAN1DIR)/dwleak.1 $(BASHCOMPDIR)/dwleak $(DESTDIR)$(SYSTEMDUNITDIR)/dwleak-agent.service
	-rmdir $(PKGLIBDIR) $(PKGDATADIR)

# make deb: the Debian package (debian/), built by dpkg-buildpackage from a
# copy of the tree in build/deb/ - its `debian/rules clean` empties the
# copy's build/, not this one, and the package is built from scratch with
# the distribution's flags - then checked with lintian and copied here as
# ./dwleak_VERSION_amd64.deb.  The copy holds the files git knows of (with
# their changes) and new ones it does not ignore; it has no .git, so the
# commit comes along in DWLEAK_COMMIT.  DEB_JOBS: parallel jobs (nproc).
DEB_DIR := $(BUILD)/deb
DEB_JOBS ?= $(shell nproc)

deb:
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/dwleak-$(VERSION)
	if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then \
		git ls-files -z --cached --others --exclude-standard | \
			tar --null --ignore-failed-read -T - -cf - 2> /dev/null; \
	else \
		tar --exclude=./$(BUILD) --exclude='./dwleak_*.deb' --exclude=./dwleak -cf - .; \
	fi | tar -C $(DEB_DIR)/dwleak-$(VERSION) -xf -
	cd $(DEB_DIR)/dwleak-$(VERSION) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL DWLEAK_COMMIT=$(DWLEAK_COMMIT) \
		dpkg-buildpackage -b -us -uc -j$(DEB_JOBS)
	lintian --fail-on error,warning --display-info $(DEB_DIR)/dwleak_$(VERSION)_*.changes
	rm -f dwleak_*.deb
	cp $(DEB_DIR)/dwleak_$(VERSION)_*.deb .
	@ls -l dwleak_$(VERSION)_*.deb

# The README's demo: the seed article's leak, traced from its first
# instruction, with the frames frame-pointer tools lose.
demo: all testdata
	./dwleak -t 3 -- $(BUILD)/testdata/seed_O2 --iterations 30 --interval-ms 50

.PHONY: FORCE all arm64 check-arm64 man install uninstall deb bpf-insns testdata fuzz-build fuzz-smoke check-build check bench-tables bench clean demo
.DELETE_ON_ERROR:
# Keep intermediates (BPF objects, vmlinux.h) instead of deleting them.
.SECONDARY:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
