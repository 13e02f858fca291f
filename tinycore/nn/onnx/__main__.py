"""python -m tinycore.nn.onnx model.onnx [--check] [--runs N] [--dim NAME=SIZE ...] [--device DEV]

Runs an ONNX model on seeded random inputs and prints each output's shape and dtype, the number of kernels and the time
of the first run (which compiles) and of the later ones (from the third on, the runner replays the kernels it
recorded on the second; the outputs printed and checked are the last run's). With --check it runs onnxruntime on the same inputs and
compares (exit status 1 when an output differs by more than --rtol/--atol). A dim the model names ("batch") is 1
unless --dim sets it."""
from __future__ import annotations
import argparse, sys, time
import numpy as np
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes, to_np_dtype
from tinycore.helpers import GlobalCounters
from tinycore.nn.onnx.runner import OnnxRunner

def random_inputs(runner: OnnxRunner, dims: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
  """Seeded inputs: floats from a normal distribution, integers in [0, 10), bools at random; named dims from `dims` (else 1)."""
  rng, feeds = np.random.default_rng(seed), {}
  for name, (shape, dt) in runner.inputs.items():
    shp = tuple(d if isinstance(d, int) and d > 0 else dims.get(d, 1) if isinstance(d, str) else 1 for d in (shape or ()))
    if dtypes.is_float(dt): feeds[name] = rng.standard_normal(shp).astype(np.float32 if dt == dtypes.bfloat16 else to_np_dtype(dt))
    elif dt == dtypes.bool: feeds[name] = rng.random(shp) < 0.5
    else: feeds[name] = rng.integers(0, 10, shp).astype(to_np_dtype(dt))
  return feeds

def max_errors(ref: np.ndarray, out: np.ndarray) -> tuple[float, float]:
  """(max absolute error, max relative error) of out against ref."""
  if ref.size == 0: return 0.0, 0.0
  diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
  return float(diff.max()), float((diff / np.maximum(np.abs(ref.astype(np.float64)), 1e-6)).max())

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m tinycore.nn.onnx", description=__doc__.splitlines()[0])
  ap.add_argument("model", help="the .onnx file")
  ap.add_argument("--check", action="store_true", help="compare with onnxruntime on the same inputs")
  ap.add_argument("--runs", type=int, default=3, help="runs after the first (default 3)")
  ap.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE", help="size of a named input dim (default 1)")
  ap.add_argument("--device", help="tinycore device (default: Device.DEFAULT)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--rtol", type=float, default=1e-4)
  ap.add_argument("--atol", type=float, default=1e-5)
  args = ap.parse_args(argv)
  t0 = time.perf_counter()
  runner = OnnxRunner(args.model, device=args.device)
  print(f"loaded {args.model} on {runner.device}: {len(runner.graph.nodes)} nodes, opset {runner.opset}, in {time.perf_counter() - t0:.2f} s")
  feeds = random_inputs(runner, {k: int(v) for k, v in (d.split("=") for d in args.dim)}, args.seed)
  inputs = {k: Tensor(v, device=runner.device) for k, v in feeds.items()}
  times, kernels = [], 0
  for i in range(1 + args.runs):
    GlobalCounters.reset()
    t0 = time.perf_counter()
    out = runner(inputs)
    Tensor.realize(*out.values())
    got = {k: v.numpy() for k, v in out.items()}
    times.append(time.perf_counter() - t0)
    if i == 0: kernels = GlobalCounters.kernel_count
  for k, v in got.items(): print(f"output {k}: shape {v.shape} {v.dtype}")
  later = f", later runs {min(times[1:]) * 1e3:.2f} ms (best of {args.runs})" if args.runs else ""
  print(f"first run {times[0]:.2f} s (compiles) with {kernels} kernels{later}")
  if not args.check: return 0
  try: import onnxruntime as ort
  except ImportError: print("--check needs onnxruntime: pip install onnxruntime"); return 2
  sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
  ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
  bad = 0
  for k, v in got.items():
    ae, re_ = max_errors(ref[k], v)
    ok = np.allclose(v.astype(np.float64), ref[k].astype(np.float64), rtol=args.rtol, atol=args.atol) and v.shape == ref[k].shape
    bad += not ok
    print(f"check {k} against onnxruntime: max abs error {ae:.3g}, max rel error {re_:.3g}: {'ok' if ok else 'DIFFERS'}")
  return 1 if bad else 0

if __name__ == "__main__": sys.exit(main())
