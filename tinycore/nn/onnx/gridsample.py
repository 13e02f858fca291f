"""ONNX GridSample: each output position reads the input at the point its grid entry names, interpolated.

grid (N, *out, r) holds, per output position, r coordinates in [-1, 1] in reverse dim order (x, the last spatial dim,
first). Per spatial dim of the input, as ONNX's reference (after PyTorch's GridSampler):
- the coordinate is denormalized to an input position p: (g + 1) / 2 * (d - 1) with align_corners, ((g + 1) * d - 1) / 2 without;
- nearest rounds p half to even first; a p outside [lo, hi] (0 and d - 1 with align_corners, -0.5 and d - 0.5 without) is
  clamped to [0, d - 1] (padding_mode border) or reflected about lo and hi (reflection), and left as is for zeros;
- the taps are p itself (nearest), floor(p) + 0..1 (linear) or floor(p) - 1..2 (cubic, Keys' kernel with a = -0.75),
  and a tap outside [0, d - 1] reads 0 (zeros), the edge (border) or its reflection (reflection).
The taps of all dims combine into one gather per combination (2^r for linear, 4^r for cubic) from the flattened input,
weighted by the product of the per-dim weights. Positions, taps and weights are Tensor ops on the grid: no host reads.
DeformConv samples its moved kernel taps with GridSample."""
from __future__ import annotations
import itertools, math
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.registry import onnx_op

_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic", "nearest": "nearest"}

def _reflect(p: Tensor, lo: float, hi: float) -> Tensor:
  """p folded back into [lo, hi] by reflecting at the borders, as often as it takes."""
  span = hi - lo
  if span <= 0: return p * 0 + lo
  below = p < lo
  dist = below.where(lo - p, p - hi)
  n = (dist / span).floor()
  r, odd = dist - n * span, (n - (n / 2).floor() * 2) == 1
  return below.where(odd.where(hi - r, lo + r), (p > hi).where(odd.where(lo + r, hi - r), p))

def _cubic(t: Tensor) -> list[Tensor]:
  a = -0.75
  def near(d: Tensor) -> Tensor: return ((a + 2) * d - (a + 3)) * d * d + 1
  def far(d: Tensor) -> Tensor: return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
  return [far(t + 1), near(t), near(1 - t), far(2 - t)]

def _taps(p: Tensor, d: int, mode: str, padding_mode: str, lo: float, hi: float) -> list[tuple[Tensor, Tensor | None]]:
  """(input index, weight or None for 1) per tap of one dim; an index outside [0, d - 1] in zeros mode gets weight 0."""
  if mode == "nearest": raw = [(p, None)]
  else:
    f = p.floor()
    t = p - f
    raw = [(f, 1 - t), (f + 1, t)] if mode == "linear" else [(f + k, w) for k, w in zip((-1, 0, 1, 2), _cubic(t))]
  out = []
  for i, w in raw:
    if padding_mode == "zeros":
      inside = (i >= 0) & (i <= d - 1)
      w = inside.where(w if w is not None else 1.0, 0.0)
      i = inside.where(i, 0)
    elif padding_mode == "border": i = i.clip(0, d - 1)
    else: i = _reflect(i, lo, hi)
    out.append((i.cast(dtypes.int32), w))
  return out

