# Two entry points: `make demo` and `make test`. Both install dependencies
# (Debian packages via scripts/setup), configure and build first.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: setup configure build demo test bench clean

setup:
	./scripts/setup

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/ina demo

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	./$(BUILD)/ina bench sim

clean:
	rm -rf $(BUILD)
