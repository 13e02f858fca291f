"""Lowering: a Kernel (AST + iteration space + opts) becomes a UOp graph of loads, ALU ops, loops and stores.

Global and local dims become SPECIAL ids (or loops where the renderer has no ids), reduce dims become RANGE loops,
and upcast/unroll dims are expanded: each combination of their values is lowered separately, and hash-consing
makes the parts that do not depend on them shared; the outputs (and so their accumulators) come in the order of the
upcast dims by length, the shortest innermost (see `lower`). One `Lowerer` lowers one kernel; its methods share the
kernel's ids, loops and vector lanes through `self`."""
from __future__ import annotations
import itertools, math
from tinycore.dtype import DType, dtypes
from tinycore.helpers import prod
from tinycore.ops import Ops
from tinycore.codegen.kernel import Kernel, upcast_combos
from tinycore.codegen.indexed import lower_scatter
from tinycore.shape import ShapeTracker
from tinycore.uop.uop import UOp, sint_to_uop
from tinycore.uop.symbolic import build_linear, simplify, ssimplify, linear_terms

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

LANE = "lane"  # the marker for the vector dim in a lowering context

def pick_vector_dim(k: Kernel) -> tuple[int, int] | None:
  """The dim whose values become the lanes of vector values, and its width; None to lower only scalars.

  An upcast output dim (U) is taken where the output is contiguous along it (a vector store), unless a wider one is a
  microkernel's lanes (an input loaded along it, another broadcast); else an unrolled reduce dim (u) where some input is
  contiguous along it (vector loads into a vector accumulator); else an upcast dim an input is broadcast along, the
  microkernel's lanes first."""
  widths = [w for w in getattr(k.renderer, "vector_widths", (1,)) if w > 1]
  vdts = getattr(k.renderer, "vector_dtypes", ())
  if not widths or not vdts or k.dims("G") or any(len(st.src) > 3 for st in k.ast.src): return None  # (a gated store stays scalar)
  out_sts = [k.st_for(st.src[1]) for st in k.ast.src]
  if any(st.src[2].dtype not in vdts for st in k.ast.src): return None
  loads = [k.st_for(u.src[1]) for u in k.ast.toposort() if u.op is Ops.LOAD]
  def microkernel(d: int) -> bool: return k.full_shape[d] in widths and {st.real_strides()[d] for st in loads} >= {0, 1}
  for d in reversed(k.dims("U")):
    # (not where a wider upcast dim has an input loaded along it and another broadcast: a conv's 4 columns beside its
    # 16 output channels, the weight's vector lanes; the stores, once per long reduce, then go lane by lane)
    if k.full_shape[d] in widths and all(st.real_strides()[d] == 1 for st in out_sts) and \
       not (k.reduceop is not None and any(microkernel(e) and k.full_shape[e] > k.full_shape[d] for e in k.dims("U"))): return d, k.full_shape[d]
  if k.reduceop is not None and k.reduceop.dtype in vdts:
    for d in reversed(k.dims("u")):
      if k.full_shape[d] in widths and any(st.real_strides()[d] == 1 for st in loads): return d, k.full_shape[d]
    # else an upcast output dim that an input is broadcast along: that input is one value for all lanes, the others
    # are gathered (outside the reduce loop the stores are cheap, inside it the other upcasts share each gather)
    # (the widest where another input is contiguous along it: a conv's output channels before its 4 columns)
    for d in sorted(reversed(k.dims("U")), key=lambda d: -k.full_shape[d] if microkernel(d) else 0):
      if k.full_shape[d] in widths and any(st.real_strides()[d] == 0 for st in loads): return d, k.full_shape[d]
  return None

