# Thin wrapper over CMake: the README's commands. Every target installs what is missing first
# (quietly when everything is there), builds, then runs.
BUILD ?= build
JOBS ?= $(shell nproc)
PY ?= python3
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
PY_FLAGS = -DPython3_EXECUTABLE=$(shell command -v $(PY)) -DHVDS_REQUIRE_PYTHON_TESTS=ON

APT_PACKAGES := cmake g++ make pkg-config libgloo-dev libhwloc-dev libgtest-dev openmpi-bin \
                libopenmpi-dev iproute2
PIP_PINS := numpy==2.2.6 pytest==8.3.5 matplotlib==3.9.2 cloudpickle==3.1.1 torch==2.5.1 \
            tensorflow-cpu==2.20.0 mpi4py==4.1.2
# Installed without their dependencies: tf-keras asks for the full tensorflow package, which
# tensorflow-cpu already provides.
PIP_NODEPS := tf-keras==2.20.1

# Installs the pinned packages $(1) (pip options $(2)) unless every one is there at its version.
define pip_pinned
@$(PY) -c "import importlib.metadata as m, sys; pins=dict(p.split('==') for p in sys.argv[1:]); \
  sys.exit(any(m.version(k) != v for k, v in pins.items()))" $(1) 2>/dev/null || \
  { echo "installing Python packages: $(1)"; $(PY) -m pip install -q $(2) $(1); }
endef

.PHONY: all deps build test demo bench test-asan clean
.PHONY: fuzz test-tsan

all: build

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	$(call pip_pinned,$(PIP_PINS),)
	$(call pip_pinned,$(PIP_NODEPS),--no-deps)

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) $(PY_FLAGS) >$(BUILD).configure.log 2>&1 || \
	  { cat $(BUILD).configure.log; exit 1; }
	@grep -A6 "hvdsparse configuration" $(BUILD).configure.log | sed 's/^-- //'
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest -j 2 --output-on-failure --timeout 600

demo: build
	$(BUILD)/bin/hvdsparse run -np 2 $(PY) frameworks/pytorch/examples/train_synthetic.py

# The benchmark suite (bench/suite/run.py, docs/benchmarks.md): dense allreduce of hvdsparse next
# to Gloo, Open MPI, torch.distributed (gloo) and Horovod (with BENCH_HOROVOD_PYTHON, a Python that
# imports horovod.torch, from bench/peers/build_horovod.sh), on loopback and on namespace hosts
# with shaped links (needs root; about an hour). With BENCH_HOROVOD_PYTHON it also trains the same
# scripts under Horovod and hvdsparse (bench/horovod_compare.py), Keras fit too with
# BENCH_HOROVOD_TF_PYTHON (bench/peers/build_horovod.sh tensorflow). It rewrites
# docs/benchmarks.md and docs/benchmarks/. BENCH_QUICK=1: 2 runs, fewer sizes,
# loopback np 4 and 4 hosts at 1 Gbit/s only, written to $(BUILD)/bench-quick, docs untouched
# (a few minutes). BENCH_ARGS adds options (e.g. --scenarios loopback,4x1gbit).
BENCH_QUICK ?=
BENCH_HOROVOD_PYTHON ?=
BENCH_HOROVOD_TF_PYTHON ?=
comma := ,
BENCH_ARGS ?=
BENCH_OUT = $(if $(BENCH_QUICK),--quick --out $(BUILD)/bench-quick,--out docs/benchmarks --doc docs/benchmarks.md)

bench: build
	$(PY) bench/suite/run.py --build $(BUILD) $(BENCH_OUT) \
	  $(if $(BENCH_HOROVOD_PYTHON),--horovod-python $(BENCH_HOROVOD_PYTHON)) $(BENCH_ARGS)
	$(if $(BENCH_QUICK),,bench/fusion_step.sh $(BUILD) 5)
	$(if $(BENCH_QUICK),,$(PY) bench/allreduce_stability.py --build $(BUILD) --np 2,4 \
	  --sizes 64K,256K,1M,4M,16M,64M,256M --runs 8 --max-seconds 5)
	$(if $(BENCH_HOROVOD_PYTHON),$(PY) bench/horovod_compare.py --build $(BUILD) \
	  --horovod-python $(BENCH_HOROVOD_PYTHON) --workloads synthetic$(comma)embedding$(if \
	  $(BENCH_HOROVOD_TF_PYTHON),$(comma)keras --horovod-tf-python $(BENCH_HOROVOD_TF_PYTHON)))

