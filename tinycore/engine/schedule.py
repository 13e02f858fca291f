"""The scheduler: groups the lazy graph into kernels.

Each kernel is one AST: SINK(STORE(out, VIEW, value)) whose value is a tree of ALU ops, at most one REDUCE_AXIS,
LOADs of realized buffers and CONSTs, each LOAD/CONST carrying the ShapeTracker that maps the kernel's iteration
space onto its buffer. Fusion rules:
- elementwise ops fuse into each other, into the reduce that consumes them, and into the store after a reduce;
- a buffer whose value reaches two kernels is computed once (it becomes a kernel of its own);
- movement ops never copy: they only compose ShapeTrackers;
- a padded view is never pushed through an op where f(0) != 0 (the padded input is computed first);
- an assign is written after every kernel that reads the value it overwrites. Where two assigns read each other's old
  values (SGD over two parameters whose gradients depend on each other) the kernels would wait on each other: one of
  them computes its value into a buffer of its own first, then copies it in (every assign sees the old values, as
  numpy would compute them);
- a kernel holds at most KERNEL_OPS_MAX (1000) AST nodes: past that, the biggest part is realized first (a value read
  through many views, as a scan's gradient, would otherwise grow exponentially);
- an indexed op reads or writes at positions loaded from data: GATHER's table and SCATTER's operands are buffers of
  their own (realized first); GATHER's index fuses into the kernel that uses it, the load's address is the table's
  view with the indexed axis's position replaced by the loaded index (wrapped, clamped into the buffer); a padded view
  is never pushed through a GATHER (a masked index would read entry 0, not 0). SCATTER and INDEX_CHECK write in place
  into the buffer of their first source (see tinycore.index_errors, codegen/indexed.py);
- an assign through a view of a buffer (an ASSIGN whose arg is the view) is a kernel over the value's shape storing at
  the view's positions, the other elements kept; a reduce in its value is computed first. A write through a view not
  made yet into a buffer that a schedule reads (lazy.pending_writes) is made in that schedule, as an assign;
- assigns that write tensors of one shape, without a reduce, where one's value reads another's result element for
  element (Adam's parameter reading its new moments), are one kernel with a store per target (`_assign_groups`): each
  element's new moments are computed once, in registers, and written with the parameter. Every read of a target in
  that kernel is at the element it writes; where that fails, or the merged kernel would wait on itself, they stay apart;
- a view that selects only padding is a zero: its buffer is no input of the kernel. The kernel's buffers (`bufs`,
  output first) are exactly the DEFINE_GLOBALs of its AST, numbered by position; the code generator declares every one
  of them as a parameter, so what a runner passes and what a kernel takes come from this one list.
A float32 constant (other than 0 and +-1, which the simplifier folds) is a kernel input: a one-element buffer holding
its value, so `x * 0.37` and `x * 0.42` share one compiled kernel (and one cached schedule)."""
from __future__ import annotations
import math, operator, struct
from dataclasses import dataclass, field
from typing import Any, Callable
from tinycore.device import Buffer
from tinycore.dtype import dtypes
from tinycore.helpers import DEBUG, GRAPH, ContextVar, prod
from tinycore.lazy import LazyBuffer, merge_var_vals, pending_readers, pending_writes, BUFFER, CONST, ASSIGN
from tinycore.ops import Ops, GroupOp
from tinycore.shape import ShapeTracker, View
from tinycore.codegen.indexed import safe_index
from tinycore.engine import schedulestore
from tinycore.uop.uop import UOp, sint_to_uop

@dataclass(frozen=True)
class ScheduleItem:
  """One step of a schedule: a kernel AST (or a COPY / EMPTY) and its buffers, output first."""
  ast: UOp
  bufs: tuple[Buffer, ...]
  outputs: tuple[LazyBuffer, ...] = field(default=(), compare=False)
  inputs: tuple[LazyBuffer, ...] = field(default=(), compare=False)  # the lazy bases whose buffers it reads

class _AssignCycle(Exception):
  """Kernels that wait on each other (two assigns reading each other's old values): the assigns on the cycle."""
  def __init__(self, assigns: list[LazyBuffer]): self.assigns = assigns

class _OwnValues(tuple):
  """A schedule cache entry: the graph positions of the assigns whose values get buffers of their own (see
  _own_value), after which the graph has a schedule (cached under its own key)."""

class _Refuse(Exception):
  """A fusion turned out invalid: the base named here must become a kernel of its own."""
  def __init__(self, base: LazyBuffer): self.base = base

