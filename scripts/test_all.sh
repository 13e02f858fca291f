#!/usr/bin/env bash
# Every test of the project, as CI runs it: the pytest suites of the core, the plugins and the conformance suite's own
# self-tests, then the conformance suite against every backend: run for real where the hardware is here (CLANG,
# PYTHON, OPENCL on PoCL), compile-only where it is not (CUDA, NV, AMD; METAL is a C++ syntax and type check).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=.venv/bin/python
"$PY" -m pytest -q -n 2 test plugins conformance/tests
for dev in CLANG PYTHON OPENCL; do
  echo "=== conformance $dev"
  "$PY" -m tinycore_conformance "$dev"
done
for dev in CUDA NV AMD METAL; do
  echo "=== conformance $dev --compile-only"
  "$PY" -m tinycore_conformance "$dev" --compile-only
done
