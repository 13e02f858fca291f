"""Tensor movement: reshape, permute, expand, pad, shrink, flip and what is built of them (views, concatenation,
repetition, windows). No data is computed, only how it is read."""
from __future__ import annotations
import math, itertools
from typing import TYPE_CHECKING, Any, Sequence
import numpy as np
import tinycore.function as F
from tinycore.dtype import dtypes, least_upper_dtype
from tinycore.helpers import all_int, argfix, prod, make_tuple, flatten, ceildiv
from tinycore.errors import ShapeError, ArgumentError, DimError, UnsupportedError
from tinycore.uop.uop import UOp, sint
from tinycore.uop.symbolic import ssimplify
from tinycore.tensor.args import _bound_vals, _same, _sym
if TYPE_CHECKING: from tinycore.tensor import Tensor

def _bind(t: Tensor, var_vals: dict[UOp, int]) -> Tensor:
  """t, its lazy graph carrying the bound values (the scheduler collects them for the kernels)."""
  if var_vals: t.lazydata = t.lazydata.bind(var_vals)
  return t

def _plain_sizes(shape: tuple) -> bool:
  """Every size a plain non-negative int (no -1, None, numpy int or symbol)."""
  for s in shape:
    if s.__class__ is not int or s < 0: return False
  return True

