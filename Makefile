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
            tensorflow-cpu==2.20.0

.PHONY: all deps build test demo bench test-asan clean

all: build

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@$(PY) -c "import importlib.metadata as m, sys; pins=dict(p.split('==') for p in sys.argv[1:]); \
	  sys.exit(any(m.version(k) != v for k, v in pins.items()))" $(PIP_PINS) 2>/dev/null || \
	  { echo "installing Python packages: $(PIP_PINS)"; $(PY) -m pip install -q $(PIP_PINS); }

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) $(PY_FLAGS) >$(BUILD).configure.log 2>&1 || \
	  { cat $(BUILD).configure.log; exit 1; }
	@grep -A6 "hvdsparse configuration" $(BUILD).configure.log | sed 's/^-- //'
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600

demo: build
	$(BUILD)/bin/hvdsparse run -np 2 $(PY) frameworks/pytorch/examples/train_synthetic.py

bench: build
	$(PY) bench/compare_allreduce.py --build $(BUILD) --out docs/benchmarks --doc docs/benchmarks.md
	bench/fusion_step.sh $(BUILD) 5

test-asan: deps
	@$(MAKE) --no-print-directory test BUILD=build-asan CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DHVDS_SANITIZE=ON"

clean:
	rm -rf $(BUILD) build-asan $(BUILD).configure.log build-asan.configure.log
