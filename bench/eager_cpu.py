#!/usr/bin/env python3
"""Issue 20's eager measures as same-process ratios of CPU time: tinycore and torch (one thread) side by side in one
process, each step timed by the thread's CPU clock, medians. On a shared machine, wall times swing with the load (a
torch step of 0.4 ms took 10 ms with nine runnable processes on two cores); a thread's CPU time counts only its own
work, so the ratio stays comparable from run to run. tinycore's CLANG kernels run on one thread too (THREADS=1: a
kernel spread over a thread pool would spend CPU time that the calling thread's clock does not see).

    .venv/bin/python bench/eager_cpu.py                  # the eager MLP steps (sliced and gathered batch)
    .venv/bin/python bench/eager_cpu.py --gpt 1024 jit   # the small GPT step under TinyJit vs torch eager
    .venv/bin/python bench/eager_cpu.py --gpt 50257      # GPT-2's vocabulary, no TinyJit, vs torch eager

Without TinyJit, --gpt lists the kernels that took most of tinycore's CPU time (per step); a TinyJit replay calls its
kernels' bound launchers directly, past the clock: `DEBUG=2` prints each kernel's time there."""
from __future__ import annotations
import argparse, collections, os, statistics, sys, time
from typing import Any, Callable
os.environ["THREADS"] = "1"  # (read when the CLANG backend loads)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import bench  # noqa: E402  (bench/ is a package: its bench.py is the module)

def cpu_median(step: Callable[[], Any], reps: int, warmup: int) -> float:
  """Median thread CPU seconds of one call of step (which reads its loss back: the work is done when it returns)."""
  for _ in range(warmup): step()
  ts = []
  for _ in range(reps):
    st = time.thread_time()
    step()
    ts.append(time.thread_time() - st)
  return statistics.median(ts)

def paired_medians(a: Callable[[], Any], b: Callable[[], Any], reps: int, warmup: int, block: int = 25) -> tuple[float, float]:
  """cpu_median of a and of b, run in alternating blocks of `block` steps: both see the same minutes of a shared
  machine's load (which shows in CPU time too: caches and memory bandwidth are shared), while each runs back to back
  with itself as in a training loop (step by step alternation slowed torch's step ~1.5x: its caches went cold)."""
  for _ in range(warmup): a(), b()
  ta: list[float] = []
  tb: list[float] = []
  while len(ta) < reps:
    for step, ts in ((a, ta), (b, tb)):
      for _ in range(min(block, reps - len(ts))):
        st = time.thread_time()
        step()
        ts.append(time.thread_time() - st)
  return statistics.median(ta), statistics.median(tb)

def kernel_clock() -> collections.Counter:
  """Thread CPU seconds per kernel name, counted from now on (every kernel that run_schedule runs)."""
  from tinycore.engine import realize, jit
  per: collections.Counter = collections.Counter()
  run = realize.exec_runner
  def timed(runner: Any, bufs: list, var_vals: dict, jit: bool = False) -> None:
    st = time.thread_time()
    run(runner, bufs, var_vals, jit)
    per[runner.display_name] += time.thread_time() - st
  realize.exec_runner = jit.exec_runner = timed
  return per

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--gpt", nargs="+", metavar=("VOCAB", "jit"), help="the GPT step at this vocabulary (add 'jit' for TinyJit)")
  ap.add_argument("--reps", type=int, default=0, help="timed steps per library (default: 200 MLP, 9 GPT v1024, 3 larger)")
  args = ap.parse_args()
  import torch
  torch.set_num_threads(1)
  tc, th = bench.make_lib("tinycore", True), bench.make_lib("torch", True)
  if not args.gpt:
    for gathered in (False, True):
      a, b = paired_medians(bench._eager_mlp_setup(tc, gathered), bench._eager_mlp_setup(th, gathered), args.reps or 200, 2 * bench.EPOCH)
      print(f"eager MLP step, {'gathered' if gathered else 'sliced'} batch: tinycore {a * 1e3:.2f} ms, torch {b * 1e3:.3f} ms: {a / b:.1f}x torch")
    return
  cfg, jit = dict(bench.GPT, vocab=int(args.gpt[0])), args.gpt[1:] == ["jit"]
  reps = args.reps or (9 if cfg["vocab"] <= bench.GPT["vocab"] else 3)
  step = bench._gpt_step(tc, cfg, jit)
  st = time.thread_time()
  step()
  first = time.thread_time() - st
  per = kernel_clock()
  a = cpu_median(step, reps, 2 if jit else 1)
  kernels = dict(per)
  b = cpu_median(bench._gpt_step(th, cfg, False), reps, 1)
  print(f"GPT step v{cfg['vocab']} {'TinyJit' if jit else 'eager'}: tinycore {a * 1e3:.1f} ms (first step {first:.1f} s), torch eager "
        f"{b * 1e3:.1f} ms: {a / b:.2f}x torch")
  if jit: return
  k = sum(kernels.values()) / (reps + 1)
  print(f"kernels {k * 1e3:.1f} ms of the step, the rest (Python, scheduling) {(a - k) * 1e3:.1f} ms; the biggest kernels:")
  for name, t in sorted(kernels.items(), key=lambda x: -x[1])[:12]: print(f"  {t / (reps + 1) * 1e3:9.2f} ms  {name}")

if __name__ == "__main__": main()
