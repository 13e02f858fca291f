"""ONNX's transformer ops: Attention, RotaryEmbedding, RMSNormalization, and the losses SoftmaxCrossEntropyLoss and
NegativeLogLikelihoodLoss; FlexAttention (domain ai.onnx.preview).

Attention (version 23 on) in the order ONNX defines it:
- 3-d inputs (batch, seq, heads * head_size) are split into heads by q_num_heads / kv_num_heads; 4-d ones are
  (batch, heads, seq, head_size); the output takes the input's layout;
- past_key / past_value are prepended along the sequence (and returned with the new keys as present_key / present_value);
- fewer key/value heads than query heads (grouped-query attention) repeat each key/value head;
- scores are (Q * sqrt(scale)) @ (K * sqrt(scale))^T (scale defaults to 1/sqrt(head_size)), then softcap, then the bias:
  the mask (a bool mask keeps True; a float mask is added; a short mask is padded as masked), the causal mask aligned to
  the bottom right (a query sees keys up to its own position after the past), the sliding window (version 25:
  left_window_size / right_window_size keys either side of that position) and nonpad_kv_seqlen's padding;
- a row with every key masked gives zeros, not NaN;
- the 4th output is the scores at qk_matmul_output_mode: 0 and 1 after softcap (before the bias), 2 after the bias,
  3 after softmax (as ONNX's reference computes them)."""
from __future__ import annotations
import math
from typing import Any
import numpy as np
from tinycore.tensor import Tensor
from tinycore.dtype import DType, dtypes
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import axis_of, dtype_of, DTYPES

def _heads(x: Tensor, n: int | None) -> Tensor:
  return x if x.ndim == 4 else x.reshape(x.shape[0], x.shape[1], n, -1).permute(0, 2, 1, 3)

def _bias(q_len: int, kv_len: int, mask: Tensor | None, is_causal: int, past: int, nonpad: Tensor | None, dt: DType,
          window: tuple[int, int]) -> Tensor | None:
  """The additive bias (0 or -inf where a float mask does not say otherwise), broadcastable to (batch, heads, q, kv)."""
  bias, offset = None, (nonpad.reshape(-1, 1, 1, 1) - q_len) if nonpad is not None and not past else past
  i, j = Tensor.arange(q_len).reshape(q_len, 1) + offset, Tensor.arange(kv_len).reshape(1, kv_len)
  if mask is not None:
    if mask.shape[-1] < kv_len:
      mask = mask.pad([(0, 0)] * (mask.ndim - 1) + [(0, kv_len - mask.shape[-1])], value=False if mask.dtype == dtypes.bool else -math.inf)
    bias = mask.where(0, -math.inf).cast(dt) if mask.dtype == dtypes.bool else mask.cast(dt)
  if is_causal:
    causal = (j <= i).where(0, -math.inf).cast(dt)
    bias = causal if bias is None else bias + causal
  for lo, n in ((True, window[0]), (False, window[1])):
    if n < 0: continue
    w = ((j >= i - n) if lo else (j <= i + n)).where(0, -math.inf).cast(dt)
    bias = w if bias is None else bias + w
  if nonpad is not None:
    pad = (Tensor.arange(kv_len).reshape(1, 1, 1, kv_len) < nonpad.reshape(-1, 1, 1, 1)).where(0, -math.inf).cast(dt)
    bias = pad if bias is None else bias + pad
  return bias

