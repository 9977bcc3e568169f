# pstrain: the two commands that matter are `make demo` and `make test`.
# Every target first makes sure the Debian packages are present
# (scripts/install-deps.sh installs only what is missing).

BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test demo bench fuzz clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) > $(BUILD).configure.log 2>&1 || \
	  (cat $(BUILD).configure.log; exit 1)
	@grep -E "pstrain:" $(BUILD).configure.log || true

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# In CI (CI=true) the fuzzers also run, FUZZ_SECONDS (60) each.
test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900
	@if [ "$$CI" = true ]; then scripts/fuzz.sh; fi

fuzz: deps
	@scripts/fuzz.sh

demo: build
	@scripts/demo.sh $(BUILD)

bench: build
	@$(BUILD)/bin/pstrain_bench all

clean:
	rm -rf $(BUILD) $(BUILD).configure.log build-fuzz build-fuzz.configure.log