class _KernelBuilder:
  def __init__(self, out: LazyBuffer, realizes: set[LazyBuffer]):
    self.out, self.realizes = out, realizes
    self.bufs: list[Buffer] = [out.buffer]
    self.inputs: list[LazyBuffer] = []
    self.reduce: LazyBuffer | None = None
    self.unsafe_cache: dict[LazyBuffer, bool] = {}
    self.memo: dict[tuple[LazyBuffer, ShapeTracker, bool], UOp] = {}
    # per op node: a bound on the nodes of its subtree (exact once it was counted), and the base that computes it
    self.size: dict[UOp, int] = {}
    self.owner: dict[UOp, LazyBuffer] = {}
    self.inline: dict[LazyBuffer, ShapeTracker] = {}  # a group's assigns (see _group_ast): read at their own view, their value

  def load(self, base: LazyBuffer, st: ShapeTracker) -> UOp:
    # a view that selects no element (padding only) reads nothing: a zero, and the buffer is no argument of the kernel
    if _never_valid(st): return UOp(Ops.CONST, base.dtype, (UOp(Ops.VIEW, arg=st),), dtypes.as_const(0, base.dtype))
    buf = base.buffer
    if buf not in self.bufs: self.bufs.append(buf)
    if base not in self.inputs: self.inputs.append(base)
    g = UOp(Ops.DEFINE_GLOBAL, base.dtype.ptr(), arg=self.bufs.index(buf))
    return UOp(Ops.LOAD, base.dtype, (g, UOp(Ops.VIEW, arg=st)))

  def has_unsafe_pad(self, base: LazyBuffer) -> bool:
    if base in self.realizes or base.op in (Ops.BUFFER, Ops.CONST): return False
    if (r := self.unsafe_cache.get(base)) is None:
      r = base.op in GroupOp.UnsafePad or base.op in (Ops.REDUCE_AXIS, Ops.GATHER) or any(self.has_unsafe_pad(s.base) for s in base.srcs)
      self.unsafe_cache[base] = r
    return r

  def build(self, lb: LazyBuffer, st: ShapeTracker, root: bool = False) -> UOp:
    """The AST computing `lb` at every point of the iteration space that `st` maps onto lb's shape."""
    base, st = lb.base, lb.st + st
    if (key := (base, st, root)) not in self.memo: self.memo[key] = self._build(base, st, root)
    return self.memo[key]

  def _build(self, base: LazyBuffer, st: ShapeTracker, root: bool) -> UOp:
    if not root and (base.op is Ops.BUFFER or base in self.realizes):
      if self.inline.get(base) != st: return self.load(base, st)
      if (key := (base, st, True)) not in self.memo: self.memo[key] = self._build(base, st, True)
      return self.memo[key]
    if base.op is Ops.CONST:
      if not root and _lifted(base): return self.load(base, st)
      return UOp(Ops.CONST, base.dtype, (UOp(Ops.VIEW, arg=st),), base.arg)
    if base.op is Ops.REDUCE_AXIS:
      if not root and (not st.contiguous or st.shape != base.shape or (self.reduce is not None and self.reduce is not base)):
        raise _Refuse(base)
      self.reduce = base
      src = base.srcs[0]
      return self.bounded(UOp(Ops.REDUCE_AXIS, base.dtype, (self.build(src, ShapeTracker.from_shape(src.shape)),), base.arg), base)
    if base.op in (Ops.CONTIGUOUS, Ops.ASSIGN) and root:
      return self.build(base.srcs[-1], st)
    if base.op is Ops.GATHER:
      if any(v.mask is not None for v in st.views) and not root: raise _Refuse(base)
      return self.bounded(self.gather(base, st), base)
    if base.op in GroupOp.Elementwise:
      if any(v.mask is not None for v in st.views) and self.has_unsafe_pad(base) and not root: raise _Refuse(base)
      return self.bounded(UOp(base.op, base.dtype, tuple(self.build(s, st) for s in base.srcs), base.arg), base)
    raise RuntimeError(f"cannot build a kernel from {base.op}")

  def gather(self, base: LazyBuffer, st: ShapeTracker) -> UOp:
    """A load of the table (a realized buffer seen through one view) at the loaded index: the table's view with the
    indexed axis's stride taken out, plus the index (wrapped and clamped) times that stride."""
    table, idx = base.srcs[:2]
    axis, v = base.arg, table.st.views[-1]
    mask = tuple((0, s) if d == axis else m for d, (m, s) in enumerate(zip(v.mask, base.shape))) if v.mask is not None else None
    rest = ShapeTracker((View.create(base.shape, tuple(0 if d == axis else x for d, x in enumerate(v.strides)), v.offset, mask),)) + st
    ld = self.load(table.base, rest)
    if ld.op is not Ops.LOAD: return ld
    pos = safe_index(self.build(idx, st), table.shape[axis])[0]
    return UOp(Ops.LOAD, ld.dtype, ld.src + (pos * sint_to_uop(v.strides[axis]),))

  def bounded(self, u: UOp, base: LazyBuffer) -> UOp:
    """u, where the kernel stays within KERNEL_OPS_MAX nodes; past it, its biggest source is computed first, in a
    kernel of its own (a graph that reads values through ever more views, like a scan's gradient, grows exponentially)."""
    n = 1 + sum(self.size.get(s, 3) for s in set(u.src))  # a load or a constant: itself, its view (and its buffer)
    if n > KERNEL_OPS_MAX.value and (n := len(u.toposort())) > KERNEL_OPS_MAX.value:
      parts = [s for s in set(u.src) if s in self.owner]
      if parts: raise _Refuse(self.owner[max(parts, key=lambda s: len(s.toposort()))])
    self.size[u], self.owner[u] = n, base
    return u

# a kernel of more AST nodes than this is split (see _KernelBuilder.bounded): lowering, optimizing and compiling cost
# grows faster than linearly with it (a 4600-node kernel took minutes), while real fused kernels stay in the hundreds
KERNEL_OPS_MAX = ContextVar("KERNEL_OPS_MAX", 1000)
# a value read by two kernels only through a refused fusion is stored once where it reads more buffers of its size than this
# (see _recompute_costs_more)
RECOMPUTE_LOADS_MAX = 2

