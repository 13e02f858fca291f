"""ONNX's detection ops: NonMaxSuppression and RoiAlign (its rules in its docstring).

NonMaxSuppression: per batch and class, boxes by falling score, each kept unless it overlaps a kept one too much.

The rules, as ONNX's reference (after onnxruntime):
- boxes are [y1, x1, y2, x2] with the corners in either order (center_point_box=0) or [x_center, y_center, w, h] (1);
- a box is a candidate when its score is above score_threshold (every box when the input is absent);
- candidates are visited by score, highest first, the lower box index first among equal scores; one is kept unless its
  intersection over union with an already kept box of the class is above iou_threshold (boxes with an empty
  intersection or a non-positive area never suppress); at most max_output_boxes_per_class are kept (0 when absent);
- the output lists [batch, class, box] of the kept boxes, by batch, then class, then the order they were kept in.
Everything is Tensor ops on (batch, class, box, box) overlaps. Which boxes are kept is the fixed point of
keep[k] = candidate[k] and no kept j before k overlaps k: iterated from keep = candidate, each round settles at least
one more box in score order, and the rounds stop when nothing changes (a host read per round, usually a few). The
output's length depends on the data: the kept count is read back, as NonZero's."""
from __future__ import annotations
import math
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import ints, floats, scalar