@onnx_op(since=23, values={"qk_matmul_output_mode": (0, 1, 2, 3), "softmax_precision": tuple(DTYPES)})
def Attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, past_key: Tensor | None = None, past_value: Tensor | None = None,
              nonpad_kv_seqlen: Tensor | None = None, /, *, is_causal: int = 0, kv_num_heads: int | None = None, q_num_heads: int | None = None,
              qk_matmul_output_mode: int = 0, scale: float | None = None, softcap: float = 0.0, softmax_precision: int | None = None,
              left_window_size: int = -1, right_window_size: int = -1) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  three_d = q.ndim == 3
  q, k, v = _heads(q, q_num_heads), _heads(k, kv_num_heads), _heads(v, kv_num_heads)
  past = past_key.shape[2] if past_key is not None else 0
  if past_key is not None: k, v = past_key.cat(k, dim=2), past_value.cat(v, dim=2)  # type: ignore[union-attr]
  present_k, present_v = k, v
  if q.shape[1] != k.shape[1]: k, v = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1), v.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
  s = math.sqrt(scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
  scores = (q * s) @ (k * s).transpose(-1, -2)
  if softcap: scores = softcap * (scores / softcap).tanh()
  qk_out = scores
  bias = _bias(q.shape[2], k.shape[2], mask, is_causal, past, nonpad_kv_seqlen, scores.dtype, (left_window_size, right_window_size))
  if bias is not None: scores = scores + bias
  if qk_matmul_output_mode == 2: qk_out = scores
  sm = scores.cast(dtype_of(softmax_precision, "Attention softmax_precision")) if softmax_precision is not None else scores
  probs = sm.softmax(-1)
  if bias is not None: probs = (bias.max(-1, keepdim=True) == -math.inf).where(0, probs)
  probs = probs.cast(q.dtype)
  if qk_matmul_output_mode == 3: qk_out = probs
  out = probs @ v
  if three_d: out = out.permute(0, 2, 1, 3).reshape(out.shape[0], out.shape[2], -1)
  return out, present_k, present_v, qk_out.cast(q.dtype)

@onnx_op(since=23)
def RotaryEmbedding(x: Tensor, cos: Tensor, sin: Tensor, position_ids: Tensor | None = None, /, *, interleaved: int = 0, num_heads: int = 0,
                    rotary_embedding_dim: int = 0) -> Tensor:
  """Rotates the first rotary_embedding_dim features of each head by the angles of cos/sin (indexed by position_ids when given)."""
  shape = x.shape
  h = x.permute(0, 2, 1, 3) if x.ndim == 4 else x.reshape(shape[0], shape[1], num_heads, -1)  # (batch, seq, heads, head_size)
  d = rotary_embedding_dim or h.shape[-1]
  if position_ids is not None: cos, sin = cos[position_ids], sin[position_ids]
  cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
  rot, keep = h[..., :d], h[..., d:]
  if interleaved: x1, x2 = rot.reshape(*rot.shape[:-1], d // 2, 2)[..., 0], rot.reshape(*rot.shape[:-1], d // 2, 2)[..., 1]
  else: x1, x2 = rot[..., :d // 2], rot[..., d // 2:]
  real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
  rot = real.stack(imag, dim=-1).reshape(rot.shape) if interleaved else real.cat(imag, dim=-1)
  out = rot.cat(keep, dim=-1) if keep.shape[-1] else rot
  return out.permute(0, 2, 1, 3) if x.ndim == 4 else out.reshape(shape)

@onnx_op(since=23)
def RMSNormalization(x: Tensor, scale: Tensor, /, *, axis: int = -1, epsilon: float = 1e-5, stash_type: int = 1) -> Tensor:
  """x / sqrt(mean(x^2) + epsilon) over the dims from axis on, times scale; computed in float32 (stash_type 1)."""
  xf = x.cast(dtypes.float32) if stash_type == 1 and x.dtype != dtypes.float64 else x
  axes = tuple(range(axis_of(axis, x.ndim), x.ndim))
  return (xf * ((xf * xf).mean(axes, keepdim=True) + epsilon).rsqrt()).cast(x.dtype) * scale

def _nll(logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int | None, reduction: str) -> Tensor:
  """-logp[n, target[n, ...], ...] * weight[target], with ignored targets contributing (and weighing) nothing."""
  ignored = (target == ignore_index) if ignore_index is not None else None
  t = ignored.where(0, target) if ignored is not None else target
  picked = -logp.gather(1, t.unsqueeze(1).cast(dtypes.int32)).squeeze(1)
  w = weight[t] if weight is not None else Tensor.ones(t.shape, dtype=logp.dtype)
  if ignored is not None: w = ignored.where(0, w).cast(logp.dtype)
  loss = picked * w
  if reduction == "none": return loss
  return loss.sum() if reduction == "sum" else loss.sum() / w.sum()

@onnx_op(values={"reduction": ("none", "sum", "mean")})
def NegativeLogLikelihoodLoss(x: Tensor, target: Tensor, weight: Tensor | None = None, /, *, ignore_index: int | None = None,
                              reduction: str = "mean") -> Tensor:
  return _nll(x, target, weight, ignore_index, reduction).cast(x.dtype)

@onnx_op(values={"reduction": ("none", "sum", "mean")})
def SoftmaxCrossEntropyLoss(scores: Tensor, labels: Tensor, weight: Tensor | None = None, /, *, ignore_index: int | None = None,
                            reduction: str = "mean") -> tuple[Tensor, Tensor]:
  """Outputs the loss and the log-probabilities (log_softmax over dim 1)."""
  logp = scores.log_softmax(1)
  return _nll(logp, labels, weight, ignore_index, reduction).cast(scores.dtype), logp

@onnx_op(domain="ai.onnx.preview", values={"softmax_precision": (1, 10, 11, 16)})
def FlexAttention(q: Tensor, k: Tensor, v: Tensor, /, *, scale: float | None = None, score_mod: Any = None, prob_mod: Any = None,
                  softmax_precision: int | None = None, _scope: Any = None) -> Tensor:
  """Attention of 4-d (batch, heads, seq, head_size) inputs whose scores and probabilities subgraphs may rewrite:
  score_mod maps the scores (after the sqrt(scale) pre-scaling of Q and K) before the softmax, prob_mod the
  probabilities after it; both in softmax_precision (default: float32 for 16-bit inputs, else the input's dtype).
  Fewer key/value heads than query heads repeat each key/value head."""
  if scale is None: scale = 1 / math.sqrt(q.shape[-1])
  if (rep := q.shape[1] // k.shape[1]) > 1: k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
  s = Tensor(math.sqrt(float(np.float32(scale))), dtype=q.dtype, device=q.device)
  dt = dtype_of(softmax_precision, "FlexAttention softmax_precision") if softmax_precision else \
    dtypes.float32 if q.dtype.itemsize < 4 else q.dtype
  scores = ((q * s) @ (k * s).transpose(-1, -2)).cast(dt)
  if score_mod is not None: scores = _call(score_mod, scores, _scope).cast(dt)
  probs = scores.softmax(-1)
  if prob_mod is not None: probs = _call(prob_mod, probs, _scope).cast(dt)
  return (probs @ v.cast(dt)).cast(v.dtype)

def _call(graph: Any, x: Tensor, scope: dict[str, Tensor]) -> Tensor:
  """A one-input, one-output subgraph applied to x."""
  values = graph.run({**scope, next(iter(graph.inputs)): x})
  return values[graph.outputs[0]]
