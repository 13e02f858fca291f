"""Division guards: integer IDIV, MOD and RECIP never reach a renderer in a form that can trap.

In C (and in most GPU languages) an integer division by zero, and the signed MIN // -1, are undefined: the CPU traps
(SIGFPE), a compiler that sees a constant zero emits a trap (SIGILL), other devices return whatever their instruction
gives. tinycore defines them once, as numpy does, for every dtype and every backend:
- x // 0 == 0 and x % 0 == 0 (and the integer reciprocal 1 // 0 == 0);
- MIN // -1 == MIN (the true quotient wraps) and MIN % -1 == 0.
The rules, applied to every integer (scalar) division of a kernel before it is linearized:
- a divisor whose bounds exclude 0 (and -1 where the dividend can be MIN) is left alone: index arithmetic, which
  divides by positive constants and symbolic sizes, costs nothing;
- otherwise the division runs on a safe divisor d' = (d != 0 and not (x == MIN and d == -1)) ? d : 1, so x // d'
  is x (MIN in the overflow case, as wanted) and x % d' is 0; IDIV then selects 0 where d == 0.
No negation is emitted: -MIN is itself undefined in C."""
from __future__ import annotations
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.uop.uop import UOp

def _may_trap(u: UOp) -> bool:
  if u.op not in (Ops.IDIV, Ops.MOD, Ops.RECIP) or not dtypes.is_int(u.dtype): return False
  if u.op is Ops.RECIP: return u.src[0].vmin <= 0 <= u.src[0].vmax
  x, d = u.src
  if d.vmin <= 0 <= d.vmax: return True
  return not dtypes.is_unsigned(u.dtype) and d.vmin <= -1 <= d.vmax and x.vmin == dtypes.min(u.dtype)

def _guarded(u: UOp) -> UOp:
  if u.dtype.count > 1: raise NotImplementedError(f"integer {u.op} on {u.dtype} vectors has no division guard: render it lane by lane")
  if u.op is Ops.RECIP: x, d = u.const_like(1), u.src[0]
  else: x, d = u.src
  ok = d.ne(0)
  if not dtypes.is_unsigned(u.dtype): ok = ok & (x.ne(dtypes.min(u.dtype)) | d.ne(-1))
  q = UOp(Ops.IDIV if u.op is Ops.RECIP else u.op, u.dtype, (x, ok.where(d, d.const_like(1))))
  return q if u.op is Ops.MOD else d.ne(0).where(q, u.const_like(0))

def guard_division(sink: UOp) -> UOp:
  """sink with every integer division that could trap guarded (the rules above); sink itself when there is none."""
  nodes = sink.toposort()
  if not any(_may_trap(u) for u in nodes): return sink
  memo: dict[UOp, UOp] = {}
  for u in nodes:
    n = u.replace(src=tuple(memo[s] for s in u.src)) if u.src else u
    memo[u] = _guarded(n) if _may_trap(n) else n
  return memo[sink]
