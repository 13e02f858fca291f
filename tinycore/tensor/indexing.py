"""Tensor indexing: __getitem__ and __setitem__, gather and scatter, masked selection. Indexing with tensors is a
gather (a load at a loaded index, Function Gather) and its gradient, scatter and __setitem__ a scatter (Function
Scatter): their cost is the index's, and an index out of range raises IndexError at the next sync (tinycore.index_errors).
scatter's add and multiply and scatter_reduce (sum, prod, mean, amax, amin) are scatters too."""
from __future__ import annotations
from typing import TYPE_CHECKING, Any, Callable
import numpy as np
import tinycore.function as F
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.lazy import LazyBuffer, HOLDS_BUFFER
from tinycore.helpers import prod, flatten, ceildiv
from tinycore.errors import ShapeError, ArgumentError, ArgumentTypeError, DTypeError
from tinycore.uop.uop import UOp
from tinycore.tensor.args import _broadcast_shape, _is_sym
if TYPE_CHECKING: from tinycore.tensor import Tensor

_INT_OR_NONE = (int, type(None))

class IndexingMixin:
  __slots__ = ()

  # *** indexing ***
  def _index_tensor(self, t: Any) -> Tensor:
    """A list, numpy array or Tensor used as an index, as a Tensor (int or bool)."""
    if not isinstance(t, type(self)):
      arr = np.asarray(t)
      if arr.size == 0: arr = arr.astype(np.int32)
      if arr.dtype == object or arr.dtype.kind not in "iub": raise IndexError(f"tensors used as indices must be int or bool, got {t!r}")
      fits = arr.dtype.kind in "iu" and arr.size and arr.max(initial=0) < 2**31 and arr.min(initial=0) >= -2**31
      t = type(self)(arr.astype(np.int32) if fits else arr, device=self.device)
    if not (dtypes.is_int(t.dtype) or t.dtype == dtypes.bool): raise IndexError(f"tensors used as indices must be int or bool, got {t.dtype}")
    if t.device != self.device: t = t.to(self.device)
    return t
  def _plan(self, indices: Any) -> tuple[Tensor, list[tuple[int, Tensor]], Callable[[Tensor, bool], Tensor]]:
    """Apply the basic part of an index (ints, slices, None, Ellipsis) as views. Returns the view, the tensor indices
    as (dim in the view, int tensor), and a function that maps a tensor of the view's shape back onto self's
    shape (padding with `fill`), which __setitem__ uses."""
    # a list that holds sequences, slices, None or Ellipsis is a tuple of indices (numpy's old rule, kept by torch and
    # tinygrad: x[[[0, 1], [1, 2]]] is x[[0, 1], [1, 2]]); a tuple inside the index is an index list
    if isinstance(indices, list) and any(isinstance(i, (list, tuple, slice)) or i is None or i is Ellipsis for i in indices): indices = tuple(indices)
    idx = list(indices) if isinstance(indices, tuple) else [indices]
    # bool masks become one int index tensor per dim they cover (a data-dependent shape: the mask is realized)
    norm: list[Any] = []
    for i in idx:
      if isinstance(i, bool): raise IndexError("indexing with a python bool is not supported")
      if isinstance(i, (type(self), list, tuple, np.ndarray)):
        t = self._index_tensor(i)
        if t.dtype == dtypes.bool:
          nz = np.nonzero(t.numpy())
          norm.extend(type(self)(n.astype(np.int32), device=self.device) for n in nz)
          norm.append(("mask", t.ndim, t.shape))
          continue
        norm.append(t)
      elif i is None or i is Ellipsis or isinstance(i, slice) or isinstance(i, (int, np.integer)): norm.append(i)
      else: raise IndexError(f"cannot index with {type(i).__name__}: {i!r}")
    # a mask marker covers mask.ndim dims and checks their sizes; drop the marker, keep the int tensors
    items: list[Any] = []
    mask_dims: list[tuple[int, tuple]] = []
    for i in norm:
      if isinstance(i, tuple): mask_dims.append((len(items) - i[1], i[2]))
      else: items.append(i)
    if sum(1 for i in items if i is Ellipsis) > 1: raise IndexError("an index can only have a single ellipsis")
    n_real = sum(1 for i in items if i is not None and i is not Ellipsis)
    if n_real > self.ndim: raise IndexError(f"too many indices for tensor of dimension {self.ndim}: got {n_real}")
    if any(i is Ellipsis for i in items):
      e = next(k for k, i in enumerate(items) if i is Ellipsis)
      items[e:e + 1] = [slice(None)] * (self.ndim - n_real)
      mask_dims = [(p + (self.ndim - n_real - 1 if p > e else 0), s) for p, s in mask_dims]
    items += [slice(None)] * (self.ndim - sum(1 for i in items if i is not None))
    shrink, flips, strides, kinds = [], [], [], []
    tensors: list[tuple[int, Tensor]] = []
    dim = 0
    vdim = 0  # position in the view after ints are dropped and Nones inserted
    dim_of_item: dict[int, int] = {}
    for k, i in enumerate(items):
      if i is None:
        kinds.append("none"); vdim += 1  # noqa: E702
        continue
      size = self.shape[dim]
      dim_of_item[k] = dim
      if isinstance(i, type(self)):
        shrink.append((0, size)); flips.append(False); strides.append(1); kinds.append("tensor")  # noqa: E702
        tensors.append((vdim, i))
        vdim += 1
      elif isinstance(i, (int, np.integer)):
        j = int(i) + size if i < 0 else int(i)
        if not 0 <= j < size: raise IndexError(f"index {i} is out of bounds for dim {dim} with size {size}")
        shrink.append((j, j + 1)); flips.append(False); strides.append(1); kinds.append("int")  # noqa: E702
      elif any(_is_sym(v) for v in (i.start, i.stop)) or (isinstance(size, UOp) and i == slice(None)):
        # symbolic bounds: a plain [start:stop] shrink
        if i.step not in (None, 1): raise IndexError(f"a slice with a symbolic bound cannot have a step, got {i}")
        b, e = i.start if i.start is not None else 0, i.stop if i.stop is not None else size  # (shrink binds bound values)
        shrink.append((b, e)); flips.append(False); strides.append(1); kinds.append("slice")  # noqa: E702
        vdim += 1
      else:
        if i.step == 0: raise ValueError("slice step cannot be zero")
        start, stop, step = i.indices(size)
        if step > 0: b, e = start, max(start, stop)
        else: b, e = stop + 1, max(stop + 1, start + 1)
        shrink.append((b, e)); flips.append(step < 0); strides.append(abs(step)); kinds.append("slice")  # noqa: E702
        vdim += 1
      dim += 1
    for p, s in mask_dims:
      got = tuple(self.shape[dim_of_item[p + q]] for q in range(len(s))) if all(p + q in dim_of_item for q in range(len(s))) else None
      if got != tuple(s): raise IndexError(f"boolean mask of shape {tuple(s)} does not match the indexed dims {got} of {self.shape}")
    x = self.shrink(tuple(shrink))
    shrunk_shape = x.shape
    if any(flips): x = x.flip(tuple(d for d, f in enumerate(flips) if f))
    if any(s != 1 for s in strides):
      # a step is a pad to a multiple of it, a reshape into (n, step), and taking column 0
      x = x.pad(tuple((0, ceildiv(s, st) * st - s) for s, st in zip(x.shape, strides)))
      x = x.reshape(flatten((ceildiv(s, st), st) for s, st in zip(x.shape, strides)))
      x = x.shrink(tuple(flatten(((0, s), (0, 1)) for s in x.shape[::2]))).reshape(x.shape[::2])
    pre_shape = x.shape
    view_shape: list[int] = []
    it = iter(pre_shape)
    for kd in kinds:
      if kd == "none": view_shape.append(1)
      elif kd == "int": next(it)
      else: view_shape.append(next(it))
    x = x.reshape(tuple(view_shape))
    def unview(v: Tensor, fill: bool = False) -> Tensor:
      v = v.reshape(pre_shape)
      if any(s != 1 for s in strides):
        v = v.reshape(flatten((s, 1) for s in v.shape)).pad(tuple(flatten(((0, 0), (0, st - 1)) for st in strides)))
        v = v.reshape(tuple(s * st for s, st in zip(pre_shape, strides)))
        v = v.shrink(tuple((0, s) for s in shrunk_shape))
      if any(flips): v = v.flip(tuple(d for d, f in enumerate(flips) if f))
      return v.pad(tuple((b, s - e) for (b, e), s in zip(shrink, self.shape)), value=fill) if v.dtype != dtypes.bool or not fill else \
        v.pad(tuple((b, s - e) for (b, e), s in zip(shrink, self.shape)))
    return x, tensors, unview
  def _advanced(self, x: Tensor, tensors: list[tuple[int, Tensor]]) -> tuple[Tensor, tuple[int, ...], tuple[int, ...], Tensor, tuple, bool]:
    """Shared by get and set: x permuted to (rest..., indexed...) and flattened over the indexed dims, the broadcast
    index shape, the rest dims, the flat index (negatives wrapped), the range checks of each index tensor against its
    own dim (lazy INDEX_CHECKs, see tinycore.index_errors) and whether B goes in place."""
    tdims = [d for d, _ in tensors]
    try: bshape = _broadcast_shape(*[t.shape for _, t in tensors])
    except ValueError: raise IndexError(f"index tensors of shapes {[t.shape for _, t in tensors]} cannot be broadcast together") from None
    sizes = [x.shape[d] for d in tdims]
    pnum = prod(sizes)
    idt = dtypes.int64 if pnum >= 2**31 else dtypes.int32
    flat: Tensor | None = None
    bad: Tensor | None = None
    checks = []
    for (_, t), s, stride in zip(tensors, sizes, [prod(sizes[k + 1:]) for k in range(len(sizes))]):
      if s and t.numel(): checks.append(t.lazydata._index_check(s))  # (an empty axis: the gather reports it from the shapes)
      t = t.cast(idt).expand(bshape)
      out = (t < -s) | (t >= s)
      bad = out if bad is None else bad | out
      t = (t < 0).where(t + s, t) * stride
      flat = t if flat is None else flat + t
    assert flat is not None
    # an entry out of range in some dim (reported by that dim's check, with its own index and size) reads flat entry 0
    if bad is not None: flat = bad.where(0, flat)
    rest = [d for d in range(x.ndim) if d not in tdims]
    xp = x.permute(*rest, *tdims).reshape(*[x.shape[d] for d in rest], pnum)
    adjacent = tdims == list(range(tdims[0], tdims[0] + len(tdims)))
    return xp, bshape, tuple(rest), flat, tuple(checks), adjacent
  def __getitem__(self, indices: Any) -> Tensor:
    """numpy/torch indexing: ints, slices with any step (negative too), None, Ellipsis, integer tensors/lists (a gather:
    cost of the output; an index out of range raises IndexError at the next sync) and bool masks (realized to find
    their true entries)."""
    if indices.__class__ is slice and indices.step is None and indices.start.__class__ in _INT_OR_NONE and \
       indices.stop.__class__ in _INT_OR_NONE and self.shape and self.shape[0].__class__ is int:
      # x[a:b], a training loop's batch: the shrink _plan makes, without its general walk (~40 us, twice a step)
      b, e, _ = indices.indices(self.shape[0])
      return self.shrink(((b, max(b, e)),) + (None,) * (self.ndim - 1))
    x, tensors, _ = self._plan(indices)
    if not tensors: return x
    if len(tensors) == 1:
      # one index tensor: a gather along its dim, the result's other dims in place (rows of the table stay contiguous)
      (p, t), n = tensors[0], tensors[0][1].numel()
      idx = t.reshape(*[1] * p, n, *[1] * (x.ndim - p - 1)).expand(*x.shape[:p], n, *x.shape[p + 1:])
      return x._gather(idx, p).reshape((*x.shape[:p], *t.shape, *x.shape[p + 1:]))  # a tuple: it may be () (a 0-d index)
    xp, bshape, rest, flat, checks, adjacent = self._advanced(x, tensors)
    nr, nb = len(rest), len(bshape)
    rshape, nbt = xp.shape[:-1], prod(bshape)
    out = xp._gather(flat.reshape(*[1] * nr, nbt).expand(*rshape, nbt), nr, checks).reshape((*rshape, *bshape))  # (rest..., B...)
    if adjacent and nr:
      p = tensors[0][0]
      out = out.permute(*range(p), *range(nr, nr + nb), *range(p, nr))
    elif nr: out = out.permute(*range(nr, nr + nb), *range(nr))
    return out
  def _gather(self, idx: Tensor, axis: int, checks: tuple = ()) -> Tensor:
    """self's entries at idx along axis (idx has self's shape except at axis): a load at the loaded index, O(idx's
    size). A negative index counts from the end; one out of range raises IndexError at the next sync. `checks`: more
    index checks to run with it (x[i, j]'s, per index tensor)."""
    return F.Gather.apply(self, idx, axis=axis, checks=checks)
  def _scatter(self, idx: Tensor, src: Tensor | float, axis: int, op: Ops | None = Ops.ADD, checks: tuple = ()) -> Tensor:
    """self with src added (op ADD), multiplied in (MUL) or written (None: the last write wins) at idx along axis (idx and src: self's shape
    except at axis), repeated indices combining in order: O(idx's size) plus a copy of self."""
    if not isinstance(src, type(self)): src = self.full(idx.shape, src, dtype=self.dtype, device=self.device)
    return F.Scatter.apply(self, idx, src.cast(self.dtype), axis=axis, op=op, checks=checks)
  @classmethod
  def _select_sum(cls, mask: Tensor, x: Tensor, axis: int = -1) -> Tensor:
    """sum over axis of where(mask, x, 0), exact for every dtype when at most one entry is selected."""
    if x.dtype == dtypes.bool: return cls._select_sum(mask, x.cast(dtypes.uint8), axis).cast(dtypes.bool)
    return mask.where(x, 0).sum(axis, dtype=x.dtype)
  def __setitem__(self, indices: Any, v: Any) -> None:
    """Write v (broadcast to the indexed shape) into the indexed elements; with repeated tensor indices the last write
    wins (a scatter; an index out of range raises IndexError at the next sync). Not differentiable."""
    if self.requires_grad or (isinstance(v, type(self)) and v.requires_grad):
      raise RuntimeError("setitem on a tensor that requires grad is not supported")
    x, tensors, unview = self._plan(indices)
    if not isinstance(v, type(self)): v = type(self)(v, device=self.device, dtype=self.dtype)
    v = v.cast(self.dtype)
    if not tensors:
      try: v = v.expand(x.shape) if v.shape != x.shape else v
      except ValueError: raise ValueError(f"cannot assign a value of shape {v.shape} to an index of shape {x.shape}") from None
      # a view of a buffer: written through, in place (one kernel over the view); a padded view (a step that does not
      # divide the size) rewrites the whole buffer below
      if type(x.lazydata) is LazyBuffer and x.lazydata.base.op in HOLDS_BUFFER and all(v.mask is None for v in x.lazydata.st.views):
        x.assign(v).realize()
        return
      vfull = unview(v.contiguous() if v.lazydata.st.contiguous is False else v)
      mask = unview(self.ones(x.shape, dtype=dtypes.bool, device=self.device), True)
    else:
      xp, bshape, rest, flat, checks, adjacent = self._advanced(x, tensors)
      nr, nb = len(rest), len(bshape)
      rshape = tuple(x.shape[d] for d in rest)
      oshape = (rshape[:tensors[0][0]] + bshape + rshape[tensors[0][0]:]) if adjacent else bshape + rshape
      try: v = v.expand(oshape) if v.shape != oshape else v
      except ValueError: raise ValueError(f"cannot assign a value of shape {v.shape} to an index of shape {oshape}") from None
      # v as (rest..., B...)
      if adjacent and nr:
        p = tensors[0][0]
        v = v.permute(*range(p), *range(p + nb, nb + nr), *range(p, p + nb))
      elif nr: v = v.permute(*range(nb, nb + nr), *range(nb))
      nbt = prod(bshape)
      # xp with v written at the flat index (a scatter: the last write wins), (rest..., P)
      vals = xp._scatter(flat.reshape(*[1] * nr, nbt).expand(*rshape, nbt), v.reshape(*rshape, nbt), nr, None, checks)
      tsz = [x.shape[d] for d, _ in tensors]
      tdims = [d for d, _ in tensors]
      inv = np.argsort(list(rest) + tdims).tolist()
      vview = vals.reshape(*rshape, *tsz).permute(*inv)
      vfull, mask = unview(vview), unview(self.ones(x.shape, dtype=dtypes.bool, device=self.device), True)
    self.assign(mask.where(vfull, self)).realize()
  def _dim_index(self, dim: int, index: Any, name: str) -> tuple[int, Tensor]:
    """The checked dim and index tensor of gather/scatter: integer dtype, self's number of dims."""
    d = self._resolve_dim(dim)
    if isinstance(index, type(self)) and not dtypes.is_int(index.dtype):
      raise DTypeError(f"{name} index must be an integer tensor, got {index.dtype}")
    index = self._index_tensor(index)
    if not dtypes.is_int(index.dtype): raise DTypeError(f"{name} index must be an integer tensor, got {index.dtype}")
    if index.ndim != self.ndim: raise ShapeError(f"{name} index needs {self.ndim} dims like self {self.shape}, got {index.shape}")
    return d, index
  def gather(self, dim: int, index: Tensor) -> Tensor:
    """out[i][j] = self[index[i][j]][j] for dim=0 (as torch.gather): index has self's ndim and is no larger elsewhere."""
    d, index = self._dim_index(dim, index, "gather")
    for i, (a, b) in enumerate(zip(index.shape, self.shape)):
      if i != d and a > b: raise ShapeError(f"gather index shape {index.shape} is larger than self {self.shape} at dim {i}")
    return self.shrink(tuple((0, s) if i != d else None for i, s in enumerate(index.shape)))._gather(index, d)
  def _scatter_setup(self, dim: int, index: Tensor, src: Any, name: str) -> tuple[int, Tensor, Tensor, tuple]:
    """The checked dim, index and src (cut to index's shape, in self's dtype), and the pad from index's sizes back to self's."""
    d, index = self._dim_index(dim, index, name)
    if not isinstance(src, type(self)): src = self.full(index.shape, src, dtype=self.dtype, device=self.device)
    elif src.dtype != self.dtype: raise DTypeError(f"{name} needs src of self's dtype {self.dtype}, got {src.dtype} (as torch)")
    if src.ndim != self.ndim: raise ShapeError(f"{name} src needs {self.ndim} dims, got {src.shape}")
    for i, (a, b, c) in enumerate(zip(index.shape, self.shape, src.shape)):
      if (i != d and a > b) or a > c:
        raise ShapeError(f"{name} index shape {index.shape} is larger than self {self.shape} or src {src.shape} at dim {i}")
    src = src.shrink(tuple((0, a) for a in index.shape)).cast(self.dtype)
    pad = tuple((0, self.shape[i] - index.shape[i]) if i != d else (0, 0) for i in range(self.ndim))
    return d, index, src, pad
  def _in_region(self, pad: tuple, fn: Callable[[Tensor], Tensor]) -> Tensor:
    """fn of the part of self that a scatter's index covers (self cut by pad), self elsewhere."""
    part = fn(self.shrink(tuple((0, s - p[1]) for s, p in zip(self.shape, pad))))
    if not any(p[1] for p in pad): return part
    return self.ones(part.shape, dtype=dtypes.bool, device=self.device).pad(pad).where(part.pad(pad), self)
  def scatter(self, dim: int, index: Tensor, src: Tensor | float, reduce: str | None = None) -> Tensor:
    """self with src[i][j] written to position index[i][j] along dim (as torch.scatter); reduce None (the last write
    to a position wins), 'add' or 'multiply' (a python number src only, as tinygrad 0.14: scatter_reduce takes a tensor). An index out of range
    raises IndexError at the next sync."""
    if reduce not in (None, "add", "multiply"): raise ArgumentTypeError(f"scatter reduce must be None, 'add' or 'multiply', got {reduce!r}")
    if reduce is not None and isinstance(src, type(self)):  # tinygrad 0.14's rule (TypeError), checked before the dims
      raise ArgumentTypeError(f"scatter with reduce={reduce!r} takes a python number src; for a tensor src use scatter_reduce(dim, index, src, "
                              f"{'sum' if reduce == 'add' else 'prod'!r})")
    d, index, src, pad = self._scatter_setup(dim, index, src, "scatter")
    return self._in_region(pad, lambda r: r._scatter(index, src, d, {None: None, "add": Ops.ADD, "multiply": Ops.MUL}[reduce]))
  def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True) -> Tensor:
    """Reduce src into self at index along dim (as torch.scatter_reduce): reduce 'sum', 'prod', 'mean', 'amax' or 'amin';
    include_self=False leaves self's value out of positions that receive something."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
      raise ArgumentError(f"scatter_reduce reduce must be sum, prod, mean, amax or amin, got {reduce!r}")
    d, index, src, pad = self._scatter_setup(dim, index, src, "scatter_reduce")
    if reduce in ("amax", "amin"): return self._in_region(pad, lambda r: r._scatter_extreme(index, src, d, reduce == "amax", include_self))
    def part(r: Tensor) -> Tensor:
      cnt = self.zeros(r.shape, dtype=r.dtype, device=r.device)._scatter(index, 1, d)
      hit = cnt > 0
      # include_self=False: the targets start from the reduction's identity
      v = (r if include_self else hit.where(1 if reduce == "prod" else 0, r))._scatter(index, src, d, Ops.MUL if reduce == "prod" else Ops.ADD)
      if reduce != "mean": return v
      n = (cnt + (1 if include_self else 0)).maximum(1)
      return hit.where((v / n if dtypes.is_float(r.dtype) else v // n).cast(r.dtype), r)
    return self._in_region(pad, part)
  def _scatter_extreme(self, idx: Tensor, src: Tensor, d: int, amax: bool, include_self: bool) -> Tensor:
    """scatter_reduce amax / amin (self and src of index's shape). The value: a scatter that keeps the larger value
    (amin: of the negated values, ~ for integers), O(index) work. The gradient, as torch's: split evenly among the
    entries equal to the result, self's counted even where it takes no part (include_self=False, where it then gets
    none), through terms whose value is exactly zero."""
    def flip(t: Tensor) -> Tensor: return t if amax else -t if dtypes.is_float(t.dtype) else ~t
    cnt = self.zeros(self.shape, dtype=dtypes.int32, device=self.device, requires_grad=False)._scatter(idx, 1, d)
    hit = cnt > 0
    x = flip(self.detach()) if include_self else hit.where(dtypes.min(self.dtype), flip(self.detach()))
    v = flip(type(self)(x.lazydata.scatter(idx.lazydata, flip(src.detach()).lazydata, d, Ops.MAX), requires_grad=False))
    if not dtypes.is_float(self.dtype) or (self.requires_grad is False and src.requires_grad is False): return v
    at_self, at_src = self.detach() == v, src.detach() == v._gather(idx, d)
    n = at_self.cast(dtypes.int32) + cnt.zeros_like()._scatter(idx, at_src.cast(dtypes.int32), d)
    def zero(t: Tensor) -> Tensor:  # value 0, gradient 1 (where t is finite)
      f = t.isfinite().where(t, 0)
      return f - f.detach()
    w_self = (at_self if include_self else at_self & ~hit).where((1 / n).cast(self.dtype), 0)
    w_src = at_src.where((1 / n._gather(idx, d)).cast(self.dtype), 0)
    return v + zero(self) * w_self + self.zeros_like(requires_grad=False)._scatter(idx, zero(src) * w_src, d)
  def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
    """self with value where mask is True (mask broadcasts)."""
    return self._as_bool(mask, self.device).where(value, self)
  @classmethod
  def _as_bool(cls, mask: Any, device: str) -> Tensor:
    m = mask if isinstance(mask, cls) else cls(mask, device=device)
    if m.dtype != dtypes.bool: raise TypeError(f"a mask must be a bool tensor, got {m.dtype}")
    return m
  def masked_select(self, mask: Tensor, size: int | None = None, fill_value: Any = 0) -> Tensor:
    """The elements where mask (broadcast with self) is True, as a 1-D tensor. With size=None the mask is realized to
    count them; with size=N the result has N elements, the selected ones first, cut or padded with fill_value, and
    nothing is realized (so it can run inside a TinyJit)."""
    m = self._as_bool(mask, self.device)
    x, m = self._broadcast_pair(m)
    if size is None: return x[m]
    return x.flatten()._first_selected(m.flatten(), size, fill_value)
  def _first_selected(self, m: Tensor, size: int, fill_value: Any) -> Tensor:
    """(size, ...): the rows of self (M, ...) where the bool m (M,) is True, in order, then fill_value rows."""
    if not isinstance(size, int) or size < 0: raise ArgumentError(f"size must be a non-negative int, got {size!r}")
    n = self.shape[0]
    if n == 0 or size == 0: return self.full((size, *self.shape[1:]), fill_value, dtype=self.dtype, device=self.device)
    # a selected element goes to slot (its running count of selected ones - 1), the others (and those past size) to a
    # spare slot `size` that is cut off: a scatter, O(M) work
    rank = m.cast(dtypes.int32).cumsum() - 1
    slot = (m & (rank < size)).where(rank, size).reshape(n, *[1] * (self.ndim - 1)).expand(self.shape)
    out = self.full((size + 1, *self.shape[1:]), fill_value, dtype=self.dtype, device=self.device)
    return out._scatter(slot, self, 0, None).shrink(((0, size), *[(0, s) for s in self.shape[1:]]))
  def nonzero(self, size: int | None = None, fill_value: Any = 0) -> Tensor:
    """(n, ndim) int32 indices of the nonzero elements, in row-major order (as torch.nonzero). size=None realizes self
    to count them; size=N gives N rows, cut or padded with fill_value, without realizing."""
    if size is None:
      return type(self)(np.argwhere(self.detach().numpy() != 0).astype(np.int32), device=self.device)  # (n, ndim), also for 0-d
    coords = [self._iota(self.numel(), self.device).reshape(self.shape) // prod(self.shape[d + 1:]) % s for d, s in enumerate(self.shape)]
    flat = type(self).stack(*[c.flatten() for c in coords], dim=-1) if coords else self.zeros(1, 0, dtype=dtypes.int32, device=self.device)
    return flat._first_selected((self != 0).flatten(), size, fill_value)
  def _broadcast_pair(self, m: Tensor) -> tuple[Tensor, Tensor]:
    try: shape = _broadcast_shape(self.shape, m.shape)
    except ValueError: raise ShapeError(f"mask of shape {m.shape} cannot be broadcast with {self.shape}") from None
    return self.expand(shape), m.expand(shape)