# HWLOC_COMPONENTS=-pci: hwloc's PCI plugin leaks a few allocations of libpciaccess and is unloaded
# before LeakSanitizer reports, so the leak cannot be suppressed by name; the tests read no PCI
# devices (GPU placement is tested from XML topologies).
test-asan: deps
	@HWLOC_COMPONENTS=-pci $(MAKE) --no-print-directory test BUILD=build-asan \
	  CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DHVDS_SANITIZE=ON"

clean:
	rm -rf $(BUILD) build-asan $(BUILD).configure.log build-asan.configure.log

# Fuzzing (test/fuzz/): the store protocol and negotiation message decoders as libFuzzer targets
# with ASan, UBSan and LeakSanitizer, each run for FUZZ_SECONDS. A crash, a leak, a failed
# round-trip check, or one allocation of FUZZ_MALLOC_MB or more (a length a peer declared, not
# bounded by the bytes received) fails it; the reproducer is kept in build-fuzz/artifacts/TARGET/.
# Found inputs accumulate in build-fuzz/corpus/; test/fuzz/corpus/ holds the checked-in seeds.
FUZZ_SECONDS ?= 60
FUZZ_MALLOC_MB ?= 8
FUZZ_TARGETS := fuzz_store_proto fuzz_message
FUZZ_FLAGS = -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
             -malloc_limit_mb=$(FUZZ_MALLOC_MB) -print_final_stats=1

fuzz:
	@missing=""; for p in clang cmake make; do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	rt=libclang-rt-$$(clang -dumpversion 2>/dev/null | cut -d. -f1)-dev; \
	if [ -z "$$missing" ]; then dpkg -s $$rt >/dev/null 2>&1 || missing=" $$rt"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  rt=libclang-rt-$$(clang -dumpversion | cut -d. -f1)-dev; \
	  dpkg -s $$rt >/dev/null 2>&1 || \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$rt >/dev/null; \
	fi
	@CC=clang cmake -S test/fuzz -B build-fuzz -DHVDS_FUZZ=ON >build-fuzz.configure.log 2>&1 || \
	  { cat build-fuzz.configure.log; exit 1; }
	@cmake --build build-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	@fail=0; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t build-fuzz/artifacts/$$t; \
	  echo "$$t: fuzzing for $(FUZZ_SECONDS) s (log: build-fuzz/$$t.log)"; \
	  build-fuzz/bin/$$t $(FUZZ_FLAGS) -artifact_prefix=build-fuzz/artifacts/$$t/ \
	    build-fuzz/corpus/$$t test/fuzz/corpus/$$t >build-fuzz/$$t.log 2>&1; rc=$$?; \
	  grep -E "^#[0-9]+.*(DONE|INITED)" build-fuzz/$$t.log | tail -1 | sed "s/^/  /"; \
	  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)" \
	    build-fuzz/$$t.log | sed "s/^/  /"; \
	  if [ $$rc -ne 0 ]; then \
	    fail=1; echo "$$t: FAILED (exit $$rc)"; \
	    grep -E -A30 "^==[0-9]+==ERROR|runtime error|fuzz property failed|out-of-memory|malloc\(" \
	      build-fuzz/$$t.log | head -60; \
	    grep "Test unit written to" build-fuzz/$$t.log; \
	  fi; \
	done; exit $$fail

# ThreadSanitizer build of the C and C++ tests in build-tsan. The Python binding tests are left
# out as in test-asan (a sanitized libhvdsparse cannot load into an unsanitized interpreter).
# test/tsan.supp silences only uninstrumented third-party code (libgloo).
TSAN_RUN_OPTIONS = suppressions=$(CURDIR)/test/tsan.supp second_deadlock_stack=1

test-tsan: deps
	@$(MAKE) --no-print-directory build BUILD=build-tsan PY_FLAGS= \
	  CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=RelWithDebInfo -DHVDS_TSAN=ON"
	cd build-tsan && TSAN_OPTIONS="$(TSAN_RUN_OPTIONS)" \
	  ctest --output-on-failure --timeout 600 -E '^python_'

# GPU tests (test/gpu/, docs/gpu.md): builds the CUDA kernels and the NCCL backend in $(BUILD),
# checks every kernel against the CPU implementation in ops/ and the NCCL collectives, and
# prints the allreduce bus bandwidth of our path next to ncclAllReduce. Needs a GPU; `make test`
# never runs these (they are not registered with ctest).
.PHONY: test-gpu
test-gpu: deps
	CMAKE_FLAGS="$(CMAKE_FLAGS)" test/gpu/run.sh $(BUILD)
