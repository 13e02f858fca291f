"""A kernel's program: lower, simplify, linearize and render a Kernel into a ProgramSpec (source plus launch sizes).

Below search.py (which compiles and times many programs) and the codegen package's entry point, get_kernel."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Any
from tinycore.dtype import dtypes
from tinycore.helpers import DEBUG, GRAPHUOPS, prod
from tinycore.ops import Ops, GroupOp
from tinycore.uop.uop import UOp, sint
from tinycore.uop.rewrite import graph_rewrite
from tinycore.uop.symbolic import symbolic
from tinycore.uop.graph import save_uop_graph
from tinycore.codegen.kernel import Kernel, Opt
from tinycore.codegen.lowerer import lower
from tinycore.codegen.linearize import linearize
from tinycore.codegen.safediv import guard_division

@dataclass
class ProgramSpec:
  """A rendered kernel and what it takes to launch it."""
  name: str
  src: str
  device: str
  uops: list[UOp]
  global_size: list[sint]  # a symbolic size is evaluated from the Variables' values at launch
  local_size: list[sint] | None
  vars: list[UOp] = field(default_factory=list)
  applied_opts: list[Opt] = field(default_factory=list)
  estimates_ops: int = 0
  display_name: str = ""
  ast: Any = None

def _vmax(x: sint) -> int: return x if isinstance(x, int) else int(x.vmax)

def _launch_sizes(uops: list[UOp]) -> tuple[list[sint], list[sint]]:
  """The global and local sizes the SPECIAL ids ask for (1 for an axis no id uses)."""
  gs, ls = [1, 1, 1], [1, 1, 1]
  for u in uops:
    if u.op is Ops.SPECIAL:
      name, size = u.arg
      (gs if name[0] == "g" else ls)[int(name[-1])] = size
  return gs, ls

def estimate_flops(uops: list[UOp], global_size: list[sint], local_size: list[sint] | None) -> int:
  """Floating-point (and other non-index) ALU ops executed, counting loop trips and threads (a symbolic size counts
  as its largest value)."""
  mult, stack, flops = prod(_vmax(x) for x in global_size) * prod(_vmax(x) for x in local_size or [1]), [], 0
  for u in uops:
    if u.op is Ops.RANGE:
      stack.append(mult)
      mult *= max(0, _vmax(u.src[1]) - u.src[0].vmin)
    elif u.op is Ops.ENDRANGE: mult = stack.pop()
    elif u.op in GroupOp.ALU and not dtypes.is_int(u.dtype) and u.dtype != dtypes.bool:
      flops += mult * (2 if u.op is Ops.MULACC else 1) * u.dtype.count  # a vector op does one per lane
  return flops

def get_program(k: Kernel, device: str) -> ProgramSpec:
  """The kernel lowered, simplified, linearized and rendered by its renderer, with its launch sizes."""
  name = k.name
  sink = guard_division(graph_rewrite(lower(k), symbolic, name="symbolic"))  # after folding: the bounds of what is left decide
  # the parameters are the AST's buffers, every one: the scheduler passes exactly those (ScheduleItem.bufs), so a buffer
  # whose loads simplified away must still take its place in the signature, or later arguments would shift
  if (gone := sorted((u for u in k.ast.toposort() if u.op is Ops.DEFINE_GLOBAL and u not in sink.sparents()), key=lambda u: u.arg)):
    sink = UOp(Ops.SINK, dtypes.void, sink.src + tuple(gone))
  uops = linearize(sink)
  if DEBUG >= 5:
    for i, u in enumerate(uops): print(f"{i:4d} {str(u.op):20s} {str(u.dtype):22s} {[uops.index(s) if s in uops else '-' for s in u.src]} {u.arg!r}")
  if GRAPHUOPS: save_uop_graph(sink, name)
  src = k.renderer.render(name, uops)
  gs, ls = _launch_sizes(uops)
  vars_ = sorted((u for u in uops if u.op is Ops.DEFINE_VAR), key=lambda v: v.arg)
  return ProgramSpec(name, src, device, uops, gs, ls if k.renderer.has_local else None, vars_, list(k.applied_opts),
                     estimate_flops(uops, gs, ls), getattr(k, "display_name", name), k.ast)
