#!/usr/bin/env bash
# `pip install .` from the checkout, as a user does (issue 20): builds the wheel through
# scikit-build-core (no network: the build requirements come from the given Python's
# environment) into a fresh target folder, then runs the NumPy test against the installed package
# rather than the build tree. Usage: pip_install.sh <python with nanobind, scikit-build-core, numpy> <work dir>
set -euo pipefail
py=${1:?python} work=${2:?work dir}
src="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$work" && mkdir -p "$work"
"$py" -m pip install --no-build-isolation --no-deps --quiet --target "$work/site" "$src" \
  > "$work/pip.log" 2>&1 || { tail -40 "$work/pip.log"; exit 1; }
ls "$work/site/tessera"
cd "$work"  # not the source tree: the installed package must be the one imported
PYTHONPATH="$work/site" "$py" -c 'import tessera, sys; print("installed:", tessera.__file__); assert tessera.__file__.startswith(sys.argv[1])' "$work/site"
PYTHONPATH="$work/site" "$py" "$src/tests/python/test_numpy.py"
