#!/usr/bin/env python3
"""Where an ONNX model's call goes, kernel by kernel: the kernels of OnnxRunner's captured call (CLANG, one thread),
each timed in the model's order (the caches as the call leaves them) and alone (the same kernel again and again).

    .venv/bin/python bench/onnx_kernels.py                 # ResNet-18 batch 1 (test/onnx_models.py, seeded weights)
    .venv/bin/python bench/onnx_kernels.py ResNet18:8 --rounds 5

One thread CPU time (time.process_time) of each bound launch, median of the rounds; GFLOP/s from the kernel's own
estimate. The load average is printed: on a shared machine compare only numbers of one run."""
from __future__ import annotations
import argparse, os, statistics, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test"))

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("model", nargs="?", default="ResNet18:1", help="name:batch (test/onnx_models.py names)")
  ap.add_argument("--rounds", type=int, default=15)
  args = ap.parse_args()
  os.environ.setdefault("THREADS", "1")  # read by the CLANG device when it loads
  import onnx_models
  from tinycore import Tensor, TinyJit
  from tinycore.nn.onnx import OnnxRunner
  name, batch = args.model.split(":")
  model, x = onnx_models.build(name)
  if name != "Encoder": x = x.expand(int(batch), -1, -1, -1).contiguous()
  run, xt = OnnxRunner(onnx_models.export(model, x, dynamic_batch=True), jit=False), Tensor(x.numpy()).realize()
  jit = TinyJit(lambda t: run({"input": t})["output"].realize())
  for _ in range(4): jit(xt)  # compile, capture, replay (the replays bind each kernel's launch to its buffers)
  calls, runners = jit.captured.calls, [r for r, _ in jit.captured.kernels]
  def timed(f: object) -> float:
    t0 = time.process_time()
    f()  # type: ignore[operator]
    return (time.process_time() - t0) * 1e3
  in_model: list[list[float]] = [[] for _ in calls]
  for _ in range(args.rounds):
    for i, f in enumerate(calls): in_model[i].append(timed(f))
  alone = [statistics.median(timed(f) for _ in range(max(5, args.rounds // 2))) for f in calls]
  print(f"{args.model}: load average {os.getloadavg()[0]:.1f}; one thread CPU ms, median of {args.rounds} rounds")
  print("| # | kernel | in the model ms | GFLOP/s | alone ms | GFLOP/s |\n| --- | --- | --- | --- | --- | --- |")
  def gflops(ops: int, ms: float) -> str: return f"{ops / ms / 1e6:.0f}" if ms > 0 else "-"  # (a clock tick is 1 us)
  for i, r in enumerate(runners):
    m, a = statistics.median(in_model[i]), alone[i]
    print(f"| {i} | {r.display_name} | {m:.3f} | {gflops(r.op_estimate, m)} | {a:.3f} | {gflops(r.op_estimate, a)} |")
  print(f"| | all {len(runners)} | {sum(statistics.median(t) for t in in_model):.2f} | | {sum(alone):.2f} | |")

if __name__ == "__main__": main()
