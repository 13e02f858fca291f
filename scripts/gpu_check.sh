#!/usr/bin/env bash
# Runs the NVIDIA plugins end to end on a real GPU: the CUDA and NV conformance suites, the plugins' own tests, the example
# training run and one timing against torch. Meant for a machine with a GPU and no network (the packages it needs besides
# this repo: numpy, pluggy, pytest, cuda-bindings, NVRTC and ptxas). Logs go to $OUT (default ./gpu-check).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-$PWD/gpu-check}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TINYCORE_CACHE_DIR=/tmp/tinycore-gpu-cache PY=${PY:-python3}
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY -c "import sys, numpy, pluggy, pytest; from importlib.metadata import version as v; print(sys.version.split()[0], 'numpy', numpy.__version__, 'cuda-bindings', v('cuda-bindings'))"
  command -v ptxas || ls /usr/local/cuda/bin/ptxas; } 2>&1 | tee "$OUT/env.txt"
[[ -x /usr/local/cuda/bin/ptxas ]] && export PATH=$PATH:/usr/local/cuda/bin
$PY -m pip install -q --no-deps --no-build-isolation --no-index --upgrade --target /tmp/tinycore-site \
  . ./plugins/tinygrad-cuda ./plugins/tinygrad-nv ./plugins/tinygrad-clang ./conformance >"$OUT/install.log" 2>&1 || { tail "$OUT/install.log"; exit 1; }
export PYTHONPATH=/tmp/tinycore-site
$PY -m tinycore devices 2>&1 | tee "$OUT/devices.txt"
for dev in CUDA NV; do
  (timeout 420 $PY -m tinycore_conformance $dev --report "$OUT/conformance_$dev" >"$OUT/conformance_$dev.log" 2>&1; echo "exit $?" >>"$OUT/conformance_$dev.log") &
done
timeout 240 $PY -m pytest -q -p no:cacheprovider plugins/tinygrad-cuda/tests plugins/tinygrad-nv/tests >"$OUT/plugin_tests.log" 2>&1; echo "exit $?" >>"$OUT/plugin_tests.log"
DEV=CUDA timeout 180 $PY examples/train_digits.py >"$OUT/train_digits_CUDA.log" 2>&1; echo "exit $?" >>"$OUT/train_digits_CUDA.log"
timeout 120 $PY - >"$OUT/matmul.log" 2>&1 <<'PY'
import time, numpy as np
from tinycore import Tensor, Device
n = 4096
a, b = np.random.rand(n, n).astype(np.float32), np.random.rand(n, n).astype(np.float32)
ta, tb = Tensor(a, device="CUDA").realize(), Tensor(b, device="CUDA").realize()
out = (ta @ tb).numpy()
print("max abs err vs numpy float64:", np.abs(out - a.astype(np.float64) @ b).max())
ts = []
for _ in range(5):
  c = (ta @ tb); Device["CUDA"].synchronize(); t0 = time.perf_counter(); c.realize(); Device["CUDA"].synchronize(); ts.append(time.perf_counter() - t0)
print(f"tinycore CUDA matmul {n}: {min(ts)*1e3:.2f} ms, {2*n**3/min(ts)/1e12:.1f} TFLOP/s (float32)")
try:
  import torch
  x, y = torch.tensor(a, device="cuda"), torch.tensor(b, device="cuda"); torch.backends.cuda.matmul.allow_tf32 = False
  for _ in range(3): x @ y
  torch.cuda.synchronize(); t0 = time.perf_counter(); [x @ y for _ in range(10)]; torch.cuda.synchronize()
  tt = (time.perf_counter() - t0) / 10
  print(f"torch {torch.__version__} matmul {n}: {tt*1e3:.2f} ms, {2*n**3/tt/1e12:.1f} TFLOP/s (float32, no TF32); ratio {tt/min(ts):.3f}x")
except Exception as e: print("torch:", e)
PY
echo "exit $?" >>"$OUT/matmul.log"
wait
for f in "$OUT"/*.log; do echo "== $f"; tail -n 25 "$f"; done
