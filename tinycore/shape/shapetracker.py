"""ShapeTracker: a stack of Views. Movement ops edit the top View when they can and stack a new one when they can't;
`to_indexed_uops` turns index variables into one buffer index expression and one validity expression."""
from __future__ import annotations
import functools
from dataclasses import dataclass
from tinycore.dtype import dtypes
from tinycore.helpers import prod, all_int
from tinycore.ops import Ops
from tinycore.uop.uop import UOp, Variable, sint
from tinycore.uop.symbolic import linear_terms, simplify
from tinycore.shape.view import View, index_uop, strides_for_shape

@dataclass(frozen=True)
class ShapeTracker:
  views: tuple[View, ...]

  @staticmethod
  def from_shape(shape: tuple[sint, ...]) -> ShapeTracker: return ShapeTracker((View.create(shape),))
  @property
  def shape(self) -> tuple[sint, ...]: return self.views[-1].shape
  @property
  def size(self) -> sint: return self.views[-1].size
  @property
  def contiguous(self) -> bool: return len(self.views) == 1 and self.views[-1].contiguous
  def vars(self) -> frozenset[UOp]:
    """The Variables (symbolic sizes) this tracker's views use."""
    return _vars(self)
  def __add__(self, st: ShapeTracker) -> ShapeTracker:
    """Apply `st` (defined over this tracker's shape, read as a contiguous array) on top of this one."""
    ret = self
    for v in st.views: ret = ShapeTracker(ret.views + (v,)).simplify()
    return ret

  def to_indexed_uops(self, idxs: list[UOp] | None = None) -> tuple[UOp, UOp]:
    idxs = idxs if idxs is not None else [Variable(f"idx{i}", 0, _max(s) - 1) for i, s in enumerate(self.shape)]
    idx, valid = self.views[-1].to_indexed_uops(idxs)
    for view in reversed(self.views[:-1]):
      # unravel the flat index into the lower view's dims (row-major)
      sub: list[UOp] = []
      acc: sint = 1
      for s in reversed(view.shape):
        sub.append((idx // index_uop(acc, idx.dtype)) % index_uop(s, idx.dtype) if s != 1 else UOp.const(idx.dtype, 0))
        acc = acc * s
      idx, valid = view.to_indexed_uops(list(reversed(sub)), valid)
    return simplify(idx), simplify(valid)

  def real_strides(self) -> tuple[sint | None, ...]:
    """For each dim, how far the buffer index moves per step along it, or None where that is not a constant."""
    return _real_strides(self)

  def simplify(self) -> ShapeTracker:
    if len(self.views) < 2: return self
    top, below = self.views[-1], self.views[-2]
    if below.contiguous: return ShapeTracker(self.views[:-2] + (top,)).simplify()
    if top.contiguous and (r := below.reshape(top.shape)) is not None: return ShapeTracker(self.views[:-2] + (r,)).simplify()
    if (merged := self._merge_top()) is not None: return ShapeTracker(self.views[:-2] + (merged,)).simplify()
    return self

  def _merge_top(self) -> View | None:
    """Collapse the top two views into one when the combined index is linear in every dim and the validity is a box."""
    top = self.views[-1]
    if not all(isinstance(s, int) for s in top.shape) or 0 in top.shape: return None
    # only the elements inside the top view's mask need an index: the index variables range over that box, so a shift
    # that runs past the end of a dim (the padding of a pad, masked above) still folds to a linear index
    box = top.mask if top.mask is not None and all(isinstance(x, int) for m in top.mask for x in m) else tuple((0, s) for s in top.shape)
    if any(b >= e for b, e in box): return None
    idxs = [Variable(f"m{i}", b, e - 1) if s != 1 else UOp.const(dtypes.int32, 0) for i, (s, (b, e)) in enumerate(zip(top.shape, box))]
    idx, valid = ShapeTracker(self.views[-2:]).to_indexed_uops(idxs)
    terms, offset = linear_terms(idx)
    pos = {v: i for i, v in enumerate(idxs)}
    if any(t not in pos for t in terms): return None
    mask = list(box)
    for clause in _and_clauses(valid):
      if clause.op is Ops.CONST and clause.arg is True: continue
      if clause.op is Ops.CMPLT and clause.src[0] in pos and clause.src[1].op is Ops.CONST:
        k = pos[clause.src[0]]
        mask[k] = (mask[k][0], min(mask[k][1], clause.src[1].arg))
      elif clause.op is Ops.CMPNE and clause.src[1].op is Ops.CONST and clause.src[1].arg is True and clause.src[0].op is Ops.CMPLT \
          and clause.src[0].src[0] in pos and clause.src[0].src[1].op is Ops.CONST:
        k = pos[clause.src[0].src[0]]
        mask[k] = (max(mask[k][0], clause.src[0].src[1].arg), mask[k][1])
      else: return None
    if valid.op is Ops.CONST and valid.arg is False:
      if not top.shape: return None  # a 0-d view cannot carry "nothing valid" (see View.reshape)
      mask = [(0, 0)] * len(top.shape)
    strides = tuple(terms.get(v, 0) for v in idxs)
    # an out-of-mask element must not need an index; a linear index for the in-mask elements is enough
    return View.create(top.shape, strides, offset, tuple(mask))

  # *** movement ops ***
  def reshape(self, new_shape: tuple[sint, ...]) -> ShapeTracker:
    if prod(self.shape) != prod(new_shape) and all(isinstance(s, int) for s in self.shape + tuple(new_shape)):
      raise ValueError(f"cannot reshape {self.shape} ({prod(self.shape)} elements) to {new_shape} ({prod(new_shape)} elements)")
    # a plain reshape on top (contiguous, no mask, every element of the view below) only renumbers the view below: reshape
    # that one instead (a weight stored in panels, viewed in its logical shape, then split back into its panels is one view again)
    if len(self.views) > 1 and self.views[-1].contiguous and all_int(self.shape) and all_int(self.views[-2].shape) and \
       prod(self.shape) == prod(self.views[-2].shape): return ShapeTracker(self.views[:-1]).reshape(new_shape)
    if (v := self.views[-1].reshape(tuple(new_shape))) is not None: return ShapeTracker(self.views[:-1] + (v,))
    return ShapeTracker(self.views + (View.create(tuple(new_shape)),))
  def permute(self, axis: tuple[int, ...]) -> ShapeTracker: return ShapeTracker(self.views[:-1] + (self.views[-1].permute(axis),))
  def expand(self, shape: tuple[sint, ...]) -> ShapeTracker: return ShapeTracker(self.views[:-1] + (self.views[-1].expand(shape),))
  def pad(self, arg: tuple[tuple[sint, sint], ...]) -> ShapeTracker: return ShapeTracker(self.views[:-1] + (self.views[-1].pad(arg),))
  def shrink(self, arg: tuple[tuple[sint, sint], ...]) -> ShapeTracker:
    return ShapeTracker(self.views[:-1] + (self.views[-1].shrink(arg),))
  def flip(self, arg: tuple[bool, ...]) -> ShapeTracker: return ShapeTracker(self.views[:-1] + (self.views[-1].flip(arg),))

def _max(s: sint) -> int: return s if isinstance(s, int) else int(s.vmax)  # an index over a symbolic dim ranges to its largest value

@functools.lru_cache(maxsize=4096)
def _real_strides(self: ShapeTracker) -> tuple[sint | None, ...]:
  if len(self.views) == 1 and self.views[-1].mask is None: return self.views[-1].strides
  idxs = [Variable(f"idx{i}", 0, _max(s) - 1) if s != 1 else UOp.const(dtypes.int32, 0) for i, s in enumerate(self.shape)]
  idx, _ = self.to_indexed_uops(idxs)
  terms, _ = linear_terms(idx)
  out: list[sint | None] = []
  for v in idxs:
    if v.op is Ops.CONST: out.append(0)
    elif v in terms: out.append(terms[v] if all(v not in t.toposort() for t in terms if t is not v) else None)
    else: out.append(None if any(v in t.toposort() for t in terms) else 0)
  return tuple(out)

@functools.lru_cache(maxsize=4096)
def _vars(st: ShapeTracker) -> frozenset[UOp]: return frozenset().union(*(v.vars() for v in st.views))

def _and_clauses(u: UOp) -> list[UOp]:
  return _and_clauses(u.src[0]) + _and_clauses(u.src[1]) if u.op is Ops.AND and u.dtype == dtypes.bool else [u]

__all__ = ["ShapeTracker", "View", "strides_for_shape"]
