#!/usr/bin/env bash
# The GPU machine's check, in one call of the device tool (DESIGN.md §4):
#   builds GoogleTest from the Debian sources carried in .deps/googletest (the machine has none),
#   builds tessera with every core, runs the `gpu` and `nvrtc` test labels, then the whole suite,
#   `tessera doctor` and the demo, and ends with a short summary (full logs under $OUT).
#
#   scripts/gpu-check.sh            # on the GPU machine: run(command="scripts/gpu-check.sh",
#                                   #                         carry=[".deps"])
#   scripts/gpu-check.sh quick      # the build, the `gpu` label, the tutorials and the demo;
#                                   # TESTS=regex narrows it (TESTS='test_ops_cuda|test_cuda$')
#   scripts/gpu-check.sh bench      # the build and the benchmarks with their peers only;
#                                   # BENCH=regex picks steps by name (BENCH='kernels|training')
#   scripts/gpu-check.sh python     # the build with the Python module, its tests with PyTorch
# Every step has a time limit (STEP_TIMEOUT seconds, default 300): a hung kernel fails its step
# instead of eating the session's GPU time.
# Here, once: mkdir -p .deps && cp -r /usr/src/googletest .deps/   (.deps/ is git-ignored)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tessera-gpu-check}
mkdir -p "$OUT"
J=$(nproc)
BUILD=${BUILD:-build-gpu}  # CXX picks the compiler of a fresh build folder, as CMake reads it
# The machine's default CXX (/opt/gcc's g++) links libstdc++ statically into shared libraries
# (docs/python.md): libtessera and libtessera_runtime would each carry a C++ runtime. The system
# g++ links it dynamically, once.
[ -x /usr/bin/g++ ] && export CXX=${GPU_CXX:-/usr/bin/g++}
if [ "${1:-}" = python ]; then
  BUILD=${BUILD_PY:-build-gpu-py}
  export CXX=${PY_CXX:-/usr/bin/g++}
