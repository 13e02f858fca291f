"""`tinygrad.uop.ops` for programs that reach into tinygrad's IR: the names tinycore's own IR shares with it.

Offered: UOp (UOp.const in either argument order, UOp.variable, arithmetic, render, vmin/vmax), Ops and GroupOp (tinycore's op
set: most ALU and movement names match tinygrad's; tinygrad-only ops such as Ops.STACK do not exist), Variable, UPat,
PatternMatcher, graph_rewrite and the sint helpers. Anything else tinygrad's module holds is its own internals and is
not provided: asking for it raises an AttributeError that says so."""
from tinycore.ops import Ops, GroupOp  # noqa: F401
from tinycore.uop.uop import UOp, Variable, BoundVariable, sint, sint_to_uop, sym_infer  # noqa: F401
from tinycore.uop.rewrite import UPat, PatternMatcher, graph_rewrite  # noqa: F401
from tinycore.uop.symbolic import smax, resolve, ssimplify  # noqa: F401

def __getattr__(name: str) -> object:
  raise AttributeError(f"tinycore.uop.ops does not provide {name!r}: it is a tinygrad internal with no tinycore equivalent "
                       f"(provided: UOp, Ops, GroupOp, Variable, UPat, PatternMatcher, graph_rewrite, sint helpers)")
