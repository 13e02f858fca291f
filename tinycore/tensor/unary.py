"""Tensor unary math: exp and log, trigonometric and hyperbolic functions, rounding, clipping, and the float predicates
(isnan, isclose)."""
from __future__ import annotations
import functools, math
from typing import TYPE_CHECKING, Any, Callable, Sequence
import tinycore.function as F
from tinycore.dtype import dtypes, least_upper_float
from tinycore.errors import ArgumentError
if TYPE_CHECKING: from tinycore.tensor import Tensor

class UnaryMixin:
  __slots__ = ()

  # *** unary math ***
  def _float(self) -> Tensor: return self.cast(least_upper_float(self.dtype))
  def exp(self) -> Tensor:
    """e ** self."""
    return F.Exp.apply(self._float())
  def exp2(self) -> Tensor:
    """2 ** self."""
    return F.Exp2.apply(self._float())
  def log(self) -> Tensor:
    """Natural log (NaN below 0, -inf at 0)."""
    return F.Log.apply(self._float())
  def log2(self) -> Tensor:
    """Base-2 log."""
    return F.Log2.apply(self._float())
  def log10(self) -> Tensor:
    """Base-10 log."""
    return self.log2() * math.log10(2)
  def log1p(self) -> Tensor:
    """log(1 + self), accurate near 0."""
    x = self._float()
    u = x + 1
    # log(u) * x / (u - 1) corrects the rounding of 1 + x (Goldberg); far from 0 there is nothing to correct
    return (x.abs() > 1e4).where(u.log(), (u == 1).where(x, u.log() * x / (u == 1).where(1, u - 1)))
  def expm1(self) -> Tensor:
    """exp(self) - 1, accurate near 0."""
    x = self._float()
    u = x.exp()
    return (x.abs() > 0.5).where(u - 1, (u == 1).where(x, (u - 1) * x / (u == 1).where(1, u.log())))
  def sqrt(self) -> Tensor:
    """Square root (NaN below 0)."""
    return F.Sqrt.apply(self._float())
  def rsqrt(self) -> Tensor:
    """1 / sqrt(self)."""
    return self.sqrt().reciprocal()
  def sin(self) -> Tensor:
    """Sine."""
    return F.Sin.apply(self._float())
  def cos(self) -> Tensor:
    """Cosine."""
    return ((math.pi / 2) - self._float()).sin()
  def tan(self) -> Tensor:
    """Tangent."""
    return self.sin() / self.cos()
  def asin(self) -> Tensor:
    """Arc sine (NaN outside [-1, 1])."""
    x = self._float()
    a = x.abs()
    # Abramowitz & Stegun 4.4.46: asin(a) = pi/2 - sqrt(1 - a) * poly(a) on [0, 1], error below 2e-8
    coeffs = [-0.0012624911, 0.0066700901, -0.0170881256, 0.0308918810, -0.0501743046, 0.0889789874, -0.2145988016, 1.5707963050]
    p = a * 0 + coeffs[0]
    for c in coeffs[1:]: p = p * a + c
    r = math.pi / 2 - (1 - a).sqrt() * p
    return (a > 1).where(math.nan, x.sign() * r)
  def acos(self) -> Tensor:
    """Arc cosine (NaN outside [-1, 1])."""
    return math.pi / 2 - self.asin()
  def atan(self) -> Tensor:
    """Arc tangent."""
    x = self._float()
    big = x.abs() > 1
    t = big.where(x.reciprocal(), x)
    r = (t / (1 + t * t).sqrt()).asin()
    return big.where(x.sign() * (math.pi / 2) - r, r)
  def sinh(self) -> Tensor:
    """Hyperbolic sine."""
    x = self._float()
    return (x.exp() - (-x).exp()) / 2
  def cosh(self) -> Tensor:
    """Hyperbolic cosine."""
    x = self._float()
    return (x.exp() + (-x).exp()) / 2
  def tanh(self) -> Tensor:
    """Hyperbolic tangent."""
    return 2.0 * ((2.0 * self._float()).sigmoid()) - 1.0
  def asinh(self) -> Tensor:
    """Inverse hyperbolic sine."""
    x = self._float()
    a = x.abs()
    big = a > 1e15
    r = big.where(a.log() + math.log(2), (a + (big.where(0, a * a) + 1).sqrt()).log())
    return x.sign() * r
  def acosh(self) -> Tensor:
    """Inverse hyperbolic cosine (NaN below 1)."""
    x = self._float()
    big = x > 1e15
    return big.where(x.log() + math.log(2), (x + (big.where(2, x * x) - 1).sqrt()).log())
  def atanh(self) -> Tensor:
    """Inverse hyperbolic tangent (NaN outside [-1, 1], inf at +-1)."""
    x = self._float()
    return 0.5 * ((1 + x) / (1 - x)).log()
  def square(self) -> Tensor:
    """self * self."""
    return self * self
  def abs(self) -> Tensor:
    """|self|."""
    if self.dtype == dtypes.bool or dtypes.is_unsigned(self.dtype): return self
    return self * self.sign()
  def sign(self) -> Tensor:
    """-1, 0 or 1 by the sign of each element (0 for NaN, as torch)."""
    return F.Sign.apply(self)
  def _signbit(self) -> Tensor:
    if not dtypes.is_float(self.dtype): return self < 0
    it = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[self.dtype.itemsize]
    return self.detach().bitcast(it) < 0
  def copysign(self, other: Any) -> Tensor:
    """|self| with the sign of other (the sign bit: -0.0 counts as negative)."""
    a, b = self._broadcasted(other)
    if not dtypes.is_float(a.dtype):  # integers keep their dtype (as tinygrad): -|a| where b < 0
      mag = a.abs() if a.dtype != dtypes.bool else a
      return (b < 0).where(-mag, mag)
    a, b = a._float(), b._float()
    # a zero has magnitude +0 and, as in torch and tinygrad, gradient 0 (the sign-bit select alone would give +-1 there)
    mag = (a == 0).where(0.0, a._signbit().where(-a, a))
    return b._signbit().where(-mag, mag)
  def trunc(self) -> Tensor:
    """Round toward zero (integers pass through); zero gradient."""
    return F.Trunc.apply(self)
  def floor(self) -> Tensor:
    """Round down; zero gradient."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self < t).where(t - 1, t)
  def ceil(self) -> Tensor:
    """Round up; zero gradient."""
    if not dtypes.is_float(self.dtype): return self
    t = self.trunc()
    return (self > t).where(t + 1, t)
  def round(self) -> Tensor:
    """Round half to even, as torch and numpy; zero gradient."""
    if self.dtype == dtypes.bool: return self.cast(dtypes.default_float)  # as tinygrad 0.14 (torch has no round of bool)
    if not dtypes.is_float(self.dtype): return self
    f = self.floor()
    d = self.detach() - f
    odd = (f * 0.5).floor() != f * 0.5
    return (d > 0.5).where(f + 1, (d < 0.5).where(f, odd.where(f + 1, f)))
  def isnan(self) -> Tensor:
    """True where NaN."""
    return self != self
  def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
    """True where +inf (detect_positive) or -inf (detect_negative)."""
    if not dtypes.is_float(self.dtype): return self.full_like(False, dtype=dtypes.bool)
    return ((self == math.inf) & detect_positive) | ((self == -math.inf) & detect_negative)
  def isfinite(self) -> Tensor:
    """True where neither inf nor NaN."""
    if not dtypes.is_float(self.dtype): return self.full_like(True, dtype=dtypes.bool)
    return (self - self) == 0
  def lerp(self, end: Any, weight: Any) -> Tensor:
    """self + (end - self) * weight."""
    return self + (end - self) * weight
  def erf(self) -> Tensor:
    """The error function (Abramowitz & Stegun 7.1.26, error below 1.5e-7)."""
    x = self._float()
    t = 1.0 / (1.0 + 0.3275911 * x.abs())
    p = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return x.sign() * (1.0 - p * (-(x * x)).exp())
  def clip(self, min_: Any = None, max_: Any = None) -> Tensor:
    """Clamp into [min_, max_] (either may be None); NaN stays NaN. A value on a bound keeps gradient 1 (torch and tinygrad
    select with a strict comparison; maximum/minimum would split a tie's gradient in half)."""
    if min_ is None and max_ is None: raise ArgumentError("clip needs at least one of 'min_' or 'max_' not None")
    x = (self < min_).where(min_, self) if min_ is not None else self
    return (x > max_).where(max_, x) if max_ is not None else x
  def clamp(self, min_: Any = None, max_: Any = None) -> Tensor:
    """Same as clip."""
    return self.clip(min_, max_)

  def isclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """|self - other| <= atol + rtol * |other| elementwise (as torch.isclose); equal infinities are close."""
    a, b = self._broadcasted(other)
    if dtypes.is_int(a.dtype) or a.dtype == dtypes.bool: close = a == b
    else: close = (a == b) | (((a - b).abs() <= atol + rtol * b.abs()) & a.isfinite() & b.isfinite())
    return close | (a.isnan() & b.isnan()) if equal_nan else close
  def allclose(self, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    """A 0-d bool tensor, True when every element isclose (tinygrad 0.14 returns a Tensor: `.item()` gives a python bool)."""
    return self.isclose(other, rtol, atol, equal_nan).all()
  def sequential(self, ll: Sequence[Callable[[Tensor], Tensor]]) -> Tensor:
    """Apply each callable of ll in turn: ll[-1](...ll[0](self))."""
    return functools.reduce(lambda x, f: f(x), ll, self)