def _tree(op: Ops, xs: list[UOp]) -> UOp:
  """Combine values pairwise: a shallow tree, so the combining does not wait on one long chain."""
  while len(xs) > 1: xs = [UOp(op, xs[i].dtype, (xs[i], xs[i + 1])) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
  return xs[0]

def _pack(xs: tuple[UOp, ...]) -> UOp:
  """The vector holding these lanes: the vector they were taken from, or a VECTORIZE of them."""
  v = xs[0].src[0] if xs[0].op is Ops.GEP else None
  if v is not None and v.dtype.count == len(xs) and all(x.op is Ops.GEP and x.src[0] is v and x.arg == j for j, x in enumerate(xs)): return v
  return UOp(Ops.VECTORIZE, xs[0].dtype.vec(len(xs)), xs)

def _unpack(v: UOp) -> tuple[UOp, ...]: return tuple(UOp(Ops.GEP, v.dtype.scalar(), (v,), j) for j in range(v.dtype.count))

def _key(consts: dict[int, int]) -> tuple:
  """The hashable form of a lowering context (the values of the expanded dims), the memo key of a lowered node."""
  return tuple(sorted(consts.items()))

INDEX_MAX = 2**31 - 1

def index_dtype(k: Kernel) -> DType:
  """The dtype of the kernel's index arithmetic: int32, or int64 where a view's furthest element lies past INT32_MAX
  (int32 would wrap around and address memory outside the buffer) and the renderer declares int64. A renderer without
  int64 gets such a kernel refused by name."""
  for st in k.sts:
    for v in st.views:
      if not all(isinstance(x, int) for x in (*v.shape, *v.strides, v.offset)): continue
      if (reach := abs(v.offset) + sum((s - 1) * abs(st_) for s, st_ in zip(v.shape, v.strides))) > INDEX_MAX:
        if dtypes.int64 in k.renderer.supported_dtypes(): return dtypes.int64
        raise OverflowError(f"kernel {k.name}: a view of shape {v.shape} and strides {v.strides} reaches element {reach}, past the "
                            f"int32 index arithmetic of kernels ({INDEX_MAX}), and {type(k.renderer).__name__} declares no int64 to index "
                            "in: split the op")
  return dtypes.int32

class Lowerer:
  """Lowers one kernel. The state every node's lowering shares: the index of each dim (an id or a loop), the loops,
  the vector dim and its lane variable, and the accumulator counter.

  A node is lowered in a context: the values of the expanded (upcast/unroll) dims, as a sorted tuple of (dim, value).
  `node` gives the scalar value in that context; `lanes` gives its value at every lane of the vector dim (a tuple of
  scalars, often GEPs of one vector). Both are memoized per context, so shared subgraphs are lowered once."""
  def __init__(self, k: Kernel):
    self.k = k
    self.idxs: dict[int, UOp] = {}
    self.ranges: list[UOp] = []      # every loop, in nesting order (a RANGE's arg is its place here; a lane loop last)
    self.red_ranges: list[UOp] = []  # the reduce loops an accumulator lives across
    self.acc_ids = itertools.count()
    self.vdim, self.vw = pick_vector_dim(k) or (None, 1)
    self.vec_ops: set = set(getattr(k.renderer, "vector_alu", ()))
    self.vec_dts: tuple = tuple(getattr(k.renderer, "vector_dtypes", ()))
    self.lane_var = UOp(Ops.DEFINE_VAR, dtypes.int32, arg=("_lane", 0, self.vw - 1))
    self.node_memo: dict[tuple[UOp, tuple], UOp] = {}
    self.lanes_memo: dict[tuple[UOp, tuple], tuple[UOp, ...]] = {}
    self.index_memo: dict[tuple, tuple[UOp, UOp]] = {}
    self.idx_dt = index_dtype(k)
    self.lane_loop: UOp | None = None  # the loop over the lanes of the stores that go lane by lane (see _lane_loop_store)
    self._index_dims()

  # *** the iteration space: ids and loops ***
  def _index_dims(self) -> None:
    k = self.k
    if k.renderer.has_local:
      self.idxs.update(_linear_ids(k, "g", "gidx"))
      # grouped-reduce dims are threads of the group too: then locals and groups share one id
      self.idxs.update(_linear_ids_group(k) if k.dims("G") else _linear_ids(k, "l", "lidx"))
    else:
      for d in k.dims("g"): self._loop(d)
    # tile dims are loops inside the global ones (inside each thread where global dims are ids)
    for d in k.dims("t"): self._loop(d)
    for d in k.dims("r"): self.red_ranges.append(self._loop(d))

  def _loop(self, d: int) -> UOp:
    self.idxs[d] = rng = UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 0), sint_to_uop(self.k.full_shape[d])), arg=len(self.ranges))
    self.ranges.append(rng)
    return rng

  def index(self, view: UOp, consts: dict[int, int | str]) -> tuple[UOp, UOp]:
    """The (index, valid) expressions of a view in a context; a dim set to LANE takes the lane variable. Memoized by
    the view's tracker and the context: loads of several buffers through one view (an elementwise op's operands, a
    gradient's) share them."""
    st = self.k.st_for(view)
    if (ret := self.index_memo.get(key := (st, _key(consts)))) is None: self.index_memo[key] = ret = self._index(st, consts)
    return ret

  def _index(self, st: ShapeTracker, consts: dict[int, int | str]) -> tuple[UOp, UOp]:
    ix = [self.lane_var if consts.get(d) == LANE else UOp.const(dtypes.int32, consts[d]) if d in consts else
          self.idxs.get(d, UOp.const(dtypes.int32, 0)) if s != 1 else UOp.const(dtypes.int32, 0) for d, s in enumerate(st.shape)]
    # (ids and loops count in int32: each dim fits; the address they make is worked out in the index dtype)
    return st.to_indexed_uops(ix if self.idx_dt is dtypes.int32 else [simplify(x.cast(self.idx_dt)) for x in ix])

  def lane_stride(self, idx: UOp, valid: UOp) -> int | None:
    """How far idx moves from one lane to the next where it is linear in the lane and valid does not use it."""
    if self.lane_var in valid.sparents(): return None
    terms, _ = linear_terms(idx)
    if any(self.lane_var in t.sparents() for t in terms if t is not self.lane_var): return None
    return terms.get(self.lane_var, 0)

  def at_lane0(self, idx: UOp) -> UOp: return simplify(idx.substitute({self.lane_var: UOp.const(dtypes.int32, 0)}))

  def lane_uniform(self, valid: UOp) -> UOp:
    """valid with each comparison that has one value at every lane taken at lane 0: `a + lane < c` where a moves in steps
    of g (the gcd of its terms' coefficients) that never land within a vector's lanes of c. A row padded to a multiple
    of the vector width (a matmul's column panels, `codegen/matmul.py`) is then one gated vector load per vector rather
    than a gated scalar load per lane (its repack at 0.7-4 GB/s)."""
    if self.lane_var not in valid.sparents(): return valid
    def uniform(cmp: UOp) -> bool:
      (t0, c0), (t1, c1) = linear_terms(cmp.src[0]), linear_terms(cmp.src[1])
      terms = dict(t0)
      for t, c in t1.items(): terms[t] = terms.get(t, 0) - c
      s, const = terms.pop(self.lane_var, 0), c0 - c1
      if any(self.lane_var in t.sparents() for t, c in terms.items() if c): return False
      # the comparison d + s*lane < 0 differs between lanes where d (const + a multiple of g) lies in [lo, hi]
      lo, hi = (-(self.vw - 1) * s, -1) if s > 0 else (0, -(self.vw - 1) * s - 1)
      g = math.gcd(*terms.values())
      return s == 0 or (lo > const or const > hi if g == 0 else lo + (const - lo) % g > hi)
    lane0 = {self.lane_var: UOp.const(dtypes.int32, 0)}
    subs = {u: u.substitute(lane0) for u in valid.toposort() if u.op is Ops.CMPLT and self.lane_var in u.sparents() and uniform(u)}
    return simplify(valid.substitute(subs)) if subs else valid

  def vectorizable(self, op: Ops, dt, srcs: tuple) -> bool:  # noqa: ANN001
    return op in self.vec_ops and dt in self.vec_dts and all(s.dtype in self.vec_dts for s in srcs)

  # *** values: scalar mode gives one UOp; lane mode gives a tuple of vw scalar UOps (often GEPs of one vector) ***
  def node(self, u: UOp, key: tuple) -> UOp:
    """u lowered in the context `key`: one scalar value."""
    if (ret := self.node_memo.get((u, key))) is None: self.node_memo[(u, key)] = ret = self._node(u, dict(key), key)
    return ret

  def _node(self, u: UOp, consts: dict[int, int], key: tuple) -> UOp:
    if u.op is Ops.LOAD:
      idx, valid = self.index(u.src[1], consts)
      buf = u.src[0]
      if len(u.src) > 2: idx = idx + self.node(u.src[2], key).cast(idx.dtype)  # a gather: the loaded index's part of the address
      if valid.op is Ops.CONST and valid.arg is False: return UOp.const(u.dtype, 0)
      if valid.op is Ops.CONST: return UOp(Ops.LOAD, u.dtype, (buf, idx))
      return UOp(Ops.LOAD, u.dtype, (buf, idx, valid, UOp.const(u.dtype, 0)))
    if u.op is Ops.CONST and not u.src: return u  # a value without a view (an indexed op's index arithmetic)
    if u.op is Ops.CONST:
      _, valid = self.index(u.src[0], consts)
      c = u.arg.cast(u.dtype) if isinstance(u.arg, UOp) else UOp.const(u.dtype, u.arg)  # a symbolic const: its Variables' expression
      return c if valid.op is Ops.CONST and valid.arg is True else simplify(valid.where(c, UOp.const(u.dtype, 0)))
    if u.op is Ops.REDUCE_AXIS and consts.get(self.vdim) == LANE:  # (in a lane loop: the vector accumulator's lane)
      return UOp(Ops.GEP, u.dtype, (_pack(self.lanes(u, _key({d: v for d, v in consts.items() if d != self.vdim}))), self.lane_var))
    if u.op is Ops.REDUCE_AXIS: return self.reduce(u, consts)
    return UOp(u.op, u.dtype, tuple(self.node(s, key) for s in u.src), u.arg)

  def lanes(self, u: UOp, key: tuple) -> tuple[UOp, ...]:
    """u at every value of the vector dim (the other dims as in `key`): a tuple of lanes."""
    if (ret := self.lanes_memo.get((u, key))) is None: self.lanes_memo[(u, key)] = ret = self._lanes(u, dict(key), key)
    return ret

  def _lanes(self, u: UOp, consts: dict[int, int], key: tuple) -> tuple[UOp, ...]:
    if u.op is Ops.LOAD and len(u.src) > 2: return self._per_lane(u, consts)  # a gather's address is loaded: lane by lane
    if u.op is Ops.LOAD: return self._load_lanes(u, consts)
    if u.op is Ops.CONST: return self._per_lane(u, consts)
    if u.op is Ops.REDUCE_AXIS: return self.reduce_lanes(u, consts)
    srcs = [self.lanes(s, key) for s in u.src]
    if self.vectorizable(u.op, u.dtype, u.src): return _unpack(UOp(u.op, u.dtype.vec(self.vw), tuple(_pack(x) for x in srcs), u.arg))
    return tuple(UOp(u.op, u.dtype, tuple(x[j] for x in srcs), u.arg) for j in range(self.vw))

  def _per_lane(self, u: UOp, consts: dict[int, int]) -> tuple[UOp, ...]:
    return tuple(self.node(u, _key({**consts, self.vdim: j})) for j in range(self.vw))

  def _load_lanes(self, u: UOp, consts: dict[int, int]) -> tuple[UOp, ...]:
    """A load at every lane: one value for all (stride 0), one vector load (stride 1, where the dtype has vectors),
    else one load per lane."""
    idx, valid = self.index(u.src[1], {**consts, self.vdim: LANE})
    valid = self.lane_uniform(valid)
    stride = self.lane_stride(idx, valid)
    if stride == 0: return (self.node(u, _key({**consts, self.vdim: 0})),) * self.vw
    if stride == 1 and u.dtype in self.vec_dts and not (valid.op is Ops.CONST and valid.arg is False):
      idx0, buf, vdt = self.at_lane0(idx), u.src[0], u.dtype.vec(self.vw)
      if valid.op is Ops.CONST: return _unpack(UOp(Ops.LOAD, vdt, (buf, idx0), self.k.prefetch.get(u)))
      return _unpack(UOp(Ops.LOAD, vdt, (buf, idx0, valid, _pack((UOp.const(u.dtype, 0),) * self.vw))))
    if stride is not None and valid.op is Ops.CONST and valid.arg is True: return self._strided_lanes(u, consts, idx, stride)
    return self._per_lane(u, consts)

  def _strided_lanes(self, u: UOp, consts: dict[int, int], idx: UOp, stride: int) -> tuple[UOp, ...]:
    """One load per lane where the index moves `stride` a lane: each lane's index is the sum with its constant moved,
    built directly (the index worked out and simplified again for every lane was most of a gather-heavy kernel's
    lowering); the same nodes as lane by lane, memoized as node() would."""
    terms, c = linear_terms(idx)
    terms = {t: v for t, v in terms.items() if t is not self.lane_var}
    out = []
    for j in range(self.vw):
      key = _key({**consts, self.vdim: j})
      if (ld := self.node_memo.get((u, key))) is None:
        self.node_memo[(u, key)] = ld = UOp(Ops.LOAD, u.dtype, (u.src[0], build_linear(terms, c + stride * j, idx)))
      out.append(ld)
    return tuple(out)

  # *** reduces ***
  def accumulate(self, op: Ops, dt, parts: list[UOp]) -> UOp:  # noqa: ANN001
    """parts combined into an accumulator over the reduce loops (or just combined when there are none)."""
    if not self.red_ranges: return _tree(op, parts)
    init = UOp.const(dt.scalar(), _identity(op, dt.scalar()))
    acc = UOp(Ops.DEFINE_ACC, dt, (_pack((init,) * dt.count) if dt.count > 1 else init,) + tuple(self.red_ranges), arg=next(self.acc_ids))
    if all(p.op is Ops.MUL for p in parts):
      # products chain through the accumulator so that each becomes one fused multiply-add
      val = acc
      for p in parts: val = UOp(op, val.dtype, (val, p))
    else: val = UOp(op, acc.dtype, (acc, _tree(op, parts)))
    return UOp(Ops.ASSIGN, dt, (acc, val))

  def reduce_lanes(self, u: UOp, consts: dict[int, int]) -> tuple[UOp, ...]:
    """A reduce whose output is vectorized (the vector dim is an upcast output dim): a vector accumulator."""
    op = u.arg[0]
    parts = [self.lanes(u.src[0], _key({**consts, **uc})) for uc in upcast_combos(self.k, "u")]
    if op in self.vec_ops and u.dtype in self.vec_dts: return _unpack(self.accumulate(op, u.dtype.vec(self.vw), [_pack(p) for p in parts]))
    return tuple(self.accumulate(op, u.dtype, [p[j] for p in parts]) for j in range(self.vw))

  def reduce(self, u: UOp, consts: dict[int, int]) -> UOp:
    """A reduce to one scalar: accumulated over the unrolled dims and the reduce loops, then across the group."""
    if self.vdim is not None and self.k.kinds[self.vdim] == "u": ret = self._reduce_unrolled_lanes(u, consts)
    else: ret = self.accumulate(u.arg[0], u.dtype, [self.node(u.src[0], _key({**consts, **uc})) for uc in upcast_combos(self.k, "u")])
    return self._group_reduce(u, consts, ret) if self.k.dims("G") else ret

  def _reduce_unrolled_lanes(self, u: UOp, consts: dict[int, int]) -> UOp:
    """The vector dim is an unrolled reduce dim: lanes accumulate side by side and are combined after the loop."""
    op = u.arg[0]
    combos = [c for c in upcast_combos(self.k, "u") if c[self.vdim] == 0]
    parts = [self.lanes(u.src[0], _key({**consts, **{d: v for d, v in uc.items() if d != self.vdim}})) for uc in combos]
    if not (op in self.vec_ops and u.dtype in self.vec_dts): return self.accumulate(op, u.dtype, [x for p in parts for x in p])
    # the lanes of the accumulator are combined by halves: vector ops on ever shorter vectors, not one per lane
    v = self.accumulate(op, u.dtype.vec(self.vw), [_pack(p) for p in parts])
    while v.dtype.count > 2:
      lanes, h = _unpack(v), v.dtype.count // 2
      v = UOp(op, v.dtype.scalar().vec(h), (_pack(lanes[:h]), _pack(lanes[h:])))
    return _tree(op, list(_unpack(v)))

  def _group_reduce(self, u: UOp, consts: dict[int, int], partial: UOp) -> UOp:
    """Grouped reduce: each thread leaves its partial result in local memory, then every thread reduces the group."""
    k = self.k
    size = prod(k.full_shape[d] for d in k.dims("l") + k.dims("G"))
    nlanes = prod(k.full_shape[d] for d in k.dims("U")) or 1
    temp = UOp(Ops.DEFINE_LOCAL, u.dtype.ptr(local=True), arg=("temp0", size * nlanes))
    offset = self._upcast_lane(consts) * size
    store = UOp(Ops.STORE, dtypes.void, (temp, self._group_slot(self.idxs, offset), partial))
    barrier = UOp(Ops.BARRIER, dtypes.void, (store,))
    out = None
    for gc in upcast_combos(k, "G"):
      vals = {**self.idxs, **{d: UOp.const(dtypes.int32, v) for d, v in gc.items()}}
      ld = UOp(Ops.LOAD, u.dtype, (temp, self._group_slot(vals, offset), barrier))
      out = ld if out is None else UOp(u.arg[0], ld.dtype, (out, ld))
    return out

  def _group_slot(self, vals: dict[int, UOp], offset: int) -> UOp:
    """The place in local memory of the thread at these local and group indices, in the slice of one upcast lane."""
    ix, acc = UOp.const(dtypes.int32, 0), 1
    for d in reversed(self.k.dims("l") + self.k.dims("G")):
      ix, acc = ix + vals[d] * acc, acc * self.k.full_shape[d]
    return simplify(ix + offset)

  def _upcast_lane(self, consts: dict[int, int]) -> int:
    """The number of the upcast output combination a context is in (the order of the upcast dims' values)."""
    lane, acc = 0, 1
    for d in reversed(self.k.dims("U")):
      lane, acc = lane + consts.get(d, 0) * acc, acc * self.k.full_shape[d]
    return lane

  # *** stores: the kernel's outputs at every upcast combination ***
  def lower(self) -> UOp:
    """The kernel as a SINK of stores."""
    stores: list[UOp] = []
    lanes_out = self.vdim is not None and self.k.kinds[self.vdim] == "U"
    # the outputs (so their accumulators) with the shortest upcast dim innermost: a value loaded along a longer dim (a
    # conv's input column, broadcast) feeds every accumulator along the shorter one (its panel's two vectors) back to back
    # and dies; in the dims' own order each value of a stride-2 conv's step (29 over 14 columns) stayed live until the
    # second vector's pass, and the spills cost ResNet-18's 3x3/2 convs a third of their speed (73 -> 108 GFLOP/s, Zen 4)
    for uc in upcast_combos(self.k, "U", shortest_inner=True):
      if lanes_out and uc[self.vdim] != 0: continue
      for st_node in self.k.ast.src: stores.extend(self._store_lanes(st_node, uc) if lanes_out else [self._store(st_node, uc)])
    sink = UOp(Ops.SINK, dtypes.void, tuple(stores))
    return sink if self.lane_loop is None else sink.substitute({self.lane_var: self.lane_loop})

  def _store(self, st_node: UOp, uc: dict[int, int]) -> UOp:
    idx, _ = self.index(st_node.src[1], uc)
    gate = tuple(self.node(g, _key(uc)) for g in st_node.src[3:])  # a gated store (an index check's)
    return UOp(Ops.STORE, dtypes.void, (st_node.src[0], idx, self.node(st_node.src[2], _key(uc))) + gate)

  def _store_lanes(self, st_node: UOp, uc: dict[int, int]) -> list[UOp]:
    """A store at every lane of the vector dim: one vector store where the lanes are adjacent, else one per lane."""
    rest = {d: v for d, v in uc.items() if d != self.vdim}
    vals = self.lanes(st_node.src[2], _key(rest))
    idx, valid = self.index(st_node.src[1], {**rest, self.vdim: LANE})
    if self.lane_stride(idx, valid) == 1: return [UOp(Ops.STORE, dtypes.void, (st_node.src[0], self.at_lane0(idx), _pack(vals)))]
    if self.k.renderer.lane_loops: return [self._lane_loop_store(st_node, rest)]
    return [UOp(Ops.STORE, dtypes.void, (st_node.src[0], self.index(st_node.src[1], {**rest, self.vdim: j})[0], vals[j])) for j in range(self.vw)]

  def _lane_loop_store(self, st_node: UOp, rest: dict[int, int]) -> UOp:
    """A store that goes lane by lane as one store in a loop over the lanes (the renderer's `lane_loops`): its value
    lowered per lane with the lane variable (lower() makes it the loop's), a vector accumulator read at the loop's lane
    (a GEP by it). The epilogue's loads (a ReLU mask, a residual) and the stores are one scalar access per lane either
    way, but unrolled, 16 loads, a vector built of them and 16 stores per accumulator were most of a conv's C (see
    docs/performance.md, cold first step). One loop for all of a kernel's such stores, after its reduce loops."""
    if self.lane_loop is None:
      self.lane_loop = UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 0), UOp.const(dtypes.int32, self.vw)), arg=len(self.ranges))
      self.ranges.append(self.lane_loop)
    ctx = {**rest, self.vdim: LANE}
    return UOp(Ops.STORE, dtypes.void, (st_node.src[0], self.index(st_node.src[1], ctx)[0], self.node(st_node.src[2], _key(ctx))))

def lower(k: Kernel) -> UOp:
  """A kernel lowered to a UOp graph: a SINK of its stores."""
  if k.ast.src[0].op is Ops.SCATTER: return lower_scatter(k)
  return Lowerer(k).lower()
