"""ONNX's random ops, drawn with tinycore's generator (Tensor.rand / randn / multinomial).

The numbers are not numpy's or onnxruntime's: what a test can check is the shape, the dtype and the distribution.
A node's `seed` attribute is accepted but does not pick the numbers: tinycore's generator is one for the process,
seeded by Tensor.manual_seed (call it before running for reproducible draws)."""
from __future__ import annotations
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import dtype_of, DTYPES

_FLOATS = {k: v for k, v in DTYPES.items() if dtypes.is_float(v)}

@onnx_op(values={"dtype": tuple(_FLOATS)})
def RandomNormal(*, shape: list[int], dtype: int = 1, mean: float = 0.0, scale: float = 1.0, seed: float | None = None) -> Tensor:
  return (Tensor.randn(*shape) * scale + mean).cast(dtype_of(dtype, "RandomNormal"))

@onnx_op(values={"dtype": tuple(_FLOATS)})
def RandomUniform(*, shape: list[int], dtype: int = 1, low: float = 0.0, high: float = 1.0, seed: float | None = None) -> Tensor:
  return (Tensor.rand(*shape) * (high - low) + low).cast(dtype_of(dtype, "RandomUniform"))

@onnx_op(values={"dtype": tuple(_FLOATS)})
def RandomNormalLike(x: Tensor, /, *, dtype: int | None = None, mean: float = 0.0, scale: float = 1.0, seed: float | None = None) -> Tensor:
  """The input's shape, and its dtype unless `dtype` says otherwise."""
  return RandomNormal(shape=list(x.shape), dtype=dtype if dtype is not None else _code(x), mean=mean, scale=scale)

@onnx_op(values={"dtype": tuple(_FLOATS)})
def RandomUniformLike(x: Tensor, /, *, dtype: int | None = None, low: float = 0.0, high: float = 1.0, seed: float | None = None) -> Tensor:
  return RandomUniform(shape=list(x.shape), dtype=dtype if dtype is not None else _code(x), low=low, high=high)

@onnx_op(values={"dtype": tuple(DTYPES)})
def Bernoulli(p: Tensor, /, *, dtype: int | None = None, seed: float | None = None) -> Tensor:
  """1 with probability p (the input), else 0."""
  return (Tensor.rand(*p.shape) < p.cast(dtypes.float32)).cast(dtype_of(dtype, "Bernoulli") if dtype is not None else p.dtype)

@onnx_op(values={"dtype": (6, 7)})
def Multinomial(x: Tensor, /, *, dtype: int = 6, sample_size: int = 1, seed: float | None = None) -> Tensor:
  """sample_size draws (with replacement) per batch row from the classes, x holding unnormalized log-probabilities."""
  w = (x.cast(dtypes.float32) - x.cast(dtypes.float32).max(-1, keepdim=True)).exp()
  return w.multinomial(sample_size, replacement=True).cast(dtype_of(dtype, "Multinomial"))

def _code(x: Tensor) -> int: return next(k for k, v in DTYPES.items() if v == x.dtype)
