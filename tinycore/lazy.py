"""LazyBuffer: a node of the lazy graph. Either an op with sources (unrealized), a realized Buffer, or a view
(a ShapeTracker) of another LazyBuffer's base. Movement ops make views; nothing is computed until realize."""
from __future__ import annotations
import functools, math, weakref
from typing import Any
from tinycore.dtype import DType, dtypes
from tinycore.errors import UnsupportedError
from tinycore.device import Buffer
from tinycore.helpers import ContextVar, all_int, ceildiv, prod
from tinycore.index_errors import error_buffer
from tinycore.ops import Ops, GroupOp
from tinycore.shape import ShapeTracker
from tinycore.uop.uop import UOp, sint

def merge_var_vals(*ds: dict[UOp, int]) -> dict[UOp, int]:
  """The union of several Variable bindings; one Variable bound to two values is an error."""
  out: dict[UOp, int] = {}
  for d in ds:
    for v, x in d.items():
      if out.setdefault(v, x) != x: raise ValueError(f"Variable {v.expr} is bound to both {out[v]} and {x} in one computation")
  return out

def _srcs_vals(lbs: tuple[LazyBuffer, ...]) -> dict[UOp, int]:
  for lb in lbs:  # (no symbolic source, the common case: a loop that finds none, not a list built to be empty)
    if lb.var_vals: break
  else: return {}
  ds = [lb.var_vals for lb in lbs if lb.var_vals]
  return ds[0] if len(ds) == 1 else merge_var_vals(*ds)

def _add_reader(buf: Buffer, ref: weakref.ref) -> None:
  """Add a reader where LazyBuffer's inline append does not: a buffer's first reader, or a list at a pruning point (a
  power of two from 32 on), where the readers that are gone or done are dropped first, so a buffer read on every step
  stays small."""
  if buf.readers is None: buf.readers = [ref]
  else: buf.readers = [r for r in buf.readers if (x := r()) is not None and x.op is not BUFFER] + [ref]

def pending_readers(buf: Buffer) -> list[LazyBuffer]:
  """The unrealized lazy ops that read buf (directly, or through a view), alive now."""
  if not buf.readers: return []
  live = [(r, x) for r in buf.readers if (x := r()) is not None and x.op is not BUFFER]
  buf.readers = [r for r, _ in live]
  return [x for _, x in live]

# the latest write through a view into each buffer (LazyBuffer.assign), until it is made: a later write into the buffer
# comes after it, and a schedule that reads the buffer makes it first (pending_writes): the tensor that holds the
# buffer sees it, though its LazyBuffer is the buffer's, not the write's
_WRITES: weakref.WeakKeyDictionary[Buffer, LazyBuffer] = weakref.WeakKeyDictionary()

def pending_writes(leaves: list[LazyBuffer], outs: list[LazyBuffer], graph: list[LazyBuffer]) -> list[LazyBuffer]:
  """The writes through views not made yet into the buffers that a schedule of outs (graph, leaves) reads or returns."""
  if not _WRITES.data: return []  # (its dict: the WeakKeyDictionary's __len__ is a Python call; a dead entry only looks further)
  inside = set(graph)
  return list(dict.fromkeys(w for lb in leaves + [o.base for o in outs] if lb.op is BUFFER and (w := _WRITES.get(lb.buffer)) is not None
                            and w.op is ASSIGN and w not in inside))

