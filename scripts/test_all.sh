#!/usr/bin/env bash
# Every test of the project, as CI runs it: the pytest suites of the core, the plugins and the conformance suite's own
# self-tests; the core suite again without optimizations (NOOPT=1) and a subset with BEAM search (BEAM=2), so no result
# depends on the optimizations chosen; then the conformance suite against every backend: run for real where the
# hardware is here (CLANG, PYTHON, OPENCL on PoCL, WEBGPU on lavapipe, LLVM), on emulated hardware (MOCKGPU=1) for CUDA, AMD, METAL
# and NV. Any failure stops the script with a non-zero exit code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=.venv/bin/python
# scripts/setup.sh ran: a test skipped for a tool it installs (the browser, mpirun) fails instead (test/conftest.py)
export TINYCORE_SETUP_DONE=1
echo "=== pytest: core, plugins, conformance self-tests"
"$PY" -m pytest -q -n 2 test plugins conformance/tests
echo "=== pytest NOOPT=1: the core suite with no optimizations (results must not depend on them; test/compat and the ONNX suites ran above)"
# (the VIZ page in a browser, test/test_viz_browser.py, ran above: it checks the page, not the kernels)
NOOPT=1 "$PY" -m pytest -q -n 2 -p no:cacheprovider test --ignore=test/compat --ignore=test/test_onnx_backend.py --ignore=test/test_onnx_models.py \
  --ignore=test/test_viz_browser.py
# a fresh cache directory, so the kernels are really searched (the search's choices and programs are cached on disk)
BEAM_CACHE=$(mktemp -d)
trap 'rm -rf "$BEAM_CACHE"' EXIT
echo "=== pytest BEAM=2: search on matmul, conv, layernorm and batchnorm kernels (fresh cache $BEAM_CACHE)"
BEAM=2 TINYCORE_CACHE_DIR="$BEAM_CACHE" "$PY" -m pytest -q -n 2 -p no:cacheprovider test/test_beam.py \
  test/test_tensor_nn.py::test_matmul test/test_tensor_nn.py::test_layernorm test/test_nn.py::test_layernorm \
  test/test_nn.py::test_layernorm2d test/test_nn.py::test_batchnorm1d_no_affine
for dev in CLANG PYTHON OPENCL LLVM WEBGPU; do
  echo "=== conformance $dev"
  "$PY" -m tinycore_conformance "$dev"
done
# the GPU backends on emulated hardware (MOCKGPU=1: the plugin's real runtime above a mock driver, kernels executed on the
# CPU, the vendor compiler still compiling every kernel, which is why they replace the compile-only runs): AMD's and
# METAL's source on the host-source executor, NV's PTX and NVRTC's PTX of CUDA's source on the PTX interpreter
# (tinygrad_cuda.mock.ptx); CUDA's host-source executor runs in the plugin tests below
for dev in CUDA AMD METAL NV; do
  echo "=== conformance $dev on emulated hardware (MOCKGPU=1)"
  MOCKGPU=1 MOCKGPU_EXEC=ptx "$PY" -m tinycore_conformance "$dev"
done
echo "=== pytest MOCKGPU=1: the GPU plugins' own tests, hardware tests included, on emulated hardware"
MOCKGPU=1 "$PY" -m pytest -q -n 2 -p no:cacheprovider plugins/tinygrad-cuda/tests plugins/tinygrad-amd/tests plugins/tinygrad-metal/tests
