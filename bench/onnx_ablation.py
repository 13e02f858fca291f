#!/usr/bin/env python3
"""The importer's own speed levers, A/B in one process: OnnxRunner as it is against the same runner with one load-time
or run-time rewrite switched off, each under TinyJit (after warm-up, interleaved) and without, and onnxruntime.

    .venv/bin/python bench/onnx_ablation.py            # ResNet-18 batch 1 (BatchNormalization kept in the export), the Transformer encoder

Levers: `fold` (optimize.py: BatchNormalization into Conv, constant folding) and `host shapes` (shapes.py: shape
arithmetic in Python ints). The table: kernels per run, median JIT call, one call without JIT, onnxruntime, ratio."""
from __future__ import annotations
import io, os, statistics, sys, time, warnings
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test"))

def export(name: str) -> tuple[bytes, np.ndarray]:
  import torch, onnx_models
  model, x = onnx_models.build(name)
  f = io.BytesIO()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # do_constant_folding=False keeps the BatchNormalization nodes for `fold` to act on
    torch.onnx.export(model, (x,), f, input_names=["input"], output_names=["output"], opset_version=17, dynamo=False, do_constant_folding=False)
  return f.getvalue(), x.numpy()

def main() -> None:
  import onnxruntime as ort
  from tinycore import Tensor, TinyJit, GlobalCounters
  import tinycore.nn.onnx.runner as R
  from tinycore.nn.onnx import OnnxRunner
  levers = {"as is": {}, "no fold": {"optimize": lambda g: None}, "no host shapes": {"run_on_host": lambda *a: None}}
  for model in ("ResNet18", "Encoder"):
    data, feed = export(model)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    runs = {}
    for name, patch in levers.items():
      saved = R.optimize, R.shapes.run_on_host
      R.optimize, R.shapes.run_on_host = patch.get("optimize", saved[0]), patch.get("run_on_host", saved[1])
      try:
        run, xt = OnnxRunner(data), Tensor(feed).realize()
        GlobalCounters.reset()
        run({"input": xt})["output"].numpy()
        kernels = GlobalCounters.kernel_count
        t0 = time.perf_counter()
        run({"input": xt})["output"].numpy()
        nojit = time.perf_counter() - t0
        jit = TinyJit(lambda t, run=run: run({"input": t})["output"].realize())
        for _ in range(3): jit(xt)
        runs[name] = (jit, xt, kernels, nojit, len(run.graph.nodes))
      finally: R.optimize, R.shapes.run_on_host = saved
    times: dict[str, list[float]] = {k: [] for k in [*runs, "ort"]}
    for _ in range(5 if model == "ResNet18" else 20):
      for k, (jit, xt, *_) in runs.items():
        t0 = time.perf_counter()
        jit(xt).numpy()
        times[k].append(time.perf_counter() - t0)
      t0 = time.perf_counter()
      sess.run(None, {"input": feed})
      times["ort"].append(time.perf_counter() - t0)
    ort_ms = statistics.median(times["ort"]) * 1e3
    print(f"\n{model} (load average {os.getloadavg()[0]:.1f}), onnxruntime {ort_ms:.2f} ms")
    print("| runner | nodes | kernels | JIT call ms | call without JIT ms | ort / tinycore |\n| --- | --- | --- | --- | --- | --- |")
    for k, (_, _, kernels, nojit, nodes) in runs.items():
      ms = statistics.median(times[k]) * 1e3
      print(f"| {k} | {nodes} | {kernels} | {ms:.2f} | {nojit * 1e3:.1f} | {ort_ms / ms:.3f}x |")

if __name__ == "__main__": main()