# the enum members that the hot paths compare with, as module globals: `Ops.X` is a lookup through the enum's
# metaclass (~0.1 us each, several per op made and per realize)
BUFFER, CONST, ASSIGN, WHERE = Ops.BUFFER, Ops.CONST, Ops.ASSIGN, Ops.WHERE
# (frozensets: Ops hashes by identity in C, while `==` on an Ops goes through a Python-level slot lookup, because Ops
# defines __lt__: a miss in a tuple of six cost ~3 us, a third of making a LazyBuffer)
# the ops whose result is always a buffer of its own
_FORCED = frozenset((Ops.CONTIGUOUS, Ops.ASSIGN, Ops.COPY, Ops.EMPTY, Ops.SCATTER, Ops.INDEX_CHECK))
_IN_PLACE = frozenset((Ops.ASSIGN, Ops.SCATTER, Ops.INDEX_CHECK))  # the ops that write into the buffer of their first source
HOLDS_BUFFER = _IN_PLACE | {BUFFER}  # the ops whose result is a buffer tensors share (a realized one, or a write pending into one)
# the contiguous tracker of a shape, shared (trackers are immutable): equal keys of the schedule cache then compare by identity
_from_shape = functools.cache(ShapeTracker.from_shape)
@functools.lru_cache(maxsize=4096)
def _const_st(shape: tuple[sint, ...]) -> ShapeTracker: return _from_shape(()).reshape((1,) * len(shape)).expand(shape)
_COMPARISON = frozenset(GroupOp.Comparison)

# a float SUM over more elements than this is computed in stages (see LazyBuffer.reduce); 0 turns staging off
REDUCE_SPLIT = ContextVar("REDUCE_SPLIT", 16384)

