"""ONNX's layers: convolutions, pooling, normalizations, matrix products.

Spatial attributes follow ONNX: `pads` lists every begin then every end ([x1_begin, x2_begin, x1_end, x2_end]);
`auto_pad` SAME_UPPER / SAME_LOWER pads so that the output is ceil(input / stride), the odd one at the end / the
begin; `strides` default to 1 (pools too), `dilations` to 1. Tensor's conv and pool methods take torch's padding
order (the last dim first), which `_torch_pads` writes. Normalizations compute in the input's dtype;
BatchNormalization's training_mode normalizes with the batch's statistics."""
from __future__ import annotations
import math
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.ops import GroupOp, Ops
from tinycore.lazy import LazyBuffer
from tinycore.device import is_dtype_supported
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import axis_of, dtype_of, int_list
from tinycore.nn.onnx.narrow import NARROW, NarrowInt

_AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")

def _pads(x: Tensor, kernel: list[int], auto_pad: str, pads: list[int] | None, strides: list[int], dilations: list[int]) -> list[tuple[int, int]]:
  """(begin, end) padding of each spatial dim."""
  nd = len(kernel)
  if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
    out = []
    for n, k, s, d in zip(x.shape[2:], kernel, strides, dilations):
      total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
      small = total // 2
      out.append((small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small))
    return out
  if auto_pad == "VALID" or not pads: return [(0, 0)] * nd
  return [(pads[i], pads[i + nd]) for i in range(nd)]

def _torch_pads(p: list[tuple[int, int]]) -> list[int]: return [v for b, e in reversed(p) for v in (b, e)]

def _spatial(x: Tensor, w_shape: tuple[int, ...] | None, kernel_shape: list[int] | None, strides: list[int] | None,
             dilations: list[int] | None) -> tuple[list[int], list[int], list[int]]:
  k = list(kernel_shape or w_shape[2:])  # type: ignore[index]
  return k, list(strides or [1] * len(k)), list(dilations or [1] * len(k))

@onnx_op(values={"auto_pad": _AUTO_PAD})
def Conv(x: Tensor, w: Tensor, b: Tensor | None = None, /, *, auto_pad: str = "NOTSET", dilations: list[int] | None = None, group: int = 1,
         kernel_shape: list[int] | None = None, pads: list[int] | None = None, strides: list[int] | None = None) -> Tensor:
  k, s, d = _spatial(x, w.shape, kernel_shape, strides, dilations)
  return x.conv2d(w, b, groups=group, stride=s, dilation=d, padding=_torch_pads(_pads(x, k, auto_pad, pads, s, d)))

