#!/usr/bin/env python3
"""ONNX models on tinycore (OnnxRunner, CLANG by default) against onnxruntime (CPU) and torch eager, in one run.

    .venv/bin/python bench/bench_onnx.py             # ResNet-18 at batch 1 and 8 (224x224), the Transformer encoder
    .venv/bin/python bench/bench_onnx.py --quick     # fewer repetitions
    .venv/bin/python bench/bench_onnx.py --threads 0 # every runtime on all the cores it finds (wall time)

The models are test/onnx_models.py's (seeded random weights), exported by torch.onnx.export. Each runtime is warmed up
(tinycore: the first call compiles, the second records the JIT, the third replays), then timed in rounds, each round
one call of every runtime one after the other; the table shows each runtime's median and the ratio `peer time / tinycore
time` as the median of the rounds' ratios (above 1: tinycore is faster; the load of a shared machine moves the runtimes of
one round together, where timing each runtime's calls in a block of its own let it move their ratio), the kernels of one
call after the first (the first also copies the weights to the device), and the first-run time (loading and compiling).
tinycore is timed three ways: `run(inputs)` (the runner replays its own TinyJit: the headline number), tinygrad's
`TinyJit(lambda x: run(...)[...].realize())`, and `OnnxRunner(..., jit=False)`, which builds and schedules the graph on
every call (its difference to the first is the Python work per call that the JIT removes).

By default every runtime runs on one thread (tinycore THREADS=1, onnxruntime intra/inter-op 1, torch.set_num_threads(1))
and the time is the process's CPU time for the call (time.process_time): on a shared machine the wall time of a call
includes the time other jobs held the core, its CPU time does not. The load average is printed with the table."""
from __future__ import annotations
import argparse, os, statistics, sys, time
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test"))

def timed_rounds(calls: dict, reps: int, clock) -> dict[str, list[float]]:
  """ms of each call in each of `reps` rounds, every runtime once a round, one after the other."""
  ms: dict[str, list[float]] = {k: [] for k in calls}
  for _ in range(reps):
    for k, fn in calls.items():
      t0 = clock()
      fn()
      ms[k].append((clock() - t0) * 1e3)
  return ms

def bench(name: str, batch: int, reps: int, threads: int) -> dict:
  import torch, onnxruntime as ort
  import onnx_models
  from tinycore import Tensor, TinyJit, GlobalCounters
  from tinycore.nn.onnx import OnnxRunner
  clock = time.process_time if threads == 1 else time.perf_counter
  model, x = onnx_models.build(name)
  if name != "Encoder": x = x.expand(batch, -1, -1, -1).contiguous()
  data = onnx_models.export(model, x, dynamic_batch=True)
  feed = x.numpy()
  t0 = time.perf_counter()
  run = OnnxRunner(data)
  xt = Tensor(feed).realize()
  first = run({"input": xt})["output"].numpy()
  first_s = time.perf_counter() - t0
  GlobalCounters.reset()
  run({"input": xt})["output"].realize()
  kernels = GlobalCounters.kernel_count
  run({"input": xt})["output"].realize()
  jit = TinyJit(lambda t: run({"input": t})["output"].realize())
  for _ in range(3): jit(xt)
  plain = OnnxRunner(data, jit=False)
  for _ in range(2): plain({"input": xt})["output"].numpy()
  opts = ort.SessionOptions()
  if threads: opts.intra_op_num_threads, opts.inter_op_num_threads = threads, threads
  sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
  ref = sess.run(None, {"input": feed})[0]
  for _ in range(2): sess.run(None, {"input": feed})
  if threads: torch.set_num_threads(threads)
  def torch_call():
    with torch.no_grad(): model(x)
  for _ in range(2): torch_call()
  calls = {"tinycore": lambda: run({"input": xt})["output"].numpy(), "tinyjit": lambda: jit(xt).numpy(),
           "nojit": lambda: plain({"input": xt})["output"].numpy(), "ort": lambda: sess.run(None, {"input": feed}), "torch": torch_call}
  ms = timed_rounds(calls, reps, clock)
  tc, tj, tp, rt, th = (statistics.median(ms[k]) for k in calls)
  replayed = run({"input": xt})["output"].numpy()
  err = max(float(np.abs(out - ref).max() / np.abs(ref).max()) for out in (first, replayed))  # the first call and a replay
  # each round's ratio to the tinycore call of the same round, their median: the machine's load moves all runtimes of a round together
  ratio = {k: statistics.median(a / b for a, b in zip(ms[k], ms["tinycore"])) for k in ("ort", "torch")}
  return {"model": f"{name} batch {x.shape[0]}" + (" 224x224" if name != "Encoder" else f" seq {x.shape[1]}"), "tinycore_ms": tc,
          "ort_ratio": ratio["ort"], "torch_ratio": ratio["torch"],
          "tinyjit_ms": tj, "nojit_ms": tp, "ort_ms": rt, "torch_ms": th, "kernels": kernels, "first_s": first_s, "rel_err": err}

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--threads", type=int, default=1, help="threads per runtime (1: CPU time of the call; 0: all cores, wall time)")
  ap.add_argument("--models", default="ResNet18:1,ResNet18:8,Encoder:2", help="name:batch,... (test/onnx_models.py names)")
  args = ap.parse_args()
  if args.threads: os.environ["THREADS"] = str(args.threads)  # read by the CLANG device when it loads
  reps = 7 if args.quick else 15
  load = os.getloadavg()
  rows = [bench(m.split(":")[0], int(m.split(":")[1]), reps, args.threads) for m in args.models.split(",")]
  unit = "CPU ms, 1 thread" if args.threads == 1 else "ms"
  print(f"load average {load[0]:.1f} before, {os.getloadavg()[0]:.1f} after; median of {reps} timed rounds; {unit}")
  print(f"| model | tinycore {unit} | onnxruntime {unit} | torch eager {unit} | ort / tinycore | torch / tinycore | kernels a call | first run s |"
        f" max rel err vs ort | tinycore TinyJit(run) {unit} | tinycore jit=False {unit} |")
  print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
  for r in rows:
    print(f"| {r['model']} | {r['tinycore_ms']:.1f} | {r['ort_ms']:.1f} | {r['torch_ms']:.1f} | {r['ort_ratio']:.2f}x | "
          f"{r['torch_ratio']:.2f}x | {r['kernels']} | {r['first_s']:.1f} | {r['rel_err']:.1e} | {r['tinyjit_ms']:.1f} | "
          f"{r['nojit_ms']:.1f} |")

if __name__ == "__main__": main()
