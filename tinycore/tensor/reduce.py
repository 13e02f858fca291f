"""Tensor reductions (sum, max, mean, var, arg-reductions) and cumulative ops and sorting: reductions over triangular
masks or a log-depth scan, as there is no scan primitive."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Any, Callable, Sequence
import tinycore.function as F
from tinycore.dtype import DType, dtypes, least_upper_dtype, to_dtype
from tinycore.helpers import prod, ceildiv
from tinycore.lazy import LazyBuffer
from tinycore.errors import ShapeError
from tinycore.ops import Ops
from tinycore.uop.uop import UOp
from tinycore.uop.symbolic import ssimplify
if TYPE_CHECKING: from tinycore.tensor import Tensor

class ReduceMixin:
  __slots__ = ()

  # *** reductions ***
  def _reduce(self, fxn: type[F.Function], axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    axes = self._axes(axis)
    ret = fxn.apply(self, axis=axes)
    return ret if keepdim else ret.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))
  def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | str | None = None,
          acc_dtype: DType | str | None = None) -> Tensor:
    """Sum over axis (all axes when None). Small ints and bools sum in int32 (uint32 for unsigned); half floats
    accumulate in float32 and return their own dtype; `dtype` picks the accumulation and output dtype."""
    dtype = dtype if dtype is not None else acc_dtype
    if dtype is None:
      if self.dtype == dtypes.bool or (dtypes.is_int(self.dtype) and self.dtype.itemsize < 4):
        acc = dtypes.uint32 if dtypes.is_unsigned(self.dtype) else dtypes.int32
      elif self.dtype in (dtypes.float16, dtypes.bfloat16): acc = dtypes.float32
      else: acc = self.dtype
    else: acc = to_dtype(dtype)
    out = self.cast(acc)._reduce(F.Sum, axis, keepdim)
    return out.cast(self.dtype) if dtype is None and self.dtype in (dtypes.float16, dtypes.bfloat16) else out
  def _product_operands(self, w: Tensor, dtype: DType | str | None) -> tuple[Tensor, Tensor, DType]:
    """self and w as the operands of a product that is summed (dot, conv), and the dtype of the result: `dtype`, else
    the operands' common dtype. 16-bit floats are multiplied in the float32 (or wider float `dtype`) they are summed in:
    the product of two halves is exact in float32, and torch and numpy accumulate it so; rounded to half before the
    sum, each term lost up to half an ulp (ONNX's fp16 causal conv and causal attention: outputs 1-2 ulps off)."""
    out = to_dtype(dtype) if dtype is not None else least_upper_dtype(self.dtype, w.dtype)
    acc = to_dtype(dtype) if dtype is not None else dtypes.float32
    if not (dtypes.is_float(acc) and acc.itemsize >= 4 and {self.dtype, w.dtype} & {dtypes.float16, dtypes.bfloat16}): return self, w, out
    return self.cast(least_upper_dtype(self.dtype, acc)), w.cast(least_upper_dtype(w.dtype, acc)), out
  def _check_nonempty(self, axis: Any, what: str) -> None:
    for a in self._axes(axis):
      if self.shape[a] == 0: raise ShapeError(f"{what} of an empty dim: dim {a} of shape {self.shape} has size 0")
  def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """Max over axis (all when None); NaN propagates; the gradient is shared between ties. An empty reduction gives the
    dtype's smallest value (-inf for floats), as tinygrad."""
    return self._reduce(F.Max, axis, keepdim)
  def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """Min over axis (all when None); NaN propagates; an empty reduction gives the dtype's largest value (inf)."""
    if self.dtype == dtypes.bool: return self.logical_not().max(axis, keepdim).logical_not()
    if dtypes.is_int(self.dtype): return ~((~self).max(axis, keepdim))
    return -((-self).max(axis, keepdim))
  def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """Arithmetic mean over axis (ints give a float); NaN for an empty reduction."""
    out = self._float().sum(axis, keepdim)
    n = ssimplify(prod(s for i, s in enumerate(self.shape) if i in self._axes(axis)))
    if isinstance(n, UOp): return out / self._symbolic_count(n, out)
    return out / n if n else out * math.nan
  def _symbolic_count(self, n: UOp, like: Tensor) -> Tensor:
    # a count over symbolic dims: a constant whose value the kernel works out from this tensor's bound Variables
    return type(self)(LazyBuffer.const_of(n, like.dtype, self.device, (), self.lazydata.var_vals), requires_grad=False)
  def var(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    """Variance over axis with Bessel's correction (correction=1) by default."""
    x = self._float()
    sq = (x - x.mean(axis, keepdim=True)).square().sum(axis, keepdim)
    n = ssimplify(prod(s for i, s in enumerate(self.shape) if i in self._axes(axis)))
    if isinstance(n, UOp): return sq / self._symbolic_count((n - correction).maximum(0), sq)  # n - correction <= 0: inf or NaN
    return sq / max(0, n - correction) if n - correction > 0 else sq * math.inf if n else sq * math.nan
  def std(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    """Standard deviation over axis; where it is 0 its gradient is 0 (as torch and tinygrad 0.14), not sqrt's inf * 0 = NaN."""
    v = self.var(axis, keepdim, correction)
    return (v == 0).detach().where(0, v).sqrt()
  def var_mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
    """(var, mean) over axis."""
    return self.var(axis, keepdim, correction), self.mean(axis, keepdim)
  def std_mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
    """(std, mean) over axis."""
    return self.std(axis, keepdim, correction), self.mean(axis, keepdim)
  def prod(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, dtype: DType | str | None = None) -> Tensor:
    """Product over axis (all when None): a tree of multiplications, exact for integers; 1 for an empty reduction."""
    x = self.cast(to_dtype(dtype)) if dtype is not None else self
    axes = self._axes(axis)
    keep = [i for i in range(self.ndim) if i not in axes]
    y = x.permute(*keep, *axes).reshape(*[self.shape[i] for i in keep], prod(self.shape[i] for i in axes)) if self.ndim else x.reshape(1)
    n, levels = y.shape[-1], 0
    # pad once with ones to a power of two, then halve: each level multiplies pairs; a kernel every four levels
    p2 = 1 << max(0, (n - 1).bit_length())
    if p2 != n: y, n = y.pad(((0, 0),) * (y.ndim - 1) + ((0, p2 - n),), value=1), p2
    while n > 1:
      y = y.reshape(*y.shape[:-1], n // 2, 2)
      y = y[..., 0] * y[..., 1]
      n, levels = n // 2, levels + 1
      # the gradient is realized at the same places: through all levels it would be read along every path (2**levels views)
      if levels % 4 == 0 and n > 1: y = y.contiguous().contiguous_backward()
    y = y.reshape(y.shape[:-1])
    return y.reshape(tuple(1 if i in axes else s for i, s in enumerate(self.shape))) if keepdim else y
  def _argfirst(self, mask: Tensor, axis: int, keepdim: bool) -> Tensor:
    n = self.shape[axis]
    rev = (n - 1) - self._iota(n, self.device).reshape(n, *[1] * (self.ndim - axis - 1))
    return ((n - 1) - mask.where(rev, -1).max(axis, keepdim)).cast(dtypes.int32)
  def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first max along axis (of the flattened tensor when None); a NaN counts as the max. int32."""
    if axis is None: return self.flatten().argmax(0).reshape((1,) * self.ndim if keepdim else ())
    a = self._resolve_dim(axis)
    self._check_nonempty(a, "argmax")
    x = self.detach()
    m = x.max(a, keepdim=True)
    mask = (x == m) | (x != x) if dtypes.is_float(x.dtype) else (x == m)
    return self._argfirst(mask, a, keepdim)
  def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first min along axis (of the flattened tensor when None); a NaN counts as the min. int32."""
    x = self.detach()
    neg = x.logical_not() if x.dtype == dtypes.bool else ~x if dtypes.is_int(x.dtype) else -x
    return neg.argmax(axis, keepdim)
  def any(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """True where any element along axis is nonzero."""
    return self.bool().max(axis, keepdim) if all(self.shape[a] for a in self._axes(axis)) else \
      self.full(tuple(1 if i in self._axes(axis) else s for i, s in enumerate(self.shape)) if keepdim else
                  tuple(s for i, s in enumerate(self.shape) if i not in self._axes(axis)), False, device=self.device)
  def all(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """True where every element along axis is nonzero."""
    return self.logical_not().any(axis, keepdim).logical_not()
  def logsumexp(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
    """log(sum(exp(self))) over axis, computed stably."""
    x = self._float()
    m = x.detach().max(axis, keepdim=True)
    m = m.isinf().where(0, m)
    out = (x - m).exp().sum(axis, keepdim=True).log() + m
    return out if keepdim else out.reshape(tuple(s for i, s in enumerate(self.shape) if i not in self._axes(axis)))
  def softmax(self, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
    """exp(self) / sum(exp(self)) along axis, computed stably."""
    x = self.cast(to_dtype(dtype)) if dtype is not None else self._float()
    e = (x - x.detach().max(axis, keepdim=True)).exp()
    return e / e.sum(axis, keepdim=True)
  def softmin(self, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
    """softmax(-self): weights that favour the smallest elements."""
    return (-self).softmax(axis, dtype)
  def logaddexp(self, other: Any) -> Tensor:
    """log(exp(self) + exp(other)) elementwise, computed stably (-inf with -inf gives -inf, inf gives inf)."""
    a, b = self._broadcasted(other)
    a, b = a._float(), b._float()
    m = a.detach().maximum(b.detach())
    m = m.isinf().where(0, m)  # both infinite: shifting by them would give inf - inf
    return ((a - m).exp() + (b - m).exp()).log() + m
  def log_softmax(self, axis: int = -1, dtype: DType | str | None = None) -> Tensor:
    """self - logsumexp(self) along axis."""
    x = self.cast(to_dtype(dtype)) if dtype is not None else self._float()
    # the shift by the max carries no gradient: made on the lazy graph (the graph of `x.detach().max(axis, keepdim=True)`
    # broadcast to x, without its Function.apply), a Link to x as detach records
    xl = x.lazydata
    m = x - type(self)(xl.reduce(Ops.MAX, x._axes(axis)).expand(xl.shape), requires_grad=False)._link(x)
    return m - m.exp().sum(axis, keepdim=True).log()

  # *** cumulative ops and sorting ***
  def _to_last(self, axis: int) -> tuple[Tensor, Callable[[Tensor], Tensor]]:
    a = self._resolve_dim(axis)
    if self.ndim == 0: return self.reshape(1), lambda t: t.reshape(())
    if a == self.ndim - 1: return self, lambda t: t
    return self.transpose(a, -1), lambda t: t.transpose(a, -1)
  @classmethod
  def _cumsum_last(cls, x: Tensor) -> Tensor:
    n = x.shape[-1]
    if n <= 1: return x
    if n <= 512:
      # out[i] = sum over j <= i: a triangular mask and one reduce
      tri = cls._iota(n, x.device).reshape(n, 1) >= cls._iota(n, x.device).reshape(1, n)
      return tri.where(x.unsqueeze(-2), 0).sum(-1, dtype=x.dtype)
    # long axes: scan blocks of 256, then add the scanned block totals
    b, m = 256, ceildiv(n, 256)
    lead = x.shape[:-1]
    xb = x.pad(((0, 0),) * len(lead) + ((0, m * b - n),)).reshape(*lead, m, b)
    inner = cls._cumsum_last(xb)
    tot = cls._cumsum_last(inner[..., -1])
    offs = tot.pad(((0, 0),) * len(lead) + ((1, 0),)).shrink(tuple([None] * len(lead)) + ((0, m),))
    return (inner + offs.unsqueeze(-1)).reshape(*lead, m * b).shrink(tuple([None] * len(lead)) + ((0, n),))
  def cumsum(self, axis: int = 0) -> Tensor:
    """Running sum along axis (dtype as sum)."""
    x, back = self._to_last(axis)
    acc = x.sum(-1, keepdim=True).dtype if x.shape[-1] else x.dtype
    return back(self._cumsum_last(x.cast(acc)).cast(acc if self.dtype not in (dtypes.float16, dtypes.bfloat16) else self.dtype))
  @classmethod
  def _scan_last(cls, x: Tensor, fn: Callable[[Tensor, Tensor], Tensor], identity: Any) -> Tensor:
    """Hillis-Steele inclusive scan: log2(n) steps of fn(x, x shifted), a kernel every three steps."""
    n, s, steps = x.shape[-1], 1, 0
    pads = ((0, 0),) * (x.ndim - 1)
    while s < n:
      # shift by s, filling with the identity: a zero pad plus a constant that is the identity only where padded
      # (no WHERE, so the next step's pad can still fuse through)
      fill = cls.full((*x.shape[:-1], s), identity, dtype=x.dtype, device=x.device).pad(pads + ((0, n - s),))
      shifted = x.shrink(tuple([None] * (x.ndim - 1)) + ((0, n - s),)).pad(pads + ((s, 0),)) + fill
      x = fn(x, shifted)
      s, steps = s * 2, steps + 1
      if steps % 3 == 0 and s < n: x = x.contiguous().contiguous_backward()  # (the gradient too: see prod)
    return x
  @classmethod
  def _tri_last(cls, x: Tensor, identity: Any) -> Tensor:
    """(..., n, n): row i holds x[..., j] for j <= i and the identity after."""
    n = x.shape[-1]
    tri = cls._iota(n, x.device).reshape(n, 1) >= cls._iota(n, x.device).reshape(1, n)
    return tri.where(x.unsqueeze(-2), identity)
  def cumprod(self, axis: int) -> Tensor:
    """Running product along axis (a triangular mask and a product tree up to 512, a log-depth scan beyond)."""
    x, back = self._to_last(axis)
    if x.shape[-1] <= 512: return back(self._tri_last(x, 1).prod(-1))
    return back(self._scan_last(x, lambda a, b: a * b, 1))
  @classmethod
  def _cummax_last(cls, x: Tensor) -> Tensor:
    if 0 < x.shape[-1] <= 512: return cls._tri_last(x, dtypes.min(x.dtype)).max(-1)
    return cls._scan_last(x, lambda a, b: a.maximum(b), dtypes.min(x.dtype))
  def cummax(self, axis: int = 0) -> tuple[Tensor, Tensor]:
    """(values, indices) of the running max along axis, as tinygrad 0.14: the index (int32) is where the running max
    took its value first (torch names the last of equal values); a NaN is the max from where it appears."""
    x, back = self._to_last(axis)
    v = self._cummax_last(x)
    n = x.shape[-1]
    if n == 0: return back(v), back(v.cast(dtypes.int32))
    vd, io = v.detach(), self._iota(n, x.device)
    prev = vd.shrink(tuple([None] * (x.ndim - 1)) + ((0, n - 1),)).pad(((0, 0),) * (x.ndim - 1) + ((1, 0),))
    new = (vd != prev) & ~(vd.isnan() & prev.isnan()) if dtypes.is_float(x.dtype) else vd != prev
    if dtypes.is_float(x.dtype): new = new | x.detach().isnan()
    new = new | (io == 0)  # the first element always starts a run
    return back(v), back(self._cummax_last(new.where(io, 0)))
  def cummin(self, axis: int = 0) -> tuple[Tensor, Tensor]:
    """(values, indices) of the running min along axis (see cummax)."""
    neg = self.logical_not() if self.dtype == dtypes.bool else ~self if dtypes.is_int(self.dtype) else -self
    v, i = neg.cummax(axis)
    return (v.logical_not() if self.dtype == dtypes.bool else ~v if dtypes.is_int(self.dtype) else -v), i
  def logcumsumexp(self, axis: int | None = 0) -> Tensor:
    """log(cumsum(exp(self))) along axis, computed stably (O(n^2) work along the axis); axis None: over the flattened tensor."""
    if axis is None: return self.flatten().logcumsumexp(0).reshape(self.shape if self.ndim == 0 else (-1,))
    x, back = self._to_last(axis)
    x = x._float()
    n = x.shape[-1]
    if n == 0: return back(x)
    c = self._cummax_last(x.detach())
    c = c.isinf().where(0, c)
    tri = self._iota(n, x.device).reshape(n, 1) >= self._iota(n, x.device).reshape(1, n)
    z = tri.where(x.unsqueeze(-2) - c.unsqueeze(-1), -math.inf)
    return back(z.exp().sum(-1).log() + c)
  def sort(self, dim: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
    """(values, indices) sorted along dim; NaN sorts as the largest, ties keep their order. O(n^2) work along dim."""
    x, back = self._to_last(dim)
    n = x.shape[-1]
    if n == 0: return back(x), back(x.cast(dtypes.int32))
    xd = x.detach()
    xi, xj = xd.unsqueeze(-1), xd.unsqueeze(-2)  # element i (rows) vs element j (columns)
    before = (xj > xi) if descending else (xj < xi)
    tie = xj == xi
    if dtypes.is_float(x.dtype):
      ni, nj = xi != xi, xj != xj
      before = (before | (nj & ni.logical_not())) if descending else (before | (ni & nj.logical_not()))
      tie = tie | (ni & nj)
    io = self._iota(n, x.device)
    earlier = io.reshape(1, n) < io.reshape(n, 1)
    rank = (before | (tie & earlier)).sum(-1, dtype=dtypes.int32)  # (..., n) position of element i
    onehot = rank.unsqueeze(-1) == io.reshape(1, n)  # (..., i, r)
    values = self._select_sum(onehot, x.unsqueeze(-1), axis=-2)
    indices = self._select_sum(onehot, io.reshape(n, 1).expand(*x.shape, 1), axis=-2)
    return back(values), back(indices)
  def argsort(self, dim: int = -1, descending: bool = False) -> Tensor:
    """The indices that sort along dim (int32)."""
    return self.sort(dim, descending)[1]
  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Tensor, Tensor]:
    """(values, indices) of the k largest (smallest with largest=False) along dim, always sorted."""
    d = self._resolve_dim(dim)
    if not isinstance(k, int) or not 0 <= k <= (self.shape[d] if self.ndim else 1):
      raise ValueError(f"topk k={k} is out of range for dim {d} of {self.shape}")
    v, i = self.sort(d, descending=largest)
    sl = tuple((0, k) if j == d else None for j in range(self.ndim))
    return (v.shrink(sl), i.shrink(sl)) if self.ndim else (v, i)
