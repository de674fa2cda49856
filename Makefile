# Entry points for people and CI. Everything goes through the CMake presets.
PRESET ?= ci
BUILD_DIR := build/$(PRESET)
ZEUS := $(BUILD_DIR)/apps/zeus/zeus
SOURCES = $(shell git ls-files '*.cpp' '*.h' 2>/dev/null)

.PHONY: build-cuda build-plain build-wheels-ci wheels test-wheels deps configure build test test-python test-faults test-faults-nvidia test-faults-amd test-cuda test-cuda-suites test-cuda-python test-gpu-check test-install torch-wheel demo format format-check bench clean

deps:
	scripts/install-deps.sh

configure: deps
	cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET)

# Sets up a fresh Debian machine and passes the test suite: the C++ suites, then the Python
# package (built and installed into .venv-py) and its pytest suite against Debian's python3-torch.
test: build
	scripts/install-zeus016.sh
	scripts/install-bso-upstream.sh
	scripts/install-k8s-validate.sh
	scripts/install-amdsmi-abis.sh
	@echo "make test: ctest, and beside it (nice 19) the Python package's build: the suites mostly"
	@echo "wait on their jobs and servers, the build takes the idle CPU (its log: build/install-python.log)"
	@mkdir -p build; nice -n 19 scripts/install-python.sh >build/install-python.log 2>&1 & py=$$!; \
	  ctest --preset $(PRESET); rc=$$?; wait $$py; py_rc=$$?; \
	  echo "make test: scripts/install-python.sh (exit $$py_rc):"; cat build/install-python.log; \
	  [ $$rc -eq 0 ] && [ $$py_rc -eq 0 ]
	@echo "make test: the two fault campaigns and the Python suite, side by side (each mostly waits"
	@echo "on its jobs); each one's output is printed whole when it ends"
	$(MAKE) --no-print-directory -j3 --output-sync=target test-faults-nvidia test-faults-amd \
	  test-python

# The pip wheels (docs/packaging.md): manylinux_2_28 for x86_64 and aarch64, one per CPython
# 3.9-3.13, in build/wheels/dist, each checked by auditwheel; then every check of tests/wheels/run.sh
# (the bare bullseye and bookworm roots, and arm64 under qemu). The release command.
wheels: deps
	scripts/wheels/build-wheels.sh
	tests/wheels/run.sh

# CI's share of it: the x86_64 wheels of the two roots' Pythons (3.9, 3.11) and their checks in
# the bare bullseye and bookworm roots (bookworm's sees the torch scripts/install-torch.sh
# installed in .venv-torch).
test-wheels: build-wheels-ci
	tests/wheels/run.sh --checks "bullseye bookworm"
build-wheels-ci: deps
	scripts/wheels/build-wheels.sh --arch x86_64 --python "3.9 3.11"

# The fault campaign (bench/faults/campaign.py): 30 seeded faults against short jobs, as root and
# through zeusd (its Python job needs .venv-py: scripts/install-python.sh); it fails on any limit
# left lowered, process left or half-written file, and counts the strikes that hit nothing.
FAULTS ?= 30
FAULT_SEED ?= 2026
AMD_FAULTS ?= 10
test-faults: test-faults-nvidia test-faults-amd
test-faults-nvidia:
	python3 bench/faults/campaign.py --build $(BUILD_DIR) --faults $(FAULTS) --seed $(FAULT_SEED)
test-faults-amd:
	python3 bench/faults/campaign.py --build $(BUILD_DIR) --faults $(AMD_FAULTS) \
	  --seed $(FAULT_SEED) --vendor amd

# The Python package alone (the C++ build provides the zeus CLI and the fake NVML the suite uses).
PYTEST_FLAGS ?= -q -rs
test-python:
	scripts/install-python.sh
	ZEUS_BUILD_DIR=$(BUILD_DIR) .venv-py/bin/python -m pytest $(PYTEST_FLAGS) python/tests

# The suites that depend on libtorch (ctest label `torch`, and the loader cases of the zeusd and
# batch-size suites) against the second supported libtorch: PyTorch's wheel (2.x, CUDA + NCCL),
# installed into .venv-torch by scripts/install-torch.sh (pinned), or the torch of an existing
# environment: `make test-cuda TORCH_PYTHON=/opt/torch/.venv/bin/python3`. The rest (daemon,
# service, etcd, metrics, launcher, ...) does not link libtorch and ran once in `make test`.
# The torch_suites target builds what those need, not the core-only test programs. Without a
# GPU the tests that need one skip, saying why.
TORCH_PYTHON ?=
torch-wheel:
	scripts/install-torch.sh $(if $(TORCH_PYTHON),--python $(TORCH_PYTHON))