@functools.lru_cache(maxsize=1024)
def _chunk(s: int, cap: int) -> tuple[int, int]:
  """(m, k): dim s cut into m chunks of k <= cap elements, m*k >= s; a divisor where there is one up to 16x the fewest
  chunks (chunks of at least 256), else padding. A padded dim is a second view over the first (the pad's mask cannot
  split into the chunks), which the code generator cannot optimize: GPT-2's vocabulary, 50257 = 29 x 1733, padded to
  4 x 12565 made the tied embedding's matmul gradient a scalar loop 60x slower than 29 chunks of 1733."""
  m0 = ceildiv(s, cap)
  m = next((m for m in range(m0, min(16 * m0, max(m0, s // 256)) + 1) if s % m == 0), m0)
  return m, ceildiv(s, m)

class LazyBuffer:
  # the values bound to the Variables (symbolic sizes) this buffer's ShapeTracker uses; the scheduler collects them
  # from the graph. Only a symbolic buffer has an entry of its own: the class attribute is the shared empty default.
  var_vals: dict[UOp, int] = {}

  def __init__(self, device: str, st: ShapeTracker, dtype: DType, op: Ops | None = None, arg: Any = None,
               srcs: tuple[LazyBuffer, ...] = (), base: LazyBuffer | None = None, var_vals: dict[UOp, int] | None = None):
    v = st.views[-1]  # (the tracker's shape and size, without its two property calls: every op makes a LazyBuffer)
    self.device, self.st, self.dtype, self.shape, self.size, self._base = device, st, dtype, v.shape, v.size, base
    if var_vals:
      # only the values this tracker uses: a stale binding must not travel on with data that no longer depends on it
      need = st.vars() | (arg.vars() if isinstance(arg, (UOp, ShapeTracker)) else set())
      if (vals := {v: x for v, x in var_vals.items() if v in need}): self.var_vals = vals
    if base is None:
      # a base: it owns the buffer that its op writes (allocated when the schedule runs); a symbolic shape takes the
      # room of its largest value, and kernels write the part the bound values select
      self.op, self.arg, self.srcs = op, arg, srcs
      in_place = op in _IN_PLACE
      self.buffer: Buffer = srcs[0].base.buffer if in_place else Buffer(device, sz if isinstance(sz := self.size, int) else int(sz.vmax), dtype)
      self.forced_realize = op in _FORCED
      ref = None  # one weak reference, in the readers of every source
      for s in (srcs[1:] if in_place else srcs):
        if (sb := s._base or s).op is not CONST:
          ref = ref or weakref.ref(self)
          # (the common case inline: a list short of its next pruning, see _add_reader)
          if (rs := sb.buffer.readers) is not None and (len(rs) < 32 or len(rs) & (len(rs) - 1)): rs.append(ref)
          else: _add_reader(sb.buffer, ref)
    elif base.base is not base: raise RuntimeError("a view's base must be a base")

  def __repr__(self) -> str:
    what = f"op={self.op}" if self._base is None else f"view of {self.base.op}"
    return f"<LB {self.device} {self.shape} {self.dtype} {what} realized={self.realized is not None}>"
  @property
  def base(self) -> LazyBuffer: return self._base if self._base is not None else self
  @property
  def realized(self) -> Buffer | None:
    b = self.base
    return b.buffer if b.op is BUFFER else None
  def is_realized(self) -> bool: return self.base.op is BUFFER
  def buffer_view(self) -> Buffer:
    """The realized buffer of a base (a view must be made contiguous first)."""
    if self._base is not None or self.op is not Ops.BUFFER: raise RuntimeError("only a realized base has a buffer")
    return self.buffer

  # *** creation ***
  @staticmethod
  def metaop(op: Ops, shape: tuple[sint, ...], dtype: DType, device: str, arg: Any = None, srcs: tuple[LazyBuffer, ...] = (),
             var_vals: dict[UOp, int] | None = None) -> LazyBuffer:
    return LazyBuffer(device, _from_shape(shape), dtype, op, arg, srcs, var_vals=var_vals if var_vals is not None else _srcs_vals(srcs))
  @staticmethod
  def from_buffer(buf: Buffer, shape: tuple[sint, ...] | None = None) -> LazyBuffer:
    return LazyBuffer(buf.device, ShapeTracker.from_shape(shape if shape is not None else (buf.size,)), buf.dtype, Ops.BUFFER, None, ())._own(buf)
  def _own(self, buf: Buffer) -> LazyBuffer:
    self.buffer = buf
    return self
  def const(self, val: Any, shape: tuple[sint, ...] | None = None) -> LazyBuffer:
    return LazyBuffer.const_of(val, self.dtype, self.device, self.shape if shape is None else shape, self.var_vals)
  @staticmethod
  def const_of(val: Any, dtype: DType, device: str, shape: tuple[sint, ...], var_vals: dict[UOp, int] | None = None) -> LazyBuffer:
    """A constant broadcast to shape; val may be symbolic (an integer expression of Variables, like a batch size), its
    Variables' values in var_vals."""
    arg = val if isinstance(val, UOp) or (isinstance(val, float) and math.isnan(val)) else dtypes.as_const(val, dtype)
    c = LazyBuffer.metaop(Ops.CONST, (), dtype, device, arg=arg, var_vals=var_vals or {})
    # the view that c.reshape((1,) * len(shape)).expand(shape) makes, without the intermediate view (one per shape)
    return (LazyBuffer(device, _const_st(tuple(shape)), dtype, base=c, var_vals=c.var_vals) if shape else c).bind(var_vals or {})
  def is_unrealized_const(self) -> bool: return self.base.op is CONST
  def const_value(self) -> Any: return self.base.arg

  def contiguous(self) -> LazyBuffer:
    if self.st.contiguous and self._base is None:
      if self.op not in (Ops.BUFFER, Ops.CONST): self.forced_realize = True  # it must exist as a buffer of its own
      return self
    # a view that reads a realized buffer whole and in order (x.permute(p).permute(inverse of p)) is that buffer
    if self.st.contiguous and self.shape == self.base.shape and self.dtype == self.base.dtype and self.base.is_realized(): return self.base
    return LazyBuffer.metaop(Ops.CONTIGUOUS, self.shape, self.dtype, self.device, srcs=(self,))
  def copy_to_device(self, device: str) -> LazyBuffer:
    if device == self.device: return self
    if self.is_unrealized_const(): return LazyBuffer.const_of(self.const_value(), self.dtype, device, self.shape, _srcs_vals((self, self.base)))
    # the source must exist as a whole buffer of its own before it can be copied
    return LazyBuffer.metaop(Ops.COPY, self.shape, self.dtype, device, srcs=(self.contiguous(),))
  def assign(self, x: LazyBuffer) -> LazyBuffer:
    """Write x into this buffer, in place. A view of a buffer writes through: the kernel stores x at the view's
    positions in the base buffer (an ASSIGN of the base whose arg is the view, the elements it does not select kept),
    and the result is that view of the written buffer. A padded view has positions outside the buffer: refused."""
    if self.shape != x.shape: raise ValueError(f"assign shape mismatch: {self.shape} vs {x.shape}")
    if self.dtype != x.dtype: raise TypeError(f"assign dtype mismatch: {self.dtype} vs {x.dtype}")
    if self.device != x.device: raise ValueError(f"assign device mismatch: {self.device} vs {x.device}")
    base = self.base
    if self._base is None and not self.st.contiguous: raise ValueError("assign target must be a contiguous base buffer")
    if base.op is BUFFER and (w := _WRITES.get(base.buffer)) is not None and w.op is ASSIGN: base = w  # after the write pending
    if self._base is None:
      return LazyBuffer(self.device, ShapeTracker.from_shape(self.shape), self.dtype, Ops.ASSIGN, None, (base, x), var_vals=_srcs_vals((self, x)))
    if self.st.contiguous and self.size == base.size: return base.assign(x.reshape(base.shape))._view(self.st)  # the whole buffer
    if any(v.mask is not None for v in self.st.views):
      raise UnsupportedError(f"assign to a padded view {self.shape} of a buffer {base.shape} (a pad, or a step that does not divide "
                             "the size): not written through by tinycore; setitem writes such views (t[idx] = v)")
    out = LazyBuffer(self.device, ShapeTracker.from_shape(base.shape), self.dtype, Ops.ASSIGN, self.st, (base, x), var_vals=_srcs_vals((self, x)))
    _WRITES[out.buffer] = out
    return out._view(self.st)
  def rebind(self, var_vals: dict[UOp, int]) -> None:
    """Take new values for the Variables this realized buffer (and its view) already has: a replayed TinyJit wrote
    the results for those values into it."""
    for lb in (self, self.base):
      if lb.var_vals: lb.var_vals = {v: var_vals.get(v, x) for v, x in lb.var_vals.items()}
  def bind(self, var_vals: dict[UOp, int]) -> LazyBuffer:
    """This buffer with values for Variables of its shape (the bound Variables a Tensor method was given)."""
    if not var_vals or all(self.var_vals.get(v) == x for v, x in var_vals.items()): return self
    return LazyBuffer(self.device, self.st, self.dtype, base=self.base, var_vals=merge_var_vals(self.var_vals, var_vals))

  # *** compute ***
  def alu(self, op: Ops, *srcs: LazyBuffer) -> LazyBuffer:
    """An elementwise op; all inputs share this buffer's shape and device."""
    for s in srcs:
      if s.shape != self.shape: raise ValueError(f"{op} shape mismatch: {self.shape} vs {s.shape}")
      if s.device != self.device: raise ValueError(f"{op} device mismatch: {self.device} vs {s.device}")
    out_dtype = dtypes.bool if op in _COMPARISON else (srcs[-1].dtype if op is WHERE else self.dtype)
    return LazyBuffer.metaop(op, self.shape, out_dtype, self.device, srcs=(self,) + srcs)
  def cast(self, dtype: DType, bitcast: bool = False) -> LazyBuffer:
    if self.dtype == dtype: return self
    if bitcast and self.dtype.itemsize != dtype.itemsize: raise TypeError(f"bitcast needs equal sizes: {self.dtype} -> {dtype}")
    if self.is_unrealized_const() and not bitcast and all(v.mask is None for v in self.st.views):
      return LazyBuffer.const_of(self.const_value(), dtype, self.device, self.shape, _srcs_vals((self, self.base)))
    return LazyBuffer.metaop(Ops.BITCAST if bitcast else Ops.CAST, self.shape, dtype, self.device, srcs=(self,))
  def reduce(self, op: Ops, axis: tuple[int, ...]) -> LazyBuffer:
    """SUM (op=ADD) or MAX over `axis`, keeping those dims with size 1. A float SUM over more than REDUCE_SPLIT elements
    is computed in stages (partial sums, then their sum): see _staged_sum."""
    axis = tuple(sorted(a for a in set(axis) if self.shape[a] != 1))
    if not axis: return self
    new_shape = tuple(1 if i in axis else s for i, s in enumerate(self.shape))
    if self.size == 0: return self.const(0 if op is Ops.ADD else dtypes.min(self.dtype), new_shape)
    if op is Ops.ADD and dtypes.is_float(self.dtype) and (lim := REDUCE_SPLIT.value) > 1 and all_int(self.shape) and \
       prod(self.shape[a] for a in axis) > lim: return self._staged_sum(axis, lim).reshape(new_shape)
    return LazyBuffer.metaop(Ops.REDUCE_AXIS, new_shape, self.dtype, self.device, arg=(op, axis), srcs=(self,))
  def _staged_sum(self, axis: tuple[int, ...], lim: int) -> LazyBuffer:
    """A float SUM over more than `lim` elements: partial sums of at most `lim` elements (the innermost reduced dims, and a
    chunk of the next one), then the sum of the partials (staged again where they are more than `lim`). One float32
    accumulator stops growing at 2**24 ones and its rounding error grows with its length; with every accumulator at
    most `lim` long, sums are accurate on every backend (numpy and torch sum pairwise or in blocks for the same reason)."""
    first: list[int] = []
    inner = 1
    for a in reversed(axis):
      if inner * self.shape[a] > lim: break
      first.append(a)
      inner *= self.shape[a]
    rest = [a for a in axis if a not in first]
    x, a = self, rest[-1]
    if lim // inner >= 2:
      # cut dim a into m chunks of k (padded with zeros to m*k where no divisor is near) and sum the chunks first
      m, k = _chunk(self.shape[a], lim // inner)
      if m * k != self.shape[a]: x = x.pad(tuple((0, m * k - s if i == a else 0) for i, s in enumerate(self.shape)))
      # the chunks' dim goes first, so the partial sums lie in the output's order (a matmul's partials contiguous along
      # its columns, where the code generator puts its vector lanes; innermost, their 2 or 4 chunks made the vector
      # dim and a staged matmul ~10x slower than one unstaged)
      x = x.reshape(self.shape[:a] + (m, k) + self.shape[a + 1:]).permute((a,) + tuple(i for i in range(len(self.shape) + 1) if i != a))
      first, rest = [a + 1] + [b + 1 for b in first], [0] + [b + 1 for b in rest if b != a]
    return x.reduce(Ops.ADD, tuple(first)).reduce(Ops.ADD, tuple(rest))

  # *** movement: zero-copy views ***
  def _view(self, st: ShapeTracker) -> LazyBuffer:
    # an empty view of something non-empty needs none of its data
    if st.size == 0 and self.size != 0 and all_int(st.shape) and self.base.op is not Ops.CONST:
      return LazyBuffer.const_of(0, self.dtype, self.device, st.shape)
    return LazyBuffer(self.device, st, self.dtype, base=self.base, var_vals=self.var_vals)
  def reshape(self, shape: tuple[sint, ...]) -> LazyBuffer: return self if shape == self.shape else self._view(self.st.reshape(shape))
  def permute(self, axis: tuple[int, ...]) -> LazyBuffer:
    return self if axis == tuple(range(len(axis))) else self._view(self.st.permute(axis))
  def expand(self, shape: tuple[sint, ...]) -> LazyBuffer: return self if shape == self.shape else self._view(self.st.expand(shape))
  def pad(self, arg: tuple[tuple[sint, sint], ...]) -> LazyBuffer:
    return self if all(b == 0 and e == 0 for b, e in arg) else self._view(self.st.pad(arg))
  def shrink(self, arg: tuple[tuple[sint, sint], ...]) -> LazyBuffer:
    return self if all(b == 0 and e == s for (b, e), s in zip(arg, self.shape)) else self._view(self.st.shrink(arg))
  def flip(self, arg: tuple[bool, ...]) -> LazyBuffer: return self if not any(arg) else self._view(self.st.flip(arg))

  # *** indexed: positions read from data (the index is loaded inside the kernel; see tinycore.index_errors) ***
  def gather(self, idx: LazyBuffer, axis: int, checks: tuple[LazyBuffer, ...] = ()) -> LazyBuffer:
    """out[..., k, ...] = self[..., idx[..., k, ...], ...] along `axis`; idx has self's shape except at axis. A negative
    index counts from the end; one outside [-n, n) reads entry 0 and raises IndexError at the next sync. `checks`: more
    INDEX_CHECKs (of the index tensors idx was computed from) that run along with it."""
    size = self._indexed(idx, idx, axis, "gather")
    if idx.size == 0: return LazyBuffer.const_of(0, self.dtype, self.device, idx.shape)
    # the table is read at loaded positions: it is a buffer, seen through one view that does not pad the indexed axis
    v = self.st.views[-1]
    simple = len(self.st.views) == 1 and (v.mask is None or v.mask[axis] == (0, size)) and self.base.op is not CONST
    return LazyBuffer.metaop(Ops.GATHER, idx.shape, self.dtype, self.device, arg=axis,
                             srcs=(self if simple else self.contiguous(), idx, idx._index_check(size), *checks))
  def scatter(self, idx: LazyBuffer, src: LazyBuffer, axis: int, op: Ops | None = Ops.ADD, checks: tuple[LazyBuffer, ...] = ()) -> LazyBuffer:
    """A copy of self with src combined in at idx along `axis` (idx and src have self's shape except at axis):
    out[..., idx[..., k, ...], ...] = op(out[..., idx[..., k, ...], ...], src[..., k, ...]), or src's value where op is
    None. Repeated indices combine in k's order on every backend (the last write wins for None): one thread per position
    of the other dims loops over k, so no two threads touch one element. An index out of range changes nothing and
    raises IndexError at the next sync."""
    size = self._indexed(idx, src, axis, "scatter")
    target = LazyBuffer.metaop(Ops.CONTIGUOUS, self.shape, self.dtype, self.device, srcs=(self,))  # a fresh buffer, written in place
    if idx.size == 0: return target
    idx, src = (x.contiguous() if x.base.op is CONST else x for x in (idx, src))  # loaded as buffers (through their views)
    srcs = (target, idx, src.cast(self.dtype), idx._index_check(size), *checks)
    return LazyBuffer(self.device, _from_shape(self.shape), self.dtype, Ops.SCATTER, (axis, op), srcs, var_vals=_srcs_vals((self, idx, src)))
  def _indexed(self, idx: LazyBuffer, src: LazyBuffer, axis: int, what: str) -> int:
    """The size of the indexed axis, after checking the shapes of an indexed op."""
    if not dtypes.is_int(idx.dtype): raise TypeError(f"{what} needs integer indices, got {idx.dtype}")
    if not 0 <= axis < len(self.shape): raise ValueError(f"{what}: axis {axis} is out of range for shape {self.shape}")
    if not (len(idx.shape) == len(src.shape) == len(self.shape)) or idx.shape != src.shape or \
       any(a != b for d, (a, b) in enumerate(zip(idx.shape, self.shape)) if d != axis):
      raise ValueError(f"{what}: index {idx.shape} (and values {src.shape}) must match {self.shape} except at axis {axis}")
    if idx.device != self.device or src.device != self.device:
      raise ValueError(f"{what} device mismatch: {self.device} vs {idx.device}, {src.device}")
    if not isinstance(size := self.shape[axis], int): raise ValueError(f"{what}: the indexed axis cannot be symbolic ({self.shape})")
    # every index into an empty axis is out of range: known from the shapes alone
    if size == 0 and idx.size != 0: raise IndexError(f"{what}: index into axis {axis} of size 0 (shape {self.shape})")
    return size
  def _index_check(self, size: int) -> LazyBuffer:
    """The kernel that records an entry of this index outside [-size, size) in the device's error buffer."""
    # a broadcast dim repeats one value: checked once
    v = self.st.views[-1]
    x = self.shrink(tuple((0, 1) if st == 0 and (v.mask is None or m == (0, s)) else (0, s)
                          for s, st, m in zip(self.shape, v.strides, v.mask or [(0, s) for s in self.shape])))
    err = LazyBuffer.from_buffer(error_buffer(self.device))
    return LazyBuffer(self.device, err.st, dtypes.int32, Ops.INDEX_CHECK, size, (err, x), var_vals=x.var_vals)