fi
export TESSERA_CACHE_DIR
TESSERA_CACHE_DIR=$(mktemp -d)
summary="$OUT/summary.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }
step() {  # step NAME LOG COMMAND...: runs a step, records its status and seconds
  local name=$1 logf=$2
  shift 2
  local t0=$SECONDS
  timeout -k 5 "${STEP_TIMEOUT:-300}" "$@" > "$OUT/$logf" 2>&1
  local rc=$?
  say "$(printf '%-28s %s (%ds, log %s)' "$name" "$([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc")" $((SECONDS - t0)) "$logf")"
  return $rc
}

bstep() {  # a benchmark step, run when its name matches BENCH (a regex; all by default)
  [[ "$1" =~ ${BENCH:-.} ]] || return 0
  step "$@"
}

run_benchmarks() {
  # Benchmarks: tessera and its peers (Triton's tutorial kernels, PyTorch) in one run, one table of
  # ratios (bench/gpu_table.py). First launches run in new processes: cold caches, then warm.
  B="$BUILD/bench/bench_gpu_kernels"
  P=bench/peers/triton_gpu.py
  bstep "bench_gpu_kernels" bench-gpu.jsonl "$B" --json
  bstep "bench compiled" bench-compiled.jsonl "$B" compiled
  bstep "bench launch" bench-launch.jsonl "$B" launch
  # (every path runs; a wrong result in any fails the step)
  bstep "bench matmul" bench-matmul.jsonl bash -c "rc=0; '$B' matmul || rc=1; \
    TESSERA_CUDA_WGMMA_ASYNC=1 '$B' matmul || rc=1; TESSERA_CUDA_WGMMA_ASYNC=0 '$B' matmul || rc=1; \
    TESSERA_CUDA_WGMMA=0 '$B' matmul || rc=1; TESSERA_CUDA_MMA=0 '$B' matmul || rc=1; exit \$rc"
  bstep "bench attention" bench-attention.jsonl "$B" attention
  bstep "bench training" bench-training.jsonl "$B" training
  # Each kernel of one MLP step under ncu (only when BENCH names it: ncu replays every kernel).
  if [[ "${BENCH:-}" == *profile* ]] && command -v ncu > /dev/null; then
    bstep "profile training" profile-training.txt bash -c "TESSERA_LOGS=graph ncu --profile-from-start off \
      --metrics gpu__time_duration.sum --csv --page raw '$B' training-profile"
    python3 - "$OUT/profile-training.txt" << 'PY' | tee -a "$summary"
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
rows = [l for l in lines if l.startswith('"')]
for r in csv.DictReader(rows):
    if not r.get("ID", "").isdigit():
        continue  # the units row
    print(f'{r["ID"]:>4} {r["Kernel Name"][:70]:70} {r.get("Grid Size", ""):>16} {r.get("gpu__time_duration.sum", "?"):>10}')
print("\n".join(l for l in lines if l.startswith("== ")))
PY
  fi
  tcold=$(mktemp -d)
  bstep "bench first launch" bench-first.jsonl bash -c "TESSERA_CACHE_DIR=$tcold '$B' first-launch cold && \
    TESSERA_CACHE_DIR=$tcold '$B' first-launch warm"
  tcold3=$(mktemp -d)
  bstep "bench autotune" bench-autotune.jsonl bash -c "TESSERA_CACHE_DIR=$tcold3 '$B' autotune cold \
    && TESSERA_CACHE_DIR=$tcold3 '$B' autotune warm"
  tcold2=$(mktemp -d)
  bstep "bench compiled first" bench-compiled-first.jsonl bash -c "TESSERA_CACHE_DIR=$tcold2 '$B' \
    compiled-first cold && TESSERA_CACHE_DIR=$tcold2 '$B' compiled-first warm"
  # The first compiled call with NVRTC's files out of the page cache (as on a fresh machine), with
  # the background read-ahead (docs/decisions.md) and without it, alternating, two rounds each.
  bstep "bench nvrtc cold" bench-nvrtc-cold.jsonl python3 bench/nvrtc_cold.py "$B"
  if python3 -c "import triton, torch" 2> /dev/null; then
    bstep "peers: kernels" peers-kernels.jsonl python3 "$P" kernels
    bstep "peers: compiled" peers-compiled.jsonl python3 "$P" compiled
    bstep "peers: launch" peers-launch.jsonl python3 "$P" launch
    bstep "peers: matmul" peers-matmul.jsonl python3 "$P" matmul
    bstep "peers: attention" peers-attention.jsonl python3 "$P" attention
    bstep "peers: training" peers-training.jsonl python3 "$P" training
    pcold=$(mktemp -d)
    bstep "peers: first launch" peers-first.jsonl bash -c "TRITON_CACHE_DIR=$pcold python3 $P first-launch cold \
      && TRITON_CACHE_DIR=$pcold python3 $P first-launch warm"
    pcold3=$(mktemp -d)
    bstep "peers: autotune" peers-autotune.jsonl bash -c "export TRITON_CACHE_DIR=$pcold3; \
      python3 $P autotune cold && python3 $P autotune warm"
    pcold2=$(mktemp -d)
    bstep "peers: compiled first" peers-compiled-first.jsonl bash -c "export TRITON_CACHE_DIR=$pcold2/triton \
      TORCHINDUCTOR_CACHE_DIR=$pcold2/inductor; python3 $P compiled-first cold && python3 $P compiled-first warm"
  else
    say "no Triton/PyTorch in python3: the table has tessera's figures only"
  fi
  # JAX Pallas inside jax.jit: the seed's add_fn (bench/peers/pallas_gpu.py)
  if python3 -c "import jax.experimental.pallas" 2> /dev/null; then
    jcold=$(mktemp -d)
    bstep "peers: pallas" peers-pallas.jsonl bash -c "export PALLAS_CACHE_DIR=$jcold; \
      python3 bench/peers/pallas_gpu.py first cold && python3 bench/peers/pallas_gpu.py first warm \
      && python3 bench/peers/pallas_gpu.py compiled"
  else
    say "no JAX Pallas in python3: no Pallas column"
  fi
  # Triton's tutorials' own benchmarks (examples/tutorial_bench.h): the kernel beside the eager
  # composition, on this machine's CPU cores and on the GPU.
  for t in tutorial_03_matmul tutorial_05_layer_norm tutorial_06_attention tutorial_08_grouped_gemm; do
    bstep "$t --bench" "$t-bench-cpu.txt" "$BUILD/examples/$t" --bench --rounds 3
    bstep "$t --bench --cuda" "$t-bench-cuda.txt" "$BUILD/examples/$t" --bench --cuda --rounds 3
    cat "$OUT/$t-bench-cpu.txt" "$OUT/$t-bench-cuda.txt" 2> /dev/null | grep -v "^case" | tee -a "$summary"
  done
  (cd "$OUT" && python3 "$OLDPWD/bench/gpu_table.py" $(ls bench-*.jsonl peers-*.jsonl 2> /dev/null)) |
    tee "$OUT/bench-table.md" | tee -a "$summary"
}

run_tutorials() {
  # Triton's tutorials as ported (examples/), on the GPU, and the seed walkthrough.
  for t in tutorial_03_matmul tutorial_04_dropout tutorial_05_layer_norm tutorial_06_attention \
    tutorial_07_extern_functions tutorial_08_grouped_gemm tutorial_09_persistent_matmul aot_seed; do
    step "$t --cuda" "$t.log" "$BUILD/examples/$t" --cuda
    tail -2 "$OUT/$t.log" | tee -a "$summary"
  done
  step "demo" demo.log "$BUILD/bin/tessera" demo
  head -2 "$OUT/demo.log" | tee -a "$summary"
}

say "== tessera GPU check, $(date -u +%Y-%m-%dT%H:%MZ), $J cores"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader 2>&1 | tee -a "$summary"

GT=.deps/googletest
[ -d "$GT" ] || GT=/usr/src/googletest
if [ ! -d "$GT" ]; then
  say "no GoogleTest sources: carry .deps (mkdir -p .deps && cp -r /usr/src/googletest .deps/)"
  exit 1
fi
step "googletest" gtest.log bash -c "cmake -S '$GT' -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=/tmp/gtest && cmake --build /tmp/gtest-build -j$J && cmake --install /tmp/gtest-build" || exit 1
# The Python module in the python mode, where nanobind is carried (the machine reaches no PyPI; here, once:
# cp -r "$(python3 -c 'import nanobind, os; print(os.path.dirname(nanobind.__file__))')" .deps/)
# and the machine's Python has headers: its tests run with the machine's PyTorch and NumPy.
PYFLAGS=(-DTESSERA_PYTHON=OFF)  # explicit: a cached ON from an earlier configure stays otherwise
if [ "${1:-}" = python ] && [ -d .deps/nanobind/cmake ] && python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  PYFLAGS=(-DTESSERA_PYTHON=ON "-DPython_EXECUTABLE=$(command -v python3)" "-Dnanobind_ROOT=$PWD/.deps/nanobind/cmake")
fi
step "configure" configure.log cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH=/tmp/gtest -DTESSERA_BUILD_BENCH=OFF "${PYFLAGS[@]}" || { tail -30 "$OUT/configure.log"; exit 1; }
step "build" build.log cmake --build "$BUILD" -j"$J" -- -k 0 || { grep -E "error|FAILED:" "$OUT/build.log" | head -40; exit 1; }
step "doctor" doctor.log "$BUILD/bin/tessera" doctor
cat "$OUT/doctor.log"
if [ "${1:-}" = bench ]; then
  run_benchmarks
  say "== done (bench)"
  exit 0
fi
if [ "${1:-}" = python ]; then  # the Python tests against this machine's PyTorch (CPU and CUDA)
  if [ "${PYFLAGS[0]}" = -DTESSERA_PYTHON=OFF ]; then say "python: no .deps/nanobind or no Python headers here"; exit 1; fi
  step "ctest -L python" ctest-python.log ctest --test-dir "$BUILD" -L python -E pip_install \
    --output-on-failure -V
  grep -E "^ok|passed|skipped|Error|FAIL|Passed|Failed" "$OUT/ctest-python.log" | head -30 | tee -a "$summary"
  say "== done (python)"
  exit 0
fi
if [ "${1:-}" = quick ]; then
  STEP_TIMEOUT=${STEP_TIMEOUT_GPU_TESTS:-420} step "ctest -L gpu" ctest-gpu.log ctest --test-dir "$BUILD" -L gpu -R "${TESTS:-.}" --output-on-failure -j12 \
    --timeout 300
  grep -E "Skipped|SKIPPED|Failure|FAILED|tests passed|tests failed|Timeout" "$OUT/ctest-gpu.log" |
    head -30 | tee -a "$summary"
  run_tutorials
  say "== done (quick)"
  exit 0
fi
STEP_TIMEOUT=${STEP_TIMEOUT_GPU_TESTS:-420} step "ctest -L 'gpu|nvrtc'" ctest-gpu.log ctest --test-dir "$BUILD" -L 'gpu|nvrtc' --output-on-failure -j12 \
  --timeout 300
grep -E "Skipped|SKIPPED|Failure|FAILED|tests passed|tests failed|Timeout" "$OUT/ctest-gpu.log" | head -30 | tee -a "$summary"
# The GPU cases' own lines (ctest hides a passing test's output): a skip on this machine is a defect.
step "test_cuda (verbose)" test_cuda.log "$BUILD/tests/test_cuda"
grep -E "^\[  (PASSED|SKIPPED|FAILED) |^\[  FAILED  \]|SKIPPED \]" "$OUT/test_cuda.log" | head -30 | tee -a "$summary"
# The rest of the suite (the gpu and nvrtc labels ran above).
step "ctest (the rest)" ctest-all.log ctest --test-dir "$BUILD" -LE 'gpu|nvrtc' --output-on-failure -j"$J"
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$OUT/ctest-all.log" | head -20 | tee -a "$summary"
run_benchmarks
run_tutorials
say "== done"
