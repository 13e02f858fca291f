"""ONNX's movement, indexing and creation ops: shapes, slices, gathers and scatters, padding, constants.

Inputs that hold a shape, axes, pads or slice bounds are read as Python ints (`ints`). Several ops moved an attribute
to an input at some version (Reshape 5, Slice 10, Pad 11, Split, Squeeze and Unsqueeze 13); one implementation takes
either. Negative indices count from the end, as ONNX says for Gather, GatherElements, GatherND, Scatter* and OneHot."""
from __future__ import annotations
import math
from typing import Any
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import ints, int_list, floats, axis_of, dtype_of, host_tensor, host_value, scalar, DTYPES

def _wrap(idx: Tensor, n: int | Tensor) -> Tensor: return (idx < 0).where(idx + n, idx)

@onnx_op()
def Reshape(x: Tensor, shape_input: Tensor | None = None, /, *, shape: list[int] | None = None, allowzero: int = 0,
            consumed_inputs: list[int] | None = None) -> Tensor:
  """A 0 in the shape copies the input's dim there (unless allowzero); one -1 is inferred."""
  s = int_list(shape_input, shape)
  return x.reshape([x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(s)])

@onnx_op()
def Flatten(x: Tensor, /, *, axis: int = 1) -> Tensor:
  a = axis_of(axis, x.ndim)
  return x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:]))

@onnx_op()
def Transpose(x: Tensor, /, *, perm: list[int] | None = None) -> Tensor: return x.permute(perm if perm is not None else list(reversed(range(x.ndim))))

@onnx_op()
def Squeeze(x: Tensor, axes_input: Tensor | None = None, /, *, axes: list[int] | None = None) -> Tensor:
  ax = int_list(axes_input, axes)
  drop = {axis_of(a, x.ndim) for a in ax} if ax else {i for i, s in enumerate(x.shape) if s == 1}
  return x.reshape([s for i, s in enumerate(x.shape) if i not in drop])

@onnx_op()
def Unsqueeze(x: Tensor, axes_input: Tensor | None = None, /, *, axes: list[int] | None = None) -> Tensor:
  n = x.ndim + len(ax := int_list(axes_input, axes))
  new, dims = {axis_of(a, n) for a in ax}, iter(x.shape)
  return x.reshape([1 if i in new else next(dims) for i in range(n)])

@onnx_op()
def Concat(*xs: Tensor, axis: int = 0) -> Tensor:
  return xs[0].cat(*xs[1:], dim=axis) if len(xs) > 1 else xs[0]

