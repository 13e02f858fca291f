"""Lowering: a Kernel (AST + iteration space + opts) becomes a UOp graph of loads, ALU ops, loops and stores.

Global and local dims become SPECIAL ids (or loops where the renderer has no ids), reduce dims become RANGE loops,
and upcast/unroll dims are expanded: each combination of their values is lowered separately, and hash-consing
makes the parts that do not depend on them shared."""
from __future__ import annotations
import functools
from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.ops import Ops
from tinycore.codegen.kernel import Kernel, upcast_combos
from tinycore.uop.uop import UOp
from tinycore.uop.symbolic import simplify

def _identity(op: Ops, dt) -> object:  # noqa: ANN001
  return 0 if op is Ops.ADD else dtypes.min(dt)

def _linear_ids(k: Kernel, kind: str, prefix: str) -> dict[int, UOp]:
  """Ids for the dims of one kind; more dims than the hardware has axes are folded into the last axis."""
  dims = k.dims(kind)
  if not dims: return {}
  naxes = min(len(dims), 3)
  # the innermost dims get their own axes (axis 0 is the fastest-varying one), the outer ones share the last axis
  groups = [dims[:len(dims) - naxes + 1]] + [[d] for d in dims[len(dims) - naxes + 1:]]
  out: dict[int, UOp] = {}
  for axis, grp in enumerate(reversed(groups)):
    size = prod(k.full_shape[d] for d in grp)
    sid = UOp(Ops.SPECIAL, dtypes.int32, arg=(f"{prefix}{axis}", size))
    acc = 1
    for d in reversed(grp):
      out[d] = (sid // acc) % k.full_shape[d] if len(grp) > 1 else sid
      acc *= k.full_shape[d]
  return out

def lower(k: Kernel) -> UOp:
  r = k.renderer
  idxs: dict[int, UOp] = {}
  ranges: list[UOp] = []
  if r.has_local:
    idxs.update(_linear_ids(k, "g", "gidx"))
    # grouped-reduce dims are threads of the group too: then locals and groups share one id
    idxs.update(_linear_ids_group(k) if k.dims("G") else _linear_ids(k, "l", "lidx"))
  else:
    for d in k.dims("g"):
      idxs[d] = UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 0), UOp.const(dtypes.int32, k.full_shape[d])), arg=len(ranges))
      ranges.append(idxs[d])
  red_ranges = []
  for d in k.dims("r"):
    idxs[d] = UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 0), UOp.const(dtypes.int32, k.full_shape[d])), arg=len(ranges))
    ranges.append(idxs[d])
    red_ranges.append(idxs[d])
  acc_ids = iter(range(1 << 30))

  def index(view: UOp, consts: dict[int, int]) -> tuple[UOp, UOp]:
    st = k.st_for(view)
    ix = [UOp.const(dtypes.int32, consts[d]) if d in consts else idxs.get(d, UOp.const(dtypes.int32, 0)) if s != 1
          else UOp.const(dtypes.int32, 0) for d, s in enumerate(st.shape)]
    return st.to_indexed_uops(ix)

  @functools.lru_cache(maxsize=None)
  def lower_node(u: UOp, consts_key: tuple) -> UOp:
    consts = dict(consts_key)
    if u.op is Ops.LOAD:
      idx, valid = index(u.src[1], consts)
      buf = u.src[0]
      if valid.op is Ops.CONST and valid.arg is False: return UOp.const(u.dtype, 0)
      if valid.op is Ops.CONST: return UOp(Ops.LOAD, u.dtype, (buf, idx))
      return UOp(Ops.LOAD, u.dtype, (buf, idx, valid, UOp.const(u.dtype, 0)))
    if u.op is Ops.CONST:
      _, valid = index(u.src[0], consts)
      c = UOp.const(u.dtype, u.arg)
      return c if valid.op is Ops.CONST and valid.arg is True else simplify(valid.where(c, UOp.const(u.dtype, 0)))
    if u.op is Ops.REDUCE_AXIS: return lower_reduce(u, consts)
    return UOp(u.op, u.dtype, tuple(lower_node(s, consts_key) for s in u.src), u.arg)

  def combine(op: Ops, a: UOp, b: UOp) -> UOp: return UOp(op, a.dtype, (a, b))

  def lower_reduce(u: UOp, consts: dict[int, int]) -> UOp:
    op = u.arg[0]
    parts = [lower_node(u.src[0], tuple(sorted({**consts, **uc}.items()))) for uc in upcast_combos(k, "u")]
    if red_ranges:
      acc = UOp(Ops.DEFINE_ACC, u.dtype, (UOp.const(u.dtype, _identity(op, u.dtype)),) + tuple(red_ranges), arg=next(acc_ids))
      val = acc
      for p in parts: val = combine(op, val, p)
      ret = UOp(Ops.ASSIGN, u.dtype, (acc, val))
    else:
      ret = parts[0]
      for p in parts[1:]: ret = combine(op, ret, p)
    if not k.dims("G"): return ret
    # grouped reduce: each thread leaves its partial result in local memory, then every thread reduces the group
    ldims, gdims = k.dims("l"), k.dims("G")
    lane = consts_index(consts)
    size = prod(k.full_shape[d] for d in ldims + gdims)
    nlanes = prod(k.full_shape[d] for d in k.dims("U")) or 1
    temp = UOp(Ops.DEFINE_LOCAL, u.dtype.ptr(local=True), arg=("temp0", size * nlanes))
    def lin(vals: dict[int, UOp]) -> UOp:
      ix, acc_ = UOp.const(dtypes.int32, 0), 1
      for d in reversed(ldims + gdims):
        ix, acc_ = ix + vals[d] * acc_, acc_ * k.full_shape[d]
      return simplify(ix + lane * size)
    store = UOp(Ops.STORE, dtypes.void, (temp, lin(idxs), ret))
    barrier = UOp(Ops.BARRIER, dtypes.void, (store,))
    out = None
    for gc in upcast_combos(k, "G"):
      vals = {**idxs, **{d: UOp.const(dtypes.int32, v) for d, v in gc.items()}}
      ld = UOp(Ops.LOAD, u.dtype, (temp, lin(vals), barrier))
      out = ld if out is None else combine(op, out, ld)
    return out

  def consts_index(consts: dict[int, int]) -> int:
    lane, acc = 0, 1
    for d in reversed(k.dims("U")):
      lane, acc = lane + consts.get(d, 0) * acc, acc * k.full_shape[d]
    return lane

  stores = []
  for uc in upcast_combos(k, "U"):
    for st_node in k.ast.src:
      key = tuple(sorted(uc.items()))
      val = lower_node(st_node.src[2], key)
      idx, valid = index(st_node.src[1], uc)
      stores.append(UOp(Ops.STORE, dtypes.void, (st_node.src[0], idx, val)))
  return UOp(Ops.SINK, dtypes.void, tuple(stores))

def _linear_ids_group(k: Kernel) -> dict[int, UOp]:
  """Local ids for the local dims and grouped-reduce dims together (both are threads of one group)."""
  dims = k.dims("l") + k.dims("G")
  if not k.dims("G"): return {}
  out: dict[int, UOp] = {}
  total = prod(k.full_shape[d] for d in dims)
  sid = UOp(Ops.SPECIAL, dtypes.int32, arg=("lidx0", total))
  acc = 1
  for d in reversed(dims):
    out[d] = (sid // acc) % k.full_shape[d]
    acc *= k.full_shape[d]
  return out
