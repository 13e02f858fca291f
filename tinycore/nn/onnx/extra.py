"""ONNX's remaining tensor ops: windows, cumulative products, bit casts, data-dependent selections (Compress, Unique),
per-batch reversal (ReverseSequence), crop-or-pad (CenterCropPad), unpooling, gated activations, integer convolutions
and matmuls, determinants (Det), n-gram counts of integer tokens (TfIdfVectorizer). Compress and Unique read back a
count: their output's length depends on the data."""
from __future__ import annotations
import math
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import ints, int_list, axis_of, dtype_of, read, scalar, DTYPES
from tinycore.nn.onnx.nn import Conv

def _window(name: str, terms: tuple[float, ...]) -> None:
  """A window sum_k terms[k] * cos(2 pi k n / N) over n < size (N = size when periodic, size - 1 otherwise)."""
  def impl(size: Tensor, /, *, output_datatype: int = 1, periodic: int = 1) -> Tensor:
    n = ints(size)
    den = n if periodic else n - 1
    i = Tensor.arange(n, dtype=dtypes.float64 if output_datatype == 11 else dtypes.float32)
    return sum((c * (i * (2 * math.pi * k / den)).cos() for k, c in enumerate(terms)), start=i * 0).cast(dtype_of(output_datatype, name))
  impl.__name__ = impl.__qualname__ = name
  impl.__doc__ = f"ONNX {name}"
  onnx_op(name=name, values={"output_datatype": tuple(DTYPES)})(impl)

_window("HannWindow", (0.5, -0.5))
_window("HammingWindow", (25 / 46, -21 / 46))
_window("BlackmanWindow", (0.42, -0.5, 0.08))

@onnx_op()
def Swish(x: Tensor, /, *, alpha: float = 1.0) -> Tensor: return x * (x * alpha).sigmoid()

@onnx_op()
def SwiGLU(a: Tensor, b: Tensor, /, *, alpha: float = 1.0) -> Tensor: return (a * (a * alpha).sigmoid() * b).cast(a.dtype)

@onnx_op()
def CumProd(x: Tensor, axis: Tensor, /, *, exclusive: int = 0, reverse: int = 0) -> Tensor:
  a = axis_of(ints(axis), x.ndim)
  if reverse: x = x.flip(a)
  if exclusive: x = x.pad([(1, -1) if i == a else (0, 0) for i in range(x.ndim)], value=1)
  out = x.cumprod(a).cast(x.dtype)
  return out.flip(a) if reverse else out

@onnx_op(values={"to": tuple(DTYPES)})
def BitCast(x: Tensor, /, *, to: int) -> Tensor:
  dt = dtype_of(to, "BitCast")
  if dt.itemsize != x.dtype.itemsize: raise NotImplementedError(f"ONNX BitCast between widths ({x.dtype.name} to {dt.name})")
  return x.bitcast(dt)

@onnx_op()
def Compress(x: Tensor, cond: Tensor, /, *, axis: int | None = None) -> Tensor:
  src, a = (x.flatten(), 0) if axis is None else (x, axis_of(axis, x.ndim))
  keep = [i for i, c in enumerate(read(cond)) if c and i < src.shape[a]]
  return src[(slice(None),) * a + (Tensor(keep, dtype=dtypes.int32),)] if keep else src.shrink([(0, 0) if i == a else None for i in range(src.ndim)])

@onnx_op()
def ReverseSequence(x: Tensor, lens: Tensor, /, *, batch_axis: int = 1, time_axis: int = 0) -> Tensor:
  """Reverses the first lens[b] steps along time_axis of batch b, the rest stays."""
  t = Tensor.arange(x.shape[time_axis]).reshape([-1 if i == time_axis else 1 for i in range(x.ndim)])
  n = lens.cast(dtypes.int32).reshape([-1 if i == batch_axis else 1 for i in range(x.ndim)])
  idx = (t < n).where(n - 1 - t, t).expand(x.shape)
  return x.gather(time_axis, idx)