# The Python suite runs too, with the same wheel as make test's, under this PyTorch (2.x), with
# the training frameworks (transformers, Lightning; pinned) its callback tests drive.
# The C++ suites and the Python suite run side by side (the Python suite mostly waits on its
# jobs); each one's output is printed whole when it ends.
TORCH_PY = $(or $(TORCH_PYTHON),.venv-torch/bin/python)
test-cuda: build-cuda
	scripts/install-python.sh --python $(TORCH_PY) --target build/python-cuda
	scripts/install-frameworks.sh --python $(TORCH_PY) --target build/python-frameworks
	$(MAKE) --no-print-directory -j2 --output-sync=target test-cuda-suites test-cuda-python
test-cuda-suites:
	ctest --preset cuda -L torch
	ctest --preset cuda -R '^(BsoLoader|ZeusdJob)\.'
test-cuda-python:
	PYTHONPATH=$(CURDIR)/build/python-cuda:$(CURDIR)/build/python-frameworks ZEUS_BUILD_DIR=build/cuda \
	  $(TORCH_PY) -m pytest $(PYTEST_FLAGS) python/tests

# The build-* targets are each test target's build alone (.ci/run makes them in the background).
build-cuda: deps torch-wheel
	cmake --preset cuda $(if $(TORCH_PYTHON),-DZEUS_TORCH_PYTHON=$(TORCH_PYTHON))
	cmake --build --preset cuda --target torch_suites

# The GPU check (scripts/gpu-check.sh, docs/gpu.md) on this machine: its unit tests, then the
# check itself in --cpu-only mode three times against the GPU machine's torch (.venv-gpu-check):
# whole, with what it returns held to the device's return rules (the report in
# build/gpu-check/ci-out); with one step made to hang; with a file missing from the carry.
test-gpu-check: deps
	test -x .venv-py/bin/python || scripts/install-python.sh
	ZEUS_GPU_CHECK_RUN=1 .venv-py/bin/python -m pytest $(PYTEST_FLAGS) tests/gpu_check
	cat build/gpu-check/ci-out/gpu-check.txt

# A user's build, then zeus-cpp as a dependency: the plain Release configuration with no preset
# (`cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build`; warnings stay
# warnings), installed into one prefix and moved to another (the package is relocatable); then the
# Fashion-MNIST example's own CMake project, as a user writes theirs, built against the moved
# prefix with find_package(zeus_cpp CONFIG), and both programs run. What the package installs is
# built whole; the test suites and the in-tree examples are left out (as a packager builds it):
# make test compiles and runs them, and the consumer step builds the example from the package.
PLAIN_DIR := build/plain
PREFIX_DIR := build/prefix
test-install: build-plain
	rm -rf $(PREFIX_DIR)-first $(PREFIX_DIR) build/consumer
	cmake --install $(PLAIN_DIR) --prefix $(PREFIX_DIR)-first
	mv $(PREFIX_DIR)-first $(PREFIX_DIR)
	cmake -S examples/fashion_mnist -B build/consumer -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_PREFIX_PATH=$(CURDIR)/$(PREFIX_DIR)
	cmake --build build/consumer --parallel $(or $(CMAKE_BUILD_PARALLEL_LEVEL),2)
	build/consumer/fashion_mnist --help > /dev/null
	$(PREFIX_DIR)/bin/zeus simulate --gpu v100 --workload cifar100 --seeds 1 > /dev/null
	@echo "test-install: the installed package builds a consumer and runs from $(PREFIX_DIR)"

build-plain: deps
	cmake -S . -B $(PLAIN_DIR) -DCMAKE_BUILD_TYPE=Release -DZEUS_BUILD_TESTS=OFF \
	  -DZEUS_BUILD_EXAMPLES=OFF
	cmake --build $(PLAIN_DIR) --parallel $(or $(CMAKE_BUILD_PARALLEL_LEVEL),2)

# Sets up and runs the main job: 2-process data-parallel Fashion-MNIST on simulated V100s that
# profiles the power limits, trains to 0.88 test accuracy, prints the summary, and writes
# zeus_log/report.html. A fresh zeus_log/ each time, so the limits are profiled again.
DEMO_LOG := zeus_log
demo: configure
	cmake --build --preset $(PRESET) --target zeus fashion_mnist
	rm -rf $(DEMO_LOG)
	$(ZEUS) run --nproc-per-node 2 --standalone --omp-num-threads 1 \
	  $(BUILD_DIR)/examples/fashion_mnist --device sim:v100 --epochs 3 --target-accuracy 0.88 \
	  --log-dir $(DEMO_LOG)
	$(ZEUS) report $(DEMO_LOG)

format:
	clang-format -i $(SOURCES)

format-check:
	clang-format --dry-run -Werror $(SOURCES)

# Benchmarks are run by hand; see bench/README.md.
bench: deps
	cmake --preset release
	cmake --build --preset release --target monitor_bench loader_bench
	build/release/bench/monitor_bench
	build/release/bench/loader_bench

clean:
	rm -rf build