@onnx_op(values={"auto_pad": _AUTO_PAD})
def ConvTranspose(x: Tensor, w: Tensor, b: Tensor | None = None, /, *, auto_pad: str = "NOTSET", dilations: list[int] | None = None, group: int = 1,
                  kernel_shape: list[int] | None = None, output_padding: list[int] | None = None, output_shape: list[int] | None = None,
                  pads: list[int] | None = None, strides: list[int] | None = None) -> Tensor:
  """With output_shape (or SAME auto_pad) the pads are what makes the output that size, as ONNX's formula says."""
  k, s, d = _spatial(x, w.shape, kernel_shape, strides, dilations)
  op = list(output_padding or [0] * len(k))
  if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
    target = output_shape[-len(k):] if output_shape is not None else [n * ss for n, ss in zip(x.shape[2:], s)]
    per = []
    for n, kk, ss, dd, o, t in zip(x.shape[2:], k, s, d, op, target):
      total = ss * (n - 1) + o + (kk - 1) * dd + 1 - t
      per.append((total // 2, total - total // 2) if auto_pad == "SAME_UPPER" else (total - total // 2, total // 2))
  else: per = _pads(x, k, auto_pad, pads, s, d)
  # the full transposed convolution (no padding), then each end cropped by its pad: a negative pad, or output_padding,
  # extends the output past every contribution, with zeros
  full = x.conv_transpose2d(w, None, groups=group, stride=s, dilation=d)
  out = full.pad([(0, 0), (0, 0)] + [(-pb, o - pe) for (pb, pe), o in zip(per, op)])
  return out if b is None else out + b.reshape(1, -1, *[1] * len(k))

def _pool_args(x: Tensor, kernel_shape: list[int], auto_pad: str, pads: list[int] | None, strides: list[int] | None,
               dilations: list[int] | None) -> tuple[list[int], list[int], list[int], list[int]]:
  k, s, d = _spatial(x, None, kernel_shape, strides, dilations)
  return k, s, d, _torch_pads(_pads(x, k, auto_pad, pads, s, d))

@onnx_op(values={"auto_pad": _AUTO_PAD, "storage_order": (0, 1)})
def MaxPool(x: Tensor, /, *, kernel_shape: list[int], auto_pad: str = "NOTSET", ceil_mode: int = 0, dilations: list[int] | None = None,
            pads: list[int] | None = None, storage_order: int = 0, strides: list[int] | None = None,
            _noutputs: int = 1) -> Tensor | tuple[Tensor, Tensor]:
  """The second output, where asked for, is each max's index into the whole input, flattened row-major (column-major in
  the spatial dims with storage_order=1)."""
  k, s, d, p = _pool_args(x, kernel_shape, auto_pad, pads, strides, dilations)
  if _noutputs < 2: return x.max_pool2d(k, s, d, p, bool(ceil_mode))
  y, idx = x.max_pool2d(k, s, d, p, bool(ceil_mode), return_indices=True)
  idx = idx.cast(dtypes.int64)
  if storage_order: idx = idx % x.shape[-1] * x.shape[-2] + idx // x.shape[-1]
  plane = math.prod(x.shape[2:])
  base = Tensor.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1], *[1] * len(k)) * plane
  return y, (idx + base).cast(dtypes.int64)

@onnx_op(values={"auto_pad": _AUTO_PAD})
def AveragePool(x: Tensor, /, *, kernel_shape: list[int], auto_pad: str = "NOTSET", ceil_mode: int = 0, count_include_pad: int = 0,
                dilations: list[int] | None = None, pads: list[int] | None = None, strides: list[int] | None = None) -> Tensor:
  k, s, d, p = _pool_args(x, kernel_shape, auto_pad, pads, strides, dilations)
  return x.avg_pool2d(k, s, d, p, bool(ceil_mode), bool(count_include_pad))

@onnx_op(values={"auto_pad": _AUTO_PAD})
def LpPool(x: Tensor, /, *, kernel_shape: list[int], p: int = 2, auto_pad: str = "NOTSET", ceil_mode: int = 0, dilations: list[int] | None = None,
           pads: list[int] | None = None, strides: list[int] | None = None) -> Tensor:
  k, s, d, pp = _pool_args(x, kernel_shape, auto_pad, pads, strides, dilations)
  return (x.abs().pow(p).avg_pool2d(k, s, d, pp, bool(ceil_mode), True) * math.prod(k)).pow(1 / p)

@onnx_op()
def GlobalAveragePool(x: Tensor, /) -> Tensor:
  """Each value is divided before the sum: large activations (the light models reach 1e36) would overflow a sum first."""
  return (x * (1 / math.prod(x.shape[2:]))).sum(tuple(range(2, x.ndim)), keepdim=True)
@onnx_op()
def GlobalMaxPool(x: Tensor, /) -> Tensor: return x.max(tuple(range(2, x.ndim)), keepdim=True)
@onnx_op()
def GlobalLpPool(x: Tensor, /, *, p: int = 2) -> Tensor: return x.abs().pow(p).sum(tuple(range(2, x.ndim)), keepdim=True).pow(1 / p)

def _channel(t: Tensor, ndim: int) -> Tensor: return t.reshape(1, -1, *[1] * (ndim - 2))

