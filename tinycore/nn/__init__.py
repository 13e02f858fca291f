"""Layers: plain classes holding Tensors, called like functions. No Module base class and no forward(): a model is any
object whose attributes (lists, dicts and other objects, recursively) hold Tensors; `nn.state.get_parameters` finds them.

Names, argument names and initialisation follow tinygrad 0.14 (and so PyTorch): Linear and Conv weights are uniform in
+-1/sqrt(fan_in), Embedding is Glorot-uniform, norms start at weight=1, bias=0."""
from __future__ import annotations
import math
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.helpers import prod, make_tuple, flatten, TRAINING
from tinycore.nn import optim, state, datasets  # noqa: F401

__all__ = ["Linear", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "BatchNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "LayerNorm", "LayerNorm2d", "GroupNorm", "InstanceNorm", "RMSNorm", "Embedding", "LSTMCell", "optim", "state", "datasets"]

# *** functional helpers: the Tensor method when the Tensor has it, the same math written out here otherwise ***

def _layernorm(x: Tensor, axis: int | tuple[int, ...] = -1, eps: float = 1e-5) -> Tensor:
  """(x - mean) / sqrt(var + eps) over `axis`, the biased variance as torch."""
  if hasattr(Tensor, "layernorm"): return x.layernorm(axis=axis, eps=eps)
  y = x - x.mean(axis, keepdim=True)
  return y * (y * y).mean(axis, keepdim=True).add(eps).rsqrt()

def _batchnorm(x: Tensor, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor) -> Tensor:
  """Normalise over the channel dim 1 with given per-channel mean and 1/std, then scale and shift."""
  if hasattr(Tensor, "batchnorm"): return x.batchnorm(weight, bias, mean, invstd)
  shape = (1, -1) + (1,) * (x.ndim - 2)
  y = (x - mean.reshape(shape)) * invstd.reshape(shape)
  if weight is not None: y = y * weight.reshape(shape)
  return y + bias.reshape(shape) if bias is not None else y

def _uniform(*shape: int, bound: float) -> Tensor: return Tensor.uniform(*shape, low=-bound, high=bound)

def _conv_transpose(x: Tensor, weight: Tensor, bias: Tensor | None, groups: int, stride: int | tuple[int, ...], dilation: int | tuple[int, ...],
                    padding: int | tuple[int, ...], output_padding: int | tuple[int, ...]) -> Tensor:
  """Transposed convolution as a convolution: spread the input by the stride (zeros between elements), pad each side by
  dilation*(k-1) - padding, and convolve with the weight flipped and with its in/out channels swapped per group."""
  if hasattr(Tensor, "conv_transpose2d"): return x.conv_transpose2d(weight, bias, groups, stride, dilation, padding, output_padding)
  hw = weight.shape[2:]
  nd = len(hw)
  st, dil, pad, opad = (make_tuple(v, nd) for v in (stride, dilation, padding, output_padding))
  cin, rcout = weight.shape[0], weight.shape[1]
  w = weight.reshape(groups, cin // groups, rcout, *hw).transpose(1, 2).flip(*range(3, 3 + nd)).reshape(groups * rcout, cin // groups, *hw)
  if any(s > 1 for s in st):
    lead = x.shape[:2]
    x = x.reshape(*lead, *flatten((n, 1) for n in x.shape[2:]))
    x = x.pad(((0, 0), (0, 0)) + tuple(p for s in st for p in ((0, 0), (0, s - 1))))
    x = x.reshape(*lead, *[n * s for n, s in zip(x.shape[2::2], st)])
    x = x.shrink(((0, lead[0]), (0, lead[1])) + tuple((0, n - (s - 1)) for n, s in zip(x.shape[2:], st)))
  pads = tuple(((k - 1) * d - p, (k - 1) * d - p + op) for k, d, p, op in zip(hw, dil, pad, opad))
  x = x.pad(((0, 0), (0, 0)) + pads)
  return x.conv2d(w, bias, groups=groups, dilation=dil)

# *** layers ***

class Linear:
  """y = x @ weight.T + bias, weight (out_features, in_features)."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    bound = 1 / math.sqrt(in_features)
    self.weight = _uniform(out_features, in_features, bound=bound)
    self.bias: Tensor | None = _uniform(out_features, bound=bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.weight.transpose(), self.bias)

class Conv2d:
  """N-d convolution (the kernel_size tuple's length sets N; an int means 2-d). padding: an int, one per spatial dim,
  torch-style (left, right, top, bottom), or 'same' (stride 1 only)."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: int | tuple[int, ...] = 1,
               padding: int | tuple[int, ...] | str = 0, dilation: int | tuple[int, ...] = 1, groups: int = 1, bias: bool = True):
    self.kernel_size: tuple[int, ...] = make_tuple(kernel_size, 2)
    if in_channels % groups or out_channels % groups:
      raise ValueError(f"in_channels {in_channels} and out_channels {out_channels} must both be divisible by groups={groups}")
    if isinstance(padding, str):
      if padding.lower() != "same": raise ValueError(f"padding {padding!r} is not supported: use an int, a tuple or 'same'")
      if any(s != 1 for s in make_tuple(stride, len(self.kernel_size))): raise ValueError("padding='same' needs stride 1")
      dil = make_tuple(dilation, len(self.kernel_size))
      # torch puts the odd pixel on the right/bottom: (left, right) per dim, last dim first
      padding = tuple(flatten((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for d, k in reversed(list(zip(dil, self.kernel_size)))))
    self.stride, self.dilation, self.groups, self.padding = stride, dilation, groups, padding
    bound = 1 / math.sqrt(in_channels * prod(self.kernel_size))  # tinygrad's fan_in: in_channels, whatever the groups
    self.weight = _uniform(out_channels, in_channels // groups, *self.kernel_size, bound=bound)
    self.bias: Tensor | None = _uniform(out_channels, bound=bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding)

def Conv1d(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int | str = 0, dilation: int = 1, groups: int = 1,
           bias: bool = True) -> Conv2d:
  """1-d convolution over (batch, channels, length): a Conv2d with a one-element kernel_size tuple."""
  return Conv2d(in_channels, out_channels, (kernel_size,), stride, padding, dilation, groups, bias)

class ConvTranspose2d(Conv2d):
  """Transposed convolution, weight (in_channels, out_channels/groups, *kernel_size) as torch."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: int | tuple[int, ...] = 1,
               padding: int | tuple[int, ...] = 0, output_padding: int | tuple[int, ...] = 0, dilation: int | tuple[int, ...] = 1,
               groups: int = 1, bias: bool = True):
    if isinstance(padding, str): raise ValueError("ConvTranspose2d does not support string padding")
    super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias)
    bound = 1 / math.sqrt(in_channels * prod(self.kernel_size))
    self.weight = _uniform(in_channels, out_channels // groups, *self.kernel_size, bound=bound)
    self.bias = _uniform(out_channels, bound=bound) if bias else None
    self.output_padding = output_padding
  def __call__(self, x: Tensor) -> Tensor:
    return _conv_transpose(x, self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding, self.output_padding)  # type: ignore[arg-type]

def ConvTranspose1d(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0, output_padding: int = 0,
                    dilation: int = 1, groups: int = 1, bias: bool = True) -> ConvTranspose2d:
  return ConvTranspose2d(in_channels, out_channels, (kernel_size,), stride, padding, output_padding, dilation, groups, bias)

class BatchNorm:
  """Batch normalisation over dim 1 of (N, C, ...). In training (TRAINING: `Context(TRAINING=1)` or Tensor.train()) it
  normalises with the batch statistics and updates running_mean / running_var (unbiased variance, as torch) and the
  0-d int64 num_batches_tracked in place; in eval it uses the running statistics."""
  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True, momentum: float = 0.1):
    self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
    self.weight: Tensor | None = Tensor.ones(sz) if affine else None
    self.bias: Tensor | None = Tensor.zeros(sz) if affine else None
    self.num_batches_tracked = Tensor.zeros((), dtype=dtypes.int64, requires_grad=False)
    if track_running_stats: self.running_mean, self.running_var = Tensor.zeros(sz, requires_grad=False), Tensor.ones(sz, requires_grad=False)

  def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
    """(mean, biased variance) per channel: of the batch in training, the running ones in eval."""
    if self.track_running_stats and not TRAINING: return self.running_mean, self.running_var
    axes = tuple(a for a in range(x.ndim) if a != 1)
    mean = x.mean(axis=axes)
    y = x - mean.detach().reshape((1, -1) + (1,) * (x.ndim - 2))  # d(var)/d(mean) is zero
    return mean, (y * y).mean(axis=axes)

  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2: raise ValueError(f"BatchNorm needs an input of at least 2 dims (N, C, ...), got {x.shape}")
    mean, var = self.calc_stats(x)
    if self.track_running_stats and TRAINING:
      n = x.numel() // x.shape[1]
      unbiased = var.detach() * (n / max(n - 1, 1))
      self.running_mean.assign((1 - self.momentum) * self.running_mean + self.momentum * mean.detach())
      self.running_var.assign((1 - self.momentum) * self.running_var + self.momentum * unbiased)
      self.num_batches_tracked.assign(self.num_batches_tracked + 1)
    return _batchnorm(x, self.weight, self.bias, mean, var.add(self.eps).rsqrt())
BatchNorm1d = BatchNorm2d = BatchNorm3d = BatchNorm

class LayerNorm:
  """Normalise over the last len(normalized_shape) dims, then weight * x + bias."""
  def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True):
    self.normalized_shape: tuple[int, ...] = make_tuple(normalized_shape, 1)
    self.axis, self.eps, self.elementwise_affine = tuple(-1 - i for i in range(len(self.normalized_shape))), eps, elementwise_affine
    self.weight: Tensor | None = Tensor.ones(*self.normalized_shape) if elementwise_affine else None
    self.bias: Tensor | None = Tensor.zeros(*self.normalized_shape) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if tuple(x.shape[-len(self.normalized_shape):]) != self.normalized_shape:
      raise ValueError(f"LayerNorm over {self.normalized_shape}: the last dims of input {x.shape} do not match")
    x = _layernorm(x, self.axis, self.eps)
    if self.weight is None or self.bias is None: return x
    return x * self.weight + self.bias

class LayerNorm2d(LayerNorm):
  """LayerNorm over the channels of (N, C, H, W)."""
  def __call__(self, x: Tensor) -> Tensor: return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

def _affine_channels(x: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
  if weight is None or bias is None: return x
  shape = (1, -1) + (1,) * (x.ndim - 2)
  return x * weight.reshape(shape) + bias.reshape(shape)

class GroupNorm:
  """Normalise each of num_groups groups of channels of (N, C, ...), then a per-channel affine."""
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    if num_channels % num_groups: raise ValueError(f"num_channels {num_channels} is not divisible by num_groups {num_groups}")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight: Tensor | None = Tensor.ones(num_channels) if affine else None
    self.bias: Tensor | None = Tensor.zeros(num_channels) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    x = _layernorm(x.reshape(x.shape[0], self.num_groups, -1), -1, self.eps).reshape(x.shape)
    return _affine_channels(x, self.weight, self.bias)

class InstanceNorm:
  """Normalise each channel of each sample of (N, C, ...) over its spatial dims, then a per-channel affine."""
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
    self.num_features, self.eps = num_features, eps
    self.weight: Tensor | None = Tensor.ones(num_features) if affine else None
    self.bias: Tensor | None = Tensor.zeros(num_features) if affine else None
  def __call__(self, x: Tensor) -> Tensor:
    x = _layernorm(x.reshape(x.shape[0], self.num_features, -1), -1, self.eps).reshape(x.shape)
    return _affine_channels(x, self.weight, self.bias)

class RMSNorm:
  """x / sqrt(mean(x^2) + eps) over the last dim, times weight; computed in float32 at least."""
  def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
    self.eps = eps
    self.weight: Tensor | None = Tensor.ones(dim) if elementwise_affine else None
  def _norm(self, x: Tensor) -> Tensor: return x * (x * x).mean(-1, keepdim=True).add(self.eps).rsqrt()
  def __call__(self, x: Tensor) -> Tensor:
    y = self._norm(x.float() if x.dtype in (dtypes.float16, dtypes.bfloat16) else x).cast(x.dtype)
    return y if self.weight is None else y * self.weight

class Embedding:
  """A lookup table: integer indices of any shape -> rows of weight (vocab_size, embed_size), Glorot-uniform."""
  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_sz, self.embed_sz = vocab_size, embed_size
    self.weight = _uniform(vocab_size, embed_size, bound=math.sqrt(6 / (vocab_size + embed_size)))
  def __call__(self, idx: Tensor) -> Tensor:
    if not dtypes.is_int(idx.dtype): raise TypeError(f"Embedding needs integer indices, got {idx.dtype}")
    if idx.numel() == 0: return Tensor.zeros(*idx.shape, self.embed_sz, dtype=self.weight.dtype, device=self.weight.device)
    # row idx[n] of the table for every n: a gather along the vocabulary, its gradient a scatter-add of the rows
    n = idx.numel()
    rows = self.weight._gather(idx.to(self.weight.device).reshape(n, 1).expand(n, self.embed_sz), 0)
    return rows.reshape(*idx.shape, self.embed_sz)

class LSTMCell:
  """One LSTM step: (x, (h, c)) -> (h', c'), gates ordered i, f, g, o as torch; weights uniform in +-1/sqrt(hidden), biases zero."""
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    stdv = 1.0 / math.sqrt(hidden_size)
    self.hidden_size = hidden_size
    self.weight_ih = _uniform(hidden_size * 4, input_size, bound=stdv)
    self.weight_hh = _uniform(hidden_size * 4, hidden_size, bound=stdv)
    self.bias_ih: Tensor | None = Tensor.zeros(hidden_size * 4) if bias else None
    self.bias_hh: Tensor | None = Tensor.zeros(hidden_size * 4) if bias else None
  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    if hc is None:
      z = Tensor.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
      hc = (z, z)
    gates = x.linear(self.weight_ih.transpose(), self.bias_ih) + hc[0].linear(self.weight_hh.transpose(), self.bias_hh)
    h = self.hidden_size
    i, f, g, o = (gates[:, k * h:(k + 1) * h] for k in range(4))
    new_c = f.sigmoid() * hc[1] + i.sigmoid() * g.tanh()
    new_h = o.sigmoid() * new_c.tanh()
    return new_h.contiguous(), new_c.contiguous()
