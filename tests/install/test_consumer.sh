#!/usr/bin/env bash
# The install test: `cmake --install` of this build into a staging prefix, then
# examples/consumer (a separate CMake project) found through find_package(tessera CONFIG),
# built and run; then the same program built with only the pkg-config file's flags.
#   tests/install/test_consumer.sh <build dir> <source dir>
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TESSERA_CACHE_DIR=$tmp/cache

cmake --install "$build" --prefix "$tmp/stage" > "$tmp/install.log"
for f in include/tessera/tessera.h include/tessera/trt/cpu.h bin/tessera; do
  [ -e "$tmp/stage/$f" ] || { echo "not installed: $f"; exit 1; }
done
"$tmp/stage/bin/tessera" doctor | head -1

cmake -S "$src/examples/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/stage" > "$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/consumer" > "$tmp/build.log" || { cat "$tmp/build.log"; exit 1; }
"$tmp/consumer/consumer"

pc=$(find "$tmp/stage" -name tessera.pc | head -1)
[ -n "$pc" ] || { echo "no tessera.pc installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
[ "$(pkg-config --modversion tessera)" = "$(sed -n 's/^Version: //p' "$pc")" ]
# shellcheck disable=SC2046
c++ -O1 "$src/examples/consumer/main.cpp" -o "$tmp/pc_consumer" $(pkg-config --cflags --libs tessera)
"$tmp/pc_consumer" | tail -1