def _indexed_ast(out: LazyBuffer, kb: _KernelBuilder) -> UOp:
  """The kernel of an op that writes at loaded positions. INDEX_CHECK: over the index's shape, a store of [size + 1,
  index] into the error buffer where the index is out of range. SCATTER: SCATTER(buf, dst view, src, index) with arg
  (axis, size, stride, op), lowered by codegen/indexed.py: dst's view over the index's shape with the axis's stride taken out."""
  idx = out.srcs[1]
  it = ShapeTracker.from_shape(idx.shape)
  g = UOp(Ops.DEFINE_GLOBAL, out.dtype.ptr(), arg=0)
  if out.op is Ops.INDEX_CHECK:
    i = kb.build(idx, it)
    bad = UOp(Ops.CMPNE, dtypes.bool, (safe_index(i, out.arg)[1], UOp.const(dtypes.bool, True)))
    def slot(k: int) -> UOp: return UOp(Ops.VIEW, arg=ShapeTracker((View.create(idx.shape, (0,) * len(idx.shape), k),)))
    vals = (UOp(Ops.CONST, dtypes.int32, (UOp(Ops.VIEW, arg=it),), out.arg + 1), i if i.dtype == dtypes.int32 else UOp(Ops.CAST, dtypes.int32, (i,)))
    return UOp(Ops.SINK, dtypes.void, tuple(UOp(Ops.STORE, dtypes.void, (g, slot(k), v, bad)) for k, v in enumerate(vals)))
  (axis, op), src = out.arg, out.srcs[2]
  kb.load(out.srcs[0].base, ShapeTracker.from_shape(out.shape))  # the target: the kernel runs after the kernel that fills it
  strides = View.create(out.shape).strides
  dst = ShapeTracker((View.create(idx.shape, tuple(0 if d == axis else x for d, x in enumerate(strides))),))
  loads = [kb.load(x.base, x.st) for x in (src, idx)]
  return UOp(Ops.SINK, dtypes.void, (UOp(Ops.SCATTER, dtypes.void, (g, UOp(Ops.VIEW, arg=dst), *loads), (axis, out.shape[axis], strides[axis], op)),))

def _never_valid(st: ShapeTracker) -> bool:
  """Whether every element of st is masked out (a view with an empty mask somewhere in the stack)."""
  return any(v.mask is not None and any(isinstance(b, int) and isinstance(e, int) and b >= e for b, e in v.mask) for v in st.views)

def _lifted(base: LazyBuffer) -> bool:
  """Whether a CONST base becomes a kernel input (a one-element buffer) instead of a literal in the kernel's code."""
  v = base.arg
  return base.dtype is dtypes.float32 and isinstance(v, float) and math.isfinite(v) and v not in (0.0, 1.0, -1.0)

def _fill_consts(sched: list[ScheduleItem]) -> list[ScheduleItem]:
  """Give the lifted constants among the kernels' inputs their values, written when their buffers are allocated (at
  run time: a compile-only schedule allocates nothing)."""
  for si in sched:
    for x in si.inputs:
      if x.op is CONST: _fill_const(x)
  return sched

def _fill_const(x: LazyBuffer) -> None:
  if x.buffer.fill is None: x.buffer.fill = struct.pack("<f", x.arg)

def _reduce_below(lb: LazyBuffer, realizes: set[LazyBuffer], seen: set[LazyBuffer], root: LazyBuffer) -> LazyBuffer | None:
  """The reduce a kernel rooted at `root` would contain, following unrealized elementwise sources from lb."""
  base = lb.base
  if base in seen or (base is not root and (base.op is Ops.BUFFER or base in realizes)): return None
  seen.add(base)
  if base.op is Ops.REDUCE_AXIS: return base
  if base.op in GroupOp.Elementwise or base.op in (Ops.CONTIGUOUS, Ops.ASSIGN):
    for s in base.srcs:
      if s.base.op is Ops.BUFFER or s.base in realizes: continue
      if (r := _reduce_below(s, realizes, seen, root)) is not None: return r
  return None

def _kernel_ast(out: LazyBuffer, realizes: set[LazyBuffer]) -> tuple[UOp, list[Buffer], list[LazyBuffer]]:
  kb = _KernelBuilder(out, realizes)
  if out.op in (Ops.SCATTER, Ops.INDEX_CHECK): return _indexed_ast(out, kb), kb.bufs, kb.inputs
  if out.op is Ops.ASSIGN and out.arg is not None: return _view_assign_ast(out, kb), kb.bufs, kb.inputs
  red = out if out.op is Ops.REDUCE_AXIS else _reduce_below(out.srcs[-1] if out.op in (Ops.CONTIGUOUS, Ops.ASSIGN) else out, realizes, set(), out)
  # with a reduce inside, the kernel iterates over the reduce's output shape (its reduced dims are size 1)
  iter_shape = red.shape if red is not None else out.shape
  # a reduce reached through a broadcast (softmax's sum) cannot share the output's iteration space: it is realized first
  if red is not None and red is not out and prod(red.shape) != prod(out.shape): raise _Refuse(red)
  st = ShapeTracker.from_shape(out.shape).reshape(iter_shape) if iter_shape != out.shape else ShapeTracker.from_shape(out.shape)
  value = kb.build(out, st, root=True)
  out_view = UOp(Ops.VIEW, arg=ShapeTracker.from_shape(iter_shape))
  # an assign whose value reads its target at other elements than the one it writes (x @ w, w.flip(0)) would overwrite
  # values still to be read: that value is computed into a buffer of its own first
  if out.op is Ops.ASSIGN and out.srcs[-1].base is not out.srcs[0].base and any(
      u.op is Ops.LOAD and u.src[0].arg == 0 and u.src[1].arg != out_view.arg for u in value.toposort()):
    raise _Refuse(out.srcs[-1].base)
  store = UOp(Ops.STORE, dtypes.void, (UOp(Ops.DEFINE_GLOBAL, out.dtype.ptr(), arg=0), out_view, value))
  return UOp(Ops.SINK, dtypes.void, (store,)), kb.bufs, kb.inputs

