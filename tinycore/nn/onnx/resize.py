"""ONNX Resize (and the older Upsample) as one matrix product per resized axis.

Every mode of Resize is linear in the input along each axis: output[j] = sum_i W[i, j] * input[i]. W depends only on
the sizes, the scales and the attributes, never on the data, so it is built on the host (numpy, like the weights of
Tensor.interpolate) and the data moves through a Tensor matmul. Per output index j:
- the coordinate transformation maps j to a position x in the input (half_pixel, align_corners, asymmetric, ...);
- nearest takes one input index (rounded by nearest_mode), linear two (weights 1-t, t), cubic four (Keys' kernel with
  cubic_coeff_a); indices past an edge are clamped to it, or dropped with the rest renormalised (exclude_outside);
- tf_crop_and_resize reads positions inside the region of interest, and a position outside the input gives
  extrapolation_value (added through a second, constant term);
- antialias (linear and cubic) stretches the kernel by 1 / scale when downsampling, over more taps, normalized."""
from __future__ import annotations
import math
import numpy as np
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes, to_np_dtype
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import ints, floats, axis_of

_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")

def _positions(n_in: int, n_out: int, scale: float, mode: str, roi: tuple[float, float]) -> np.ndarray:
  """The input position of each output index under coordinate transformation `mode`. The resized length in the formulas
  is n_in * scale, not rounded (as ONNX's reference): it differs from n_out where the scale does not divide evenly."""
  j, length = np.arange(n_out, dtype=np.float64), n_in * scale
  if mode == "half_pixel": return (j + 0.5) / scale - 0.5
  if mode == "half_pixel_symmetric":
    adj = n_out / length
    return n_in / 2 * (1 - adj) + (j + 0.5) / scale - 0.5
  if mode == "pytorch_half_pixel": return (j + 0.5) / scale - 0.5 if length > 1 else np.zeros(n_out)
  if mode == "align_corners": return j * (n_in - 1) / (length - 1) if length > 1 else np.zeros(n_out)
  if mode == "asymmetric": return j / scale
  s, e = roi  # tf_crop_and_resize
  return s * (n_in - 1) + j * (e - s) * (n_in - 1) / (length - 1) if length > 1 else np.full(n_out, 0.5 * (s + e) * (n_in - 1))

def _taps(x: np.ndarray, mode: str, nearest_mode: str, a: float) -> tuple[np.ndarray, np.ndarray]:
  """(input indices, weights), each (n_out, taps), before clamping."""
  if mode == "nearest":
    r = {"round_prefer_floor": np.ceil(x - 0.5), "round_prefer_ceil": np.floor(x + 0.5), "floor": np.floor(x), "ceil": np.ceil(x)}[nearest_mode]
    return r[:, None].astype(np.int64), np.ones((len(x), 1))
  f = np.floor(x)
  t = (x - f)[:, None]
  if mode == "linear": return (f[:, None] + np.arange(2)).astype(np.int64), np.concatenate([1 - t, t], axis=1)
  d = np.abs(np.concatenate([t + 1, t, 1 - t, 2 - t], axis=1))  # distances to the taps at f-1, f, f+1, f+2
  w = np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a)
  return (f[:, None] + np.arange(-1, 3)).astype(np.int64), w