@onnx_op()
def Split(x: Tensor, split_input: Tensor | None = None, /, *, axis: int = 0, split: list[int] | None = None, num_outputs: int | None = None,
          _noutputs: int = 1) -> tuple[Tensor, ...]:
  """Sizes from the input (13 on) or attribute (before 13); else num_outputs parts (the last smaller, 18 on), else as
  many equal parts as the node has outputs."""
  a, sizes = axis_of(axis, x.ndim), int_list(split_input, split)
  if not sizes:
    n = num_outputs or _noutputs
    each = -(-x.shape[a] // n)
    sizes = [min(each, x.shape[a] - i * each) for i in range(n)]
  return x.split(sizes, dim=a)

@onnx_op()
def Slice(x: Tensor, starts_input: Tensor | None = None, ends_input: Tensor | None = None, axes_input: Tensor | None = None,
          steps_input: Tensor | None = None, /, *, starts: list[int] | None = None, ends: list[int] | None = None,
          axes: list[int] | None = None) -> Tensor:
  """Bounds clamp as Python's slices do; a negative step walks backwards."""
  st, en = int_list(starts_input, starts), int_list(ends_input, ends)
  ax, sp = int_list(axes_input, axes) or list(range(len(st))), int_list(steps_input) or [1] * len(st)
  sl: list[Any] = [slice(None)] * x.ndim
  for a, s, e, p in zip(ax, st, en, sp): sl[axis_of(a, x.ndim)] = slice(*slice(s, e, p).indices(x.shape[axis_of(a, x.ndim)]))
  for i, s in enumerate(sl):
    if s.step is not None and s.step < 0:  # slice(...).indices() may give stop -1 for "through the first element", not "the last"
      x, sl[i] = x.flip(i), slice(x.shape[i] - 1 - s.start, x.shape[i] - 1 - s.stop, -s.step)
  return x.shrink(tuple((s.start or 0, max(s.start or 0, s.stop if s.stop is not None else x.shape[i])) for i, s in enumerate(sl)))[
    tuple(slice(None, None, s.step) for s in sl)]

@onnx_op()
def Gather(x: Tensor, idx: Tensor, /, *, axis: int = 0) -> Tensor:
  """A host-value index (a constant, a shape) is wrapped on the host; a single one is a view (attention's packed q, k, v
  split by Gather 0/1/2 costs no kernel)."""
  a = axis_of(axis, x.ndim)
  if isinstance(v := host_value(idx), int): return x[(slice(None),) * a + (v + x.shape[a] if v < 0 else v,)]
  return x[(slice(None),) * a + (_wrap(idx, x.shape[a]),)]

@onnx_op()
def GatherElements(x: Tensor, idx: Tensor, /, *, axis: int = 0) -> Tensor:
  a = axis_of(axis, x.ndim)
  return x.gather(a, _wrap(idx, x.shape[a]))

def _nd_index(x: Tensor, idx: Tensor, batch_dims: int) -> tuple[Tensor, Tensor, int]:
  """x with its batch and indexed dims merged into one, and the flat index into that dim of each index tuple."""
  k, lead = idx.shape[-1], x.shape[:batch_dims]
  dims = x.shape[batch_dims:batch_dims + k]
  strides = [math.prod(dims[j + 1:]) for j in range(k)]
  flat = sum((_wrap(idx[..., j], dims[j]) * strides[j] for j in range(k)), start=idx[..., 0] * 0)
  nb = math.prod(lead)
  flat = flat.reshape(nb, -1) + Tensor.arange(nb).reshape(nb, 1) * math.prod(dims)
  return x.reshape(nb * math.prod(dims), *x.shape[batch_dims + k:]), flat.reshape(idx.shape[:-1]), k

@onnx_op()
def GatherND(x: Tensor, idx: Tensor, /, *, batch_dims: int = 0) -> Tensor:
  flat_x, flat, _ = _nd_index(x, idx, batch_dims)
  return flat_x[flat]

_SCATTER = {"none": None, "add": "sum", "mul": "prod", "max": "amax", "min": "amin"}

@onnx_op(values={"reduction": tuple(_SCATTER)})
def ScatterElements(x: Tensor, idx: Tensor, upd: Tensor, /, *, axis: int = 0, reduction: str = "none") -> Tensor:
  a = axis_of(axis, x.ndim)
  idx = _wrap(idx, x.shape[a])
  return x.scatter(a, idx, upd) if reduction == "none" else x.scatter_reduce(a, idx, upd, _SCATTER[reduction])

@onnx_op(until=10)
def Scatter(x: Tensor, idx: Tensor, upd: Tensor, /, *, axis: int = 0) -> Tensor: return ScatterElements(x, idx, upd, axis=axis)

@onnx_op(values={"reduction": tuple(_SCATTER)})
def ScatterND(x: Tensor, idx: Tensor, upd: Tensor, /, *, reduction: str = "none") -> Tensor:
  flat_x, flat, k = _nd_index(x, idx, 0)
  rest = flat_x.shape[1:]
  src = upd.reshape(-1, *rest)
  where = flat.reshape(-1, *[1] * len(rest)).expand(src.shape)
  out = flat_x.scatter(0, where, src) if reduction == "none" else flat_x.scatter_reduce(0, where, src, _SCATTER[reduction])
  return out.reshape(x.shape)

def _broadcast(a: tuple[int, ...], b: list[int]) -> tuple[int, ...]:
  n = max(len(a), len(b))
  a, bb = (1,) * (n - len(a)) + tuple(a), [1] * (n - len(b)) + list(b)
  return tuple(y if x == 1 else x for x, y in zip(a, bb))

@onnx_op()
def Expand(x: Tensor, shape: Tensor, /) -> Tensor:
  out = _broadcast(x.shape, int_list(shape))
  return x.reshape((1,) * (len(out) - x.ndim) + x.shape).expand(out)

@onnx_op()
def Tile(x: Tensor, repeats: Tensor, /) -> Tensor: return x.repeat(int_list(repeats))

_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}

@onnx_op(values={"mode": tuple(_PAD_MODES)})
def Pad(x: Tensor, pads_input: Tensor | None = None, value_input: Tensor | None = None, axes_input: Tensor | None = None, /, *,
        mode: str = "constant", pads: list[int] | None = None, paddings: list[int] | None = None, value: float = 0.0) -> Tensor:
  """pads lists every begin then every end, for `axes` (18 on) or for all dims."""
  p = int_list(pads_input, pads if pads is not None else paddings)
  ax = [axis_of(a, x.ndim) for a in int_list(axes_input, list(range(x.ndim)))]
  per = [(0, 0)] * x.ndim
  for i, a in enumerate(ax): per[a] = (p[i], p[i + len(ax)])
  v = floats(value_input, value) if value_input is None or value_input.numel() else value
  return x.pad(per, mode=_PAD_MODES[mode], **({"value": v} if mode == "constant" else {}))

@onnx_op()
def Shape(x: Tensor, /, *, start: int = 0, end: int | None = None) -> Tensor:
  return host_tensor(list(x.shape[slice(start, end)]), dtypes.int64, x.device)
@onnx_op()
def Size(x: Tensor, /) -> Tensor: return host_tensor(x.numel(), dtypes.int64, x.device)