def _view_assign_ast(out: LazyBuffer, kb: _KernelBuilder) -> UOp:
  """An assign through a view (out.arg, a tracker over the target buffer): over the value's shape, a store at the
  view's positions. A reduce in the value is computed first; a value that reads the target elsewhere than where it
  writes is computed into a buffer of its own first (as for a whole assign)."""
  x = out.srcs[1]
  if (red := _reduce_below(x, kb.realizes, set(), out)) is not None: raise _Refuse(red)
  kb.load(out.srcs[0].base, ShapeTracker.from_shape(out.shape))  # the elements kept: it runs after the kernel that fills them
  value = kb.build(x, ShapeTracker.from_shape(x.shape))
  if x.base is not out.srcs[0].base and any(u.op is Ops.LOAD and u.src[0].arg == 0 and u.src[1].arg != out.arg for u in value.toposort()):
    raise _Refuse(x.base)
  g = UOp(Ops.DEFINE_GLOBAL, out.dtype.ptr(), arg=0)
  return UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (g, UOp(Ops.VIEW, arg=out.arg), value)),))

class _Ungroup(Exception):
  """A group of assigns that cannot be one kernel (a target read at another element than the one written)."""

def _group_ast(members: list[LazyBuffer], realizes: set[LazyBuffer]) -> tuple[UOp, list[Buffer], list[LazyBuffer]]:
  """One kernel storing every member's value into its target: a member read by another at its own element is its value
  (computed once), not a load of its buffer."""
  kb = _KernelBuilder(members[0], realizes)
  kb.bufs = [m.buffer for m in members]
  st = ShapeTracker.from_shape(members[0].shape)
  kb.inline = {m: st for m in members}
  values = [kb.build(m, st, root=True) for m in members]
  if any(u.op is Ops.LOAD and u.src[0].arg < len(members) and u.src[1].arg != st for v in values for u in v.toposort()): raise _Ungroup
  out_view = UOp(Ops.VIEW, arg=st)
  stores = tuple(UOp(Ops.STORE, dtypes.void, (UOp(Ops.DEFINE_GLOBAL, m.dtype.ptr(), arg=j), out_view, v))
                 for j, (m, v) in enumerate(zip(members, values)))
  return UOp(Ops.SINK, dtypes.void, stores), kb.bufs, [x for x in kb.inputs if x not in kb.inline]

def _assign_groups(graph: list[LazyBuffer], realizes: set[LazyBuffer], touched: set[LazyBuffer] | None = None) -> list[list[LazyBuffer]]:
  """The assigns (to distinct buffers, of one shape and device, without a reduce) whose kernels read one another's
  results, joined into groups of two or more (graph order), each to become one kernel (see _group_ast). `touched`
  collects the unrealized bases the searches passed through: the answer depends on whether those are in `realizes`
  only, so realizing any other base leaves it as it is."""
  touched = set() if touched is None else touched
  def no_reduce(b: LazyBuffer) -> bool:
    r = _reduce_below(b.srcs[-1], realizes, seen := set(), b)
    touched.update(seen)
    return r is None
  cands = [b for b in graph if b.op is ASSIGN and b.arg is None and b in realizes and b.srcs[-1].base is not b.srcs[0].base and
           no_reduce(b) and b.srcs[-1].base.op is not Ops.GATHER]
  if len(cands) < 2: return []
  if len({id(b.buffer) for b in cands}) != len(cands): return []  # two assigns into one buffer: kept apart
  parent = {b: b for b in cands}
  def find(b: LazyBuffer) -> LazyBuffer:
    while parent[b] is not b: b = parent[b]
    return b
  for b in cands:
    seen: set[LazyBuffer] = set()
    todo = [b.srcs[-1].base]
    while todo:
      if (x := todo.pop()) in seen: continue
      seen.add(x)
      if x in parent:
        if x.shape == b.shape and x.device == b.device: parent[find(x)] = find(b)
      elif x.op is not BUFFER and x not in realizes and x.op in GroupOp.Elementwise: todo += [s.base for s in x.srcs]
    touched.update(seen)
  groups: dict[LazyBuffer, list[LazyBuffer]] = {}
  for b in cands: groups.setdefault(find(b), []).append(b)
  return [g for g in groups.values() if len(g) > 1]

def _graph(outs: list[LazyBuffer]) -> list[LazyBuffer]:
  """Unrealized bases reachable from outs, sources before users."""
  order: list[LazyBuffer] = []
  seen: set[LazyBuffer] = set()
  stack: list[tuple[LazyBuffer, bool]] = [(o.base, False) for o in reversed(outs)]
  while stack:
    b, done = stack.pop()
    if done:
      order.append(b)
      continue
    if b in seen or b.op is BUFFER: continue
    seen.add(b)
    stack.append((b, True))
    for s in b.srcs:
      sb = s._base if s._base is not None else s  # s.base, without the property call (this walk runs on every realize)
      if sb not in seen and sb.op is not BUFFER: stack.append((sb, False))
  return order

# *** the schedule cache: a lazy graph of the same structure as one seen before (the same ops, args, dtypes and views,
# reading realized buffers in the same pattern) gets the same kernels; only the buffers differ. This keeps the cost of
# a repeated small operation (a training step's Python, a tiny op in a loop) to one walk over the graph. ***

def _pick(idx: tuple[int, ...]) -> Callable[[tuple], tuple]:
  """A function taking these positions of a tuple, as a tuple (operator.itemgetter: one C call)."""
  return operator.itemgetter(*idx) if len(idx) > 1 else operator.itemgetter(slice(idx[0], idx[0] + 1) if idx else slice(0, 0))