@onnx_op()
def BatchNormalization(x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor, /, *, epsilon: float = 1e-5, momentum: float = 0.9,
                       training_mode: int = 0, spatial: int = 1, is_test: int = 0,
                       consumed_inputs: list[int] | None = None) -> Tensor | tuple[Tensor, ...]:
  """Inference: normalise with the running statistics given. training_mode: with the batch's mean and (biased) variance
  over every axis but the channels', and also give the running statistics updated with `momentum`."""
  if not training_mode:
    return (x - _channel(mean, x.ndim)) * _channel((var + epsilon).rsqrt() * scale, x.ndim) + _channel(bias, x.ndim)
  axes = tuple(i for i in range(x.ndim) if i != 1)
  bmean = x.mean(axes)
  d = x - _channel(bmean, x.ndim)
  bvar = (d * d).mean(axes)
  y = d * _channel((bvar + epsilon).rsqrt() * scale, x.ndim) + _channel(bias, x.ndim)
  return y, mean * momentum + bmean * (1 - momentum), var * momentum + bvar * (1 - momentum)

def _normalize(x: Tensor, axes: tuple[int, ...], eps: float) -> tuple[Tensor, Tensor, Tensor]:
  mean = x.mean(axes, keepdim=True)
  y = x - mean
  inv = ((y * y).mean(axes, keepdim=True) + eps).rsqrt()
  return y * inv, mean, inv

@onnx_op()
def InstanceNormalization(x: Tensor, scale: Tensor, bias: Tensor, /, *, epsilon: float = 1e-5) -> Tensor:
  return _normalize(x, tuple(range(2, x.ndim)), epsilon)[0] * _channel(scale, x.ndim) + _channel(bias, x.ndim)

@onnx_op()
def LayerNormalization(x: Tensor, scale: Tensor, bias: Tensor | None = None, /, *, axis: int = -1, epsilon: float = 1e-5,
                       stash_type: int = 1) -> tuple[Tensor, Tensor, Tensor]:
  """Outputs Y, Mean and InvStdDev; the statistics are computed in float32 (stash_type 1) and Y cast back."""
  xf = x.cast(dtypes.float32) if stash_type == 1 and x.dtype != dtypes.float64 else x
  y, mean, inv = _normalize(xf, tuple(range(axis_of(axis, x.ndim), x.ndim)), epsilon)
  y = y.cast(x.dtype) * scale
  return (y + bias if bias is not None else y), mean, inv

@onnx_op(since=18, until=20)
def GroupNormalization(x: Tensor, scale: Tensor, bias: Tensor, /, *, num_groups: int, epsilon: float = 1e-5, stash_type: int = 1) -> Tensor:
  """Version 18 scales and shifts per group."""
  g = x.reshape(x.shape[0], num_groups, -1)
  y = _normalize(g, (2,), epsilon)[0] * scale.reshape(1, -1, 1) + bias.reshape(1, -1, 1)
  return y.reshape(x.shape)
@onnx_op(since=21, name="GroupNormalization")
def GroupNormalization21(x: Tensor, scale: Tensor, bias: Tensor, /, *, num_groups: int, epsilon: float = 1e-5, stash_type: int = 1) -> Tensor:
  """Version 21 on scales and shifts per channel."""
  y = _normalize(x.reshape(x.shape[0], num_groups, -1), (2,), epsilon)[0].reshape(x.shape)
  return y * _channel(scale, x.ndim) + _channel(bias, x.ndim)

@onnx_op()
def MeanVarianceNormalization(x: Tensor, /, *, axes: list[int] | None = None) -> Tensor:
  return _normalize(x, tuple(axes if axes is not None else (0, 2, 3)), 1e-9)[0]

