"""Tensor elementwise ops: broadcasting and dtype promotion, arithmetic, comparisons, bitwise and logical ops, pow,
and the activations built of them."""
from __future__ import annotations
import functools, math
from typing import TYPE_CHECKING, Any
import numpy as np
import tinycore.function as F
from tinycore.dtype import DType, dtypes, least_upper_dtype, least_upper_float, to_dtype
from tinycore.helpers import all_int
from tinycore.lazy import LazyBuffer
from tinycore.errors import ShapeError, ArgumentError, DimError, DTypeError
from tinycore.ops import Ops
from tinycore.tensor.args import _broadcast_shape, _py_int_dtype
from tinycore.tensor.autograd import by_rule
from tinycore.device import is_dtype_supported
if TYPE_CHECKING: from tinycore.tensor import Tensor

_EXACT_PRODUCT = {dtypes.float16: dtypes.float32, dtypes.bfloat16: dtypes.float32, dtypes.float32: dtypes.float64}
_PY_SCALARS = (float, int, bool)

def _expanded(t: Tensor, shape: tuple[int, ...]) -> Tensor:
  """t (of shape's length, broadcast-compatible: checked by the caller) expanded to shape."""
  return t if t.shape == shape else F.Expand.apply(t, shape=shape)

class ElementwiseMixin:
  __slots__ = ()

  # *** broadcasting and elementwise ***
  def _broadcasted(self, y: Any, reverse: bool = False) -> tuple[Tensor, Tensor]:
    x = self
    if y.__class__ is type(self) and (xl := x.lazydata).dtype is (yl := y.lazydata).dtype and xl.shape == yl.shape and xl.device == yl.device:
      return (y, x) if reverse else (x, y)  # the common case: nothing to cast or broadcast
    if (yc := y.__class__) in _PY_SCALARS and not (xl := x.lazydata).var_vals and all_int(xl.shape) and \
       ((yc is not bool and y == y and dtypes.is_float(xl.dtype)) or (yc is int and dtypes.is_int(xl.dtype)) or
        (yc is bool and xl.dtype == dtypes.bool)):
      # a python number that takes x's dtype (a number with a float tensor, an int with an int tensor, a bool with a bool
      # one): its constant made at x's shape on the lazy graph (the same CONST and views as below, without a
      # Tensor-level reshape and expand: ~10x less Python per op)
      if yc is int and dtypes.is_int(xl.dtype): _py_int_dtype(y, xl.dtype)  # an int that does not fit: the error below
      c = type(self)(xl.const(y), requires_grad=False)
      return (c, x) if reverse else (x, c)
    if not isinstance(y, type(self)):
      if isinstance(y, (np.ndarray, list, tuple)): y = type(self)(y, device=x.device)
      else:
        if isinstance(y, np.generic): y = y.item()
        if not isinstance(y, (bool, int, float)): raise TypeError(f"cannot combine a Tensor with {type(y).__name__}")
        # a python scalar takes the tensor's dtype unless it needs a wider kind (a float with an int tensor)
        ydt = x.dtype if (dtypes.is_float(x.dtype) or (dtypes.is_int(x.dtype) and not isinstance(y, float)) or
                          (x.dtype == dtypes.bool and isinstance(y, bool))) else dtypes.from_py(y)
        if dtypes.is_int(ydt) and isinstance(y, int) and not isinstance(y, bool): _py_int_dtype(y, ydt)  # a scalar that does not fit: an error
        y = type(self)(dtypes.as_const(y, ydt) if not (isinstance(y, float) and math.isnan(y)) else y, device=x.device, dtype=ydt,
                       requires_grad=False)
    if x.device != y.device: raise ValueError(f"tensors are on different devices: {x.device} and {y.device}")
    if reverse: x, y = y, x
    out_dtype = least_upper_dtype(x.dtype, y.dtype)
    x, y = x.cast(out_dtype), y.cast(out_dtype)
    if x.shape == y.shape: return x, y
    sx, sy = (1,) * (max(x.ndim, y.ndim) - x.ndim) + x.shape, (1,) * (max(x.ndim, y.ndim) - y.ndim) + y.shape
    out = []
    for a, b in zip(sx, sy):
      if a != b and a != 1 and b != 1: raise ShapeError(f"shapes {x.shape} and {y.shape} cannot be broadcast together")
      out.append(b if a == 1 else a)
    if all_int(out):  # the shapes are checked: the Expand itself, without Tensor.expand's checks (most tensors here need none)
      shape = tuple(out)
      return _expanded(x.reshape(sx), shape), _expanded(y.reshape(sy), shape)
    return x.reshape(sx).expand(tuple(out)), y.reshape(sy).expand(tuple(out))

  def cast(self, dtype: DType | str) -> Tensor:
    """Convert to dtype (floats to ints truncate toward zero)."""
    dt = to_dtype(dtype)
    return self if self.dtype == dt else F.Cast.apply(self, dtype=dt)
  def bitcast(self, dtype: DType | str) -> Tensor:
    """Reinterpret the bits as dtype. With a different item size the last dim scales (little-endian)."""
    dt = to_dtype(dtype)
    if self.requires_grad: raise RuntimeError("bitcast is not differentiable: detach() first")
    if dt == self.dtype: return self
    if dt.itemsize == self.dtype.itemsize: return F.Cast.apply(self, dtype=dt, bitcast=True)
    if dt == dtypes.bool or self.dtype == dtypes.bool: raise TypeError(f"cannot bitcast between {self.dtype} and {dt}")
    uint = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}
    a, b = self.dtype.itemsize, dt.itemsize
    if self.ndim == 0: raise DimError(f"bitcast from {self.dtype} to {dt} needs at least one dim")  # as tinygrad 0.14: there is no last dim
    x = self if self.dtype == uint[a] else F.Cast.apply(self, dtype=uint[a], bitcast=True)
    if a > b:  # split each element into a//b pieces
      parts = [((x >> (8 * b * k)) & (2 ** (8 * b) - 1)).cast(uint[b]) for k in range(a // b)]
      y = type(self).stack(*parts, dim=-1).reshape(*self.shape[:-1], self.shape[-1] * (a // b))
    else:
      if self.shape[-1] % (b // a): raise ValueError(f"bitcast {self.dtype} to {dt} needs the last dim {self.shape[-1]} divisible by {b // a}")
      x = x.reshape(*self.shape[:-1], self.shape[-1] // (b // a), b // a).cast(uint[b])
      y = x[..., 0]
      for k in range(1, b // a): y = y | (x[..., k] << (8 * a * k))
    return y if dt == uint[dt.itemsize] else F.Cast.apply(y, dtype=dt, bitcast=True)
  def float(self) -> Tensor:
    """Cast to float32."""
    return self.cast(dtypes.float32)
  def half(self) -> Tensor:
    """Cast to float16."""
    return self.cast(dtypes.float16)
  def double(self) -> Tensor:
    """Cast to float64."""
    return self.cast(dtypes.float64)
  def bfloat16(self) -> Tensor:
    """Cast to bfloat16."""
    return self.cast(dtypes.bfloat16)
  def int(self) -> Tensor:
    """Cast to int32."""
    return self.cast(dtypes.int32)
  def long(self) -> Tensor:
    """Cast to int64."""
    return self.cast(dtypes.int64)
  def short(self) -> Tensor:
    """Cast to int16."""
    return self.cast(dtypes.int16)
  def char(self) -> Tensor:
    """Cast to int8."""
    return self.cast(dtypes.int8)
  def bool(self) -> Tensor:
    """Cast to bool (x != 0)."""
    return self.cast(dtypes.bool)
  def const_like(self, b: Any, dtype: DType | None = None) -> Tensor:
    """A constant of self's shape and device, in self's dtype unless given."""
    dt = to_dtype(dtype) if dtype is not None else self.dtype
    c = type(self)(dtypes.as_const(b, dt) if not (isinstance(b, float) and math.isnan(b)) else b, device=self.device, dtype=dt)
    return c.expand(self.shape) if self.shape else c

  def add(self, x: Any, reverse: bool = False) -> Tensor:
    """self + x with broadcasting and dtype promotion."""
    return F.Add.apply(*self._broadcasted(x, reverse))
  def sub(self, x: Any, reverse: bool = False) -> Tensor:
    """self - x."""
    a, b = self._broadcasted(x, reverse)
    if a.dtype == dtypes.bool: raise TypeError("subtraction of bool tensors is not supported: use logical_xor or ^")
    return F.Sub.apply(a, b)
  def mul(self, x: Any, reverse: bool = False) -> Tensor:
    """self * x."""
    return F.Mul.apply(*self._broadcasted(x, reverse))
  def div(self, x: Any, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
    """True division (integers promote to the default float); rounding_mode "trunc" or "floor" rounds the quotient."""
    a, b = self._broadcasted(x, reverse)
    if rounding_mode is not None:
      if rounding_mode not in ("trunc", "floor"): raise ArgumentError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
      if dtypes.is_int(a.dtype): return a.idiv(b) if rounding_mode == "trunc" else a._floordiv(b)
      q = a.div(b)
      return q.trunc() if rounding_mode == "trunc" else q.floor()
    if not dtypes.is_float(a.dtype): a, b = a.cast(least_upper_float(a.dtype)), b.cast(least_upper_float(b.dtype))
    return a * b.reciprocal()
  def idiv(self, x: Any, reverse: bool = False) -> Tensor:
    """Integer division truncating toward zero (C semantics)."""
    a, b = self._broadcasted(x, reverse)
    if not dtypes.is_int(a.dtype): raise TypeError(f"idiv needs integer tensors, got {a.dtype}")
    return F.BinaryNoGrad.apply(a, b, op=Ops.IDIV)
  def __floordiv__(self, x: Any) -> Tensor: return self._floordiv(x)
  def __rfloordiv__(self, x: Any) -> Tensor: return self._floordiv(x, True)
  def _floordiv(self, x: Any, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype):
      # as numpy and torch (Python's float //): from the remainder, so a == (a // b) * b + a % b; floor(a / b) differs
      # where a / b rounds up to an integer (1 // 0.1 is 9), at inf (inf // 2 is nan) and for -1 // inf (-1)
      m = a.fmod(b)
      div = (a - m) / b
      div = ((m != 0) & ((b < 0) != (m < 0))).where(div - 1, div)
      fl = div.floor()
      fl = (div - fl > 0.5).where(fl + 1, fl)
      q = a / b
      return (b == 0).where(q, (div == 0).where(q * 0, fl))  # a zero quotient keeps the sign of a / b
    if a.dtype == dtypes.bool: raise TypeError("floor division of bool tensors is not supported")
    q = F.BinaryNoGrad.apply(a, b, op=Ops.IDIV)
    # round toward negative infinity: subtract one where the signs differ and there is a remainder
    fix = ((a.mod_c(b) != 0) & ((a < 0) != (b < 0))).cast(q.dtype)
    return q - fix
  def mod_c(self, b: Tensor) -> Tensor:
    """C remainder of integers (sign of the dividend); internal building block."""
    return F.BinaryNoGrad.apply(self, b, op=Ops.MOD)
  def __mod__(self, x: Any) -> Tensor: return self.mod(x)
  def __rmod__(self, x: Any) -> Tensor: return self.mod(x, True)
  def mod(self, x: Any, reverse: bool = False) -> Tensor:
    """Python modulo (torch.remainder): the result takes the divisor's sign."""
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_float(a.dtype):
      r = a.fmod(b)
      return ((r != 0) & ((r < 0) != (b < 0))).where(r + b, r)
    if a.dtype == dtypes.bool: raise TypeError("modulo of bool tensors is not supported")
    r = F.BinaryNoGrad.apply(a, b, op=Ops.MOD)
    return ((r != 0) & ((r < 0) != (b < 0))).where(r + b, r)
  remainder = mod
  def fmod(self, x: Any) -> Tensor:
    """C fmod: the remainder of self / x truncated toward zero, with the sign of self (as torch.fmod)."""
    a, b = self._broadcasted(x)
    if not dtypes.is_float(a.dtype):
      if a.dtype == dtypes.bool: raise TypeError("fmod of bool tensors is not supported")
      return F.BinaryNoGrad.apply(a, b, op=Ops.MOD)
    q = (a / b).trunc()
    # q * b rounded would move r by up to half an ulp of the product (1 fmod 0.1 came out -1.5e-8, not 0.09999999):
    # q and b carry a float's significand each, so their product is exact in a type with twice the bits, where declared
    if (wide := _EXACT_PRODUCT.get(a.dtype)) is not None and is_dtype_supported(wide, a.device):
      r = (a.cast(wide) - q.cast(wide) * b.cast(wide)).cast(a.dtype)
    else: r = a - q * b  # exact only where the device fuses the multiply-add (float64 everywhere, float32 without float64)
    # the quotient may round across an integer: bring r back into (-|b|, |b|) with self's sign
    ab = b.abs()
    r = ((r != 0) & ((r < 0) != (a < 0))).where(r + a.sign() * ab, r)
    r = (r.abs() >= ab).where(r - a.sign() * ab, r)
    # b == 0 and a == +-inf give NaN through the arithmetic itself; b == +-inf leaves a
    return ab.isinf().where(a, r)
  def neg(self) -> Tensor:
    """-self (logical not for bool)."""
    return self.logical_not() if self.dtype == dtypes.bool else F.Neg.apply(self)
  def reciprocal(self) -> Tensor:
    """1 / self (as a float)."""
    return F.Reciprocal.apply(self.cast(least_upper_float(self.dtype)))
  def maximum(self, x: Any) -> Tensor:
    """Elementwise max with broadcasting; NaN propagates."""
    return F.Maximum.apply(*self._broadcasted(x))
  def minimum(self, x: Any) -> Tensor:
    """Elementwise min with broadcasting; NaN propagates."""
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a & b
    if dtypes.is_int(a.dtype): return ~((~a).maximum(~b))
    return -((-a).maximum(-b))
  def where(self, x: Any, y: Any) -> Tensor:
    """self ? x : y elementwise, broadcasting all three (self is read as bool)."""
    if not isinstance(x, type(self)) and not isinstance(y, type(self)):
      dt = least_upper_dtype(dtypes.from_py(x), dtypes.from_py(y))
      x = type(self)(x, device=self.device, dtype=dt)
    if isinstance(x, type(self)): x, y = x._broadcasted(y)
    else: y, x = y._broadcasted(x)
    cond = self.cast(dtypes.bool)
    if cond.shape == x.shape and all_int(x.shape): return F.Where.apply(cond, x, y)  # nothing to broadcast
    try: shape = _broadcast_shape(cond.shape, x.shape)
    except ValueError: raise ShapeError(f"where condition of shape {cond.shape} cannot be broadcast with values of shape {x.shape}") from None
    return F.Where.apply(cond._expand_to(shape), x._expand_to(shape), y._expand_to(shape))
  def _expand_to(self, shape: tuple[int, ...]) -> Tensor:
    return self if self.shape == shape else self.reshape((1,) * (len(shape) - self.ndim) + self.shape).expand(shape)
  def _cmp(self, x: Any) -> Tensor:
    """self, widened when x is a Python int outside its int dtype: a comparison with it is well defined (as numpy's),
    where arithmetic would overflow."""
    if isinstance(x, int) and not isinstance(x, bool) and dtypes.is_int(self.dtype) and not dtypes.min(self.dtype) <= x <= dtypes.max(self.dtype):
      return self.cast(dtypes.int64 if self.dtype != dtypes.uint64 and -2**63 <= x < 2**63 else dtypes.float64)
    return self
  def __lt__(self, x: Any) -> Tensor: return F.BinaryNoGrad.apply(*self._cmp(x)._broadcasted(x), op=Ops.CMPLT)
  def __gt__(self, x: Any) -> Tensor: return F.BinaryNoGrad.apply(*self._cmp(x)._broadcasted(x, True), op=Ops.CMPLT)
  def __ge__(self, x: Any) -> Tensor:
    a, b = self._cmp(x)._broadcasted(x)
    return F.BinaryNoGrad.apply(b, a, op=Ops.CMPLT) | (a == b) if dtypes.is_float(a.dtype) else F.BinaryNoGrad.apply(a, b, op=Ops.CMPLT).logical_not()
  def __le__(self, x: Any) -> Tensor:
    a, b = self._cmp(x)._broadcasted(x)
    return F.BinaryNoGrad.apply(a, b, op=Ops.CMPLT) | (a == b) if dtypes.is_float(a.dtype) else F.BinaryNoGrad.apply(b, a, op=Ops.CMPLT).logical_not()
  def __ne__(self, x: Any) -> Tensor: return F.BinaryNoGrad.apply(*self._cmp(x)._broadcasted(x), op=Ops.CMPNE)  # type: ignore[override]
  def __eq__(self, x: Any) -> Tensor: return (self != x).logical_not()  # type: ignore[override]
  def eq(self, x: Any) -> Tensor:
    """self == x elementwise."""
    return self == x
  def ne(self, x: Any) -> Tensor:
    """self != x elementwise."""
    return self != x
  def lt(self, x: Any) -> Tensor:
    """self < x elementwise."""
    return self < x
  def gt(self, x: Any) -> Tensor:
    """self > x elementwise."""
    return self > x
  def le(self, x: Any) -> Tensor:
    """self <= x elementwise."""
    return self <= x
  def ge(self, x: Any) -> Tensor:
    """self >= x elementwise."""
    return self >= x
  def logical_not(self) -> Tensor:
    """not self (read as bool)."""
    return F.BinaryNoGrad.apply(*self.cast(dtypes.bool)._broadcasted(True), op=Ops.CMPNE)
  def logical_and(self, x: Any) -> Tensor:
    """self and x (read as bool)."""
    return self.bool() & (x.bool() if isinstance(x, type(self)) else bool(x))
  def logical_or(self, x: Any) -> Tensor:
    """self or x (read as bool)."""
    return self.bool() | (x.bool() if isinstance(x, type(self)) else bool(x))
  def logical_xor(self, x: Any) -> Tensor:
    """self xor x (read as bool)."""
    return self.bool() ^ (x.bool() if isinstance(x, type(self)) else bool(x))
  def _bitwise(self, x: Any, op: Ops, reverse: bool = False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if not (dtypes.is_int(a.dtype) or a.dtype == dtypes.bool): raise DTypeError(f"{op.name} needs integer or bool tensors, got {a.dtype}")
    if op in (Ops.SHL, Ops.SHR) and a.dtype == dtypes.bool: raise DTypeError(f"{op.name} needs integer tensors, got bool")
    return F.BinaryNoGrad.apply(a, b, op=op)
  def bitwise_and(self, x: Any, reverse: bool = False) -> Tensor:
    """self & x (x & self with reverse) for int or bool tensors."""
    return self._bitwise(x, Ops.AND, reverse)
  def bitwise_or(self, x: Any, reverse: bool = False) -> Tensor:
    """self | x (x | self with reverse) for int or bool tensors."""
    return self._bitwise(x, Ops.OR, reverse)
  def bitwise_xor(self, x: Any, reverse: bool = False) -> Tensor:
    """self ^ x (x ^ self with reverse) for int or bool tensors."""
    return self._bitwise(x, Ops.XOR, reverse)
  def bitwise_not(self) -> Tensor:
    """~self for int or bool tensors."""
    if not (dtypes.is_int(self.dtype) or self.dtype == dtypes.bool): raise DTypeError(f"bitwise_not needs integer or bool tensors, got {self.dtype}")
    return self.logical_not() if self.dtype == dtypes.bool else self ^ (-1 if not dtypes.is_unsigned(self.dtype) else dtypes.max(self.dtype))
  def lshift(self, x: Any, reverse: bool = False) -> Tensor:
    """self << x (x << self with reverse) for integer tensors."""
    return self._bitwise(x, Ops.SHL, reverse)
  def rshift(self, x: Any, reverse: bool = False) -> Tensor:
    """self >> x (x >> self with reverse) for integer tensors (arithmetic for signed)."""
    return self._bitwise(x, Ops.SHR, reverse)
  def pow(self, x: Any, reverse: bool = False) -> Tensor:
    """self ** x. Integer tensors to non-negative integer powers stay integers; floats follow C's pow as torch does
    (0 ** 0 == 1, 0 ** negative is inf, negative bases keep their sign for odd integer exponents, NaN where the real
    result is undefined, (-inf) ** 0.3 is inf), with torch's gradients. An integer tensor to a python float power is a
    float; to a negative python int power it is an error (as torch and tinygrad)."""
    if not reverse and dtypes.is_int(self.dtype) and isinstance(x, (int, float)) and not isinstance(x, bool):
      if isinstance(x, float): return self._float().pow(x)
      if x < 0: raise ArgumentError(f"an integer tensor ({self.dtype}) to the negative integer power {x}: cast it to a float first")
    if not reverse and not isinstance(x, type(self)) and isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
      # constant exponents: multiplications (exact, and the gradient is right at 0)
      if x == int(x) and 0 < abs(x) <= 64 and (x > 0 or dtypes.is_float(self.dtype)):
        n = int(abs(x))
        base = self if x > 0 else self.reciprocal()
        acc: Tensor | None = None
        while n:
          if n & 1: acc = base if acc is None else acc * base
          n >>= 1
          if n: base = base * base
        return acc  # type: ignore[return-value]
      if x == 0 and not dtypes.is_float(self.dtype): return self.const_like(1)
      if x == 0.5 and dtypes.is_float(self.dtype): return self.sqrt()  # as torch, (-inf) ** 0.5 is NaN
    base, exponent = self._broadcasted(x, reverse)
    if dtypes.is_int(base.dtype):
      # binary exponentiation; negative exponents give 1/b^|e| truncated: only |b| == 1 survive
      e, b, acc = exponent, base, base.const_like(1)
      for _ in range(8 * base.dtype.itemsize - (0 if dtypes.is_unsigned(base.dtype) else 1)):
        acc = ((e & 1) != 0).where(acc * b, acc)
        e, b = e >> 1, b * b
      if dtypes.is_unsigned(base.dtype): return acc
      neg = exponent < 0
      return neg.where((base == 1).where(1, (base == -1).where(((exponent & 1) != 0).where(-1, 1), 0)), acc).cast(base.dtype)
    if base.dtype == dtypes.bool: base, exponent = base.cast(dtypes.int32), exponent.cast(dtypes.int32)
    if not dtypes.is_float(base.dtype): base, exponent = base.float(), exponent.float()
    return F.Pow.apply(base, exponent, value=self._pow_value(base, exponent))
  @classmethod
  def _pow_value(cls, base: Tensor, exponent: Tensor) -> LazyBuffer:
    """C's pow on the edge values (see function.Pow), composed of elementwise ops outside the graph."""
    b, e = cls(base.lazydata, requires_grad=False), cls(exponent.lazydata, requires_grad=False)
    mag = (e * b.abs().log2()).exp2()  # |b| ** e
    int_e = e == e.trunc()
    odd = int_e & (e.abs().fmod(2) == 1)
    out = (b < 0).where((int_e | b.isinf()).where(odd.where(-mag, mag), math.nan), mag)
    # log2 of 0 and 1 need not be exact on every backend: those bases are spelled out (-0.0 to an odd power keeps its sign)
    z = (e < 0).where(math.inf, (e > 0).where(0.0, out))
    out = (b == 0).where((odd & b._signbit()).where(-z, z), out)
    one = (e == 0) | (b == 1) | ((b.abs() == 1) & e.isinf())
    return one.where(1.0, out).cast(base.dtype).lazydata

  __add__ = add
  def __radd__(self, x: Any) -> Tensor: return self.add(x, True)
  __sub__ = sub
  def __rsub__(self, x: Any) -> Tensor: return self.sub(x, True)
  __mul__ = mul
  def __rmul__(self, x: Any) -> Tensor: return self.mul(x, True)
  def __truediv__(self, x: Any) -> Tensor: return self.div(x)
  def __rtruediv__(self, x: Any) -> Tensor: return self.div(x, True)
  def __pow__(self, x: Any) -> Tensor: return self.pow(x)
  def __rpow__(self, x: Any) -> Tensor: return self.pow(x, True)
  def __neg__(self) -> Tensor: return self.neg()
  def __abs__(self) -> Tensor: return self.abs()
  def __and__(self, x: Any) -> Tensor: return self.bitwise_and(x)
  def __or__(self, x: Any) -> Tensor: return self.bitwise_or(x)
  def __xor__(self, x: Any) -> Tensor: return self.bitwise_xor(x)
  def __rand__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.AND, True)
  def __ror__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.OR, True)
  def __rxor__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.XOR, True)
  def __lshift__(self, x: Any) -> Tensor: return self.lshift(x)
  def __rshift__(self, x: Any) -> Tensor: return self.rshift(x)
  def __rlshift__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.SHL, True)
  def __rrshift__(self, x: Any) -> Tensor: return self._bitwise(x, Ops.SHR, True)
  def __invert__(self) -> Tensor: return self.bitwise_not()
  def __matmul__(self, x: Tensor) -> Tensor: return self.matmul(x)
  def __rmatmul__(self, x: Tensor) -> Tensor: return self.matmul(x, reverse=True)
  def __iadd__(self, x: Any) -> Tensor: return self.assign(self + x)
  def __isub__(self, x: Any) -> Tensor: return self.assign(self - x)
  def __imul__(self, x: Any) -> Tensor: return self.assign(self * x)
  def __itruediv__(self, x: Any) -> Tensor: return self.assign(self / x)
  def __imatmul__(self, x: Any) -> Tensor: return self.assign(self @ x)
  def __ipow__(self, x: Any) -> Tensor: return self.assign(self ** x)
  def __iand__(self, x: Any) -> Tensor: return self.assign(self & x)
  def __ior__(self, x: Any) -> Tensor: return self.assign(self | x)
  def __ixor__(self, x: Any) -> Tensor: return self.assign(self ^ x)
  def __ifloordiv__(self, x: Any) -> Tensor: return self.assign(self // x)
  def __ilshift__(self, x: Any) -> Tensor: return self.assign(self << x)
  def __irshift__(self, x: Any) -> Tensor: return self.assign(self >> x)

  # *** activations ***
  def relu(self) -> Tensor:
    """max(self, 0)."""
    return F.Relu.apply(self)
  def relu6(self) -> Tensor:
    """min(max(self, 0), 6)."""
    return self.relu().minimum(6)
  def sigmoid(self) -> Tensor:
    """1 / (1 + exp(-self))."""
    return F.Sigmoid.apply(self._float())
  def hardsigmoid(self, alpha: float = 1 / 6, beta: float = 0.5) -> Tensor:
    """max(0, min(1, alpha * self + beta))."""
    return (alpha * self + beta).relu().minimum(1)
  def leaky_relu(self, neg_slope: float = 0.01) -> Tensor:
    """self where positive, neg_slope * self elsewhere."""
    return (self < 0).where(neg_slope * self, self)
  def elu(self, alpha: float = 1.0) -> Tensor:
    """self where positive, alpha * (exp(self) - 1) elsewhere."""
    return (self > 0).where(self, alpha * (self.minimum(0).exp() - 1))
  def celu(self, alpha: float = 1.0) -> Tensor:
    """max(0, self) + min(0, alpha * (exp(self / alpha) - 1))."""
    return self.maximum(0) + (alpha * ((self / alpha).minimum(0).exp() - 1)).minimum(0)
  def selu(self, alpha: float = 1.67326, gamma: float = 1.0507) -> Tensor:
    """gamma * elu(self, alpha) with the self-normalizing constants."""
    return gamma * self.elu(alpha)
  def gelu(self, approximate: str = "tanh") -> Tensor:
    """GELU: approximate="tanh" (the default, as tinygrad) or "none", the exact self * Phi(self) through erf (torch's
    default)."""
    if approximate not in ("tanh", "none"): raise ArgumentError(f"gelu approximate must be 'tanh' or 'none', got {approximate!r}")
    # the value without its pieces recorded, the gradient by a rule from x alone (_gelu_grad): through the pieces, the
    # forward stored 6 tensors of x's size that the backward reads (GPT's MLP: 6 kernels of 1M floats a layer, and fc2's
    # input gradient loading them all in its epilogue)
    return by_rule((self,), functools.partial(_gelu, self, approximate), functools.partial(_gelu_grad, approximate=approximate))
  def quick_gelu(self) -> Tensor:
    """self * sigmoid(1.702 * self)."""
    return self * (self * 1.702).sigmoid()
  def silu(self) -> Tensor:
    """self * sigmoid(self)."""
    return self * self.sigmoid()
  def swish(self) -> Tensor:
    """Same as silu."""
    return self.silu()
  def mish(self) -> Tensor:
    """self * tanh(softplus(self))."""
    return self * self.softplus().tanh()
  def softplus(self, beta: float = 1.0) -> Tensor:
    """log(1 + exp(beta * self)) / beta, computed without overflow."""
    x = self._float() * beta
    return (x.relu() + (1 + (-x.abs()).exp()).log()) * (1 / beta)
  def softsign(self) -> Tensor:
    """self / (1 + |self|)."""
    return self / (1 + self.abs())
  def hardswish(self) -> Tensor:
    """self * relu6(self + 3) / 6."""
    return self * (self + 3).relu6() * (1 / 6)
  def hardtanh(self, min_val: float = -1, max_val: float = 1) -> Tensor:
    """clip(self, min_val, max_val)."""
    return self.clip(min_val, max_val)
  def logsigmoid(self) -> Tensor:
    """log(sigmoid(self)), computed without overflow."""
    return -(-self).softplus()

def _gelu(x: Tensor, approximate: str) -> Tensor:
  if approximate == "none": return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())
  return 0.5 * x * (1 + (_GELU_C * (x + _GELU_A * x * x * x)).tanh())

_GELU_C, _GELU_A = math.sqrt(2 / math.pi), 0.044715

def _gelu_grad(grad: Tensor, x: Tensor, *, needs: tuple[bool, ...], approximate: str) -> tuple[Tensor]:
  """gelu's gradient (F.Composite's rule), from x alone. tanh: with s = sigmoid(2u), u = c (x + a x^3), gelu = x s
  (0.5 (1 + tanh u) = s) and gelu' = s + x s (1 - s) 2c (1 + 3a x^2). none: Phi(x) + x phi(x)."""
  if approximate == "none": d = 0.5 * (1 + (x * (1 / math.sqrt(2))).erf()) + x * (-0.5 * x * x).exp() * (1 / math.sqrt(2 * math.pi))
  else:
    s = (2 * _GELU_C * (x + _GELU_A * x * x * x)).sigmoid()
    d = s + x * s * (1 - s) * (2 * _GELU_C) * (1 + 3 * _GELU_A * x * x)
  return (grad * d,)