class _Entry(list):
  """A schedule cache entry: per item its AST and the positions of its buffers, outputs and inputs among the graph's
  bases followed by its leaves (as functions that take them from a tuple of those), the positions of the lifted
  constants it reads, and `memo`, what running the schedule works out once for every graph of this structure (see
  Schedule)."""
  def __init__(self, items: list[tuple[UOp, tuple[int, ...], tuple[int, ...], tuple[int, ...]]], consts: tuple[int, ...]):
    super().__init__((ast, _pick(b), _pick(o), _pick(i)) for ast, b, o, i in items)
    self.consts = consts
    self.memo: dict[Any, Any] = {}

class Schedule(list):
  """The items of a schedule that the cache can give again, and its `memo`: a dict shared by every schedule of this
  structure, where the code that runs it keeps what depends on the items' positions only (their runners, which buffer
  is free after which item), worked out on the first run and reused by the next."""
  memo: dict[Any, Any]
  @staticmethod
  def of(items: list[ScheduleItem], memo: dict[Any, Any]) -> Schedule:
    # (list's own constructor, not an __init__ in Python: a tiny cached op schedules in ~8 us)
    (s := Schedule(items)).memo = memo
    return s

class CachedSchedule:
  """A schedule the cache gave again, before its items are made: the cache entry and the graph's bases then leaves,
  which each item takes its buffers, outputs and inputs from by position. run_schedule runs one whose structure ran
  before straight from its memo (an op repeated in an eager loop makes no items); `items()` makes them, once: the
  items then hold the graph alone (run_schedule frees a buffer that nothing but the items references, engine/memory.py)."""
  __slots__ = ("entry", "lbs", "bufs")
  def __init__(self, entry: _Entry, lbs: tuple[LazyBuffer, ...]):
    self.entry, self.lbs, self.bufs = entry, lbs, tuple([x.buffer for x in lbs])
  def items(self) -> Schedule:
    lbs, bufs = self.lbs, self.bufs
    self.lbs = self.bufs = ()
    return Schedule.of([ScheduleItem(ast, b(bufs), o(lbs), i(lbs)) for ast, b, o, i in self.entry], self.entry.memo)

_sched_cache: dict[tuple, _Entry | _OwnValues] = {}

def _structure(outs: list[LazyBuffer]) -> tuple[tuple, list[LazyBuffer], list[LazyBuffer], dict[UOp, int], bool]:
  """A hashable description of the graph, the unrealized bases (graph order), the realized ones it reads, the
  values of the Variables its ShapeTrackers use (they are not part of the description: the kernels take them) and
  whether the graph has assigns (what the steps after it may skip)."""
  if len(outs) == 1 and (o := outs[0])._base is None and o.op is not BUFFER and (one := _one_op_structure(o)) is not None: return one
  graph = _graph(outs)
  pos = dict(zip(graph, range(len(graph))))
  leaves: dict[LazyBuffer, int] = {}
  desc: list[tuple] = []
  bound: list[dict[UOp, int]] = []
  assigns = False
  for b in graph:
    if b.var_vals: bound.append(b.var_vals)
    # each source by its position (or leaf number) and its view, side by side in one flat tuple (fewer tuples to make,
    # hash and compare). A base's own view is its whole shape, which the description holds: left out (None); a base of
    # the graph brings its Variables itself. A view by its tracker's views: Views are made through a cache, so equal
    # keys mostly compare by identity
    srcs: list = []
    for s in b.srcs:
      if (sb := s._base) is None:
        if (i := pos.get(s)) is None:
          if s.var_vals: bound.append(s.var_vals)
          i = -1 - leaves.setdefault(s, len(leaves))
        srcs.append(i)
        srcs.append(None)
      else:
        if s.var_vals: bound.append(s.var_vals)
        srcs.append(pos[sb] if sb in pos else -1 - leaves.setdefault(sb, len(leaves)))
        srcs.append(s.st.views)
    # a lifted constant's value is not part of the structure (it is an input), unless it is an output
    if (op := b.op) is ASSIGN: assigns = True
    arg = None if op is CONST and _lifted(b) and all((o._base or o) is not b for o in outs) else b.arg
    desc.append((op, arg, b.dtype, b.shape, b.device, b.forced_realize, tuple(srcs)))
  leaf_list = list(leaves)
  # two realized bases can share one buffer (a tensor and what was assigned to it): kernels then read it once
  first: dict[int, int] = {}
  leaf_desc = tuple([(lb.dtype, lb.device, lb.shape, lb.buffer.size, first.setdefault(id(lb.buffer), j)) for j, lb in enumerate(leaf_list)])
  out_desc = tuple([(0, pos[ob]) if (ob := o._base or o) in pos else (2, ob.dtype) for o in outs])
  return (tuple(desc), leaf_desc, out_desc), graph, leaf_list, merge_var_vals(*bound) if bound else {}, assigns

