#!/usr/bin/env bash
# Installs the Debian packages tessera's build needs, only those missing. Safe to run repeatedly.
set -euo pipefail

# clang and its runtime libraries build the fuzzers (make fuzz, run by CI); Python's venv and
# headers build the Python module and its tests (docs/python.md).
required=(cmake ninja-build g++ make libgtest-dev libgmock-dev libbenchmark-dev pkg-config clang
  libclang-rt-dev python3-venv python3-dev)
optional=(ccache libopenblas-dev clang-format)

missing=()
for pkg in "${required[@]}" "${optional[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "tessera: installing missing packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  apt=(apt-get)
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  apt=(sudo apt-get)
else
  echo "tessera: these Debian packages are missing: ${missing[*]}" >&2
  echo "tessera: run as root, or install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"; then
  "${apt[@]}" update -q
  "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"
fi
