"""Standalone reproductions of failing cases (`--repro`): a short python program using only tinycore and numpy that
rebuilds the kernel, runs it on the device and on the PYTHON reference and prints the differences, followed by the
kernel source the device's renderer produced."""
from __future__ import annotations
import math
from typing import Any, Callable
import numpy as np
from tinycore.uop.uop import UOp
from tinycore_conformance.values import dtcode

def _arg(a: Any) -> str:
  if isinstance(a, float):
    if math.isnan(a): return "float('nan')"
    if math.isinf(a): return "float('inf')" if a > 0 else "-float('inf')"
    return repr(a)
  if isinstance(a, tuple): return "(" + "".join(_arg(x) + ", " for x in a) + ")"
  if hasattr(a, "name") and type(a).__name__ == "Ops": return f"Ops.{a.name}"
  return repr(a)

def uops_code(uops: list[UOp]) -> str:
  """Python lines that rebuild a linear program, one UOp per line, as `uops`."""
  names: dict[UOp, str] = {}
  lines = []
  for u in uops:
    for s in u.src:
      if s not in names: raise ValueError(f"{s.op} used before it is defined in the linear program")
    names[u] = f"u{len(names)}"
    src = "(" + "".join(names[s] + ", " for s in u.src) + ")"
    lines.append(f"{names[u]} = UOp(Ops.{u.op.name}, {dtcode(u.dtype)}, {src}, {_arg(u.arg)})")
  lines.append("uops = [" + ", ".join(names[u] for u in uops) + "]")
  return "\n".join(lines)

def array_code(a: np.ndarray) -> str:
  a = np.ascontiguousarray(a).reshape(-1)
  head = ", ".join(str(x) for x in a[:6].tolist()) + (", ..." if a.size > 6 else "")
  return f"np.frombuffer(bytes.fromhex('{a.view(np.uint8).tobytes().hex()}'), dtype=np.{a.dtype.name}).copy(),  # [{head}]"

PRELUDE = """import numpy as np
from tinycore.device import Device
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.uop.uop import UOp
from tinycore.runtime.python import PythonRenderer, PythonCompiler, PythonAllocator, PythonProgram
"""

RUNNER = """
def run(renderer, compiler, allocator, program, device, execute=True):
  src = renderer.render("repro", uops)
  lib = compiler.compile(src)
  if not execute: return src, None
  hs = [allocator.alloc(max(b.nbytes, 1)) for b in bufs]
  for h, b in zip(hs, bufs):
    if b.nbytes: allocator.copyin(h, memoryview(b.view(np.uint8)))
  program(device, "repro", lib)(*hs, global_size={gs}, local_size={ls}, vals={vals}, wait=True)
  outs = [np.empty_like(b) for b in bufs]
  for o, h in zip(outs, hs):
    if o.nbytes: allocator.copyout(memoryview(o.view(np.uint8)), h)
  return src, outs
"""

def program_repro(title: str, uops: list[UOp], bufs: list[np.ndarray], device: str, compile_only: bool, src: str | None,
                  global_size=(1, 1, 1), local_size: Any = (1, 1, 1), vals=(), note: str = "") -> str:
  lines = [f"# reproduction: {title} on {device}" + (f" ({note})" if note else ""), PRELUDE, uops_code(uops)]
  lines.append("bufs = [\n" + "".join(f"  {array_code(b)}\n" for b in bufs) + "]")
  lines.append(RUNNER.format(gs=tuple(global_size), ls=local_size if local_size is None else tuple(local_size), vals=tuple(vals)))
  if compile_only:
    lines.append(f"from tinycore.plugin import registry\nregistry.load()\nr = registry.pm.hook.tinycore_renderer(device={device!r})\n"
                 f"c = registry.pm.hook.tinycore_compiler(device={device!r})\nsrc, _ = run(r, c, None, None, {device!r}, execute=False)\nprint(src)")
  else:
    lines.append(f"""d = Device[{device!r}]
src, got = run(d.renderer, d.compiler, d.allocator, d.program, {device!r})
_, want = run(PythonRenderer(), PythonCompiler(), PythonAllocator(), PythonProgram, "PYTHON")
print(src)
for i, (g, w) in enumerate(zip(got, want)):
  bad = np.nonzero(g.view(np.uint8) != w.view(np.uint8))[0] // g.itemsize
  if bad.size: print(f"buffer {{i}}: {{len(set(bad.tolist()))}} elements differ, first {{bad[0]}}: got {{g[bad[0]]}}, expected {{w[bad[0]]}}")""")
  out = "\n".join(lines)
  if src is not None: out += "\n\n# --- the kernel source the device rendered (as it ran in the suite) ---\n" + src
  return out

def readable(renderer, src: str | None) -> str | None:
  """A renderer's own readable listing of its source where it has one (the PYTHON device pickles its program)."""
  if src is None or not hasattr(renderer, "describe"): return src
  try: return renderer.describe(src)
  except Exception: return src

class Repro:
  """Filled in by a test; rendered only when it fails and --repro is given."""
  def __init__(self) -> None:
    self.makers: list[Callable[[], str]] = []
  def add(self, maker: Callable[[], str] | str) -> None:
    self.makers.append(maker if callable(maker) else (lambda: maker))
  def render(self) -> str:
    parts = []
    for m in self.makers:
      try: parts.append(m())
      except Exception as e: parts.append(f"# (could not build the reproduction: {type(e).__name__}: {e})")
    return "\n\n".join(parts)

def case_repro(case, target, src: str | None) -> str:
  """The standalone program of one Case (alone in its kernel, as in the bisected run)."""
  p = case.program("repro")
  gs, ls = case.launch
  ls = target.local_size if ls == "default" else ls
  note = f"seed {case.seed}" if case.seed is not None else ""
  if case.note: note = (note + "; " if note else "") + case.note
  rsrc = None
  try: rsrc = target.renderer.render("repro", p.uops())
  except Exception as e: rsrc = f"(rendering this case alone raises {type(e).__name__}: {e})\n--- source of the batched kernel ---\n{src}"
  return program_repro(case.key, p.uops(), [a for _, a in case.bufs], target.device, target.compile_only, readable(target.renderer, rsrc),
                       gs, ls, (), note)
