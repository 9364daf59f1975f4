# Spillway - one Makefile for the whole tree. Outputs go under build/.
# make [all] | test | soak | demo | bench | deploy-check | clean      SANITIZER=address|undefined|thread  WERROR=0|1  V=1

CC       ?= cc
SANITIZER ?=
# A sanitizer build goes to its own folder, so switching back and forth never links mixed objects.
BUILD    ?= build$(if $(SANITIZER),-$(SANITIZER))
V        ?= 0
Q        := $(if $(filter 1,$(V)),,@)
WERROR   ?= 1
OPT      ?= -O3
PKGS     := libturbojpeg libjpeg libpng libwebp flac libmpg123 vorbisfile opusfile jansson libprotobuf-c grpc fftw3f libmicrohttpd libzstd libarchive libcurl openssl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
        -Werror=implicit-function-declaration -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN += -Werror
endif
# -fvisibility=hidden: libspillway.so exports what spillway/client.h marks SPW_API, nothing else.
CFLAGS  := -std=c11 -D_GNU_SOURCE -ffp-contract=off -fno-math-errno $(OPT) -g -march=x86-64-v2 -fPIC -fvisibility=hidden $(WARN) -I. -Iclient/include -I$(BUILD)/gen $(PKG_CFLAGS) -MMD -MP $(EXTRA_CFLAGS)
LDLIBS  := $(PKG_LIBS) -lpthread -lm
ifneq ($(SANITIZER),)
CFLAGS  += -fsanitize=$(SANITIZER) -fno-omit-frame-pointer
LDFLAGS += -fsanitize=$(SANITIZER)
endif

# The release (one place: the Python package's _version.py) and the shared library's ABI number.
SPW_RELEASE   := $(shell sed -n 's/^__version__ = "\(.*\)"$$/\1/p' client/python/spillway/_version.py)
SPW_SOVERSION := 0