@onnx_op(values={"mode": ("DCR", "CRD")})
def DepthToSpace(x: Tensor, /, *, blocksize: int, mode: str = "DCR") -> Tensor:
  (b, c, h, w), s = x.shape, blocksize
  if mode == "DCR": return x.reshape(b, s, s, c // (s * s), h, w).permute(0, 3, 4, 1, 5, 2).reshape(b, c // (s * s), h * s, w * s)
  return x.reshape(b, c // (s * s), s, s, h, w).permute(0, 1, 4, 2, 5, 3).reshape(b, c // (s * s), h * s, w * s)

@onnx_op(values={"mode": ("DCR", "CRD")})
def SpaceToDepth(x: Tensor, /, *, blocksize: int, mode: str = "DCR") -> Tensor:
  (b, c, h, w), s = x.shape, blocksize
  order = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
  return x.reshape(b, c, h // s, s, w // s, s).permute(*order).reshape(b, c * s * s, h // s, w // s)

@onnx_op()
def Trilu(x: Tensor, k: Tensor | None = None, /, *, upper: int = 1) -> Tensor:
  return x.triu(ints(k, 0)) if upper else x.tril(ints(k, 0))

@onnx_op()
def OneHot(idx: Tensor, depth: Tensor, values: Tensor, /, *, axis: int = -1) -> Tensor:
  d = int(floats(depth if depth.ndim == 0 else depth.reshape(())))
  a = axis_of(axis, idx.ndim + 1)
  hot = _wrap(idx.cast(dtypes.int64), d).unsqueeze(a) == Tensor.arange(d).reshape([d] + [1] * (idx.ndim - a))
  return hot.where(values[1], values[0])

@onnx_op()
def Constant(*, value: Tensor | None = None, value_float: float | None = None, value_floats: list[float] | None = None,
             value_int: int | None = None, value_ints: list[int] | None = None) -> Tensor:
  if value is not None: return value
  if value_float is not None or value_floats is not None: return Tensor(value_float if value_floats is None else value_floats, dtype=dtypes.float32)
  return Tensor(value_int if value_ints is None else value_ints, dtype=dtypes.int64)

@onnx_op()
def ConstantOfShape(shape: Tensor, /, *, value: Tensor | None = None) -> Tensor:
  fill, dt = (scalar(value), value.dtype) if value is not None else (0.0, dtypes.float32)
  return Tensor.full(tuple(int_list(shape)), fill, dtype=dt, device=shape.device)

@onnx_op()
def Range(start: Tensor, limit: Tensor, delta: Tensor, /) -> Tensor:
  s, l, d = scalar(start), scalar(limit), scalar(delta)
  n = max(math.ceil((l - s) / d), 0)
  return (Tensor.arange(n, device=start.device).cast(start.dtype) * d + s).cast(start.dtype) if n else Tensor.zeros(0, dtype=start.dtype)

@onnx_op(values={"dtype": tuple(DTYPES)})
def EyeLike(x: Tensor, /, *, dtype: int | None = None, k: int = 0) -> Tensor:
  n, m = x.shape
  rows, cols = Tensor.arange(n).reshape(n, 1), Tensor.arange(m).reshape(1, m)
  return (cols - rows == k).cast(dtype_of(dtype, "EyeLike") if dtype is not None else x.dtype)

@onnx_op()
def NonZero(x: Tensor, /) -> Tensor:
  """The output's length depends on the data: the count is read back first."""
  return x.nonzero(size=int(scalar((x != 0).sum()))).cast(dtypes.int64).T

@onnx_op()
def Dropout(x: Tensor, ratio_input: Tensor | None = None, training_mode: Tensor | None = None, /, *, seed: int | None = None, is_test: int = 0,
            ratio: float = 0.5, consumed_inputs: list[int] | None = None) -> tuple[Tensor, Tensor]:
  """Without training_mode the input passes through and the mask is all true; with it each element is kept with
  probability 1 - ratio (tinycore's generator: Tensor.manual_seed, not the node's seed) and scaled by 1 / (1 - ratio).
  training_mode and ratio are read on the host."""
  p = floats(ratio_input, ratio)
  if training_mode is None or not scalar(training_mode) or p == 0: return x, Tensor.ones(x.shape, dtype=dtypes.bool, device=x.device)
  keep = Tensor.rand(*x.shape, device=x.device) >= p
  return keep.where(x / (1 - p), 0).cast(x.dtype), keep

@onnx_op(values={"mode": ("linear", "circular")})
def TensorScatter(past: Tensor, update: Tensor, write_indices: Tensor | None = None, /, *, mode: str = "linear", axis: int = -2) -> Tensor:
  """A cache update: update's steps along axis go to the cache from batch b's write index on (wrapping around the
  cache's length in circular mode); the rest of the cache stays. Per cache position, the update step it takes is its
  offset from the write index: a gather and a where, no host reads."""
  a = axis_of(axis, past.ndim)
  length, steps = past.shape[a], update.shape[a]
  t = Tensor.arange(length).reshape([length if i == a else 1 for i in range(past.ndim)])
  w = write_indices.cast(dtypes.int32).reshape(-1, *[1] * (past.ndim - 1)) if write_indices is not None else 0
  s = t - w
  if mode == "circular": s = s % length
  ok = (s >= 0) & (s < steps)
  taken = update.gather(a, ok.where(s, 0).expand(*[length if i == a else n for i, n in enumerate(past.shape)]))
  return ok.where(taken, past)