@onnx_op(values={"mode": tuple(_MODES), "padding_mode": ("zeros", "border", "reflection")})
def GridSample(x: Tensor, grid: Tensor, /, *, align_corners: int = 0, mode: str = "linear", padding_mode: str = "zeros") -> Tensor:
  n, c, *dims = x.shape
  out_sp, r, kind = grid.shape[1:-1], len(dims), _MODES[mode]
  if n * c * math.prod(out_sp) == 0: return Tensor.zeros(n, c, *out_sp, dtype=x.dtype, device=x.device)
  g = grid.reshape(n, -1, r).cast(dtypes.float32 if x.dtype != dtypes.float64 else dtypes.float64)
  per_dim = []
  for k, d in enumerate(dims):
    u = g[:, :, r - 1 - k]
    p = (u + 1) / 2 * (d - 1) if align_corners else ((u + 1) * d - 1) / 2
    if kind == "nearest": p = p.round()
    lo, hi = (0.0, d - 1.0) if align_corners else (-0.5, d - 0.5)
    if padding_mode == "border": p = p.clip(0, d - 1)
    elif padding_mode == "reflection": p = _reflect(p, lo, hi)
    per_dim.append(_taps(p, d, kind, padding_mode, lo, hi))
  strides = [math.prod(dims[k + 1:]) for k in range(r)]
  flat_x, out = x.reshape(n, c, -1), None
  for combo in itertools.product(*per_dim):
    idx = sum((i * s for (i, _), s in zip(combo, strides)), start=combo[0][0] * 0)
    ws = [w for _, w in combo if w is not None]
    v = flat_x.gather(2, idx.reshape(n, 1, -1).expand(n, c, idx.shape[1])).cast(g.dtype)
    if ws: v = v * math.prod(ws[1:], start=ws[0]).reshape(n, 1, -1)
    out = v if out is None else out + v
  assert out is not None
  return out.reshape(n, c, *out_sp).cast(x.dtype)

@onnx_op()
def DeformConv(x: Tensor, w: Tensor, offset: Tensor, b: Tensor | None = None, mask: Tensor | None = None, /, *, dilations: list[int] | None = None,
               group: int = 1, kernel_shape: list[int] | None = None, offset_group: int = 1, pads: list[int] | None = None,
               strides: list[int] | None = None) -> Tensor:
  """A 2-d convolution whose every kernel tap reads the input at its usual place moved by a learned offset (per offset
  group, tap and output position), bilinearly: GridSample (align_corners, zero padding) of each offset group's
  channels at all the moved taps, times the mask, then the grouped weighted sum over channels and taps."""
  if x.ndim != 4: raise NotImplementedError(f"ONNX DeformConv on {x.ndim - 2}-d inputs: only 2-d is implemented")
  n, ic, ih, iw = x.shape
  oc, (kh, kw), (oh, ow) = w.shape[0], (kernel_shape or w.shape[2:]), offset.shape[2:]
  (sh, sw), (dh, dw), p, og = strides or [1, 1], dilations or [1, 1], pads or [0, 0, 0, 0], offset_group
  off = offset.reshape(n, og, kh, kw, 2, oh, ow)
  ph = (Tensor.arange(kh) * dh).reshape(1, 1, kh, 1, 1, 1) + (Tensor.arange(oh) * sh - p[0]).reshape(1, 1, 1, 1, oh, 1) + off[:, :, :, :, 0]
  pw = (Tensor.arange(kw) * dw).reshape(1, 1, 1, kw, 1, 1) + (Tensor.arange(ow) * sw - p[1]).reshape(1, 1, 1, 1, 1, ow) + off[:, :, :, :, 1]
  grid = Tensor.stack(pw / (iw - 1) * 2 - 1, ph / (ih - 1) * 2 - 1, dim=-1).reshape(n * og, kh * kw * oh, ow, 2)
  taps = GridSample(x.reshape(n * og, ic // og, ih, iw), grid, align_corners=1).reshape(n, og, ic // og, kh, kw, oh, ow)
  if mask is not None: taps = taps * mask.reshape(n, og, 1, kh, kw, oh, ow).cast(taps.dtype)
  icg, ocg = ic // group, oc // group
  wg = w.reshape(1, group, ocg, icg, kh, kw, 1, 1).cast(taps.dtype)
  out = (taps.reshape(n, group, 1, icg, kh, kw, oh, ow) * wg).sum((3, 4, 5)).reshape(n, oc, oh, ow)
  return out + b.reshape(1, -1, 1, 1) if b is not None else out