def _one_op_structure(o: LazyBuffer) -> tuple[tuple, list[LazyBuffer], list[LazyBuffer], dict[UOp, int], bool] | None:
  """_structure of one op whose sources are all realized, without Variables (an eager loop's op: `(a + b).realize()`),
  or None for any other graph. The same description, built without the walk's dicts (test_schedule_cache.py checks
  they agree): the graph is the op, each source a leaf, numbered by first appearance."""
  if o.var_vals: return None
  leaves: list[LazyBuffer] = []
  bufs: list[Buffer] = []  # (the leaves' buffers: two leaves sharing one are described by the first, as in _structure)
  leaf_desc: list[tuple] = []
  srcs: list = []
  for s in o.srcs:
    if (sb := s._base or s).op is not BUFFER or s.var_vals: return None
    if sb in leaves: j = leaves.index(sb)
    else:
      j = len(leaves)
      leaves.append(sb)
      buf = sb.buffer
      leaf_desc.append((sb.dtype, sb.device, sb.shape, buf.size, bufs.index(buf) if buf in bufs else j))
      bufs.append(buf)
    srcs += (-1 - j, None if s is sb else s.st.views)
  op = o.op
  return (((op, o.arg, o.dtype, o.shape, o.device, o.forced_realize, tuple(srcs)),), tuple(leaf_desc), ((0, 0),)), [o], leaves, {}, op is ASSIGN

def create_schedule(outs: list[LazyBuffer]) -> list[ScheduleItem]:
  """The kernels (and copies) that realize `outs`, in an order that respects their dependencies."""
  return create_schedule_with_vars(outs)[0]

def create_schedule_with_vars(outs: list[LazyBuffer]) -> tuple[list[ScheduleItem], dict[UOp, int]]:
  """The schedule for `outs` and the values of the Variables its kernels use (what run_schedule needs)."""
  return _schedule_with_vars(outs, True)  # type: ignore[return-value]

def schedule_to_run(outs: list[LazyBuffer]) -> tuple[list[ScheduleItem] | CachedSchedule, dict[UOp, int]]:
  """What create_schedule_with_vars gives, for run_schedule only: a schedule from the cache not made into items yet."""
  return _schedule_with_vars(outs, True, True)

def _schedule_with_vars(outs: list[LazyBuffer], check_readers: bool,
                        deferred: bool = False) -> tuple[list[ScheduleItem] | CachedSchedule, dict[UOp, int]]:
  key, graph, leaves, var_vals, assigns = _structure(outs)
  if check_readers and (writes := pending_writes(leaves, outs, graph)): return _schedule_with_vars(outs + writes, True, deferred)
  # (one pass of _overwritten_readers finds every value to realize early: the graph with them needs no second look)
  if assigns and check_readers and (early := _overwritten_readers(graph, outs)):
    inside = set(graph)
    if not all(e in inside for e in early): return _schedule_with_vars(outs + early, False, deferred)
    # values of this graph only (the common case): the graph and its description stay; only the outputs grow
    outs, key = outs + early, (key[0], key[1], key[2] + tuple((0, graph.index(e)) for e in early))
  cached = None
  if not (GRAPH.value or DEBUG.value >= 5) and (cached := _sched_cache.get(key)) is None: cached = _from_disk(key, len(graph) + len(leaves))
  if type(cached) is _OwnValues:
    for i in cached: _own_value(graph[i])
    return _schedule_with_vars(outs, False, deferred)
  if cached is not None:
    run = CachedSchedule(cached, (*graph, *leaves))
    for j in cached.consts: _fill_const(run.lbs[j])
    return run if deferred else run.items(), var_vals
  try: sched = _fill_consts(_create_schedule(outs))
  except _AssignCycle as c:
    if not (fixed := [a for a in c.assigns if _own_value(a)]):  # (each one given its own value: what a hit replays)
      raise RuntimeError("cycle in the schedule: kernels wait on each other (an assign reads its own target through another view?)") from None
    own = _remember(key, _OwnValues(graph.index(a) for a in fixed))  # the next graph of this structure is fixed at once
    schedulestore.save(key, schedulestore.Stored(own=own))
    return _schedule_with_vars(outs, False)
  if GRAPH.value or DEBUG.value >= 5: return sched, var_vals
  refs: dict[int, int] = {}  # id of a lazy buffer or its buffer -> its position among the graph's bases, then its leaves
  for j, x in enumerate(leaves): refs[id(x)] = refs[id(x.buffer)] = len(graph) + j
  for i, x in enumerate(graph): refs[id(x)] = refs[id(x.buffer)] = i
  try:
    stored = schedulestore.Stored([(si.ast, tuple(refs[id(b)] for b in si.bufs), tuple(refs[id(x)] for x in si.outputs),
                                    tuple(refs[id(x)] for x in si.inputs)) for si in sched],
                                  tuple(dict.fromkeys(refs[id(x)] for si in sched for x in si.inputs if x.op is CONST)))
  except KeyError: return sched, var_vals  # a buffer from outside the graph: not cacheable
  _remember(key, entry := _Entry(stored.items or [], stored.consts))
  schedulestore.save(key, stored)
  return Schedule.of(sched, entry.memo), var_vals

def _remember(key: tuple, entry: _Entry | _OwnValues) -> _Entry | _OwnValues:
  """Keep an entry in the in-memory cache (its oldest entry goes past 4096)."""
  if len(_sched_cache) >= 4096: _sched_cache.pop(next(iter(_sched_cache)))
  _sched_cache[key] = entry
  return entry

def _from_disk(key: tuple, n_refs: int) -> _Entry | _OwnValues | None:
  """The entry for a graph of this structure that an earlier process scheduled (engine/schedulestore.py), or None."""
  if (got := schedulestore.load(key, n_refs)) is None: return None
  return _remember(key, _OwnValues(got.own) if got.own is not None else _Entry(got.items or [], got.consts))

def _own_value(a: LazyBuffer) -> bool:
  """Give assign `a` a kernel of its own that computes its value into a new buffer; `a` becomes a copy of that buffer.
  The value's reads of other assigns' old targets then happen in that kernel, before any of them is written. False
  where the value already is such a buffer (it cannot help)."""
  v = a.srcs[1]
  if v._base is None and v.op is Ops.CONTIGUOUS: return False
  a.srcs = (a.srcs[0], LazyBuffer.metaop(Ops.CONTIGUOUS, v.shape, v.dtype, v.device, srcs=(v,)))
  return True