PROTO_SRC := $(BUILD)/gen/proto/spillway.pb-c.c $(BUILD)/gen/proto/health.pb-c.c
CORE_SRC  := $(wildcard lib/*.c ops/*.c pipeline/*.c) $(PROTO_SRC)
CORE_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(patsubst $(BUILD)/gen/%,gen/%,$(CORE_SRC)))
CORE_LIB  := $(BUILD)/lib/libspwcore.a
DISP_SRC  := $(filter-out dispatcher/main.c,$(wildcard dispatcher/*.c))
DISP_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(DISP_SRC))
DISP_LIB  := $(BUILD)/lib/libspwdisp.a
CLI_SRC   := $(wildcard client/*.c)
CLI_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRC))
CLI_LIB   := $(BUILD)/lib/libspwclient.a
WRK_SRC   := $(filter-out worker/main.c,$(wildcard worker/*.c))
WRK_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(WRK_SRC))
TEST_SRC  := $(wildcard tests/unit/check_*.c)
TEST_BIN  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC))
EQUIV_SRC := $(wildcard tests/equiv/*.c)
EQUIV_BIN := $(patsubst tests/equiv/%.c,$(BUILD)/tests/%,$(EQUIV_SRC))
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/tests/%,$(BENCH_SRC))
TOOL_SRC  := $(wildcard tests/tools/*.c)
TOOL_BIN  := $(patsubst tests/tools/%.c,$(BUILD)/tests/%,$(TOOL_SRC))
BINS      := $(BUILD)/bin/spillctl $(BUILD)/bin/spillway-dispatcher $(BUILD)/bin/spillway-worker \
             $(BUILD)/lib/libspillway.so $(BUILD)/lib/libspillway.so.$(SPW_SOVERSION) $(BUILD)/lib/libspillway.a

# The CUDA plugin (ops/cuda/), built where nvcc is (/usr/local/cuda, or NVCC=...); nothing else links CUDA, and
# everything builds and runs without it. The host emulation of the plugin (tests/gpuemu/) serves the tests.
NVCC      ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
GPU_ARCH  ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
GPU_PLUGIN := $(BUILD)/lib/libspillway-gpu.so
GPU_EMU    := $(BUILD)/lib/libspillway-gpuemu.so
ifneq ($(NVCC),)
BINS      += $(GPU_PLUGIN)
endif

.PHONY: all test unit lint equiv corrupt integration soak soak-long demo bench clean deps tsan-audio deploy-check fuzz fuzz-bins
all: $(BINS)

deps:
	@command -v protoc-c >/dev/null && pkg-config --exists $(PKGS) check && \
	  command -v espeak-ng flac lame oggenc opusenc opusdec >/dev/null && test -x /usr/bin/python3 && \
	  /usr/bin/python3 -c 'import torchvision, torchaudio, soundfile, scipy' 2>/dev/null && \
	  command -v podman debootstrap node npm help2man nginx patchelf >/dev/null && \
	  /usr/bin/python3 -c 'import venv, setuptools, wheel' 2>/dev/null || bash scripts/install-deps.sh

$(BUILD)/gen/proto/%.pb-c.c $(BUILD)/gen/proto/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen $<

# The build's version (git describe, or SPW_VERSION=...), rewritten only when it changes so that nothing
# else rebuilds; lib/version.c is the one file that includes it.
SPW_VERSION ?= $(shell git describe --always --dirty --tags 2>/dev/null || echo unknown)
.PHONY: FORCE
$(BUILD)/gen/lib/version_gen.h: FORCE
	@mkdir -p $(dir $@)
	@printf '#define SPW_BUILD_VERSION "%s"\n' '$(subst ',,$(SPW_VERSION))' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(BUILD)/obj/lib/version.o: $(BUILD)/gen/lib/version_gen.h

# The Python op's helper (pipeline/python_helper.py), built into the library as one C string.
$(BUILD)/gen/pipeline/python_helper.inc: pipeline/python_helper.py
	@mkdir -p $(dir $@)
	$(Q)sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@
$(BUILD)/obj/pipeline/python_op.o: $(BUILD)/gen/pipeline/python_helper.inc

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -Wno-missing-prototypes -c $< -o $@

$(BUILD)/obj/%.o: %.c | $(BUILD)/gen/proto/spillway.pb-c.h $(BUILD)/gen/proto/health.pb-c.h
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(CORE_LIB): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

$(DISP_LIB): $(DISP_OBJ) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $(DISP_OBJ)

# The client library's own objects (spillway/client.h), linked in-tree with libspwcore; users get
# libspillway.a (both in one archive) and libspillway.so.
$(CLI_LIB): $(CLI_OBJ) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $(CLI_OBJ)

$(BUILD)/bin/spillway-dispatcher: $(BUILD)/obj/dispatcher/main.o $(DISP_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/bin/spillway-worker: $(BUILD)/obj/worker/main.o $(WRK_OBJ) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The client library as one shared object (the Python package loads it with ctypes; exports SPW_API only)
# and as one static archive.
$(BUILD)/lib/libspillway.so: $(CLI_OBJ) $(CORE_OBJ) client/libspillway.map
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libspillway.so.$(SPW_SOVERSION) -Wl,--version-script=client/libspillway.map \
	  $(LDFLAGS) $(filter %.o,$^) -o $@ $(LDLIBS)

$(BUILD)/lib/libspillway.so.$(SPW_SOVERSION): $(BUILD)/lib/libspillway.so
	$(Q)ln -sf libspillway.so $@

$(BUILD)/lib/libspillway.a: $(CLI_OBJ) $(CORE_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# spillctl (tools/spillctl/): a user of libspillway, in its own room.
CTL_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tools/spillctl/*.c))
$(BUILD)/bin/spillctl: $(CTL_OBJ) $(CLI_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/check_%: $(BUILD)/obj/tests/unit/check_%.o $(CLI_LIB) $(DISP_LIB) $(CORE_LIB) | $(GPU_EMU)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(CHECK_LIBS) $(LDLIBS)
# The worker's heartbeat progress is tested over a job table of its own, linked from the worker's objects.
$(BUILD)/tests/check_worker_progress: $(BUILD)/obj/tests/unit/check_worker_progress.o $(WRK_OBJ) $(CORE_LIB) | $(GPU_EMU)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(CHECK_LIBS) $(LDLIBS)
# The worker's outbox is tested alone (no sockets), linked from its object.
$(BUILD)/tests/check_outbox: $(BUILD)/obj/tests/unit/check_outbox.o $(BUILD)/obj/worker/outbox.o $(CORE_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(CHECK_LIBS) $(LDLIBS)

# the per-pixel arithmetic both share: pixel.h and the headers it includes
GPU_PIXEL_H := ops/cuda/gpu_plugin.h ops/cuda/pixel.h ops/color_px.h ops/px.h ops/warp_px.h

$(GPU_PLUGIN): ops/cuda/plugin.cu $(GPU_PIXEL_H)
	@mkdir -p $(dir $@)
	@echo "  NVCC    $@"
	$(Q)$(NVCC) -O3 -std=c++17 -fmad=false -I. -Xcompiler -fPIC,-fvisibility=hidden -cudart static \
	  $(GPU_ARCH) -shared $< -o $@

$(GPU_EMU): tests/gpuemu/gpuemu.c $(GPU_PIXEL_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) $(filter-out -MMD -MP,$(CFLAGS)) -shared $(LDFLAGS) $< -o $@

$(BUILD)/tests/%: $(BUILD)/obj/tests/tools/%.o $(CORE_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/bench/%.o $(CORE_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/equiv/%.o $(CORE_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# make test = lint + unit + equivalence against torchvision and torchaudio + corrupt-input/CLI + integration
# (real daemons) + the Python package.
# The build on every core (JOBS), the tests one after another (-j1: they time real daemons).
JOBS ?= $(shell nproc)
test: deps
	$(MAKE) -j$(JOBS) all $(TEST_BIN) $(EQUIV_BIN) $(BENCH_BIN) $(TOOL_BIN)
	$(MAKE) -j1 lint unit equiv corrupt integration python deploy-check

lint:
	bash scripts/dev/lint.sh
	/usr/bin/python3 scripts/dev/plots.py --out $(BUILD)/plots-check > /dev/null   # make plots keeps working
	test "$$(ls $(BUILD)/plots-check/plot-*.png | wc -l)" = 7
	@# libspillway.so must not need a symbol only the tools have (client/ files that spillctl alone links)
	@! nm -D --undefined-only $(BUILD)/lib/libspillway.so 2>/dev/null | grep ' spw_' || \
	  { echo "lint: libspillway.so needs the symbols above: link their files into it or leave them out"; false; }

unit: $(TEST_BIN)
	@set -e; for t in $(TEST_BIN); do echo "== $$t"; $$t; done

equiv: all $(EQUIV_BIN) $(TOOL_BIN)
	bash tests/equiv/run.sh
	bash tests/audio/run.sh

corrupt: all
	bash tests/cli/run.sh

integration: all $(TOOL_BIN)
	@set -e; for t in $(filter-out %/lib.sh,$(wildcard tests/integration/*.sh)); do echo "== $$t"; \
	  s=$$(date +%s); bash $$t; echo "== $$t: $$(( $$(date +%s) - s )) s"; done

# The Python package (client/python/spillway) and its PyTorch adapter, against this build's libspillway.so.
.PHONY: python
python: all
	SPW_BUILD=$(BUILD) bash tests/python/run.sh

# The type stub of spillway.pipeline (its op methods are made from the op registry at import, which editors and
# type checkers never run): regenerate after changing an op's fields; test_op_registry.py fails while it is stale.
.PHONY: pyi
pyi: $(BUILD)/lib/libspillway.so
	PYTHONPATH=client/python SPILLWAY_LIB=$(abspath $(BUILD)/lib/libspillway.so) /usr/bin/python3 scripts/dev/make_pyi.py

# libFuzzer targets (tests/fuzz/fuzz_*.c) with clang, ASan and UBSan, in build-fuzz/; make fuzz runs each for
# FUZZ_SECONDS (10) from its seed corpus (tests/fuzz/run.sh).
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
$(BUILD)/tests/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(DISP_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) -fsanitize=fuzzer $(LDFLAGS) $^ -o $@ $(LDLIBS)

fuzz-bins: $(patsubst tests/fuzz/%.c,$(BUILD)/tests/%,$(FUZZ_SRC))

fuzz:
	$(MAKE) -j$(JOBS) CC=clang BUILD=build-fuzz SANITIZER=address,undefined WERROR=0 \
	  EXTRA_CFLAGS='-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined' fuzz-bins
	FUZZ_BUILD=build-fuzz bash tests/fuzz/run.sh

# deploy/: the Kubernetes manifests render and validate, podman builds the image, and the image runs as pods in
# network namespaces on this machine (root; deploy/scripts/check.sh; part of make test).
deploy-check: all
	bash deploy/scripts/check.sh all

# The threaded audio path (FFTW and resampling plans made concurrently) under ThreadSanitizer.
tsan-audio:
	$(MAKE) -j$(JOBS) SANITIZER=thread build-thread/tests/check_stft build-thread/bin/spillctl
	bash tests/audio/tsan.sh

# The fault runs of the service test, 20 seeded times (make test runs 2).
soak: all
	SOAK_RUNS=20 bash tests/integration/service_client.sh

# Four job lanes for SOAK_MINUTES (30) under worker and dispatcher faults, RSS sampled (by hand; docs).
soak-long: all
	bash scripts/eval/soak-long.sh

demo: deps
	$(MAKE) all
	bash scripts/demo.sh

bench: deps
	$(MAKE) all $(BENCH_BIN)
	/usr/bin/python3 scripts/lib/bench_targets.py clear
	@fail=0; for b in ops stream offload compress audio audio-decode png python-heap python-op dispatcher recipes; do \
	  bash scripts/bench/$$b.sh || { echo "make bench: scripts/bench/$$b.sh failed" >&2; fail=1; }; \
	done; /usr/bin/python3 scripts/lib/bench_targets.py report; exit $$fail

# The benchmark figures as PNGs in docs/ (scripts/dev/plots.py: from build/'s benchmark outputs, else docs/data/).
.PHONY: plots
plots:
	/usr/bin/python3 scripts/dev/plots.py
	gnuplot scripts/dev/architecture.gp         # docs/architecture.png, the rooms and an element's path

# make install [PREFIX=/usr/local] [DESTDIR=] - binaries, man pages (help2man, from each binary's --help),
# the header, libspillway.a and .so, spillway.pc (shared) and spillway-static.pc, the GPU plugin where built, and the Python package (whose
# libspillway.so is a link to the installed one). make uninstall removes exactly what install put there.
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
PYTHONDIR  ?= $(LIBDIR)/python$(shell /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages
D          := $(DESTDIR)
PY_FILES   := $(wildcard client/python/spillway/*.py) client/python/spillway/pipeline.pyi client/python/spillway/py.typed
DAEMONS    := spillctl spillway-dispatcher spillway-worker
.PHONY: install uninstall wheel
$(BUILD)/spillway.pc $(BUILD)/spillway-static.pc: $(BUILD)/%.pc: client/%.pc.in FORCE   # anew for each PREFIX
	@mkdir -p $(dir $@)
	@sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(SPW_RELEASE)|; s|@DEPLIBS@|$(shell pkg-config --libs $(PKGS))|' $< > $@

MAN_NAME_spillctl            := run pipelines, inspect a Spillway dispatcher, plan offloading
MAN_NAME_spillway-dispatcher := Spillway's dispatcher: jobs, splits, workers and plans
MAN_NAME_spillway-worker     := Spillway's CPU worker: runs pipelines up to the cut, streams elements
$(BUILD)/man/%.1: $(BUILD)/bin/%
	@mkdir -p $(dir $@)
	help2man --no-info --no-discard-stderr --version-string='$(SPW_RELEASE)' --name="$(MAN_NAME_$*)" $< > $@.tmp
	@mv $@.tmp $@

install: all $(BUILD)/spillway.pc $(BUILD)/spillway-static.pc $(patsubst %,$(BUILD)/man/%.1,$(DAEMONS))
	install -d $(D)$(BINDIR) $(D)$(LIBDIR)/pkgconfig $(D)$(INCLUDEDIR)/spillway $(D)$(MANDIR)/man1 \
	  $(D)$(PYTHONDIR)/spillway
	install -m 755 $(patsubst %,$(BUILD)/bin/%,$(DAEMONS)) $(D)$(BINDIR)/
	install -m 644 $(patsubst %,$(BUILD)/man/%.1,$(DAEMONS)) $(D)$(MANDIR)/man1/
	install -m 644 client/include/spillway/client.h client/include/spillway/op_plugin.h $(D)$(INCLUDEDIR)/spillway/
	install -m 644 $(BUILD)/lib/libspillway.a $(D)$(LIBDIR)/
	install -m 755 $(BUILD)/lib/libspillway.so $(D)$(LIBDIR)/libspillway.so.$(SPW_SOVERSION)
	ln -sf libspillway.so.$(SPW_SOVERSION) $(D)$(LIBDIR)/libspillway.so
	$(if $(wildcard $(GPU_PLUGIN)),install -m 755 $(GPU_PLUGIN) $(D)$(LIBDIR)/)
	install -m 644 $(BUILD)/spillway.pc $(BUILD)/spillway-static.pc $(D)$(LIBDIR)/pkgconfig/
	install -m 644 $(PY_FILES) $(D)$(PYTHONDIR)/spillway/
	ln -sf "$$(realpath -m --relative-to=$(PYTHONDIR)/spillway $(LIBDIR))/libspillway.so.$(SPW_SOVERSION)" \
	  $(D)$(PYTHONDIR)/spillway/libspillway.so

# The Python package as a wheel (build/dist/), carrying this build's libspillway.so and every library it
# needs beyond glibc and the GCC runtime (scripts/dev/bundle_wheel.py: private copies in spillway/_libs/,
# patched with patchelf, checked), tagged manylinux_$(WHEEL_GLIBC): it imports on any x86-64 host with that
# glibc or newer. Built offline with the system's setuptools (no build isolation: nothing is downloaded).
WHEEL_GLIBC ?= 2.36
wheel: $(BUILD)/lib/libspillway.so
	@rm -rf $(BUILD)/dist/raw && mkdir -p $(BUILD)/dist/raw
	cd client/python && SPILLWAY_LIB=$(abspath $(BUILD)/lib/libspillway.so) /usr/bin/python3 -m pip wheel \
	  --no-deps --no-index --no-build-isolation -q -w $(abspath $(BUILD)/dist/raw) .
	rm -rf client/python/build client/python/spillway.egg-info
	rm -f $(BUILD)/dist/spillway-*.whl
	/usr/bin/python3 scripts/dev/bundle_wheel.py --glibc $(WHEEL_GLIBC) $(BUILD)/dist/raw/spillway-*.whl $(BUILD)/dist
	rm -rf $(BUILD)/dist/raw

uninstall:
	rm -f $(patsubst %,$(D)$(BINDIR)/%,$(DAEMONS)) $(patsubst %,$(D)$(MANDIR)/man1/%.1,$(DAEMONS)) \
	  $(D)$(INCLUDEDIR)/spillway/client.h $(D)$(INCLUDEDIR)/spillway/op_plugin.h $(D)$(LIBDIR)/libspillway.a \
	  $(D)$(LIBDIR)/libspillway.so \
	  $(D)$(LIBDIR)/libspillway.so.$(SPW_SOVERSION) $(D)$(LIBDIR)/libspillway-gpu.so \
	  $(D)$(LIBDIR)/pkgconfig/spillway.pc $(D)$(LIBDIR)/pkgconfig/spillway-static.pc $(patsubst client/python/%,$(D)$(PYTHONDIR)/%,$(PY_FILES)) \
	  $(D)$(PYTHONDIR)/spillway/libspillway.so
	rm -rf $(D)$(PYTHONDIR)/spillway/__pycache__
	-rmdir $(D)$(INCLUDEDIR)/spillway $(D)$(PYTHONDIR)/spillway 2>/dev/null

clean:
	rm -rf build build-address build-undefined build-thread build-fuzz $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' -type f 2>/dev/null)
.SECONDARY:
