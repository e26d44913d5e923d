# tessera: `make demo` runs the seed walkthrough, `make test` runs every test.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test install demo bench bench-compare bench-ab format clean sanitize fuzz \
	sanitize-thread

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: | deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The Python module's tests (docs/python.md) need nanobind, scikit-build-core and NumPy: a virtual
# environment of them from PyPI, made once. `make test` builds the module with it and runs the
# Python tests, `pip install .` included.
PY_ENV ?= .venv-py
$(PY_ENV)/.ready: | deps
	python3 -m venv $(PY_ENV)
	$(PY_ENV)/bin/pip install --quiet --disable-pip-version-check nanobind scikit-build-core numpy
	touch $@

test: deps $(PY_ENV)/.ready
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DTESSERA_PYTHON=ON \
	  -DPython_EXECUTABLE=$(CURDIR)/$(PY_ENV)/bin/python $(CMAKE_FLAGS)
	cmake --build $(BUILD_DIR) -j $(JOBS)
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# `make install PREFIX=/opt/tessera`: the library, headers, the tessera CLI, a CMake package
# (find_package(tessera CONFIG) -> tessera::tessera) and tessera.pc.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

demo: build
	$(BUILD_DIR)/bin/tessera demo

bench: build
	@for b in $(BUILD_DIR)/bench/bench_*; do echo "== $$b"; $$b || exit 1; done

# tessera beside PyTorch (pip, in .venv-bench) and Halide 14 (apt), ratios in one table.
# docs/benchmarks.md explains the set-up; a missing peer is reported, not skipped silently.
bench-compare: build
	python3 bench/compare_cpu.py --build $(BUILD_DIR)

# Before/after in one run: the revision BEFORE is built in build-ab/ and its benchmarks alternate
# with this build's (bench/ab.py): kernel GB/s, hot launch, compiled per-call, first results.
bench-ab: build
	@test -n "$(BEFORE)" || { echo "usage: make bench-ab BEFORE=<git revision>"; exit 2; }
	rm -rf build-ab/src && mkdir -p build-ab/src && git archive $(BEFORE) | tar -x -C build-ab/src
	cmake -S build-ab/src -B build-ab/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF
	cmake --build build-ab/build -j $(JOBS) --target bench_kernels_cpu bench_compile_cpu
	python3 bench/ab.py --before build-ab/build --after $(BUILD_DIR)

# The library, every test and the JIT's kernels under AddressSanitizer + UndefinedBehaviorSanitizer
# (any finding stops its test), or ThreadSanitizer (issue 19); their own build folders.
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_odr_violation=0:allocator_may_return_null=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp
# (Label sim, the CUDA simulator, is left out: its CUDA threads are ucontext fibers, which ASan
# and TSan do not follow; LeakSanitizer crashes at exit after a fiber run.)
sanitize: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_BUILD_BENCH=OFF \
	  -DTESSERA_SANITIZE=address,undefined
	cmake --build build-asan -j $(JOBS)
	@# LeakSanitizer's own tracer has crashed at a test's exit ("Tracer caught signal 11", once in
	@# about 30 runs, never reproduced): only then the failed tests run once more, and a real
	@# failure fails again.
	$(SAN_ENV) ctest --test-dir build-asan --output-on-failure -j $(JOBS) -LE 'gpu|sim' \
	  --output-log build-asan/ctest-last.log || { grep -q "Tracer caught signal" build-asan/ctest-last.log && \
	  echo "sanitize: LeakSanitizer's tracer crashed (a sanitizer fault, not a finding); the failed tests again:" && \
	  $(SAN_ENV) ctest --test-dir build-asan --output-on-failure --rerun-failed; }

sanitize-thread: deps
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_BUILD_BENCH=OFF \
	  -DTESSERA_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	$(SAN_ENV) ctest --test-dir build-tsan --output-on-failure -j $(JOBS) -LE 'gpu|sim'

# The libFuzzer targets (tests/fuzz: schemas, tile IR text, cache and tuning records, knobs, AOT packages), built
# with clang under ASan + UBSan in build-fuzz/ and run FUZZ_SECONDS each from their seed corpus.
FUZZ_SECONDS ?= 30
fuzz: deps
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
	  -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_EXAMPLES=OFF -DTESSERA_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS) --target fuzzers
	scripts/fuzz.sh build-fuzz/fuzz $(FUZZ_SECONDS)

format:
	@find include src tests tools examples bench -name '*.h' -o -name '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR)
