"""Kernels from the Tensor API for any renderer: schedule without running, then lower, linearize and render with the
target's renderer (what compile-only mode compiles, and what reproductions print)."""
from __future__ import annotations
from typing import Sequence
from tinycore.ops import Ops

def programs_for(target, outs: Sequence) -> list:
  """The ProgramSpecs (rendered for the target) of every kernel that realizing `outs` (Tensors) would run."""
  from tinycore.codegen import get_kernel, get_program
  outs = list(outs)
  if not outs: return []
  sched = outs[0].schedule(*outs[1:])
  return [get_program(get_kernel(si.ast, target.renderer), target.device) for si in sched if si.ast.op is Ops.SINK]

def compile_all(target, outs: Sequence) -> list:
  """Render and compile every kernel of `outs`; raises with the kernel's source on a compile error."""
  from tinycore.backend import CompileError
  specs = programs_for(target, outs)
  for p in specs:
    try: target.compiler.compile_cached(p.src)
    except CompileError as e: raise CompileError(f"kernel {p.name} does not compile on {target.device}: {e}\n--- source ---\n{p.src}") from None
  return specs

def sources(target, outs: Sequence) -> str:
  """The rendered source of every kernel of `outs`, for reproductions."""
  try: specs = programs_for(target, outs)
  except Exception as e: return f"(could not render the kernels: {type(e).__name__}: {e})"
  return "\n\n".join(f"// kernel {p.name} global {p.global_size} local {p.local_size}\n{p.src}" for p in specs)
