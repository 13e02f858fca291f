"""View: one strided, offset, optionally masked window onto a flat buffer. Every movement op is a new View."""
from __future__ import annotations
import functools
from dataclasses import dataclass
from tinycore.dtype import DType, dtypes
from tinycore.helpers import prod
from tinycore.uop.uop import UOp, sint, sint_to_uop
from tinycore.uop.symbolic import simplify, ssimplify

@functools.cache
def strides_for_shape(shape: tuple[sint, ...]) -> tuple[sint, ...]:
  """Row-major strides; a dimension of size 1 gets stride 0 (it is never stepped along)."""
  strides: list[sint] = []
  acc: sint = 1
  for s in reversed(shape):
    strides.append(acc if s != 1 else 0)
    acc = acc * s
  return tuple(reversed(strides))

def index_uop(x: sint, dt: DType) -> UOp:
  """A size, stride or offset as a node of index arithmetic in dtype dt (a symbolic one cast to it)."""
  if isinstance(x, int): return UOp.const(dt, x)
  return x if x.dtype == dt else x.cast(dt)

def _full(mask: tuple[tuple[sint, sint], ...] | None, shape: tuple[sint, ...]) -> bool:
  return mask is None or all(b == 0 and e == s for (b, e), s in zip(mask, shape))

@dataclass(frozen=True)
class View:
  shape: tuple[sint, ...]
  strides: tuple[sint, ...]
  offset: sint
  mask: tuple[tuple[sint, sint], ...] | None
  contiguous: bool

  @staticmethod
  @functools.cache
  def create(shape: tuple[sint, ...], strides: tuple[sint, ...] | None = None, offset: sint = 0,
             mask: tuple[tuple[sint, sint], ...] | None = None) -> View:
    if any(isinstance(s, int) and s < 0 for s in shape): raise ValueError(f"negative dimension in shape {shape}")
    strides = tuple(0 if s == 1 else st for s, st in zip(shape, strides)) if strides is not None else strides_for_shape(shape)
    if mask is not None and any(isinstance(b, int) and isinstance(e, int) and b >= e for b, e in mask):
      # nothing is valid: drop the strides so no index is ever formed from them
      return View(shape, (0,) * len(shape), 0, ((0, 0),) * len(shape), False)
    if _full(mask, shape): mask = None
    contiguous = offset == 0 and mask is None and strides == strides_for_shape(shape)
    return View(shape, strides, offset, mask, contiguous)

  # Views are hashed whenever a schedule is looked up (its key holds every view of the graph): the hash, the generated
  # one's value, is worked out once per View (and not pickled: a UOp's hash differs from process to process)
  def __hash__(self) -> int:
    if (h := self.__dict__.get("_hash")) is None:
      h = self.__dict__["_hash"] = hash((self.shape, self.strides, self.offset, self.mask, self.contiguous))
    return h
  def __getstate__(self) -> dict: return {k: v for k, v in self.__dict__.items() if k != "_hash"}
  @functools.cached_property
  def size(self) -> sint:
    """The number of elements (worked out once: Views are shared through create's cache, and every lazy op asks)."""
    return prod(self.shape)
  def vars(self) -> set[UOp]:
    """The Variables in this view's shape, strides, offset and mask."""
    xs = [*self.shape, *self.strides, self.offset, *(x for m in (self.mask or ()) for x in m)]
    return set().union(*(x.vars() for x in xs if isinstance(x, UOp)))

  def to_indexed_uops(self, idxs: list[UOp], valid: UOp | None = None) -> tuple[UOp, UOp]:
    """The buffer index and the validity condition of the element at position `idxs`. The arithmetic is in the dtype of
    the indices (int32, or int64 for a kernel that reaches past int32: see codegen/lowerer.py)."""
    dt = idxs[0].dtype if idxs else dtypes.int32
    idx = index_uop(self.offset, dt)
    for i, s, st in zip(idxs, self.shape, self.strides):
      if s != 1 and st != 0: idx = idx + i * index_uop(st, dt)
    vexpr = valid if valid is not None else UOp.const(dtypes.bool, True)
    if self.mask is not None:
      for i, (b, e), s in zip(idxs, self.mask, self.shape):
        if b != 0: vexpr = vexpr & (i >= index_uop(b, dt))
        if e != s: vexpr = vexpr & (i < index_uop(e, dt))
    return idx, vexpr

  # *** movement ops; each returns a new View (or None where it cannot be expressed as one) ***
  def permute(self, axis: tuple[int, ...]) -> View:
    return View.create(tuple(self.shape[a] for a in axis), tuple(self.strides[a] for a in axis), self.offset,
                       tuple(self.mask[a] for a in axis) if self.mask is not None else None)

  def expand(self, new_shape: tuple[sint, ...]) -> View:
    if 0 in self.shape: return View.create(new_shape)
    mask = None
    if self.mask is not None:
      mask = tuple(m if s == ns else ((0, 0) if m == (0, 0) else (0, ns)) for m, s, ns in zip(self.mask, self.shape, new_shape))
    return View.create(new_shape, tuple(st if s == ns else 0 for st, s, ns in zip(self.strides, self.shape, new_shape)), self.offset, mask)

  def _resize(self, arg: tuple[tuple[sint, sint], ...], mask: tuple[tuple[sint, sint], ...] | None = None) -> View:
    """Take the window [b, e) of every dim; b may be negative and e past the end (that is a pad, masked)."""
    if self.mask is not None:
      moved = tuple((_smax(0, _smin(mb - b, e - b)), _smax(0, _smin(me - b, e - b))) for (mb, me), (b, e) in zip(self.mask, arg))
      mask = moved if mask is None else tuple((_smax(a0, b0), _smin(a1, b1)) for (a0, a1), (b0, b1) in zip(moved, mask))
    offset = ssimplify(self.offset + sum(st * b for st, (b, _) in zip(self.strides, arg)))
    # symbolic sizes are simplified here: `bs - 0` must stay `bs` for shapes to compare equal
    return View.create(tuple(e if isinstance(b, int) and b == 0 else ssimplify(e - b) for b, e in arg), self.strides, offset, mask)

  def shrink(self, arg: tuple[tuple[sint, sint], ...]) -> View: return self._resize(arg)

  def pad(self, arg: tuple[tuple[sint, sint], ...]) -> View:
    if all(b == 0 and a == 0 for b, a in arg): return self
    zvarg = tuple((-b, s + a) for s, (b, a) in zip(self.shape, arg))
    mask = tuple((b, s + b) for s, (b, _) in zip(self.shape, arg))
    return self._resize(zvarg, mask)

  def flip(self, arg: tuple[bool, ...]) -> View:
    offset = self.offset + sum((s - 1) * st for s, st, f in zip(self.shape, self.strides, arg) if f)
    mask = tuple((s - e, s - b) if f else (b, e) for (b, e), s, f in zip(self.mask, self.shape, arg)) if self.mask is not None else None
    return View.create(self.shape, tuple(-st if f else st for st, f in zip(self.strides, arg)), offset, mask)

  def reshape(self, new_shape: tuple[sint, ...]) -> View | None:
    """Reshape in place where the memory layout allows it; None means a new View must be stacked on top."""
    if self.shape == new_shape: return self
    if 0 in self.shape or self.contiguous: return View.create(new_shape)
    if self.mask is not None and any(b == e for b, e in self.mask):
      # nothing is valid; a 0-d view has no dim to carry an empty mask (an empty mask tuple means "all valid"), so the
      # masked view stays below a new one
      return View.create(new_shape, mask=((0, 0),) * len(new_shape)) if new_shape else None
    old = [(s, st, m) for s, st, m in zip(self.shape, self.strides, self.mask or [(0, s) for s in self.shape]) if s != 1]
    new = [s for s in new_shape if s != 1]
    new_strides: list[sint] = []
    new_mask: list[tuple[sint, sint]] = []
    i = j = 0
    while i < len(old) or j < len(new):
      if i >= len(old) or j >= len(new): return None
      # grow a group of old dims and a group of new dims until their products agree
      i0, j0, po, pn = i, j, old[i][0], new[j]
      i, j = i + 1, j + 1
      while po != pn:
        if not (isinstance(po, int) and isinstance(pn, int)): return None
        if po < pn:
          if i >= len(old): return None
          po, i = po * old[i][0], i + 1
        else:
          if j >= len(new): return None
          pn, j = pn * new[j], j + 1
      group = old[i0:i]
      if any(a[1] != b[1] * b[0] for a, b in zip(group, group[1:])): return None  # not one strided run in memory
      masked = [k for k, (s, _, m) in enumerate(group) if m != (0, s)]
      if masked and (len(group) > 1 or (j - j0 > 1 and not self._split_mask_ok(group[0], new[j0:j]))): return None
      stride = group[-1][1]
      sizes = new[j0:j]
      for k in range(len(sizes)):
        new_strides.append(stride * prod(sizes[k + 1:]))
        if masked and k == 0:
          inner = prod(sizes[1:])
          b, e = group[0][2]
          new_mask.append((b // inner, e // inner))
        else: new_mask.append((0, sizes[k]))
    it_s, it_m = iter(new_strides), iter(new_mask)
    strides, mask = [], []
    for s in new_shape:
      if s == 1: strides.append(0); mask.append((0, 1))  # noqa: E702
      else: strides.append(next(it_s)); mask.append(next(it_m))  # noqa: E702
    return View.create(new_shape, tuple(strides), self.offset, tuple(mask) if self.mask is not None else None)

  @staticmethod
  def _split_mask_ok(dim: tuple[sint, sint, tuple[sint, sint]], sizes: list[sint]) -> bool:
    inner = prod(sizes[1:])
    b, e = dim[2]
    return isinstance(inner, int) and isinstance(b, int) and isinstance(e, int) and b % inner == 0 and e % inner == 0

def _smax(a: sint, b: sint) -> sint: return max(a, b) if isinstance(a, int) and isinstance(b, int) else simplify(UOp.maximum(sint_to_uop(a), b))
def _smin(a: sint, b: sint) -> sint:
  if isinstance(a, int) and isinstance(b, int): return min(a, b)
  return simplify(-UOp.maximum(-sint_to_uop(a), -sint_to_uop(b)))
