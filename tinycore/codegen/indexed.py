"""Lowering of a scatter kernel: SINK(SCATTER(buf, VIEW dst, src, index), arg=(axis, size, stride, op)).

The iteration space is the index's shape. Every position of its other dims is one thread (a loop where the renderer
has no ids); each thread loops over the indexed axis in order and writes at dst's position plus the loaded index
(wrapped) times the axis's stride: op(old, src), or src where op is None. No two threads touch one element, so
repeated indices combine in index order (the last write wins), the same on every backend; an index out of range is
skipped (tinycore.index_errors reports it). The kernel takes no optimizations: the loop over the indices must stay one
serial loop."""
from __future__ import annotations
from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.ops import Ops
from tinycore.codegen.kernel import Kernel
from tinycore.uop.uop import UOp, sint_to_uop

def safe_index(i: UOp, size: int) -> tuple[UOp, UOp]:
  """(position, in range) of an index value i on an axis of `size`: a negative index counts from the end, one outside
  [-size, size) is position 0, so no access leaves the buffer. The position is int32, as index arithmetic is."""
  zero, n = UOp.const(i.dtype, 0), UOp.const(i.dtype, size)
  w = UOp(Ops.WHERE, i.dtype, (UOp(Ops.CMPLT, dtypes.bool, (i, zero)), UOp(Ops.ADD, i.dtype, (i, n)), i))
  ok = UOp(Ops.AND, dtypes.bool, (UOp(Ops.CMPNE, dtypes.bool, (UOp(Ops.CMPLT, dtypes.bool, (w, zero)), UOp.const(dtypes.bool, True))),
                                   UOp(Ops.CMPLT, dtypes.bool, (w, n))))
  pos = UOp(Ops.WHERE, i.dtype, (ok, w, zero))
  return (pos if pos.dtype == dtypes.int32 else UOp(Ops.CAST, dtypes.int32, (pos,))), ok

def _rng(end: UOp | int, n: int) -> UOp: return UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 0), sint_to_uop(end)), arg=n)

def _load(x: UOp, ix: list[UOp]) -> UOp:
  """An AST LOAD (or a constant: a view that selects only padding) at the position ix."""
  if x.op is not Ops.LOAD: return UOp.const(x.dtype, x.arg)
  idx, valid = x.src[1].arg.to_indexed_uops(ix)
  if valid.op is Ops.CONST: return UOp(Ops.LOAD, x.dtype, (x.src[0], idx)) if valid.arg else UOp.const(x.dtype, 0)
  return UOp(Ops.LOAD, x.dtype, (x.src[0], idx, valid, UOp.const(x.dtype, 0)))

def lower_scatter(k: Kernel) -> UOp:
  sc = k.ast.src[0]
  buf, dst, src, index = sc.src
  axis, size, stride, _ = sc.arg
  shape = dst.arg.shape
  rest = [d for d in range(len(shape)) if d != axis]
  n = prod(shape[d] for d in rest)
  tid = UOp(Ops.SPECIAL, dtypes.int32, arg=("gidx0", n)) if k.renderer.has_local else _rng(n, 0)
  ix: list[UOp] = [UOp.const(dtypes.int32, 0)] * len(shape)
  acc = 1
  for d in reversed(rest):
    ix[d] = (tid // acc) % shape[d] if acc * shape[d] != n else tid // acc
    acc *= shape[d]
  ix[axis] = _rng(shape[axis], 1)
  pos, ok = safe_index(_load(index, ix), size)
  addr = dst.arg.to_indexed_uops(ix)[0] + pos * stride
  val = _load(src, ix)
  if (op := sc.arg[3]) is not None:
    # gated by the check, the load also depends on the loop: it is not hoisted out of it when the address does not move
    val = UOp(op, val.dtype, (UOp(Ops.LOAD, val.dtype, (buf, addr, ok, UOp.const(val.dtype, 0))), val))
  return UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (buf, addr, val, ok)),))
