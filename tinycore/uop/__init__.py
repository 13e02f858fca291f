"""The UOp IR: one immutable node type for kernel ASTs, linear programs and symbolic index math."""
from tinycore.uop.uop import UOp, Variable, BoundVariable, sint, sint_to_uop  # noqa: F401
from tinycore.uop.rewrite import UPat, PatternMatcher, graph_rewrite  # noqa: F401
from tinycore.uop.symbolic import symbolic, simplify, ssimplify, smax, resolve  # noqa: F401
