"""ONNX's elementwise ops: math, activations, comparisons, logic and casts, each a Tensor method or a few of them.

Binary ops broadcast as numpy (ONNX from version 7). Versions before 7 broadcast only where the node says `broadcast=1`,
aligning the second input at `axis` (or at the trailing dims): `_legacy` reshapes it so numpy broadcasting does the same."""
from __future__ import annotations
import math
from typing import Callable
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import DTYPES, dtype_of, axis_of
from tinycore.nn.onnx.narrow import NARROW

def _legacy(a: Tensor, b: Tensor, broadcast: int, axis: int | None) -> Tensor:
  """The second input of a version 1-6 binary op, shaped so that numpy broadcasting aligns it at `axis`."""
  if not broadcast or axis is None: return b
  return b.reshape(*b.shape, *[1] * (a.ndim - axis_of(axis, a.ndim) - b.ndim))

def _binary(name: str, fn: Callable[[Tensor, Tensor], Tensor]) -> None:
  def impl(a: Tensor, b: Tensor, /, *, broadcast: int = 0, axis: int | None = None, consumed_inputs: list[int] | None = None) -> Tensor:
    return fn(a, _legacy(a, b, broadcast, axis))
  impl.__name__ = impl.__qualname__ = name
  impl.__doc__ = f"ONNX {name}"
  onnx_op(name=name)(impl)

def _div(a: Tensor, b: Tensor) -> Tensor: return a.div(b, rounding_mode="trunc") if dtypes.is_int(a.dtype) else a / b
def _pow(a: Tensor, b: Tensor) -> Tensor:
  # the result has the base's dtype; an integer base with a float exponent computes in float and truncates as numpy's astype
  if dtypes.is_int(a.dtype) and not dtypes.is_int(b.dtype): return a.cast(b.dtype).pow(b).cast(a.dtype)
  return a.pow(b.cast(a.dtype) if dtypes.is_float(a.dtype) else b).cast(a.dtype)

for _name, _fn in {"Add": Tensor.add, "Sub": Tensor.sub, "Mul": Tensor.mul, "Div": _div, "Pow": _pow, "Equal": Tensor.eq, "Less": Tensor.lt,
                   "Greater": Tensor.gt, "LessOrEqual": Tensor.le, "GreaterOrEqual": Tensor.ge, "And": Tensor.logical_and,
                   "Or": Tensor.logical_or, "Xor": Tensor.logical_xor, "BitwiseAnd": Tensor.bitwise_and, "BitwiseOr": Tensor.bitwise_or,
                   "BitwiseXor": Tensor.bitwise_xor}.items():
  _binary(_name, _fn)

def _unary(name: str, fn: Callable[[Tensor], Tensor]) -> None:
  def impl(x: Tensor, /, *, consumed_inputs: list[int] | None = None) -> Tensor: return fn(x)
  impl.__name__ = impl.__qualname__ = name
  impl.__doc__ = f"ONNX {name}"
  onnx_op(name=name)(impl)

for _name, _fn in {"Abs": Tensor.abs, "Acos": Tensor.acos, "Acosh": Tensor.acosh, "Asin": Tensor.asin, "Asinh": Tensor.asinh, "Atan": Tensor.atan,
                   "Atanh": Tensor.atanh, "Ceil": Tensor.ceil, "Cos": Tensor.cos, "Cosh": Tensor.cosh, "Erf": Tensor.erf, "Exp": Tensor.exp,
                   "Floor": Tensor.floor, "Log": Tensor.log, "Neg": Tensor.neg, "Reciprocal": Tensor.reciprocal, "Relu": Tensor.relu,
                   "Round": Tensor.round, "Sigmoid": Tensor.sigmoid, "Sign": Tensor.sign, "Sin": Tensor.sin, "Sinh": Tensor.sinh,
                   "Softsign": Tensor.softsign, "Sqrt": Tensor.sqrt, "Tan": Tensor.tan, "Tanh": Tensor.tanh, "IsNaN": Tensor.isnan,
                   "Not": Tensor.logical_not, "BitwiseNot": Tensor.bitwise_not, "Identity": lambda x: x, "Mish": Tensor.mish,
                   "HardSwish": Tensor.hardswish, "Softplus": lambda x: (x.exp() + 1).log()}.items():
  _unary(_name, _fn)

@onnx_op()
def Celu(x: Tensor, /, *, alpha: float = 1.0) -> Tensor: return x.celu(alpha)
@onnx_op()
def Elu(x: Tensor, /, *, alpha: float = 1.0, consumed_inputs: list[int] | None = None) -> Tensor: return x.elu(alpha)
@onnx_op()
def Selu(x: Tensor, /, *, alpha: float = 1.67326319217681884765625, gamma: float = 1.05070102214813232421875,
         consumed_inputs: list[int] | None = None) -> Tensor:
  return gamma * (x > 0).where(x, alpha * (x.exp() - 1))