@onnx_op()
def LRN(x: Tensor, /, *, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0) -> Tensor:
  """Each channel divided by a power of the sum of squares over `size` neighbouring channels."""
  sq, lo = x * x, (size - 1) // 2
  padded = sq.pad([(0, 0), (lo, size - 1 - lo)] + [(0, 0)] * (x.ndim - 2))
  total = sum(padded.shrink([(0, x.shape[0]), (i, i + x.shape[1])] + [(0, n) for n in x.shape[2:]]) for i in range(size))
  return x / (bias + alpha / size * total).pow(beta)

def _computed(x: Tensor) -> Tensor:
  """x computed into a buffer of its own before a matrix product reads it, where that pays: the scheduler fuses the
  elementwise ops that make an operand into the product's loads, where they run once per output column.
  - it pays where they read a reduce's result broadcast over the reduced axis (a normalization: LayerNormalization,
    Softmax): recomputed per column, the final LayerNormalization before a 1000-class head (and the residual chain it
    reads, 33 buffers) took 8.9 of the Transformer encoder's 11 ms of kernel time; computed once, one small kernel;
  - and where they read all of an unrealized reduce (a product's bias and activation): they become the store of the
    kernel that computes it, for free (the encoder's FFN: 307 -> 80 us);
  - not where they read buffers, or a part of a reduce (the scaled q and k of a packed q/k/v product, which is realized
    whole for its three readers): one cheap op per load beats a kernel more.
  Buffers, views of them and reduce outputs are read as they are."""
  lb = x.lazydata
  return x.contiguous() if lb.base is lb and lb.op in GroupOp.Elementwise and _pays(lb) else x

def _pays(lb: LazyBuffer, depth: int = 0) -> bool:
  """Whether the elementwise graph at lb reads an unrealized reduce broadcast or whole (see _computed)."""
  if depth > 32: return True  # a deep chain: computing it once is right whatever it reads
  for src in lb.srcs:
    base = src.base
    if base.op is Ops.REDUCE_AXIS and src.size >= base.size: return True
    if base.op in GroupOp.Elementwise and src.size >= base.size and _pays(base, depth + 1): return True
  return False

@onnx_op()
def MatMul(a: Tensor, b: Tensor, /) -> Tensor: return _computed(a) @ _computed(b)

@onnx_op()
def Gemm(a: Tensor, b: Tensor, c: Tensor | None = None, /, *, alpha: float = 1.0, beta: float = 1.0, transA: int = 0, transB: int = 0,
         broadcast: int = 0) -> Tensor:
  a, b = _computed(a), _computed(b)
  y = (a.T if transA else a) @ (b.T if transB else b)
  if alpha != 1.0: y = y * alpha
  return y if c is None else y + (c * beta if beta != 1.0 else c)

@onnx_op()
def Einsum(*xs: Tensor, equation: str) -> Tensor: return Tensor.einsum(equation, *xs)

@onnx_op()
def MatMulInteger(a: Tensor, b: Tensor, a_zero: Tensor | None = None, b_zero: Tensor | None = None, /) -> Tensor:
  a32 = a.cast(dtypes.int32) - (a_zero.cast(dtypes.int32) if a_zero is not None else 0)
  b32 = b.cast(dtypes.int32) - (b_zero.cast(dtypes.int32) if b_zero is not None else 0)
  return a32 @ b32

@onnx_op()
def DynamicQuantizeLinear(x: Tensor, /) -> tuple[Tensor, Tensor, Tensor]:
  """The quotients that get rounded are float32 IEEE quotients, as ONNX's: tinycore divides as a * (1 / b), one rounding
  more, which moves a quotient at exactly .5 to the other integer; a * (1 / b) in float64 rounded to float32 is the IEEE
  float32 quotient (but where the exact one lies within 2^-52 of a float32 rounding boundary)."""
  lo, hi = x.min().minimum(0), x.max().maximum(0)
  scale = (hi - lo) / 255
  def div(a: Tensor, b: Tensor) -> Tensor: return (a.cast(dtypes.float64) / b.cast(dtypes.float64)).cast(a.dtype) if _f64(a) else a / b
  zero = div(-lo, scale).round().clip(0, 255).cast(dtypes.uint8)
  return div(x, scale).round().add(zero.cast(x.dtype)).clip(0, 255).cast(dtypes.uint8), scale, zero