def _overwritten_readers(graph: list[LazyBuffer], outs: list[LazyBuffer]) -> list[LazyBuffer]:
  """What must be realized now because an assign of this graph overwrites a buffer it was written against (a loss
  computed before `opt.step()` and read after it): the lazy ops outside the graph that read the old value, and the
  ops of the graph that read it, would fuse away, and have readers outside. Ops that read the assign's result come
  after it anyway, and what reads a value that this schedule keeps as a buffer (an output, a forced realize, one of
  these) reads that buffer later: their readers are not followed. One pass finds them all: the schedule of outs plus
  these finds nothing more (see test_schedule_cache.py)."""
  assigns = [b for b in graph if b.op is ASSIGN]
  if not assigns: return []
  inside = set(graph)
  after = set(assigns)  # graph ops that depend on an assign (the graph lists sources first)
  for b in graph:
    if b in after: continue
    for s in b.srcs:  # (a loop, not any() over a generator: this runs over the whole graph of every optimizer step)
      if (s._base or s) in after:
        after.add(b)
        break
  kept = {o.base for o in outs}  # values that this schedule writes into buffers of their own
  early: dict[LazyBuffer, None] = {}
  seen: set[LazyBuffer] = set()
  todo = [r for a in assigns for r in pending_readers(a.buffer)]
  while todo:
    if (r := todo.pop()) in seen or r in after: continue
    seen.add(r)
    if r not in inside:  # (only a direct reader of an overwritten buffer gets here)
      if not any(x in after for x in _graph([r])): early[r] = None
    elif r not in kept and not r.forced_realize and r.buffer.readers:
      # (pending_readers, without the lists it makes: this runs for most of a training step's forward and backward)
      readers = []
      for ref in r.buffer.readers:
        if (x := ref()) is None or x.op is BUFFER: continue
        if x not in inside:
          early[r] = None  # r's value must outlive this schedule as a buffer
          break
        readers.append(x)
      else: todo += readers
  return [r for r in early if r.op is not BUFFER]

def _recompute_costs_more(b: LazyBuffer, children: dict[LazyBuffer, list[LazyBuffer]], realizes: set[LazyBuffer]) -> bool:
  """Whether b, read by two kernels, costs more computed in each than stored once (its loads, a store and a load in
  each): where a reduce reads each of its elements several times (a matmul's operand: GPT's softmax and its gradient,
  exp and all recomputed in every step of the attention matmuls, 3-7x their time), or where it reads more than
  RECOMPUTE_LOADS_MAX buffers of its own size. A LayerNorm gradient's g * w feeding two row sums stays inline."""
  if not isinstance(n := prod(b.shape), int): return False  # (a symbolic size: left as it was)
  seen, todo = set(), list(children[b])
  while todo:  # downstream, through what fuses with b, to the reduces
    if (c := todo.pop()) in seen: continue
    seen.add(c)
    if c.op is Ops.REDUCE_AXIS and isinstance(m := prod(c.srcs[0].shape), int) and m > n: return True
    if c not in realizes: todo += children[c]
  seen, todo, full = set(), list(b.srcs), set()
  while todo:  # upstream, to the buffers it loads
    if (x := todo.pop().base) in seen: continue
    seen.add(x)
    if x in realizes or x.op is BUFFER:
      if isinstance(m := prod(x.shape), int) and m >= n: full.add(x)
    else: todo += x.srcs
  return len(full) > RECOMPUTE_LOADS_MAX

def _computed_once(graph: list[LazyBuffer], children: dict[LazyBuffer, list[LazyBuffer]], realizes: set[LazyBuffer],
                   pays: Callable[[LazyBuffer], bool] = lambda b: True) -> dict[LazyBuffer, set[LazyBuffer]]:
  """A value that flows into two kernels is computed once, in a kernel of its own (where `pays` says so): adds those to
  realizes; returns each node's roots, the kernels (realized nodes) its value flows into."""
  while True:
    roots: dict[LazyBuffer, set[LazyBuffer]] = {}
    for b in reversed(graph):
      roots[b] = {b} if b in realizes else set().union(*(roots[c] for c in children[b])) if children[b] else {b}
    multi = {b for b in graph if b not in realizes and b.op is not Ops.CONST and len(roots[b]) > 1 and pays(b)}
    if not multi: return roots
    # realize only the nodes nearest the consumers; what feeds them may then fuse into a single kernel again
    realizes |= {b for b in multi if not any(c in multi for c in children[b])}