def _antialias_taps(x: np.ndarray, mode: str, scale: float, a: float) -> tuple[np.ndarray, np.ndarray]:
  """Downsampling with antialias: the linear or cubic kernel stretched by 1 / scale (more taps), its weights normalized
  to sum 1; the taps are the kernel's length of input indices nearest x (the lower on a tie), as ONNX's reference."""
  s, f = min(scale, 1.0), np.floor(x)
  ratio = np.where(x == f, 1.0, x - f)[:, None]  # an integer position counts as the far end of the interval below it
  if mode == "linear":
    start = int(np.floor(-1 / s) + 1)
    d = (np.arange(start, 2 - start) - ratio) * s
    w = np.clip(1 - np.abs(d), 0, 1)
  else:
    start = int(np.floor(-2 / s) + 1)
    d = np.abs(s * (np.arange(start, 2 - start) - ratio))
    w = np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1, np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0))
  n = w.shape[1]
  pad = -(-n // 2)
  p = np.floor(x + pad)
  frac = x + pad - p
  off = np.where(frac == 0, -(n // 2), -(n // 2) + 1) if n % 2 == 0 else np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
  return (p + off - pad)[:, None].astype(np.int64) + np.arange(n), w / w.sum(axis=1, keepdims=True)

def _axis_weights(n_in: int, n_out: int, scale: float, roi: tuple[float, float], mode: str, transform: str, nearest_mode: str,
                  a: float, exclude_outside: int, antialias: int = 0) -> tuple[np.ndarray, np.ndarray]:
  """W (n_in, n_out) and the mask (n_out,) of outputs that take extrapolation_value."""
  x = _positions(n_in, n_out, scale, transform, roi)
  idx, w = _antialias_taps(x, mode, scale, a) if antialias and mode != "nearest" else _taps(x, mode, nearest_mode, a)
  inside = (idx >= 0) & (idx < n_in)
  if exclude_outside and (mode == "cubic" or antialias):
    w = np.where(inside, w, 0)
    w = w / w.sum(axis=1, keepdims=True)
  W = np.zeros((n_in, n_out))
  np.add.at(W, (np.clip(idx, 0, n_in - 1), np.broadcast_to(np.arange(n_out)[:, None], idx.shape)), w)
  outside = (x < 0) | (x > n_in - 1) if transform == "tf_crop_and_resize" else np.zeros(n_out, bool)
  W[:, outside] = 0
  return W, outside

def resize(x: Tensor, sizes: list[int], scales: list[float], roi: list[tuple[float, float]], mode: str, transform: str, nearest_mode: str,
           a: float = -0.75, exclude_outside: int = 0, extrapolation_value: float = 0.0, antialias: int = 0) -> Tensor:
  """Resize every dim whose size changes (or whose coordinates move) to `sizes`, dim by dim from the last."""
  out = x.cast(dtypes.float32) if not dtypes.is_float(x.dtype) else x
  for ax in reversed(range(x.ndim)):
    n_in, n_out, s = x.shape[ax], sizes[ax], scales[ax]
    if n_in == n_out and s == 1.0 and transform != "tf_crop_and_resize": continue
    W, outside = _axis_weights(n_in, n_out, s, roi[ax], mode, transform, nearest_mode, a, exclude_outside, antialias)
    npdt = to_np_dtype(out.dtype) if out.dtype != dtypes.bfloat16 else np.float32
    moved = out.transpose(ax, -1) @ Tensor(W.astype(npdt), device=x.device, dtype=out.dtype)
    if outside.any(): moved = moved + Tensor((outside * extrapolation_value).astype(npdt), device=x.device, dtype=out.dtype)
    out = moved.transpose(ax, -1)
  if dtypes.is_float(x.dtype): return out
  return (out if mode == "nearest" else out.round()).clip(dtypes.min(x.dtype), dtypes.max(x.dtype)).cast(x.dtype)

@onnx_op(since=10, values={"mode": ("nearest", "linear", "cubic"), "coordinate_transformation_mode": _TRANSFORMS, "nearest_mode": _NEAREST,
                           "keep_aspect_ratio_policy": ("stretch", "not_larger", "not_smaller")})
def Resize(x: Tensor, roi_or_scales: Tensor | None = None, scales_input: Tensor | None = None, sizes_input: Tensor | None = None, /, *,
           mode: str = "nearest", coordinate_transformation_mode: str = "half_pixel", nearest_mode: str = "round_prefer_floor",
           cubic_coeff_a: float = -0.75, exclude_outside: int = 0, extrapolation_value: float = 0.0, antialias: int = 0,
           axes: list[int] | None = None, keep_aspect_ratio_policy: str = "stretch", _version: int = 13) -> Tensor:
  """Version 10 has inputs (X, scales) and asymmetric coordinates; 11 on (X, roi, scales, sizes)."""
  if _version == 10: roi_t, sc, sz, coordinate_transformation_mode, nearest_mode = None, roi_or_scales, None, "asymmetric", "floor"
  else: roi_t, sc, sz = roi_or_scales, scales_input, sizes_input
  ax = [axis_of(a, x.ndim) for a in (axes if axes is not None else range(x.ndim))]
  scales, sizes = [1.0] * x.ndim, list(x.shape)
  given_sizes = ints(sz) if sz is not None and sz.numel() else None
  if given_sizes is not None:
    if keep_aspect_ratio_policy != "stretch":
      pick = min if keep_aspect_ratio_policy == "not_larger" else max
      r = pick(t / x.shape[a] for a, t in zip(ax, given_sizes))
      given_sizes = [int(r * x.shape[a] + 0.5) for a in ax]
      for a in ax: scales[a] = r
    for a, t in zip(ax, given_sizes):
      sizes[a] = t
      if keep_aspect_ratio_policy == "stretch": scales[a] = t / x.shape[a]
  else:
    for a, s in zip(ax, floats(sc)): scales[a], sizes[a] = s, math.floor(x.shape[a] * s)
  roi = [(0.0, 1.0)] * x.ndim
  if roi_t is not None and roi_t.numel():
    r = floats(roi_t)
    for i, a in enumerate(ax): roi[a] = (r[i], r[i + len(ax)])
  return resize(x, sizes, scales, roi, mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside, extrapolation_value,
                antialias)

@onnx_op(since=7, until=9, values={"mode": ("nearest", "linear")})
def Upsample(x: Tensor, scales_input: Tensor | None = None, /, *, mode: str = "nearest", scales: list[float] | None = None) -> Tensor:
  sc = floats(scales_input, scales)
  return resize(x, [math.floor(n * s) for n, s in zip(x.shape, sc)], sc, [(0.0, 1.0)] * x.ndim, mode, "asymmetric", "floor")
