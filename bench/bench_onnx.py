#!/usr/bin/env python3
"""ONNX models on tinycore (OnnxRunner under TinyJit, CLANG by default) against onnxruntime (CPU) and torch eager, in one run.

    .venv/bin/python bench/bench_onnx.py             # ResNet-18 at batch 1 and 8 (224x224), the Transformer encoder
    .venv/bin/python bench/bench_onnx.py --quick     # fewer repetitions

The models are test/onnx_models.py's (seeded random weights), exported by torch.onnx.export. Each runtime is warmed up
(tinycore: the first call compiles, the second records the JIT, the third replays), then timed; the table shows the
median of the timed runs and the ratio `peer time / tinycore time` (above 1: tinycore is faster), the kernel count of
one tinycore run and its first-run time (loading and compiling). Every runtime uses all the cores it finds."""
from __future__ import annotations
import argparse, os, statistics, sys, time
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test"))

def median_s(fn, reps: int) -> float:
  times = []
  for _ in range(reps):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times)

def bench(name: str, batch: int, reps: int) -> dict:
  import torch, onnxruntime as ort
  import onnx_models
  from tinycore import Tensor, TinyJit, GlobalCounters
  from tinycore.nn.onnx import OnnxRunner
  model, x = onnx_models.build(name)
  if name != "Encoder": x = x.expand(batch, -1, -1, -1).contiguous()
  data = onnx_models.export(model, x, dynamic_batch=True)
  feed = x.numpy()
  t0 = time.perf_counter()
  run = OnnxRunner(data)
  xt = Tensor(feed).realize()
  GlobalCounters.reset()
  first = run({"input": xt})["output"].numpy()
  first_s, kernels = time.perf_counter() - t0, GlobalCounters.kernel_count
  jit = TinyJit(lambda t: run({"input": t})["output"].realize())
  for _ in range(3): jit(xt)
  tc = median_s(lambda: jit(xt).numpy(), reps)
  sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
  ref = sess.run(None, {"input": feed})[0]
  rt = median_s(lambda: sess.run(None, {"input": feed}), reps)
  with torch.no_grad():
    for _ in range(2): model(x)
    th = median_s(lambda: model(x), reps)
  err = float(np.abs(first - ref).max() / np.abs(ref).max())
  return {"model": f"{name} batch {x.shape[0]}" + (" 224x224" if name != "Encoder" else f" seq {x.shape[1]}"), "tinycore_ms": tc * 1e3,
          "ort_ms": rt * 1e3, "torch_ms": th * 1e3, "kernels": kernels, "first_s": first_s, "rel_err": err}

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--quick", action="store_true")
  args = ap.parse_args()
  reps = 3 if args.quick else 10
  rows = [bench("ResNet18", 1, reps), bench("ResNet18", 8, reps), bench("Encoder", 2, reps)]
  print("| model | tinycore ms | onnxruntime ms | torch eager ms | ort / tinycore | torch / tinycore | kernels | first run s | max rel err vs ort |")
  print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
  for r in rows:
    print(f"| {r['model']} | {r['tinycore_ms']:.1f} | {r['ort_ms']:.1f} | {r['torch_ms']:.1f} | {r['ort_ms'] / r['tinycore_ms']:.2f}x | "
          f"{r['torch_ms'] / r['tinycore_ms']:.2f}x | {r['kernels']} | {r['first_s']:.1f} | {r['rel_err']:.1e} |")

if __name__ == "__main__": main()