def _create_schedule(outs: list[LazyBuffer], grouped: bool = True) -> list[ScheduleItem]:
  graph = _graph(outs)
  realizes: set[LazyBuffer] = {o.base for o in outs if o.base.op is not Ops.BUFFER}
  realizes |= {b for b in graph if b.forced_realize}
  # what indexed ops read at loaded positions is a buffer of its own
  realizes |= {s.base for b in graph if b.op in (Ops.GATHER, Ops.SCATTER) for s in (b.srcs[:1] if b.op is Ops.GATHER else b.srcs[1:3])
               if s.base.op is not Ops.BUFFER}
  children: dict[LazyBuffer, list[LazyBuffer]] = {b: [] for b in graph}
  for b in graph:
    for s in b.srcs:
      if s.base in children: children[s.base].append(b)
  roots = _computed_once(graph, children, realizes)
  # build kernels; a fusion that proves invalid makes its base a kernel of its own, then we try again. The kernels
  # built before stay: what is not realized has one consumer kernel (above), so the refused base was part of the
  # kernel being built only (rebuilding them all on each refusal made a train step's first schedule quadratic)
  kernels: dict[LazyBuffer, tuple] = {}
  built_groups: dict | None = None
  groups: dict[LazyBuffer, list[LazyBuffer]] | None = None
  touched: set[LazyBuffer] = set()  # what the grouping looked at: a refused base elsewhere leaves the groups as they are
  while True:
    try:
      # a group's kernel is keyed by its first member; the others are its outputs too. A new grouping builds them all again
      if groups is None:
        touched.clear()
        groups = {g[0]: g for g in _assign_groups(graph, realizes, touched)} if grouped else {}
      if groups != built_groups: kernels, built_groups = {}, groups
      members = {m for g in groups.values() for m in g[1:]}
      for b in graph:
        if b in realizes and b not in kernels and b not in members and b.op not in (Ops.COPY, Ops.EMPTY):
          kernels[b] = _group_ast(groups[b], realizes) if b in groups else _kernel_ast(b, realizes)
    except _Refuse as r:
      # the refused base is a kernel of its own: a value that reached the kernel both through it and another way now
      # flows into two kernels. Computed once where that pays (_recompute_costs_more: GPT's softmax gradient, into the q
      # and k gradients that one concat kernel took, 6-10 loads recomputed inside two matmuls); the kernels built with
      # such a value inline are built again
      prev, old_roots = set(realizes), roots
      realizes.add(r.base)
      roots = _computed_once(graph, children, realizes, lambda b: _recompute_costs_more(b, children, realizes))
      new = realizes - prev
      for x in {x for n in new - {r.base} for x in old_roots[n]}:
        kernels.pop(next((g[0] for g in (groups or {}).values() if x in g), x), None)
      if not touched.isdisjoint(new): groups = None
      continue
    except _Ungroup: return _create_schedule(outs, False)
    break
  items: dict[LazyBuffer, ScheduleItem] = {}
  for b in graph:
    if b not in realizes: continue
    if b.op is Ops.COPY: items[b] = ScheduleItem(UOp(Ops.COPY, arg=b.srcs[0].device), (b.buffer, b.srcs[0].base.buffer), (b,), (b.srcs[0].base,))
    elif b.op is Ops.EMPTY: items[b] = ScheduleItem(UOp(Ops.EMPTY), (b.buffer,), (b,))
    elif b in kernels: items[b] = ScheduleItem(kernels[b][0], tuple(kernels[b][1]), tuple(groups.get(b, (b,))), tuple(kernels[b][2]))
  item_of = {x: b for b, it in items.items() for x in it.outputs}
  # dependencies: a kernel runs after the kernels that compute what it reads; an ASSIGN runs after every kernel
  # that reads the value it overwrites
  deps: dict[LazyBuffer, set[LazyBuffer]] = {b: {item_of[x] for x in it.inputs if x in item_of and item_of[x] is not b} for b, it in items.items()}
  for b, it in items.items():
    for a in it.outputs:
      if a.op is not Ops.ASSIGN: continue
      # every kernel reading the old value: through the target, or through any realized base sharing its buffer
      target = a.srcs[0].base
      old = {x for o, oit in items.items() for x in oit.inputs if x is target or (x.op is Ops.BUFFER and x.buffer is a.buffer)}
      deps[b] |= {o for o, oit in items.items() if o is not b and not old.isdisjoint(oit.inputs)}
  order: list[LazyBuffer] = []
  state: dict[LazyBuffer, int] = {}
  path: list[LazyBuffer] = []
  def visit(b: LazyBuffer) -> None:
    if state.get(b) == 2: return
    if state.get(b) == 1:
      if DEBUG >= 6:
        for x, d in deps.items(): print(id(x) % 10000, x.op, [(id(y) % 10000, y.op) for y in d])
      raise _AssignCycle([x for x in path[path.index(b):] if x.op is Ops.ASSIGN])
    state[b] = 1
    path.append(b)
    for d in sorted(deps[b], key=graph.index): visit(d)
    path.pop()
    state[b] = 2
    order.append(b)
  try:
    for b in graph:
      if b in items: visit(b)
  except _AssignCycle:
    if not groups: raise
    visit = None  # type: ignore[assignment]
    return _create_schedule(outs, False)  # a group's kernel would wait on itself: its assigns stay apart
  # visit refers to itself through its closure: without this the cycle would keep the whole graph (and the buffers of
  # every intermediate) alive until the garbage collector runs
  visit = None  # type: ignore[assignment]
  if GRAPH and graph: _save_graph(graph, realizes)
  if DEBUG >= 5: print(f"scheduled {len(order)} items from {len(graph)} lazy buffers")
  return [items[b] for b in order]

def _save_graph(graph: list[LazyBuffer], realizes: set[LazyBuffer]) -> None:
  from tinycore.engine.graph import save_lazy_graph
  save_lazy_graph(graph, realizes)

def mark_realized(items: list[ScheduleItem]) -> None:
  """After running: every scheduled output becomes a plain buffer and drops its sources (freeing the graph)."""
  for it in items: mark_outputs(it.outputs)

def mark_outputs(outputs: tuple[LazyBuffer, ...]) -> None:
  """After running an item: its outputs become plain buffers and drop their sources."""
  for lb in outputs: lb.op, lb.srcs, lb.arg = BUFFER, (), None

__all__: list[Any] = ["ScheduleItem", "Schedule", "CachedSchedule", "create_schedule", "create_schedule_with_vars", "schedule_to_run",
                      "mark_realized"]
