"""Tensor nn functions: normalization, losses, attention."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING, Sequence
from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.errors import ShapeError, ArgumentError, DTypeError
from tinycore.ops import Ops
if TYPE_CHECKING: from tinycore.tensor import Tensor

class FunctionalMixin:
  __slots__ = ()

  # *** normalization, losses, attention ***
  def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """self divided by its p-norm along dim, the norm clamped below at eps (as torch.nn.functional.normalize); p may
    be inf."""
    x = self._float()
    a = x.abs()
    if p == math.inf: norm = a.max(dim, keepdim=True)
    elif p == 1: norm = a.sum(dim, keepdim=True)
    elif p == 2: norm = (x * x).sum(dim, keepdim=True).sqrt()
    else: norm = a.pow(p).sum(dim, keepdim=True).pow(1 / p)
    return x / norm.maximum(eps)
  def layernorm(self, axis: int | Sequence[int] = -1, eps: float = 1e-5) -> Tensor:
    """(self - mean) / sqrt(var + eps) over axis (biased variance), without affine parameters."""
    y = self - self.mean(axis, keepdim=True)
    return y.mul((y * y).mean(axis, keepdim=True).add(eps).rsqrt())
  def batchnorm(self, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor, axis: int | Sequence[int] = 1) -> Tensor:
    """(self - mean) * invstd * weight + bias, the parameters shaped like self's `axis` dims."""
    axes = tuple(self._resolve_dim(a) for a in (axis if isinstance(axis, (list, tuple)) else [axis]))
    shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
    def fit(t: Tensor, name: str) -> Tensor:
      if t.numel() != prod(self.shape[a] for a in axes):
        raise ValueError(f"batchnorm {name} of shape {t.shape} does not fit dims {axes} of {self.shape}")
      return t.reshape(shape)
    x = self - fit(mean, "mean")
    if weight is not None: x = x * fit(weight, "weight")
    ret = x.mul(fit(invstd, "invstd") if invstd.ndim == len(axes) or invstd.numel() > 1 else invstd)
    return (ret + fit(bias, "bias")) if bias is not None else ret
  def _do_reduction(self, reduction: str = "mean") -> Tensor:
    if reduction not in ("mean", "sum", "none"): raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return self.mean() if reduction == "mean" else self.sum() if reduction == "sum" else self
  def one_hot(self, num_classes: int = -1) -> Tensor:
    """(..., num_classes) int32 with a 1 at each index. A class out of range (negative too) raises IndexError at the next
    sync: the classes are read through a gather of 0..num_classes-1, checked on the device, not read back here. num_classes
    -1 (the default) takes the largest value + 1 (read back: it is the shape), as torch and tinygrad after 0.14 (0.14
    requires num_classes)."""
    if not dtypes.is_int(self.dtype): raise DTypeError(f"one_hot needs an integer tensor, got {self.dtype}")
    if not isinstance(num_classes, int) or num_classes < -1: raise ArgumentError(f"one_hot needs num_classes >= 0 or -1, got {num_classes!r}")
    if num_classes == -1:
      if self.numel() == 0: raise ArgumentError(f"one_hot cannot infer num_classes (-1) from an empty tensor of shape {self.shape}")
      num_classes = max(int(self.detach().max().item()) + 1, 0)
    classes = self._iota(num_classes, self.device, self.dtype)
    y = self.detach()
    if y.numel(): y = classes._gather((y < 0).where(num_classes, y).flatten(), 0).reshape(y.shape)  # a negative class: reported as num_classes
    return (y.unsqueeze(-1) == classes).where(1, 0)
  def _one_hot_unchecked(self, n: int) -> Tensor:
    return self.unsqueeze(-1) == self._iota(n, self.device, self.dtype)
  def sparse_categorical_crossentropy(self, Y: Tensor, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean") -> Tensor:
    """Cross entropy of logits self (..., classes) against integer labels Y (...); labels equal to ignore_index are
    left out (of the mean too). A label out of range raises IndexError at the next sync."""
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if reduction not in ("mean", "sum", "none"): raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if not isinstance(Y, type(self)): Y = type(self)(Y, device=self.device)
    if not dtypes.is_int(Y.dtype): raise TypeError(f"labels must be an integer tensor, got {Y.dtype}")
    if Y.shape != self.shape[:-1]: raise ShapeError(f"labels of shape {Y.shape} do not match logits {self.shape} (expected {self.shape[:-1]})")
    log_probs = self.log_softmax()
    mask, y, count = self._labels(Y, ignore_index)
    picked = log_probs._gather(y, self.ndim - 1).squeeze(-1)
    unreduced = mask.where(picked, 0)
    if label_smoothing: unreduced = (1 - label_smoothing) * unreduced + label_smoothing * (log_probs.mean(-1) * mask)
    return -(unreduced.sum() / count if reduction == "mean" else unreduced.sum() if reduction == "sum" else unreduced)
  def _labels(self, Y: Tensor, ignore_index: int) -> tuple[Tensor, Tensor, Tensor]:
    """For logits self and labels Y: the mask of the labels that count (not ignore_index), the class each label reads
    (shaped (..., 1) for a gather along the last dim) and the number that count (int32). An ignored label reads class
    0 (masked out); a label out of range raises IndexError at the next sync: the labels are checked on the device by the
    gather, not read back here (a negative one, which the gather would count from the end, reads the number of classes).
    Integer ops without a gradient, made on the lazy graph (as Tensor ops they were 9 Function.apply, a fifth of an MLP's
    forward); each result records a Link to Y, as the Tensor ops would."""
    yl, n = Y.lazydata, self.shape[-1]
    if not (dtypes.min(yl.dtype) <= min(ignore_index, 0) and max(ignore_index, n if isinstance(n, int) else 0) <= dtypes.max(yl.dtype)):
      yl = yl.cast(dtypes.int64)  # (a comparison with a number outside the labels' dtype widens them, as numpy)
    mask = yl.alu(Ops.CMPNE, yl.const(ignore_index))
    y = mask.alu(Ops.WHERE, yl.alu(Ops.CMPLT, yl.const(0)).alu(Ops.WHERE, yl.const(n), yl), yl.const(0))
    count = mask.cast(dtypes.int32).reduce(Ops.ADD, tuple(range(len(yl.shape)))).reshape(())
    T = type(self)
    return T(mask)._link(Y), T(y.reshape(y.shape + (1,)))._link(Y), T(count)._link(Y)
  def cross_entropy(self, Y: Tensor, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of logits self (N, C, ...) against class indices Y (N, ...) or probabilities Y (N, C, ...), as torch."""
    if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if self.ndim < 1: raise ShapeError("cross_entropy needs logits with a class dim")
    if not isinstance(Y, type(self)): Y = type(self)(Y, device=self.device)
    cdim = 1 if self.ndim >= 2 else 0
    nc = self.shape[cdim]
    if Y.shape == self.shape and dtypes.is_float(Y.dtype): probs = Y
    elif Y.ndim == self.ndim - 1 and Y.shape == self.shape[:cdim] + self.shape[cdim + 1:]:
      if not dtypes.is_int(Y.dtype): raise TypeError(f"class index targets must be integers, got {Y.dtype}")
      probs = Y.one_hot(nc).float()
      probs = probs.permute(0, -1, *range(1, probs.ndim - 1)) if cdim == 1 else probs
    else: raise ShapeError(f"cross_entropy target of shape {Y.shape} matches neither indices nor probabilities for logits {self.shape}")
    probs = (1 - label_smoothing) * probs + label_smoothing / nc
    return (-(self.log_softmax(axis=cdim) * probs).sum(axis=cdim))._do_reduction(reduction)
  def nll_loss(self, Y: Tensor, weight: Tensor | None = None, ignore_index: int | None = None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of log-probabilities self (N, C, ...) at class indices Y (N, ...), with optional class
    weights; a weighted mean with reduction "mean" (as torch). A target out of range raises IndexError at the next sync."""
    if reduction not in ("mean", "sum", "none"): raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if not isinstance(Y, type(self)): Y = type(self)(Y, device=self.device)
    if not dtypes.is_int(Y.dtype): raise TypeError(f"nll_loss targets must be integers, got {Y.dtype}")
    cdim = 1 if self.ndim >= 2 else 0
    nc = self.shape[cdim]
    if Y.shape != self.shape[:cdim] + self.shape[cdim + 1:]: raise ShapeError(f"nll_loss target of shape {Y.shape} does not fit input {self.shape}")
    if weight is not None and weight.shape != (nc,): raise ShapeError(f"nll_loss weight must have shape ({nc},), got {weight.shape}")
    # each target's log-probability (and weight), a gather checked on the device, as in sparse_categorical_crossentropy:
    # an ignored target reads class 0 (masked out), a negative one (which the gather would count from the end) is
    # reported as the number of classes
    keep = (Y != ignore_index) if ignore_index is not None else None
    y = (Y < 0).where(nc, Y if keep is None else keep.where(Y, 0))
    picked = self._gather(y.unsqueeze(cdim), cdim).squeeze(cdim)
    w = weight[y] if weight is not None else Y.ones_like(dtype=self.dtype)
    if keep is not None: picked, w = keep.where(picked, 0), w * keep
    nll = -picked * w
    if reduction == "mean" and weight is None and ignore_index is None: return nll.mean()
    return nll.sum() / w.sum() if reduction == "mean" else nll._do_reduction(reduction)
  def binary_crossentropy(self, Y: Tensor, reduction: str = "mean") -> Tensor:
    """Binary cross entropy of probabilities self against targets Y (the logs are clamped at -100, as torch)."""
    if not isinstance(Y, type(self)): Y = type(self)(Y, device=self.device)
    if Y.shape != self.shape: raise ShapeError(f"binary_crossentropy target shape {Y.shape} does not match input {self.shape}")
    return (-Y * self.log().maximum(-100) - (1 - Y) * (1 - self).log().maximum(-100))._do_reduction(reduction)
  def binary_crossentropy_logits(self, Y: Tensor, reduction: str = "mean", pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross entropy of logits self against targets Y, computed stably, with an optional weight of positives."""
    if not isinstance(Y, type(self)): Y = type(self)(Y, device=self.device)
    if Y.shape != self.shape: raise ShapeError(f"binary_crossentropy_logits target shape {Y.shape} does not match input {self.shape}")
    log_p, log_1mp = self.logsigmoid(), (-self).logsigmoid()
    return (-((1 if pos_weight is None else pos_weight) * Y * log_p + (1 - Y) * log_1mp))._do_reduction(reduction)
  def scaled_dot_product_attention(self, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, enable_gqa: bool = False) -> Tensor:
    """softmax(self @ key^T / sqrt(d) + mask) @ value. A bool mask keeps True positions; is_causal masks the future;
    enable_gqa repeats key/value heads to match the query's."""
    if self.ndim < 2 or key.ndim < 2 or value.ndim < 2: raise ShapeError("attention needs (..., seq, dim) tensors")
    if self.shape[-1] != key.shape[-1]: raise ShapeError(f"query dim {self.shape[-1]} does not match key dim {key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]: raise ShapeError(f"key length {key.shape[-2]} does not match value length {value.shape[-2]}")
    if is_causal and attn_mask is not None: raise ArgumentError("give either attn_mask or is_causal, not both")
    if enable_gqa and self.ndim >= 3 and key.shape[-3] != self.shape[-3]:
      if self.shape[-3] % key.shape[-3]: raise ShapeError(f"query heads {self.shape[-3]} are not a multiple of key heads {key.shape[-3]}")
      r = self.shape[-3] // key.shape[-3]
      key, value = key.repeat_interleave(r, dim=-3), value.repeat_interleave(r, dim=-3)
    qk = self.matmul(key.transpose(-2, -1)) / math.sqrt(self.shape[-1])
    if is_causal: attn_mask = self.ones(qk.shape[-2], qk.shape[-1], dtype=dtypes.bool, device=self.device).tril(0)
    if attn_mask is not None:
      if attn_mask.dtype == dtypes.bool: attn_mask = attn_mask.where(0, -math.inf)
      qk = qk + attn_mask
    return qk.softmax(-1).cast(self.dtype).dropout(dropout_p) @ value