@onnx_op()
def CenterCropPad(x: Tensor, shape: Tensor, /, *, axes: list[int] | None = None) -> Tensor:
  """Each listed dim is cropped around its centre, or zero-padded around it (the odd element at the end), to the size given."""
  sizes, ax = int_list(shape), [axis_of(a, x.ndim) for a in (axes if axes is not None else range(x.ndim))]
  for a, n in zip(ax, sizes):
    d = x.shape[a]
    lo = (d - n) // 2 if n < d else -((n - d) // 2)
    x = x.pad([(-lo, n - d + lo) if i == a else (0, 0) for i in range(x.ndim)])
  return x

@onnx_op()
def MaxUnpool(x: Tensor, idx: Tensor, output_shape: Tensor | None = None, /, *, kernel_shape: list[int], pads: list[int] | None = None,
              strides: list[int] | None = None) -> Tensor:
  """Each value goes to its MaxPool index (into the whole output, flattened); the rest is zero. The indices count in the
  shape the pool's input had by default ((n - 1) * stride + kernel - pads): with a different output_shape, each index's
  coordinates are kept and placed in the larger output."""
  nd = len(kernel_shape)
  s, p = strides or [1] * nd, pads or [0] * (2 * nd)
  default = [*x.shape[:2], *[(n - 1) * st + k - p[i] - p[i + nd] for i, (n, st, k) in enumerate(zip(x.shape[2:], s, kernel_shape))]]
  shape = int_list(output_shape) if output_shape is not None else default
  idx = idx.cast(dtypes.int64)
  if shape != default:
    rem, flat, stride = idx, idx * 0, 1
    for dd, od in zip(reversed(default), reversed(shape)):
      flat, rem, stride = flat + rem % dd * stride, rem // dd, stride * od
  else: flat = idx
  out = Tensor.zeros(math.prod(shape), dtype=x.dtype)
  return out.scatter(0, flat.flatten().cast(dtypes.int32), x.flatten()).reshape(shape)

@onnx_op()
def ConvInteger(x: Tensor, w: Tensor, x_zero: Tensor | None = None, w_zero: Tensor | None = None, /, *, auto_pad: str = "NOTSET",
                dilations: list[int] | None = None, group: int = 1, kernel_shape: list[int] | None = None, pads: list[int] | None = None,
                strides: list[int] | None = None) -> Tensor:
  """Conv of the zero-point-shifted integers in int32. Padding pads the shifted input with zeros, i.e. with x_zero itself."""
  xi = x.cast(dtypes.int32) - (x_zero.cast(dtypes.int32) if x_zero is not None else 0)
  wi = w.cast(dtypes.int32) - (w_zero.cast(dtypes.int32).reshape(-1, *[1] * (w.ndim - 1)) if w_zero is not None and w_zero.ndim else
                               w_zero.cast(dtypes.int32) if w_zero is not None else 0)
  return Conv(xi, wi, auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads, strides=strides)

@onnx_op()
def QLinearMatMul(a: Tensor, a_scale: Tensor, a_zero: Tensor, b: Tensor, b_scale: Tensor, b_zero: Tensor, y_scale: Tensor, y_zero: Tensor,
                  /) -> Tensor:
  """(a - a_zero) * a_scale @ (b - b_zero) * b_scale, requantized to y's scale and zero point (rounding half to even)."""
  af = (a.cast(dtypes.float32) - a_zero.cast(dtypes.float32)) * a_scale.cast(dtypes.float32)
  bf = (b.cast(dtypes.float32) - b_zero.cast(dtypes.float32)) * b_scale.cast(dtypes.float32)
  y = ((af @ bf) / y_scale.cast(dtypes.float32)).round() + y_zero.cast(dtypes.float32)
  return y.clip(dtypes.min(y_zero.dtype), dtypes.max(y_zero.dtype)).cast(y_zero.dtype)

