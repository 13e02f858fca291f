#!/usr/bin/env python3
"""LLVM against CLANG on bench/bench.py's cases, in one run, and the compile time per kernel of each.

    .venv/bin/python plugins/tinygrad-llvm/bench_vs_clang.py [--quick] [--groups matmul,conv] [--rounds 2]

The two devices run the same cases in turns (CLANG, LLVM, CLANG, LLVM, ...; each (device, group) in a process of its
own, as bench.py does), so a machine that other work slows down slows both alike; each case's time is its best over the
rounds. `ratio` is LLVM time / CLANG time (below 1: LLVM is faster). Compile time: the kernels of a CNN training step
(from a cold cache), each compiled again one after the other by the device's Compiler.compile, wall time."""
from __future__ import annotations
import argparse, json, os, platform, subprocess, sys, tempfile
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench  # noqa: E402

DEVICES = ("CLANG", "LLVM")
COMPILE_PROBE = """
import json, statistics, time
from tinycore import Device, Tensor, nn
comp, srcs = Device[{dev!r}].compiler, []
orig = comp.compile
comp.compile = lambda src: (srcs.append(src), orig(src))[1]
class Net:
  def __init__(self): self.c1, self.c2, self.l = nn.Conv2d(1, 8, 3), nn.Conv2d(8, 16, 3), nn.Linear(16 * 5 * 5, 10)
  def __call__(self, x): return self.l(self.c2(self.c1(x).relu().max_pool2d()).relu().max_pool2d().flatten(1)).log_softmax()
net = Net()
opt = nn.optim.Adam(nn.state.get_parameters(net))
x, y = Tensor.randn(32, 1, 28, 28), Tensor.randint(32, high=10)
with Tensor.train():
  opt.zero_grad(); loss = net(x).sparse_categorical_crossentropy(y).backward(); opt.step(); loss.realize()
times = []
for src in srcs:  # again, one after the other: the core compiles side by side, and llvmlite serializes its calls
  st = time.perf_counter(); orig(src); times.append(time.perf_counter() - st)
print("COMPILEJSON " + json.dumps({{"kernels": len(times), "seconds": sum(times), "median": statistics.median(times)}}))
"""

def compile_time(dev: str) -> dict:
  with tempfile.TemporaryDirectory() as d:
    env = {**os.environ, "DEV": dev, "TINYCORE_CACHE_DIR": d}
    out = subprocess.run([sys.executable, "-c", COMPILE_PROBE.format(dev=dev)], capture_output=True, text=True, env=env, cwd=ROOT)
  for line in out.stdout.splitlines():
    if line.startswith("COMPILEJSON "): return json.loads(line[len("COMPILEJSON "):])
  return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}

def cpu_model() -> str:
  try:
    with open("/proc/cpuinfo") as f: return next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
  except (OSError, StopIteration): return platform.processor() or platform.machine()

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--groups", default="matmul,elementwise,reduce,conv,train_mlp,train_cnn")
  ap.add_argument("--rounds", type=int, default=2)
  args = ap.parse_args()
  best: dict[str, dict[str, float]] = {d: {} for d in DEVICES}
  for g in args.groups.split(","):
    for _ in range(args.rounds):
      for dev in DEVICES:
        res = bench.spawn("tinycore", g, args.quick, {"DEV": dev})
        if "_error" in res: print(f"{dev} {g}: {res['_error']}", file=sys.stderr)
        for case, r in res.items():
          if not case.startswith("_") and r.get("t") is not None: best[dev][case] = min(best[dev].get(case, float("inf")), r["t"])
  print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; best of {args.rounds} rounds per case{' (quick)' if args.quick else ''}\n")
  print("| case | CLANG | LLVM | ratio LLVM/CLANG |\n|---|---|---|---|")
  for case, tc in best["CLANG"].items():
    if (tl := best["LLVM"].get(case)) is not None: print(f"| {case} | {tc*1e3:.2f} ms | {tl*1e3:.2f} ms | {tl/tc:.2f} |")
  print("\n| compile (CNN train step's kernels, one by one) | kernels | total | mean per kernel | median per kernel |\n|---|---|---|---|---|")
  for dev in DEVICES:
    c = compile_time(dev)
    if "error" in c: print(f"| {dev} | {c['error']} | | |")
    else: print(f"| {dev} | {c['kernels']} | {c['seconds']:.2f} s | {c['seconds'] / max(1, c['kernels'])*1e3:.1f} ms | {c['median']*1e3:.1f} ms |")

if __name__ == "__main__": main()