def _edges(b: Tensor, center_point_box: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """(x_min, x_max, y_min, y_max) of boxes (B, S, 4), each (B, S)."""
  if center_point_box:
    x, y, hw, hh = b[..., 0], b[..., 1], b[..., 2] / 2, b[..., 3] / 2
    return x - hw, x + hw, y - hh, y + hh
  return b[..., 1].minimum(b[..., 3]), b[..., 1].maximum(b[..., 3]), b[..., 0].minimum(b[..., 2]), b[..., 0].maximum(b[..., 2])

def _overlaps(boxes: Tensor, center_point_box: int, iou_threshold: float) -> Tensor:
  """(B, S, S) bool: box i suppresses box j (intersection over union above the threshold)."""
  x0, x1, y0, y1 = _edges(boxes, center_point_box)
  def pair(a: Tensor) -> tuple[Tensor, Tensor]: return a.unsqueeze(2), a.unsqueeze(1)
  (x0i, x0j), (x1i, x1j), (y0i, y0j), (y1i, y1j) = pair(x0), pair(x1), pair(y0), pair(y1)
  ix, iy = x1i.minimum(x1j) - x0i.maximum(x0j), y1i.minimum(y1j) - y0i.maximum(y0j)
  inter = ix * iy
  area_i, area_j = (x1i - x0i) * (y1i - y0i), (x1j - x0j) * (y1j - y0j)
  union = area_i + area_j - inter
  ok = (ix > 0) & (iy > 0) & (inter > 0) & (area_i > 0) & (area_j > 0) & (union > 0)
  return ok & (inter / ok.where(union, 1) > iou_threshold)

@onnx_op(values={"center_point_box": (0, 1)})
def NonMaxSuppression(boxes: Tensor, scores: Tensor, max_output_boxes_per_class: Tensor | None = None, iou_threshold: Tensor | None = None,
                      score_threshold: Tensor | None = None, /, *, center_point_box: int = 0) -> Tensor:
  nb, nc, ns = scores.shape
  limit = ints(max_output_boxes_per_class, 0)
  limit = limit[0] if isinstance(limit, list) else limit
  if limit <= 0 or ns == 0 or nb * nc == 0: return Tensor.zeros(0, 3, dtype=dtypes.int64, device=boxes.device)
  iou_t = floats(iou_threshold, 0.0) if iou_threshold is not None and iou_threshold.numel() else 0.0
  iou_t = iou_t[0] if isinstance(iou_t, list) else iou_t
  # visiting order: rank of each box among its class's boxes (higher score first, lower index first on ties)
  si, sj = scores.unsqueeze(-1), scores.unsqueeze(-2)
  ar = Tensor.arange(ns, device=scores.device)
  rank = ((sj > si) | ((sj == si) & (ar.reshape(1, ns) < ar.reshape(ns, 1)))).sum(-1)
  order = (rank.unsqueeze(-2) == ar.reshape(ns, 1)).where(ar, 0).sum(-1)  # order[b, c, k]: the box of rank k
  if score_threshold is not None and score_threshold.numel(): cand = scores > score_threshold.reshape(()).cast(scores.dtype)
  else: cand = Tensor.ones(scores.shape, dtype=dtypes.bool, device=scores.device)
  cand = cand.gather(2, order)
  ov = _overlaps(boxes if boxes.dtype == dtypes.float64 else boxes.cast(dtypes.float32), center_point_box, iou_t)
  ov = ov.unsqueeze(1).expand(nb, nc, ns, ns)
  ov = ov.gather(2, order.unsqueeze(-1).expand(nb, nc, ns, ns)).gather(3, order.unsqueeze(-2).expand(nb, nc, ns, ns))  # in rank order
  before = ar.reshape(ns, 1) < ar.reshape(1, ns)  # [j, k]: j is visited before k
  keep = cand
  while True:
    new = cand & ~(keep.unsqueeze(-1) & ov & before).any(-2)
    if not scalar((new != keep).any()): break
    keep = new.realize()
  keep = keep & (keep.cast(dtypes.int32).cumsum(-1) <= limit)
  n = int(scalar(keep.sum()))
  if n == 0: return Tensor.zeros(0, 3, dtype=dtypes.int64, device=boxes.device)
  bck = keep.nonzero(size=n).cast(dtypes.int64)  # (n, 3): batch, class, rank
  box = order.flatten().cast(dtypes.int64)[(bck[:, 0] * nc + bck[:, 1]) * ns + bck[:, 2]]
  return Tensor.stack(bck[:, 0], bck[:, 1], box, dim=1)

def _axis_taps(p: Tensor, n: int, grid_ok: Tensor) -> list[tuple[Tensor, Tensor]]:
  """RoiAlign's bilinear taps along one axis of length n: (index, weight) for the low and the high neighbour. A
  position beyond [-1, n] samples nothing (weight 0); one past the last pixel reads the last pixel."""
  inside = (p >= -1) & (p <= n) & grid_ok
  p = p.maximum(0)
  low = p.floor().minimum(n - 1)
  p = (low >= n - 1).where(low, p)
  high = (low + 1).minimum(n - 1)
  frac = p - low
  return [(low.cast(dtypes.int32), inside.where(1 - frac, 0.0)), (high.cast(dtypes.int32), inside.where(frac, 0.0))]

@onnx_op(values={"mode": ("avg", "max"), "coordinate_transformation_mode": ("half_pixel", "output_half_pixel")})
def RoiAlign(x: Tensor, rois: Tensor, batch_indices: Tensor, /, *, coordinate_transformation_mode: str = "half_pixel", mode: str = "avg",
             output_height: int = 1, output_width: int = 1, sampling_ratio: int = 0, spatial_scale: float = 1.0) -> Tensor:
  """Each region (x1, y1, x2, y2, scaled) is cut into output_height x output_width bins; each bin samples a grid of
  points (sampling_ratio per side, or ceil(bin size) when 0: the largest grid over the regions is read back), each point
  bilinearly interpolated, and the bin is their mean (avg) or the largest weighted corner value of any point (max), as
  ONNX's reference (after onnxruntime)."""
  n, c, h, w = x.shape
  r, ph, pw = rois.shape[0], output_height, output_width
  ro = rois.cast(dtypes.float32) * spatial_scale - (0.5 if coordinate_transformation_mode == "half_pixel" else 0.0)
  size_w, size_h = ro[:, 2] - ro[:, 0], ro[:, 3] - ro[:, 1]
  if coordinate_transformation_mode != "half_pixel": size_w, size_h = size_w.maximum(1.0), size_h.maximum(1.0)
  bin_h, bin_w = size_h / ph, size_w / pw
  if sampling_ratio > 0: gh = gw = Tensor.full((r,), float(sampling_ratio))
  else: gh, gw = bin_h.ceil(), bin_w.ceil()
  big_h, big_w = (sampling_ratio, sampling_ratio) if sampling_ratio > 0 else (max(int(scalar(gh.max())), 1), max(int(scalar(gw.max())), 1))
  def samples(start: Tensor, size: Tensor, grid: Tensor, bins: int, big: int) -> tuple[Tensor, Tensor]:
    """(r, bins, big) sample positions along one axis, and which of them the region's grid has."""
    i = Tensor.arange(big, dtype=dtypes.float32).reshape(1, 1, big)
    s3, z3, g3 = start.reshape(r, 1, 1), size.reshape(r, 1, 1), grid.reshape(r, 1, 1)
    return s3 + Tensor.arange(bins, dtype=dtypes.float32).reshape(1, bins, 1) * z3 + (i + 0.5) * z3 / g3.maximum(1), i < g3
  py, oky = samples(ro[:, 1], bin_h, gh, ph, big_h)
  px, okx = samples(ro[:, 0], bin_w, gw, pw, big_w)
  ty, tx = _axis_taps(py, h, oky), _axis_taps(px, w, okx)
  src = x.reshape(n, c * h * w)[batch_indices.cast(dtypes.int32)].reshape(r, c, h * w).cast(dtypes.float32)
  shape = (r, 1, ph, big_h, 1, 1)
  acc = None
  for yi, wy in ty:
    for xi, wx in tx:
      idx = (yi.reshape(shape) * w + xi.reshape(r, 1, 1, 1, pw, big_w)).reshape(r, 1, -1)
      v = src.gather(2, idx.expand(r, c, idx.shape[2])).reshape(r, c, ph, big_h, pw, big_w) * (wy.reshape(shape) * wx.reshape(r, 1, 1, 1, pw, big_w))
      acc = v if acc is None else (acc + v if mode == "avg" else acc.maximum(v))
  assert acc is not None
  if mode == "avg": out = acc.sum((3, 5)) / (gh * gw).maximum(1).reshape(r, 1, 1, 1)
  else: out = (oky.expand(r, ph, big_h).reshape(shape) & okx.expand(r, pw, big_w).reshape(r, 1, 1, 1, pw, big_w)).where(acc, -math.inf).max((3, 5))
  return out.cast(x.dtype)
