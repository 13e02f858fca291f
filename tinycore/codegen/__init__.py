"""The code generator: Kernel (AST + optimizations) -> lowered UOp graph -> simplified -> linear program.

get_kernel chooses a kernel's optimizations (heuristic.py, or search.py with BEAM); get_program (program.py) turns it into
a rendered program."""
from __future__ import annotations
from tinycore.helpers import NOOPT, BEAM
from tinycore.ops import Ops
from tinycore.backend import Renderer
from tinycore.uop.uop import UOp
from tinycore.codegen.kernel import Kernel, Opt, OptOps, KernelOptError  # noqa: F401
from tinycore.codegen.program import ProgramSpec, get_program, estimate_flops  # noqa: F401
from tinycore.codegen.heuristic import hand_coded_optimizations
from tinycore.codegen.search import beam_search

def get_kernel(ast: UOp, renderer: Renderer) -> Kernel:
  """The kernel for an AST with its optimizations: BEAM search when BEAM>0, else the heuristic (none with NOOPT)."""
  k = Kernel(ast, renderer)
  if ast.src[0].op is Ops.SCATTER: return k  # its loop over the indices must stay one serial loop (codegen/indexed.py)
  if BEAM >= 1: return beam_search(k, BEAM.value)
  if not NOOPT: hand_coded_optimizations(k)
  return k
