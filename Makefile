# pstrain: the two commands that matter are `make demo` and `make test`.
# Every target first makes sure the Debian packages are present
# (scripts/install-deps.sh installs only what is missing).

BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test demo bench bench-scale fuzz docker-image docker-test clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) > $(BUILD).configure.log 2>&1 || \
	  (cat $(BUILD).configure.log; exit 1)
	@grep -E "pstrain:" $(BUILD).configure.log || true

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# In CI (CI=true) the fuzzers also run, FUZZ_SECONDS (40 there; 60 for `make fuzz`) each.
test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900
	@if [ "$$CI" = true ]; then FUZZ_SECONDS=$${FUZZ_SECONDS:-40} scripts/fuzz.sh; fi

fuzz: deps
	@scripts/fuzz.sh

demo: build
	@scripts/demo.sh $(BUILD)

# The full docker/Dockerfile build (CPU) from the sources, on a private
# Docker engine with a Debian 12 base image made by debootstrap (as root).
docker-image:
	@PSTRAIN_FULL_DEPS=1 scripts/install-deps.sh
	@scripts/docker_env.py image --full

# The compose stack under a real Docker engine (also part of `make test`).
docker-test: build
	@cd $(BUILD) && ctest --output-on-failure -L docker

bench: build
	@$(BUILD)/bin/pstrain_bench all

# Scaling over emulated hosts (root: network namespaces, tc, cgroup-v1 cpu quotas).
bench-scale: build
	@python3 bench/scale.py --bin-dir=$(BUILD)/bin

clean:
	rm -rf $(BUILD) $(BUILD).configure.log build-fuzz build-fuzz.configure.log
