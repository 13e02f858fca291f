"""ONNX's reductions, arg-reductions, softmaxes, cumulative sums and TopK.

The Reduce* ops take their axes as an attribute up to one version (12 for ReduceSum, 17 for the others) and as an
optional input after it; one implementation reads whichever the node has. No axes reduces every axis, unless
noop_with_empty_axes asks for the input back. A reduction over an empty axis gives the op's identity (0 for a sum,
-inf for a max), as ONNX's reference does. Results keep the input's dtype."""
from __future__ import annotations
import math
from typing import Callable
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import ints, int_list, axis_of

def _max_value(x: Tensor, sign: int) -> float:
  return sign * (math.inf if dtypes.is_float(x.dtype) else dtypes.max(x.dtype) if sign > 0 else -dtypes.min(x.dtype))

_REDUCTIONS: dict[str, tuple[Callable[[Tensor, tuple[int, ...]], Tensor], Callable[[Tensor], float]]] = {
  "ReduceSum": (lambda x, a: x.sum(a, keepdim=True), lambda x: 0),
  "ReduceMean": (lambda x, a: x.mean(a, keepdim=True), lambda x: math.nan),
  "ReduceMax": (lambda x, a: x.max(a, keepdim=True), lambda x: _max_value(x, -1)),
  "ReduceMin": (lambda x, a: x.min(a, keepdim=True), lambda x: _max_value(x, 1)),
  "ReduceProd": (lambda x, a: x.prod(a, keepdim=True), lambda x: 1),
  "ReduceL1": (lambda x, a: x.abs().sum(a, keepdim=True), lambda x: 0),
  "ReduceL2": (lambda x, a: (x * x).sum(a, keepdim=True).sqrt(), lambda x: 0),
  "ReduceSumSquare": (lambda x, a: (x * x).sum(a, keepdim=True), lambda x: 0),
  "ReduceLogSum": (lambda x, a: x.sum(a, keepdim=True).log(), lambda x: -math.inf),
  "ReduceLogSumExp": (lambda x, a: x.logsumexp(a, keepdim=True), lambda x: -math.inf),
}

def _reduction(name: str) -> None:
  fn, identity = _REDUCTIONS[name]
  def impl(x: Tensor, axes_input: Tensor | None = None, /, *, axes: list[int] | None = None, keepdims: int = 1,
           noop_with_empty_axes: int = 0) -> Tensor:
    ax = int_list(axes_input, axes)
    if not ax and noop_with_empty_axes: return x
    red = tuple(sorted({axis_of(a, x.ndim) for a in ax})) if ax else tuple(range(x.ndim))
    if any(x.shape[a] == 0 for a in red):
      out = Tensor.full(tuple(1 if i in red else s for i, s in enumerate(x.shape)), identity(x), dtype=x.dtype, device=x.device)
    else: out = fn(x, red).cast(x.dtype)
    return out if keepdims else out.reshape(tuple(s for i, s in enumerate(x.shape) if i not in red))
  impl.__name__ = impl.__qualname__ = name
  impl.__doc__ = f"ONNX {name}"
  onnx_op(name=name)(impl)

for _name in _REDUCTIONS: _reduction(_name)

def _arg(x: Tensor, axis: int, keepdims: int, select_last_index: int, largest: bool) -> Tensor:
  a = axis_of(axis, x.ndim)
  src = x.flip(a) if select_last_index else x
  i = src.argmax(a, keepdim=bool(keepdims)) if largest else src.argmin(a, keepdim=bool(keepdims))
  return (x.shape[a] - 1 - i if select_last_index else i).cast(dtypes.int64)

@onnx_op()
def ArgMax(x: Tensor, /, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> Tensor:
  return _arg(x, axis, keepdims, select_last_index, True)
@onnx_op()
def ArgMin(x: Tensor, /, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> Tensor:
  return _arg(x, axis, keepdims, select_last_index, False)

def _softmax_like(x: Tensor, axis: int, fn: Callable[[Tensor, int], Tensor], flatten: bool) -> Tensor:
  """Up to version 12 the input is read as 2-d, (product of the dims before axis, product of the rest); from 13 on axis is one dim."""
  if not flatten: return fn(x, axis)
  a = axis_of(axis, x.ndim)
  return fn(x.reshape(math.prod(x.shape[:a]), -1), 1).reshape(x.shape)

def _hardmax(x: Tensor, axis: int) -> Tensor:
  where = Tensor.arange(x.shape[axis]).reshape([-1] + [1] * (x.ndim - axis_of(axis, x.ndim) - 1))
  return (x.argmax(axis, keepdim=True) == where).cast(x.dtype)

@onnx_op(since=1)
def Softmax(x: Tensor, /, *, axis: int = 1) -> Tensor: return _softmax_like(x, axis, Tensor.softmax, True)
@onnx_op(since=13, name="Softmax")
def Softmax13(x: Tensor, /, *, axis: int = -1) -> Tensor: return x.softmax(axis)
@onnx_op(since=1)
def LogSoftmax(x: Tensor, /, *, axis: int = 1) -> Tensor: return _softmax_like(x, axis, Tensor.log_softmax, True)
@onnx_op(since=13, name="LogSoftmax")
def LogSoftmax13(x: Tensor, /, *, axis: int = -1) -> Tensor: return x.log_softmax(axis)
@onnx_op(since=1)
def Hardmax(x: Tensor, /, *, axis: int = 1) -> Tensor: return _softmax_like(x, axis, _hardmax, True)
@onnx_op(since=13, name="Hardmax")
def Hardmax13(x: Tensor, /, *, axis: int = -1) -> Tensor: return _hardmax(x, axis)

@onnx_op()
def CumSum(x: Tensor, axis: Tensor, /, *, exclusive: int = 0, reverse: int = 0) -> Tensor:
  a = axis_of(ints(axis), x.ndim)
  if reverse: x = x.flip(a)
  out = x.cumsum(a)
  if exclusive: out = out - x
  return (out.flip(a) if reverse else out).cast(x.dtype)

@onnx_op()
def TopK(x: Tensor, k_input: Tensor | None = None, /, *, axis: int = -1, k: int | None = None, largest: int = 1,
         sorted: int = 1) -> tuple[Tensor, Tensor]:
  """Version 1 takes k as an attribute, later versions as an input; ties keep the lower index first."""
  kk = ints(k_input, k)
  values, indices = x.topk(kk[0] if isinstance(kk, list) else kk, dim=axis, largest=bool(largest))
  return values, indices.cast(dtypes.int64)

@onnx_op(values={"p": (1, 2)})
def LpNormalization(x: Tensor, /, *, axis: int = -1, p: int = 2) -> Tensor:
  """A zero norm gives zeros, as ONNX's reference."""
  norm = x.abs().sum(axis, keepdim=True) if p == 1 else (x * x).sum(axis, keepdim=True).sqrt()
  return (norm == 0).where(0, x / norm).cast(x.dtype)