@onnx_op()
def LeakyRelu(x: Tensor, /, *, alpha: float = 0.01, consumed_inputs: list[int] | None = None) -> Tensor: return x.leaky_relu(alpha)
@onnx_op()
def ThresholdedRelu(x: Tensor, /, *, alpha: float = 1.0) -> Tensor: return (x > alpha).where(x, 0)
@onnx_op()
def HardSigmoid(x: Tensor, /, *, alpha: float = 0.2, beta: float = 0.5, consumed_inputs: list[int] | None = None) -> Tensor:
  return (alpha * x + beta).clip(0, 1)
@onnx_op()
def Shrink(x: Tensor, /, *, bias: float = 0.0, lambd: float = 0.5) -> Tensor:
  return (x < -lambd).where(x + bias, (x > lambd).where(x - bias, 0)).cast(x.dtype)
@onnx_op(values={"approximate": ("none", "tanh")})
def Gelu(x: Tensor, /, *, approximate: str = "none") -> Tensor:
  return x.gelu() if approximate == "tanh" else 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())
@onnx_op()
def PRelu(x: Tensor, slope: Tensor, /, *, consumed_inputs: list[int] | None = None, _version: int = 16) -> Tensor:
  """Before version 7 a 1-d slope of the channel count is per channel (dim 1), as exporters of the time wrote it."""
  if _version < 7 and slope.ndim == 1 and x.ndim > 2 and slope.shape[0] == x.shape[1]: slope = slope.reshape(-1, *[1] * (x.ndim - 2))
  return (x < 0).where(x * slope, x)
@onnx_op()
def IsInf(x: Tensor, /, *, detect_negative: int = 1, detect_positive: int = 1) -> Tensor:
  return x.isinf(detect_positive=bool(detect_positive), detect_negative=bool(detect_negative))
@onnx_op()
def Mod(a: Tensor, b: Tensor, /, *, fmod: int = 0) -> Tensor: return a.fmod(b) if fmod else a.mod(b)
@onnx_op(values={"direction": ("LEFT", "RIGHT")})
def BitShift(a: Tensor, b: Tensor, /, *, direction: str) -> Tensor:
  """A shift by a negative amount or by the width or more gives 0 (or -1, shifting a negative number right), as ONNX says."""
  out_of_range = (b < 0) | (b >= 8 * a.dtype.itemsize)
  safe = out_of_range.where(0, b)
  if direction == "LEFT": return out_of_range.where(0, a.lshift(safe))
  return out_of_range.where((a < 0).where(-1, 0).cast(a.dtype) if not dtypes.is_unsigned(a.dtype) else 0, a.rshift(safe))
@onnx_op()
def Where(cond: Tensor, a: Tensor, b: Tensor, /) -> Tensor: return cond.where(a, b)

@onnx_op()
def Clip(x: Tensor, lo: Tensor | None = None, hi: Tensor | None = None, /, *, min: float | None = None, max: float | None = None,
         consumed_inputs: list[int] | None = None) -> Tensor:
  """Versions 1-6 take the bounds as attributes, 11 on as optional inputs; an absent bound leaves that side open."""
  lo, hi = (lo if lo is not None else min), (hi if hi is not None else max)
  if lo is not None: x = x.maximum(lo.cast(x.dtype) if isinstance(lo, Tensor) else lo).cast(x.dtype)
  if hi is not None: x = x.minimum(hi.cast(x.dtype) if isinstance(hi, Tensor) else hi).cast(x.dtype)
  return x

def _variadic(name: str, fn: Callable[[Tensor, Tensor], Tensor], finish: Callable[[Tensor, int], Tensor] = lambda x, n: x) -> None:
  def impl(*xs: Tensor, consumed_inputs: list[int] | None = None) -> Tensor:
    out = xs[0]
    for x in xs[1:]: out = fn(out, x)
    return finish(out, len(xs))
  impl.__name__ = impl.__qualname__ = name
  impl.__doc__ = f"ONNX {name}"
  onnx_op(name=name)(impl)

_variadic("Max", Tensor.maximum)
_variadic("Min", Tensor.minimum)
_variadic("Sum", Tensor.add)
_variadic("Mean", Tensor.add, lambda x, n: x / n)

def _cast(x: Tensor, to: int, saturate: int, round_mode: str) -> Tensor:
  return NARROW[to].cast(x, bool(saturate), round_mode) if to in NARROW else x.cast(dtype_of(to, "Cast"))
@onnx_op(values={"to": (*DTYPES, *NARROW), "round_mode": ("up", "down", "nearest")})
def Cast(x: Tensor, /, *, to: int, saturate: int = 1, round_mode: str = "up") -> Tensor: return _cast(x, to, saturate, round_mode)
@onnx_op()
def CastLike(x: Tensor, like: Tensor, /, *, saturate: int = 1, round_mode: str = "up", _out_types: list[int] = ()) -> Tensor:
  """The output's ONNX type (from shape inference) says when `like` is a narrow type its carrier dtype does not tell."""
  return _cast(x, _out_types[0], saturate, round_mode) if _out_types and _out_types[0] in NARROW else x.cast(like.dtype)
