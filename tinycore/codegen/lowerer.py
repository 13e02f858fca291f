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
from tinycore.codegen.indexed import lower_scatter
from tinycore.uop.uop import UOp, sint_to_uop, ssimplify
from tinycore.uop.symbolic import simplify, linear_terms

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
    size = ssimplify(prod(k.full_shape[d] for d in grp))
    sid = UOp(Ops.SPECIAL, dtypes.int32, arg=(f"{prefix}{axis}", size))
    acc = 1
    for d in reversed(grp):
      out[d] = (sid // acc) % k.full_shape[d] if len(grp) > 1 else sid
      acc *= k.full_shape[d]
  return out

LANE = "lane"  # the marker for the vector dim in a lowering context

def pick_vector_dim(k: Kernel) -> tuple[int, int] | None:
  """The dim whose values become the lanes of vector values, and its width; None to lower only scalars.

  An upcast output dim (U) is taken where the output is contiguous along it (a vector store); else an unrolled
  reduce dim (u) where some input is contiguous along it (vector loads into a vector accumulator)."""
  widths = [w for w in getattr(k.renderer, "vector_widths", (1,)) if w > 1]
  vdts = getattr(k.renderer, "vector_dtypes", ())
  if not widths or not vdts or k.dims("G") or any(len(st.src) > 3 for st in k.ast.src): return None  # (a gated store stays scalar)
  out_sts = [k.st_for(st.src[1]) for st in k.ast.src]
  if any(st.src[2].dtype not in vdts for st in k.ast.src): return None
  for d in reversed(k.dims("U")):
    if k.full_shape[d] in widths and all(st.real_strides()[d] == 1 for st in out_sts): return d, k.full_shape[d]
  loads = [k.st_for(u.src[1]) for u in k.ast.toposort() if u.op is Ops.LOAD]
  if k.reduceop is not None and k.reduceop.dtype in vdts:
    for d in reversed(k.dims("u")):
      if k.full_shape[d] in widths and any(st.real_strides()[d] == 1 for st in loads): return d, k.full_shape[d]
    # else an upcast output dim that an input is broadcast along: that input is one value for all lanes, the others
    # are gathered (outside the reduce loop the stores are cheap, inside it the other upcasts share each gather)
    for d in reversed(k.dims("U")):
      if k.full_shape[d] in widths and any(st.real_strides()[d] == 0 for st in loads): return d, k.full_shape[d]
  return None

def _tree(op: Ops, xs: list[UOp]) -> UOp:
  """Combine values pairwise: a shallow tree, so the combining does not wait on one long chain."""
  while len(xs) > 1: xs = [UOp(op, xs[i].dtype, (xs[i], xs[i + 1])) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return xs[0]

def lower(k: Kernel) -> UOp:
  if k.ast.src[0].op is Ops.SCATTER: return lower_scatter(k)
  r = k.renderer
  idxs: dict[int, UOp] = {}
  ranges: list[UOp] = []
  if r.has_local:
    idxs.update(_linear_ids(k, "g", "gidx"))
    # grouped-reduce dims are threads of the group too: then locals and groups share one id
    idxs.update(_linear_ids_group(k) if k.dims("G") else _linear_ids(k, "l", "lidx"))
  else:
    for d in k.dims("g"):
      idxs[d] = UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 0), sint_to_uop(k.full_shape[d])), arg=len(ranges))
      ranges.append(idxs[d])
  # tile dims are loops inside the global ones (inside each thread where global dims are ids)
  for d in k.dims("t"):
    idxs[d] = UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 0), sint_to_uop(k.full_shape[d])), arg=len(ranges))
    ranges.append(idxs[d])
  red_ranges = []
  for d in k.dims("r"):
    idxs[d] = UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 0), sint_to_uop(k.full_shape[d])), arg=len(ranges))
    ranges.append(idxs[d])
    red_ranges.append(idxs[d])
  acc_ids = iter(range(1 << 30))
  vdim, vw = pick_vector_dim(k) or (None, 1)
  vec_ops: set = set(getattr(r, "vector_alu", ()))
  vec_dts: tuple = tuple(getattr(r, "vector_dtypes", ()))
  lane_var = UOp(Ops.DEFINE_VAR, dtypes.int32, arg=("_lane", 0, vw - 1))

  def index(view: UOp, consts: dict[int, int | str]) -> tuple[UOp, UOp]:
    st = k.st_for(view)
    ix = [lane_var if consts.get(d) == LANE else UOp.const(dtypes.int32, consts[d]) if d in consts else idxs.get(d, UOp.const(dtypes.int32, 0))
          if s != 1 else UOp.const(dtypes.int32, 0) for d, s in enumerate(st.shape)]
    return st.to_indexed_uops(ix)

  def lane_stride(idx: UOp, valid: UOp) -> int | None:
    """How far idx moves from one lane to the next where it is linear in the lane and valid does not use it."""
    if lane_var in valid.sparents(): return None
    terms, _ = linear_terms(idx)
    if any(lane_var in t.sparents() for t in terms if t is not lane_var): return None
    return terms.get(lane_var, 0)

  # *** values: scalar mode gives one UOp; lane mode gives a tuple of vw scalar UOps (often GEPs of one vector) ***
  def pack(xs: tuple[UOp, ...]) -> UOp:
    """The vector holding these lanes: the vector they were taken from, or a VECTORIZE of them."""
    v = xs[0].src[0] if xs[0].op is Ops.GEP else None
    if v is not None and v.dtype.count == len(xs) and all(x.op is Ops.GEP and x.src[0] is v and x.arg == j for j, x in enumerate(xs)): return v
    return UOp(Ops.VECTORIZE, xs[0].dtype.vec(len(xs)), xs)
  def unpack(v: UOp) -> tuple[UOp, ...]: return tuple(UOp(Ops.GEP, v.dtype.scalar(), (v,), j) for j in range(v.dtype.count))
  def vectorizable(op: Ops, dt, srcs: tuple) -> bool:  # noqa: ANN001
    return op in vec_ops and dt in vec_dts and all(s.dtype in vec_dts for s in srcs)

  @functools.lru_cache(maxsize=None)
  def lower_node(u: UOp, consts_key: tuple) -> UOp:
    consts = dict(consts_key)
    if u.op is Ops.LOAD:
      idx, valid = index(u.src[1], consts)
      buf = u.src[0]
      if len(u.src) > 2: idx = idx + lower_node(u.src[2], consts_key)  # a gather: the loaded index's part of the address
      if valid.op is Ops.CONST and valid.arg is False: return UOp.const(u.dtype, 0)
      if valid.op is Ops.CONST: return UOp(Ops.LOAD, u.dtype, (buf, idx))
      return UOp(Ops.LOAD, u.dtype, (buf, idx, valid, UOp.const(u.dtype, 0)))
    if u.op is Ops.CONST and not u.src: return u  # a value without a view (an indexed op's index arithmetic)
    if u.op is Ops.CONST:
      _, valid = index(u.src[0], consts)
      c = u.arg.cast(u.dtype) if isinstance(u.arg, UOp) else UOp.const(u.dtype, u.arg)  # a symbolic const: its Variables' expression
      return c if valid.op is Ops.CONST and valid.arg is True else simplify(valid.where(c, UOp.const(u.dtype, 0)))
    if u.op is Ops.REDUCE_AXIS: return lower_reduce(u, consts)
    return UOp(u.op, u.dtype, tuple(lower_node(s, consts_key) for s in u.src), u.arg)

  @functools.lru_cache(maxsize=None)
  def lower_lanes(u: UOp, consts_key: tuple) -> tuple[UOp, ...]:
    """u at every value of the vector dim (the other dims as in consts_key): a tuple of lanes."""
    consts = dict(consts_key)
    def per_lane() -> tuple[UOp, ...]: return tuple(lower_node(u, tuple(sorted({**consts, vdim: j}.items()))) for j in range(vw))
    if u.op is Ops.LOAD and len(u.src) > 2: return per_lane()  # a gather's address is loaded: lane by lane
    if u.op is Ops.LOAD:
      idx, valid = index(u.src[1], {**consts, vdim: LANE})
      stride = lane_stride(idx, valid)
      if stride == 0: return (lower_node(u, tuple(sorted({**consts, vdim: 0}.items()))),) * vw
      if stride == 1 and u.dtype in vec_dts and not (valid.op is Ops.CONST and valid.arg is False):
        idx0, buf, vdt = simplify(idx.substitute({lane_var: UOp.const(dtypes.int32, 0)})), u.src[0], u.dtype.vec(vw)
        if valid.op is Ops.CONST: return unpack(UOp(Ops.LOAD, vdt, (buf, idx0)))
        return unpack(UOp(Ops.LOAD, vdt, (buf, idx0, valid, pack((UOp.const(u.dtype, 0),) * vw))))
      return per_lane()
    if u.op is Ops.CONST: return per_lane()
    if u.op is Ops.REDUCE_AXIS: return lower_reduce_lanes(u, consts)
    srcs = [lower_lanes(s, consts_key) for s in u.src]
    if vectorizable(u.op, u.dtype, u.src):
      return unpack(UOp(u.op, u.dtype.vec(vw), tuple(pack(x) for x in srcs), u.arg))
    return tuple(UOp(u.op, u.dtype, tuple(x[j] for x in srcs), u.arg) for j in range(vw))

  def combine(op: Ops, a: UOp, b: UOp) -> UOp: return UOp(op, a.dtype, (a, b))

  def accumulate(op: Ops, dt, parts: list[UOp]) -> UOp:  # noqa: ANN001
    """parts combined into an accumulator over the reduce loops (or just combined when there are none)."""
    if not red_ranges: return _tree(op, parts)
    init = UOp.const(dt.scalar(), _identity(op, dt.scalar()))
    acc = UOp(Ops.DEFINE_ACC, dt, (pack((init,) * dt.count) if dt.count > 1 else init,) + tuple(red_ranges), arg=next(acc_ids))
    if all(p.op is Ops.MUL for p in parts):
      # products chain through the accumulator so that each becomes one fused multiply-add
      val = acc
      for p in parts: val = combine(op, val, p)
    else: val = combine(op, acc, _tree(op, parts))
    return UOp(Ops.ASSIGN, dt, (acc, val))

  def lower_reduce_lanes(u: UOp, consts: dict[int, int]) -> tuple[UOp, ...]:
    """A reduce whose output is vectorized (the vector dim is an upcast output dim): a vector accumulator."""
    op = u.arg[0]
    parts = [lower_lanes(u.src[0], tuple(sorted({**consts, **uc}.items()))) for uc in upcast_combos(k, "u")]
    if op in vec_ops and u.dtype in vec_dts: return unpack(accumulate(op, u.dtype.vec(vw), [pack(p) for p in parts]))
    return tuple(accumulate(op, u.dtype, [p[j] for p in parts]) for j in range(vw))

  def lower_reduce(u: UOp, consts: dict[int, int]) -> UOp:
    op = u.arg[0]
    if vdim is not None and k.kinds[vdim] == "u":
      # the vector dim is an unrolled reduce dim: lanes accumulate side by side and are combined after the loop
      combos = [c for c in upcast_combos(k, "u") if c[vdim] == 0]
      parts = [lower_lanes(u.src[0], tuple(sorted({**consts, **{d: v for d, v in uc.items() if d != vdim}}.items()))) for uc in combos]
      if op in vec_ops and u.dtype in vec_dts:
        # the lanes of the accumulator are combined by halves: vector ops on ever shorter vectors, not one per lane
        v = accumulate(op, u.dtype.vec(vw), [pack(p) for p in parts])
        while v.dtype.count > 2:
          lanes, h = unpack(v), v.dtype.count // 2
          v = UOp(op, v.dtype.scalar().vec(h), (pack(lanes[:h]), pack(lanes[h:])))
        return _tree(op, list(unpack(v)))
      ret = accumulate(op, u.dtype, [x for p in parts for x in p])
    else:
      parts = [lower_node(u.src[0], tuple(sorted({**consts, **uc}.items()))) for uc in upcast_combos(k, "u")]
      ret = accumulate(op, u.dtype, parts)
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
  lanes_out = vdim is not None and k.kinds[vdim] == "U"
  for uc in upcast_combos(k, "U"):
    if lanes_out and uc[vdim] != 0: continue
    for st_node in k.ast.src:
      if not lanes_out:
        key = tuple(sorted(uc.items()))
        val = lower_node(st_node.src[2], key)
        idx, valid = index(st_node.src[1], uc)
        gate = tuple(lower_node(g, key) for g in st_node.src[3:])  # a gated store (an index check's)
        stores.append(UOp(Ops.STORE, dtypes.void, (st_node.src[0], idx, val) + gate))
        continue
      rest = {d: v for d, v in uc.items() if d != vdim}
      vals = lower_lanes(st_node.src[2], tuple(sorted(rest.items())))
      idx, valid = index(st_node.src[1], {**rest, vdim: LANE})
      if lane_stride(idx, valid) == 1:
        stores.append(UOp(Ops.STORE, dtypes.void, (st_node.src[0], simplify(idx.substitute({lane_var: UOp.const(dtypes.int32, 0)})), pack(vals))))
      else:
        for j in range(vw):
          idx_j, _ = index(st_node.src[1], {**rest, vdim: j})
          stores.append(UOp(Ops.STORE, dtypes.void, (st_node.src[0], idx_j, vals[j])))
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