def _f64(t: Tensor) -> bool: return is_dtype_supported(dtypes.float64, t.device)

def _per_axis(t: Tensor, x: Tensor, axis: int, block_size: int = 0) -> Tensor:
  """A scale or zero point shaped to broadcast with x: a scalar, one per index of axis, or (block_size) one per block of it."""
  if t.ndim == 0: return t
  if block_size: return t.repeat_interleave(block_size, dim=axis_of(axis, x.ndim))
  return t.reshape([-1 if i == axis_of(axis, x.ndim) else 1 for i in range(x.ndim)])

@onnx_op()
def QuantizeLinear(x: Tensor, scale: Tensor, zero: Tensor | None = None, /, *, axis: int = 1, saturate: int = 1, block_size: int = 0,
                   output_dtype: int = 0, precision: int = 0, _out_types: list[int] = ()) -> Tensor:
  """Integers round and saturate; the 8- and 4-bit floats take the nearest value (narrow.py), saturating as `saturate` says.
  The output's ONNX type (from shape inference) names a narrow type that zero's carrier dtype does not tell."""
  narrow = NARROW.get(_out_types[0] if _out_types else output_dtype)
  dt = narrow.carrier if narrow else zero.dtype if zero is not None else \
    dtype_of(output_dtype, "QuantizeLinear output_dtype") if output_dtype else dtypes.uint8
  z = _per_axis(zero, x, axis, block_size).cast(dtypes.float32) if zero is not None else 0
  y = x.cast(dtypes.float32) / _per_axis(scale, x, axis, block_size).cast(dtypes.float32)
  if narrow is not None and not isinstance(narrow, NarrowInt): return narrow.cast(y + z, bool(saturate))
  lo, hi = (narrow.lo, narrow.hi) if narrow else (dtypes.min(dt), dtypes.max(dt))
  return (y.round() + z).clip(lo, hi).cast(dt)

@onnx_op()
def DequantizeLinear(x: Tensor, scale: Tensor, zero: Tensor | None = None, /, *, axis: int = 1, block_size: int = 0, output_dtype: int = 0) -> Tensor:
  xf = x.cast(dtypes.float32) - (_per_axis(zero, x, axis, block_size).cast(dtypes.float32) if zero is not None else 0)
  return (xf * _per_axis(scale, x, axis, block_size).cast(dtypes.float32)).cast(scale.dtype)

@onnx_op()
def Col2Im(x: Tensor, image_shape: Tensor, block_shape: Tensor, /, *, dilations: list[int] | None = None, pads: list[int] | None = None,
           strides: list[int] | None = None) -> Tensor:
  """The blocks (N, C * prod(block), L) summed back into the image (N, C, *image_shape): a transposed convolution of the
  block grid with a one-hot kernel (channel c * prod(block) + k adds to channel c at block position k), cropped by pads."""
  img, blk = int_list(image_shape), int_list(block_shape)
  nd = len(blk)
  d, s, p = dilations or [1] * nd, strides or [1] * nd, pads or [0] * (2 * nd)
  n, ck, _ = x.shape
  grid = [(img[i] + p[i] + p[i + nd] - d[i] * (blk[i] - 1) - 1) // s[i] + 1 for i in range(nd)]
  full = x.reshape(n, ck, *grid).conv_transpose2d(Tensor.eye(ck, dtype=x.dtype).reshape(ck, ck // math.prod(blk), *blk), stride=s, dilation=d)
  return full.pad([(0, 0), (0, 0)] + [(-p[i], img[i] + p[i] - full.shape[2 + i]) for i in range(nd)])  # begin at pad; img long