@onnx_op()
def AffineGrid(theta: Tensor, size: Tensor, /, *, align_corners: int = 0) -> Tensor:
  """Sampling coordinates in [-1, 1] of every output position, moved by the batch's affine matrix: (N, *spatial, nd)."""
  n, _, *sp = int_list(size)
  def axis(length: int) -> Tensor:
    i = Tensor.arange(length, dtype=theta.dtype)
    return (i * (2 / (length - 1)) - 1 if length > 1 else i * 0) if align_corners else (i * 2 + 1) / length - 1
  # x runs along the last dim, y the one before, z (3-d) the first spatial one
  coords = [axis(length).reshape([-1 if j == k else 1 for j in range(len(sp))]).expand(sp) for k, length in enumerate(sp)][::-1]
  base = Tensor.stack(*coords, Tensor.ones(*sp, dtype=theta.dtype), dim=-1).reshape(1, -1, len(sp) + 1)
  return (base @ theta.transpose(1, 2)).reshape(n, *sp, len(sp))

@onnx_op()
def Unique(x: Tensor, /, *, axis: int | None = None, sorted: int = 1) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """The distinct elements (or slices along axis), sorted or in order of first appearance; the index of each one's first
  appearance, each input element's position among them, and their counts. Equality and order come from an (n, n)
  comparison of the n elements (slices compare lexicographically); only the number of distinct ones is read back."""
  a = axis_of(axis, x.ndim) if axis is not None else None
  rows = x.flatten().unsqueeze(1) if a is None else x.permute(a, *[i for i in range(x.ndim) if i != a]).reshape(x.shape[a], -1)
  n = rows.shape[0]
  ri, rj = rows.unsqueeze(1), rows.unsqueeze(0)  # (n, 1, r), (1, n, r): element i against element j
  ne = ri != rj
  same = ~ne.any(-1)
  # i sorts before j: at their first differing position i's entry is smaller
  first_diff = ne & (ne.cast(dtypes.int32).cumsum(-1) == 1)
  less = (first_diff & (ri < rj)).any(-1)
  ar = Tensor.arange(n)
  earlier = ar.reshape(1, n) < ar.reshape(n, 1)  # [i, j]: j comes before i
  is_first = ~(same & earlier).any(-1)
  # the place of each first appearance among the distinct ones: by value (sorted) or by position
  rank = (is_first.reshape(1, n) & (less.T if sorted else earlier)).cast(dtypes.int32).sum(-1)
  u = int(scalar(is_first.cast(dtypes.int32).sum()))
  pick = (rank.reshape(1, n) == Tensor.arange(u).reshape(u, 1)) & is_first.reshape(1, n)  # (u, n): the element at each place
  first_idx = pick.where(ar, 0).sum(-1).cast(dtypes.int64)
  inverse = (same & is_first.reshape(1, n)).where(rank.reshape(1, n), 0).sum(-1).cast(dtypes.int64)
  counts = (pick.where(same.cast(dtypes.int32).sum(-1).reshape(1, n), 0)).sum(-1).cast(dtypes.int64)
  y = rows[first_idx]
  if a is None: y = y.reshape(u)
  else:
    rest = [x.shape[i] for i in range(x.ndim) if i != a]
    y = y.reshape(u, *rest).permute(*range(1, a + 1), 0, *range(a + 1, x.ndim))
  return y, first_idx, inverse, counts

@onnx_op()
def Det(x: Tensor, /) -> Tensor:
  """Determinants of the trailing (n, n) matrices by Gaussian elimination with partial pivoting (the row with the
  largest entry in the column is swapped up, flipping the sign), unrolled over the n columns."""
  n = x.shape[-1]
  m, det = x, None
  ar = Tensor.arange(n).reshape(n, 1)
  for k in range(n):
    col = (Tensor.arange(n) < k).where(-1, m[..., :, k].abs())  # rows above k never pivot
    p = col.argmax(-1).unsqueeze(-1).unsqueeze(-1)  # (..., 1, 1)
    rows = (ar == k).where(p, (ar == p).where(k, ar))  # (..., n, 1): rows k and p swapped
    m = m.gather(-2, rows.expand(*m.shape))
    piv = m[..., k, k]
    d = (p.squeeze(-1).squeeze(-1) == k).where(piv, -piv)
    det = d if det is None else det * d
    if k + 1 < n:
      factor = (ar > k).where(m[..., :, k:k + 1] / (piv == 0).where(1, piv).unsqueeze(-1).unsqueeze(-1), 0)
      m = m - factor * m[..., k:k + 1, :]
  return det if det is not None else Tensor.ones(x.shape[:-2], dtype=x.dtype)

