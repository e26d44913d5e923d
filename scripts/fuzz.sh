#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for a bounded time (issue 19): `make fuzz` builds them
# (clang, ASan, UBSan) and calls this. Usage: scripts/fuzz.sh <dir of fuzz_* binaries> [seconds each]
#
# Each target starts from its seed corpus (tests/fuzz/corpus/<name>, copied: the tree is never
# written) plus the saved findings (tests/fuzz/regressions/<name>, each an input that once crashed
# and must not again). A finding stops the run with the input saved under <dir>/findings/; add it to
# tests/fuzz/regressions/<name>/ with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: scripts/fuzz.sh <dir of fuzz_* binaries> [seconds each]}
seconds=${2:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dir/findings"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_odr_violation=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TESSERA_CACHE_DIR="$work/cache"  # a fuzzer must not touch the user's caches
status=0
for bin in "$dir"/fuzz_*; do
  name=$(basename "$bin"); name=${name#fuzz_}
  corpus="$work/corpus-$name"
  mkdir -p "$corpus"
  cp tests/fuzz/corpus/"$name"/* "$corpus"/ 2>/dev/null || true
  regressions=()
  if compgen -G "tests/fuzz/regressions/$name/*" > /dev/null; then
    regressions=(tests/fuzz/regressions/"$name"/*)
    # Every saved finding first, each on its own: they must all pass.
    if ! "$bin" "${regressions[@]}" > "$dir/findings/$name-regressions.log" 2>&1; then
      echo "fuzz_$name: a saved finding fails again (log $dir/findings/$name-regressions.log)"
      tail -20 "$dir/findings/$name-regressions.log"
      status=1
      continue
    fi
  fi
  log="$dir/findings/$name.log"
  start=$(date +%s)
  if "$bin" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="$dir/findings/$name-" > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
    printf 'fuzz_%-10s ok: %s inputs in %ss, %s regressions, coverage %s edges, corpus %s files\n' \
      "$name" "$runs" "$(( $(date +%s) - start ))" "${#regressions[@]}" "$cov" "$(ls "$corpus" | wc -l)"
  else
    echo "fuzz_$name: FINDING (log $log; the input is $dir/findings/$name-crash-*)"
    grep -E 'finding:|ERROR: AddressSanitizer|runtime error|SUMMARY|deadly signal' "$log" | head -10 || true
    status=1
  fi
done
exit $status
