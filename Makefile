# Entry points for people and CI. Everything goes through the CMake presets.
PRESET ?= ci
BUILD_DIR := build/$(PRESET)
ZEUS := $(BUILD_DIR)/apps/zeus/zeus
SOURCES = $(shell git ls-files '*.cpp' '*.h' 2>/dev/null)

.PHONY: deps configure build test demo format format-check bench clean

deps:
	scripts/install-deps.sh

configure: deps
	cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET)

# Sets up a fresh Debian machine and passes the test suite.
test: build
	ctest --preset $(PRESET)

# Sets up and runs the main job: until the trainer lands, `zeus monitor` on a simulated V100.
demo: configure
	cmake --build --preset $(PRESET) --target zeus
	$(ZEUS) monitor --device sim:v100 --duration 3s

format:
	clang-format -i $(SOURCES)

format-check:
	clang-format --dry-run -Werror $(SOURCES)

# Benchmarks are run by hand; see bench/README.md.
bench: deps
	cmake --preset release
	cmake --build --preset release --target monitor_bench
	build/release/bench/monitor_bench

clean:
	rm -rf build