class MovementMixin:
  __slots__ = ()

  # *** movement ***
  def _infer_symbolic_dim(self, new_shape: list) -> list:
    # the -1 of a reshape with symbolic sizes: equal dims on both sides cancel, the rest must divide exactly
    if sum(isinstance(s, int) and s < 0 for s in new_shape) != 1 or any(isinstance(s, int) and s < -1 for s in new_shape):
      raise ShapeError(f"bad reshape target {tuple(new_shape)}: one -1 at most, other sizes non-negative")
    left, right = list(self.shape), [s for s in new_shape if not (isinstance(s, int) and s == -1)]
    for s in list(right):
      if (i := next((i for i, t in enumerate(left) if _same(s, t)), None)) is not None: left.pop(i), right.remove(s)
    total, known = ssimplify(prod(left)), ssimplify(prod(right))
    inferred = ssimplify(total // known) if isinstance(known, int) and known > 0 else None
    if inferred is None or not _same(ssimplify(inferred * known), total):
      def show(xs: Any) -> str: return "(" + ", ".join(x.render() if isinstance(x, UOp) else str(x) for x in xs) + ")"
      raise ShapeError(f"cannot infer the -1 of reshape {show(new_shape)} from {show(self.shape)}: "
                       f"{show([total])[1:-1]} is not a known multiple of {show([known])[1:-1]}")
    return [inferred if isinstance(s, int) and s == -1 else s for s in new_shape]
  def reshape(self, shape: Any, *args: Any) -> Tensor:
    """A view with a new shape of the same number of elements; one dim may be -1, None keeps that dim."""
    fixed = argfix(shape, *args)
    if _plain_sizes(fixed) and _plain_sizes(cur := self.shape) and prod(fixed) == prod(cur):
      return self if fixed == cur else F.Reshape.apply(self, shape=fixed)  # the common case: nothing to infer or check
    new_shape = list(fixed)
    # plain ints on both sides have nothing symbolic to resolve or bind
    if not (all(s.__class__ is int for s in new_shape) and all_int(self.shape)):
      new_shape = [_sym(s) if s is not None else self.shape[i] for i, s in enumerate(new_shape)]
    if any(isinstance(s, UOp) for s in new_shape + list(self.shape)):
      # symbolic: the sizes cannot be compared here; the ShapeTracker checks what it can
      if any(isinstance(s, int) and s < 0 for s in new_shape): new_shape = self._infer_symbolic_dim(new_shape)
      return _bind(self if all(_same(a, b) for a, b in zip(new_shape, self.shape)) and len(new_shape) == self.ndim else
                   F.Reshape.apply(self, shape=tuple(new_shape)), _bound_vals(shape, args))
    for s in new_shape:
      if not isinstance(s, (int, np.integer)) or s < -1: raise ShapeError(f"bad reshape target {tuple(new_shape)}")
    if new_shape.count(-1) > 1: raise ShapeError(f"only one dimension can be -1 in reshape {tuple(new_shape)}")
    if -1 in new_shape:
      known = prod(s for s in new_shape if s != -1)
      if known == 0 or self.numel() % known: raise ShapeError(f"cannot reshape {self.shape} to {tuple(new_shape)}")
      new_shape[new_shape.index(-1)] = self.numel() // known
    new_shape = [int(s) for s in new_shape]
    if prod(new_shape) != self.numel():
      raise ShapeError(f"cannot reshape tensor of shape {self.shape} ({self.numel()} elements) to {tuple(new_shape)}")
    return self if tuple(new_shape) == self.shape else F.Reshape.apply(self, shape=tuple(new_shape))
  def view(self, shape: Any, *args: Any) -> Tensor:
    """Same as reshape."""
    return self.reshape(shape, *args)
  def expand(self, shape: Any, *args: Any) -> Tensor:
    """Broadcast size-1 dims to a larger size (a view); -1 keeps a dim; new leading dims may be added."""
    new_shape = argfix(shape, *args)
    if all(s.__class__ is int for s in new_shape) and all_int(self.shape): return self._expand_ints(new_shape)
    new_shape = tuple(_sym(s) for s in new_shape)
    if len(new_shape) < self.ndim: raise ShapeError(f"cannot expand {self.shape} to fewer dims {new_shape}")
    src = self.reshape((1,) * (len(new_shape) - self.ndim) + self.shape) if len(new_shape) > self.ndim else self
    out = tuple(s if _same(n, -1) else n for s, n in zip(src.shape, new_shape))
    for s, n in zip(src.shape, out):
      if not _same(s, n) and not _same(s, 1): raise ShapeError(f"cannot expand {self.shape} to {new_shape}: only dims of size 1 can grow")
    return _bind(src if all(_same(a, b) for a, b in zip(out, src.shape)) else F.Expand.apply(src, shape=out), _bound_vals(shape, args))
  def _expand_ints(self, new_shape: tuple[int, ...]) -> Tensor:
    """expand where every size is a plain int: the same checks and result, without the symbolic comparisons."""
    if len(new_shape) < self.ndim: raise ShapeError(f"cannot expand {self.shape} to fewer dims {new_shape}")
    src = self.reshape((1,) * (len(new_shape) - self.ndim) + self.shape) if len(new_shape) > self.ndim else self
    out = tuple(s if n == -1 else n for s, n in zip(src.shape, new_shape))
    for s, n in zip(src.shape, out):
      if s != n and s != 1: raise ShapeError(f"cannot expand {self.shape} to {new_shape}: only dims of size 1 can grow")
    return src if out == src.shape else F.Expand.apply(src, shape=out)
  def broadcast_to(self, shape: Any) -> Tensor:
    """Broadcast to `shape` following numpy rules."""
    return self.expand(shape)
  def permute(self, order: Any, *args: Any) -> Tensor:
    """Reorder the dims (a view)."""
    order = tuple(self._resolve_dim(d) for d in argfix(order, *args))
    if sorted(order) != list(range(self.ndim)): raise ShapeError(f"permute order {order} is not a permutation of {self.ndim} dims")
    return F.Permute.apply(self, order=order)
  def flip(self, axis: Any, *args: Any) -> Tensor:
    """Reverse the order along the given dims (a view)."""
    axes = tuple(self._resolve_dim(a) for a in argfix(axis, *args))
    if len(set(axes)) != len(axes): raise ShapeError(f"flip axes {axes} repeat a dim")
    return F.Flip.apply(self, axis=axes)
  def shrink(self, arg: Sequence[tuple[sint, sint] | None]) -> Tensor:
    """Keep [begin, end) along each dim (None keeps the dim whole); a view."""
    if len(arg) != self.ndim: raise ShapeError(f"shrink needs one (begin, end) per dim of {self.shape}, got {arg}")
    a = tuple((_sym(x[0]), _sym(x[1])) if x is not None else (0, s) for x, s in zip(arg, self.shape))
    for (b, e), s in zip(a, self.shape):
      # a symbolic bound is checked through its range
      lo_b, hi_e = (b.vmin if isinstance(b, UOp) else b), (e.vmax if isinstance(e, UOp) else e)
      if isinstance(s, UOp): continue
      if not (0 <= lo_b and hi_e <= s and (isinstance(b, UOp) or isinstance(e, UOp) or b <= e)):
        raise ShapeError(f"shrink {arg} is out of bounds for shape {self.shape}")
    return _bind(self if all(_same(x[0], 0) and _same(x[1], s) for x, s in zip(a, self.shape)) else F.Shrink.apply(self, arg=a), _bound_vals(arg))
  def pad(self, padding: Sequence[Any], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad with one (before, after) per dim (None for none), or torch style (left, right, top, bottom, ...) from the
    last dim. mode is "constant" (with `value`), "reflect", "replicate" or "circular"; negative pads crop."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
      raise UnsupportedError(f"pad mode must be constant, reflect, replicate or circular, got {mode!r}")
    if mode != "constant" and value != 0: raise ArgumentError(f"pad value only applies to mode 'constant', not {mode!r}")
    if len(padding) and all(isinstance(p, (int, np.integer)) for p in padding):
      flat = [int(p) for p in padding]
      if len(flat) % 2: raise ShapeError(f"flat padding {tuple(padding)} needs pairs")
      if len(flat) // 2 > self.ndim: raise ShapeError(f"padding {tuple(padding)} has more pairs than the {self.ndim} dims of {self.shape}")
      pads = [(0, 0)] * (self.ndim - len(flat) // 2) + [(flat[2 * i], flat[2 * i + 1]) for i in reversed(range(len(flat) // 2))]
    else: pads = [tuple(p) if p is not None else (0, 0) for p in padding]  # type: ignore[misc]
    if len(pads) != self.ndim: raise ShapeError(f"padding {padding} does not match the {self.ndim} dims of {self.shape}")
    if any(len(p) != 2 for p in pads): raise ShapeError(f"padding {padding} needs (before, after) pairs")
    if any(b < 0 or a < 0 for b, a in pads) and mode in ("reflect", "replicate"):
      # as torch: pad first, then crop the padded tensor (the reflected or replicated part may be what is kept)
      x = self.pad(tuple((max(b, 0), max(a, 0)) for b, a in pads), mode)
      for (b, a), s in zip(pads, x.shape):
        if -min(b, 0) - min(a, 0) > s: raise ShapeError(f"negative padding {padding} crops more than the padded shape {x.shape}")
      return x.shrink(tuple((-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pads, x.shape)))
    if any(b < 0 or a < 0 for b, a in pads):  # negative pads crop (circular, as torch, crops first)
      for (b, a), s in zip(pads, self.shape):
        if -min(b, 0) - min(a, 0) > s: raise ShapeError(f"negative padding {padding} crops more than the shape {self.shape}")
      x = self.shrink(tuple((-min(b, 0), s + min(a, 0)) for (b, a), s in zip(pads, self.shape)))
      return x.pad(tuple((max(b, 0), max(a, 0)) for b, a in pads), mode, value)
    if all(p == (0, 0) for p in pads): return self
    if mode == "constant":
      ret = F.Pad.apply(self, arg=tuple(pads))
      if value == 0 and not (isinstance(value, float) and math.copysign(1, value) < 0): return ret
      mask = F.Pad.apply(self.ones(self.shape, dtype=dtypes.bool, device=self.device), arg=tuple(pads))
      return mask.where(ret, value)
    x = self
    for d, (b, a) in enumerate(pads):
      if b == 0 and a == 0: continue
      s = x.shape[d]
      def sl(lo: int, hi: int, x: Tensor = x, d: int = d) -> Tensor: return x.shrink(tuple((lo, hi) if i == d else None for i in range(x.ndim)))
      if mode == "reflect":
        if b >= s or a >= s: raise ShapeError(f"reflect padding ({b}, {a}) must be smaller than the dim size {s} of {self.shape}")
        x = type(self).cat(sl(1, b + 1).flip(d), x, sl(s - 1 - a, s - 1).flip(d), dim=d)
      elif mode == "replicate":
        if s == 0: raise ShapeError(f"cannot replicate-pad an empty dim of {self.shape}")
        e = [(-1 if i != d else b) for i in range(x.ndim)]
        e2 = [(-1 if i != d else a) for i in range(x.ndim)]
        x = type(self).cat(sl(0, 1).expand(e), x, sl(s - 1, s).expand(e2), dim=d)
      else:
        if b > s or a > s:  # torch: RuntimeError, tinygrad 0.14: ValueError, tinygrad since: NotImplementedError
          raise UnsupportedError(f"circular padding ({b}, {a}) would wrap around more than once: it must not exceed the dim size {s} of {self.shape}")
        x = type(self).cat(sl(s - b, s), x, sl(0, a), dim=d)
    return x
  def _resolve_dim(self, dim: int, extra: bool = False) -> int:
    total = self.ndim + int(extra)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool): raise TypeError(f"dim must be an int, got {dim!r}")
    if not -max(1, total) <= dim < max(1, total): raise IndexError(f"dim {dim} is out of range for a tensor of {self.ndim} dims")
    return int(dim) + total if dim < 0 else int(dim)
  def _axes(self, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = tuple(self._resolve_dim(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
    if len(set(axes)) != len(axes): raise ShapeError(f"axis {axis} repeats a dim")
    return axes if self.ndim else ()
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    """Swap two dims (a view)."""
    order = list(range(self.ndim))
    a, b = self._resolve_dim(dim0), self._resolve_dim(dim1)
    order[a], order[b] = order[b], order[a]
    return self.permute(order)
  @property
  def T(self) -> Tensor:
    """Swaps dims 0 and 1, as tinygrad (not torch's reversal of every dim for ndim > 2); 0-d and 1-d tensors unchanged."""
    return self.transpose() if self.ndim >= 2 else self
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims start_dim..end_dim into one."""
    if self.ndim == 0: return self.reshape(1)
    s, e = self._resolve_dim(start_dim), self._resolve_dim(end_dim)
    if s > e: raise ShapeError(f"flatten start_dim {start_dim} comes after end_dim {end_dim}")
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def unflatten(self, dim: int, sizes: tuple[int, ...]) -> Tensor:
    """Split one dim into `sizes` (one of them may be -1)."""
    d = self._resolve_dim(dim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:]) if -1 in sizes else \
      self._check_unflatten(d, sizes).reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])
  def _check_unflatten(self, d: int, sizes: tuple[int, ...]) -> Tensor:
    if prod(sizes) != self.shape[d]: raise ShapeError(f"unflatten sizes {tuple(sizes)} do not multiply to the size {self.shape[d]} of dim {d}")
    return self
  def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
    """Remove size-1 dims (all of them, or those in dim)."""
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    if self.ndim == 0:
      for d in (dim if isinstance(dim, (list, tuple)) else [dim]): self._resolve_dim(d)  # a 0-d tensor takes dim 0 or -1
      return self
    dims = {self._resolve_dim(d) for d in (dim if isinstance(dim, (list, tuple)) else [dim])}
    return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1)))
  def pad_to(self, shape: Any, *args: Any, value: Any = 0) -> Tensor:
    """Pad with `value` at the end of each dim up to `shape` (None keeps a dim)."""
    new = argfix(shape, *args)
    if len(new) != self.ndim: raise ShapeError(f"pad_to shape {new} needs {self.ndim} dims like {self.shape}")
    for s, n in zip(self.shape, new):
      if n is not None and n < s: raise ShapeError(f"pad_to shape {new} is smaller than {self.shape}")
    return self.pad(tuple((0, n - s if n is not None else 0) for s, n in zip(self.shape, new)), value=value)
  def shrink_to(self, shape: Any, *args: Any) -> Tensor:
    """Keep the first shape[i] elements of each dim (None keeps a dim)."""
    new = argfix(shape, *args)
    if len(new) != self.ndim: raise ValueError(f"shrink_to shape {new} needs {self.ndim} dims like {self.shape}")
    return self.shrink(tuple((0, n) if n is not None else None for n in new))
  def rearrange(self, formula: str, **sizes: int) -> Tensor:
    """einops-style rearrange: "b c (h w) -> b (c h) w" with sizes for split dims (h=2); "..." stands for the rest."""
    if formula.count("->") != 1: raise ValueError(f"rearrange formula {formula!r} needs exactly one '->'")
    def parse(side: str) -> list[list[str]]:
      groups, cur = [], None
      for tok in side.replace("(", " ( ").replace(")", " ) ").split():
        if tok == "(":
          if cur is not None: raise ValueError(f"rearrange formula {formula!r}: nested parentheses")
          cur = []
        elif tok == ")":
          if cur is None: raise ValueError(f"rearrange formula {formula!r}: unbalanced parentheses")
          groups.append(cur)
          cur = None
        elif cur is not None: cur.append(tok)
        else: groups.append([tok])
      if cur is not None: raise ValueError(f"rearrange formula {formula!r}: unbalanced parentheses")
      return groups
    lhs, rhs = (parse(x) for x in formula.split("->"))
    if any(g == ["..."] for g in lhs):
      n = self.ndim - (len(lhs) - 1)
      if n < 0: raise ValueError(f"rearrange {formula!r} names more dims than {self.shape} has")
      ell = [f"__e{i}" for i in range(n)]
      lhs = flatten([[[e] for e in ell] if g == ["..."] else [g] for g in lhs])
      rhs = flatten([[[e] for e in ell] if g == ["..."] else [g] for g in rhs])
    lhs, rhs = ([[n for n in g if n != "1"] for g in side] for side in (lhs, rhs))  # a "1" is a unit axis: dropped on the left, added on the right
    if len(lhs) != self.ndim: raise ValueError(f"rearrange {formula!r} has {len(lhs)} input dims, the tensor has shape {self.shape}")
    known: dict[str, int] = dict(sizes)
    for g, s in zip(lhs, self.shape):
      unknown = [n for n in g if n not in known]
      if len(g) == 1 and unknown: known[g[0]] = s
      elif len(unknown) > 1: raise ValueError(f"rearrange {formula!r}: give the sizes of {unknown[1:]}")
      elif unknown: known[unknown[0]] = s // prod(known[n] for n in g if n != unknown[0])
      if prod(known[n] for n in g) != s: raise ValueError(f"rearrange {formula!r}: group {g} does not multiply to {s}")
    names = flatten(lhs)
    if sorted(flatten(rhs)) != sorted(names): raise ValueError(f"rearrange {formula!r}: both sides need the same names")
    x = self.reshape([known[n] for n in names]).permute([names.index(n) for n in flatten(rhs)])
    return x.reshape([prod(known[n] for n in g) for g in rhs])
  def unsqueeze(self, dim: int) -> Tensor:
    """Insert a size-1 dim at position dim."""
    d = self._resolve_dim(dim, extra=True)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def repeat(self, repeats: Any, *args: Any) -> Tensor:
    """Tile the tensor repeats[i] times along each dim (as torch.Tensor.repeat)."""
    reps = argfix(repeats, *args)
    if len(reps) < self.ndim: raise ShapeError(f"repeat needs at least {self.ndim} repeats for shape {self.shape}, got {reps}")
    if any(not isinstance(r, int) or r < 0 for r in reps): raise ValueError(f"repeats {reps} must be non-negative ints")
    base = (1,) * (len(reps) - self.ndim) + self.shape
    x = self.reshape(flatten((1, b) for b in base)).expand(flatten(zip(reps, base)))
    return x.reshape(tuple(r * b for r, b in zip(reps, base)))
  def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor:
    """Repeat each element `repeats` times along dim (the flattened tensor when dim is None)."""
    if not isinstance(repeats, int) or repeats < 0: raise ValueError(f"repeat_interleave needs a non-negative int, got {repeats!r}")
    x, d = (self.flatten(), 0) if dim is None else (self, self._resolve_dim(dim))
    s = x.shape
    return x.reshape(*s[:d + 1], 1, *s[d + 1:]).expand(*s[:d + 1], repeats, *s[d + 1:]).reshape(*s[:d], s[d] * repeats, *s[d + 1:])
  def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
    """Shift elements cyclically along dims (the flattened tensor when dims is None), as torch.roll."""
    if dims is None: return self.flatten().roll(shifts, 0).reshape(self.shape)
    sh, ds = make_tuple(shifts, 1), make_tuple(dims, 1)
    if len(sh) != len(ds): raise ShapeError(f"roll needs as many shifts as dims, got {sh} and {ds}")
    x = self
    for s, d in zip(sh, ds):
      d = self._resolve_dim(d)
      n = x.shape[d]
      if n == 0 or s % n == 0: continue
      s %= n
      x = x.repeat(*[2 if i == d else 1 for i in range(x.ndim)]).shrink(tuple((n - s, 2 * n - s) if i == d else None for i in range(x.ndim)))
    return x
  def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
    """Concatenate tensors along dim; they must match elsewhere. Dtypes promote. `Tensor.cat([a, b])` works too."""
    if isinstance(self, (list, tuple)): return MovementMixin._first(self, "cat").cat(*self[1:], *args, dim=dim)
    ts = (self,) + args
    d = self._resolve_dim(dim)
    for t in ts:
      if not isinstance(t, type(self)): raise TypeError(f"cat needs Tensors, got {type(t).__name__}")
      if t.ndim != self.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, self.shape)) if i != d):
        raise ShapeError(f"cat shape mismatch along dim {d}: {[x.shape for x in ts]}")
    dt = least_upper_dtype(*[t.dtype for t in ts])
    ts = tuple(t.cast(dt) for t in ts)
    total = sum(t.shape[d] for t in ts)
    out: Tensor | None = None
    off = 0
    for t in ts:
      n = t.shape[d]
      if n == 0 and len(ts) > 1: continue
      arg = tuple((off, total - off - n) if i == d else (0, 0) for i in range(self.ndim))
      p = t.pad(arg)
      if out is None: out = p
      else:
        mask = self.ones(t.shape, dtype=dtypes.bool, device=t.device).pad(arg)
        out = mask.where(p, out)
      off += n
    return out if out is not None else ts[0]
  @staticmethod
  def _first(ts: Sequence[Tensor], what: str) -> Tensor:
    if not ts or not isinstance(ts[0], MovementMixin): raise TypeError(f"{what} needs Tensors, got {ts!r}")
    return ts[0]
  def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
    """Stack tensors of one shape along a new dim. `Tensor.stack([a, b])` works too."""
    if isinstance(self, (list, tuple)):
      if args: raise ArgumentError(f"stack takes tensors or one list of them, not a list and then {len(args)} more argument(s)")
      return MovementMixin._first(self, "stack").stack(*self[1:], dim=dim)
    for t in args:
      if not isinstance(t, type(self)): raise ArgumentError(f"stack takes tensors, got {type(t).__name__}")
      if t.shape != self.shape: raise ShapeError(f"stack needs tensors of one shape, got {self.shape} and {t.shape}")
    d = self._resolve_dim(dim, extra=True)
    return type(self).cat(*[t.unsqueeze(d) for t in (self,) + args], dim=d)
  def split(self, sizes: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """Split along dim into chunks of size `sizes` (the last may be smaller), or into the given sizes."""
    d = self._resolve_dim(dim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0: raise ValueError(f"split size must be positive, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, max(n, 1), sizes)] if n else [0]
    if sum(sizes) != n: raise ShapeError(f"split sizes {tuple(sizes)} do not add up to the size {n} of dim {d}")
    offs = list(itertools.accumulate(sizes, initial=0))
    return tuple(self.shrink(tuple((offs[i], offs[i + 1]) if j == d else None for j in range(self.ndim))) for i in range(len(sizes)))
  def chunk(self, chunks: int, dim: int = 0) -> list[Tensor]:
    """Split into `chunks` pieces of ceil(size/chunks) along dim (fewer when it does not divide)."""
    if not isinstance(chunks, int) or chunks <= 0: raise ValueError(f"chunk needs a positive number of chunks, got {chunks!r}")
    d = self._resolve_dim(dim)
    n = self.shape[d]
    return list(self.split(ceildiv(n, chunks), dim=d)) if n else list(self.split([0] * chunks, dim=d))
  def unfold(self, dim: int, size: int, step: int) -> Tensor:
    """Sliding windows of `size` with `step` along dim: that dim becomes the window count, and a last dim of size
    `size` is added (as torch.Tensor.unfold); size 0 gives size+1 empty windows."""
    d = self._resolve_dim(dim)
    if size < 0 or step <= 0: raise ShapeError(f"unfold needs size >= 0 and step > 0, got size={size} step={step}")
    if size > self.shape[d]: raise ShapeError(f"unfold size {size} is larger than the size {self.shape[d]} of dim {d}")
    if size == 0:  # shrunk from self, not fresh zeros, so the (empty) graph still leads back to self and backward() gives it a zero .grad
      count = self.shape[d] // step + 1
      x = self.unsqueeze(-1).shrink(tuple([None] * self.ndim) + ((0, 0),))
      return x.pad(tuple(None if i != d else (0, max(0, count - self.shape[d])) for i in range(x.ndim))) \
        .shrink(tuple(None if i != d else (0, count) for i in range(x.ndim)))
    x = self.transpose(d, -1) if d != self.ndim - 1 else self
    w = x._windows((size,), step)  # (..., o, size)
    return w.transpose(d, -2) if d != self.ndim - 1 else w
  def tril(self, diagonal: int = 0) -> Tensor:
    """Keep the lower triangle of the last two dims (j <= i + diagonal), zero elsewhere."""
    if self.ndim < 2: raise DimError(f"tril needs at least 2 dims, got shape {self.shape}")
    return self._tri_mask(diagonal, lower=True).where(self, self.zeros_like())
  def triu(self, diagonal: int = 0) -> Tensor:
    """Keep the upper triangle of the last two dims (j >= i + diagonal), zero elsewhere."""
    if self.ndim < 2: raise DimError(f"triu needs at least 2 dims, got shape {self.shape}")
    return self._tri_mask(diagonal, lower=False).where(self, self.zeros_like())
  def _tri_mask(self, diagonal: int, lower: bool) -> Tensor:
    r, c = self.shape[-2], self.shape[-1]
    i, j = self._iota(r, self.device).reshape(r, 1), self._iota(c, self.device).reshape(1, c)
    return (j <= i + diagonal) if lower else (j >= i + diagonal)
  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of dims dim1, dim2 (moved to the last dim), as torch.diagonal."""
    a, b = self._resolve_dim(dim1), self._resolve_dim(dim2)
    if a == b: raise ShapeError(f"diagonal dims must differ, got {dim1} and {dim2}")
    x = self.permute(*[i for i in range(self.ndim) if i not in (a, b)], a, b)
    r, c = x.shape[-2], x.shape[-1]
    x = x.shrink(tuple([None] * (x.ndim - 2)) + ((max(0, -offset), r), (max(0, offset), c))) if (offset < c and -offset < r) else \
      x.shrink(tuple([None] * (x.ndim - 2)) + ((0, 0), (0, 0)))
    return x._diag_last2()
  def _diag_last2(self) -> Tensor:
    r, c = self.shape[-2], self.shape[-1]
    n = min(r, c)
    lead = self.shape[:-2]
    if n == 0: return self.shrink(tuple([None] * len(lead)) + ((0, 0), (0, 0))).reshape(*lead, 0)  # still in self's graph
    # the diagonal of an n x n block is every (n+1)th element of its flattening
    x = self.shrink(tuple([None] * len(lead)) + ((0, n), (0, n))).reshape(*lead, n * n)
    x = x.pad(tuple([None] * len(lead)) + ((0, n),)).reshape(*lead, n, n + 1)
    return x.shrink(tuple([None] * len(lead)) + ((0, n), (0, 1))).reshape(*lead, n)
  def diag(self) -> Tensor:
    """A 1-D tensor becomes a diagonal matrix; a 2-D tensor gives its diagonal."""
    if self.ndim == 1:
      n = self.shape[0]
      if n == 0: return self.reshape(0, 1).shrink(((0, 0), (0, 0)))  # still in self's graph: backward() gives self a zero .grad
      return self.unsqueeze(-1).pad(((0, 0), (0, n))).flatten().shrink(((0, n * n),)).reshape(n, n)
    if self.ndim == 2: return self.diagonal()
    raise ValueError(f"diag needs a 1-D or 2-D tensor, got shape {self.shape}")