@onnx_op()
def QLinearConv(x: Tensor, x_scale: Tensor, x_zero: Tensor, w: Tensor, w_scale: Tensor, w_zero: Tensor, y_scale: Tensor, y_zero: Tensor,
                b: Tensor | None = None, /, *, auto_pad: str = "NOTSET", dilations: list[int] | None = None, group: int = 1,
                kernel_shape: list[int] | None = None, pads: list[int] | None = None, strides: list[int] | None = None) -> Tensor:
  """The integer convolution of the zero-point-shifted inputs (ConvInteger) plus the int32 bias, scaled by x_scale *
  w_scale (per output channel where w_scale is 1-d) / y_scale, rounded half to even, shifted by y_zero and saturated."""
  acc = ConvInteger(x, w, x_zero, w_zero, auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
                    strides=strides)
  if b is not None: acc = acc + b.cast(dtypes.int32).reshape(1, -1, *[1] * (acc.ndim - 2))
  ws = w_scale.cast(dtypes.float32).reshape(1, -1, *[1] * (acc.ndim - 2)) if w_scale.ndim else w_scale.cast(dtypes.float32)
  y = (acc.cast(dtypes.float32) * (x_scale.cast(dtypes.float32) * ws) / y_scale.cast(dtypes.float32)).round() + y_zero.cast(dtypes.float32)
  return y.clip(dtypes.min(y_zero.dtype), dtypes.max(y_zero.dtype)).cast(y_zero.dtype)

@onnx_op(values={"mode": ("TF", "IDF", "TFIDF")})
def TfIdfVectorizer(x: Tensor, /, *, mode: str, min_gram_length: int, max_gram_length: int, max_skip_count: int, ngram_counts: list[int],
                    ngram_indexes: list[int], pool_int64s: list[int], weights: list[float] | None = None) -> Tensor:
  """Counts of the pool's n-grams of integer tokens in each row of x (1-d: one row), weighted as `mode` says, at the
  output columns ngram_indexes names. The pool holds the 1-grams from ngram_counts[0], the 2-grams from ngram_counts[1],
  ...; an n-gram at distance d takes every d-th token (d - 1 skipped, d up to max_skip_count + 1; 1-grams once). For
  each size and distance the windows of all rows are compared with all the pool's n-grams of that size at once."""
  rows = x.reshape(1, -1) if x.ndim == 1 else x
  width, size = rows.shape[1], max(ngram_indexes) + 1
  freq = Tensor.zeros(rows.shape[0], size, dtype=dtypes.float32, device=x.device)
  bounds, first = [*ngram_counts, len(pool_int64s)], 0
  for n, (a, b) in enumerate(zip(bounds, bounds[1:]), start=1):
    grams, ids = [pool_int64s[i:i + n] for i in range(a, b, n)], ngram_indexes[first:first + (b - a) // n]
    first += len(grams)
    if not grams or not min_gram_length <= n <= max_gram_length: continue
    pool = Tensor(grams, dtype=rows.dtype, device=x.device).reshape(1, 1, len(grams), n)
    to_cols = Tensor([[float(i == c) for c in range(size)] for i in ids], dtype=dtypes.float32, device=x.device)
    for d in range(1, max_skip_count + 2 if n > 1 else 2):
      if (starts := width - d * (n - 1)) <= 0: continue
      windows = Tensor.stack(*[rows[:, j * d:j * d + starts] for j in range(n)], dim=-1)  # (rows, starts, n)
      hits = (windows.unsqueeze(2) == pool).cast(dtypes.int32).sum(-1) == n  # (rows, starts, pool n-grams)
      freq = freq + hits.cast(dtypes.float32).sum(1) @ to_cols
  w = Tensor(weights, dtype=dtypes.float32, device=x.device) if weights else 1.0
  y = freq if mode == "TF" else (freq > 0).cast(dtypes.float32) * w if mode == "IDF" else freq * w
  return y.reshape(size) if x.ndim == 1 else y
