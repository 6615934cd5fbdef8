# Two entry points: `make demo` and `make test`. Both install dependencies
# (Debian packages via scripts/setup), configure and build first.
# `make fuzz` builds the libFuzzer targets with clang-14 (fuzz/README.md) and
# runs each for FUZZ_SECONDS over its corpus.
BUILD ?= build
JOBS ?= $(shell nproc)
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
# Debug info of the build (CMakeLists.txt's INA_DEBUG_INFO): line tables only
# by default (backtraces with file:line; about 40 % less compile time per file
# than -g; `make test` from a fresh clone must stay within 10 minutes on 2
# cores). Reading variables with gdb needs `make build DEBUG_INFO=-g`
# (which rebuilds everything).
DEBUG_INFO ?= -g1

.PHONY: setup configure build demo test bench fuzz clean

setup:
	./scripts/setup

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINA_DEBUG_INFO=$(DEBUG_INFO)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The demo needs only the `ina` binary: a newcomer's first build skips the
# tests and benchmarks (`make test` builds them).
demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target ina
	./$(BUILD)/ina demo

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	./$(BUILD)/ina bench sim

fuzz:
	./scripts/setup --fuzz
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINA_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	./fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
