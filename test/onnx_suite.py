"""ONNX's own backend test suite (onnx.backend.test.BackendTest), run on tinycore or on tinygrad 0.14 in one harness.

The suite's sets: Node (one test per op variant, data generated in memory by the installed onnx package), Real (the
`light` architectures the onnx wheel ships: ResNet-50, DenseNet-121, Inception v1/v2, ShuffleNet, SqueezeNet,
VGG-19, ZFNet-512, AlexNet), Simple, PyTorchConverted and PyTorchOperator. Only the tests for ONNX device "CPU" run
(the "CUDA" copies are the same models). Every test tinycore does not pass is listed in onnx_excluded.txt with the reason.

`python test/onnx_suite.py [tinycore|tinygrad] [--only REGEX] [--json FILE]` runs the suite and prints the counts per
set (passed, failed, skipped by the suite itself); `--table A.json B.json` prints the side-by-side table docs/onnx.md holds."""
from __future__ import annotations
import argparse, contextlib, json, os, pathlib, re, signal, sys, tempfile, time, unittest, warnings
from typing import Any, Iterator

SETS = {"OnnxBackendNodeModelTest": "node", "OnnxBackendRealModelTest": "light (real)", "OnnxBackendSimpleModelTest": "simple",
        "OnnxBackendPyTorchConvertedModelTest": "pytorch-converted", "OnnxBackendPyTorchOperatorModelTest": "pytorch-operator"}
EXCLUDED_FILE = pathlib.Path(__file__).with_name("onnx_excluded.txt")

def excluded() -> dict[str, str]:
  """{test name: reason} from onnx_excluded.txt (`test_name: reason` lines, # comments)."""
  out = {}
  for line in EXCLUDED_FILE.read_text().splitlines():
    if (line := line.split("#", 1)[0].strip()):
      name, reason = line.split(":", 1)
      out[name.strip()] = reason.strip()
  return out

def tinygrad_backend() -> type:
  """tinygrad 0.14's OnnxRunner behind onnx's Backend interface, for the side-by-side count, on tinygrad's CPU device
  (clang, as tinycore's CLANG): left to itself tinygrad picks OpenCL here (PoCL), whose compiler is many times slower."""
  os.environ.setdefault("DEV", "CPU")
  import numpy as np
  from onnx.backend.base import Backend, BackendRep
  from tinygrad import Tensor
  from tinygrad.nn.onnx import OnnxRunner
  class Rep(BackendRep):
    def __init__(self, model: Any):
      self.runner = OnnxRunner(Tensor(model.SerializeToString()))
      inits = {i.name for i in model.graph.initializer}
      self.inputs, self.outputs = [i.name for i in model.graph.input if i.name not in inits], [o.name for o in model.graph.output]
    def run(self, inputs: Any, **kwargs: Any) -> tuple:
      out = self.runner(dict(zip(self.inputs, inputs)))
      return tuple(np.asarray(out[k].numpy()) if isinstance(out[k], Tensor) else np.asarray(out[k]) for k in self.outputs)
  class TinygradBackend(Backend):
    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> Rep: return Rep(model)
    @classmethod
    def supports_device(cls, device: str) -> bool: return device == "CPU"
  return TinygradBackend

def backend(name: str) -> type:
  if name == "tinygrad": return tinygrad_backend()
  from tinycore.nn.onnx.backend import TinycoreBackend
  return TinycoreBackend

@contextlib.contextmanager
def onnx_home() -> Iterator[None]:
  """The Real set writes its generated inputs under ONNX_HOME: a temporary folder, not the user's ~/.onnx."""
  with tempfile.TemporaryDirectory() as d:
    old = os.environ.get("ONNX_HOME")
    os.environ["ONNX_HOME"] = d
    try: yield
    finally:
      if old is None: os.environ.pop("ONNX_HOME", None)
      else: os.environ["ONNX_HOME"] = old

def suite(backend_cls: type) -> dict[str, type]:
  """{set class name: unittest.TestCase class} of ONNX's backend suite for `backend_cls`."""
  import onnx.backend.test
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return onnx.backend.test.BackendTest(backend_cls, __name__).test_cases

def cpu_tests(cases: dict[str, type]) -> list[tuple[str, type, str]]:
  """(set, TestCase class, method name) of every CPU test."""
  return [(SETS[k], cls, m) for k, cls in cases.items() for m in sorted(dir(cls)) if m.startswith("test_") and m.endswith("_cpu")]

def run_one(cls: type, method: str, timeout_s: int = 120) -> tuple[str, str]:
  """("pass" | "fail" | "skip", message) of one test, a failure after timeout_s."""
  def alarm(*_: Any) -> None: raise TimeoutError(f"ran past {timeout_s} s")
  old = signal.signal(signal.SIGALRM, alarm)
  signal.alarm(timeout_s)
  try:
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      result = unittest.TestResult()
      cls(method).run(result)
  finally:
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)
  if result.skipped: return "skip", result.skipped[0][1]
  if result.errors or result.failures:
    tb = (result.errors or result.failures)[0][1].strip().splitlines()
    return "fail", tb[-1][:300]
  return "pass", ""

def table(ours: dict[str, list[Any]], theirs: dict[str, list[Any]]) -> str:
  """Markdown: per set, tinycore's and tinygrad's passes out of the tests, and the tests only one of them passes."""
  rows = ["| set | tests | tinycore passes | tinygrad 0.14 passes | only tinycore | only tinygrad |", "| --- | --- | --- | --- | --- | --- |"]
  for s in SETS.values():
    names = sorted(n for n, r in ours.items() if r[0] == s and n in theirs)
    if not names: continue
    a, b = {n for n in names if ours[n][1] == "pass"}, {n for n in names if theirs[n][1] == "pass"}
    rows.append(f"| {s} | {len(names)} | {len(a)} | {len(b)} | {len(a - b)} | {len(b - a)} |")
  return "\n".join(rows)

def reasons() -> str:
  """Markdown: how many excluded tests each reason of onnx_excluded.txt covers."""
  counts: dict[str, int] = {}
  for r in excluded().values(): counts[r] = counts.get(r, 0) + 1
  return "\n".join(["| tests | reason |", "| --- | --- |"] + [f"| {n} | {r} |" for r, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))])

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("backend", nargs="?", default="tinycore", choices=["tinycore", "tinygrad"])
  ap.add_argument("--only", default="", help="run only tests whose name matches this regex")
  ap.add_argument("--json", help="write {test: [set, status, message, seconds]} here")
  ap.add_argument("--table", nargs=2, metavar=("TINYCORE_JSON", "TINYGRAD_JSON"), help="print the side-by-side counts of two --json files")
  args = ap.parse_args()
  if args.table:
    print(table(*(json.loads(pathlib.Path(p).read_text()) for p in args.table)) + "\n\n" + reasons())
    return
  results: dict[str, list[Any]] = {}
  with onnx_home():
    for s, cls, m in cpu_tests(suite(backend(args.backend))):
      if args.only and not re.search(args.only, m): continue
      t0 = time.perf_counter()
      status, msg = run_one(cls, m)
      results[m] = [s, status, msg, round(time.perf_counter() - t0, 2)]
      print(f"{status:4} {time.perf_counter() - t0:6.2f}s {m} {msg}", flush=True)
  if args.json: pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
  for s in SETS.values():
    rs = [r for r in results.values() if r[0] == s]
    print(f"{s}: {sum(r[1] == 'pass' for r in rs)} passed, {sum(r[1] == 'fail' for r in rs)} failed, {sum(r[1] == 'skip' for r in rs)} skipped")

if __name__ == "__main__": sys.exit(main())
