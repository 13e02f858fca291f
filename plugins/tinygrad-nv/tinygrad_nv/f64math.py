"""double-precision exp2, log2 and sin for the PTX renderer, which has no f64 instruction for them.

Each routine is written once against a small instruction interface (`Ops64`). The PTX renderer implements it by emitting
one PTX instruction per call; `NumpyOps64` implements it with numpy, operation for operation with the same IEEE rounding,
so the tests check on any CPU the exact sequence the GPU will run. Algorithms: range reduction, then Taylor series (exp,
sin/cos) or the atanh series (log), with fma Horner steps."""
from __future__ import annotations
import math
from typing import Any, Protocol
import numpy as np

EXP = [1 / math.factorial(k) for k in range(14)]                    # e^t, |t| <= ln2/2
SIN = [(-1) ** k / math.factorial(2 * k + 1) for k in range(9)]     # sin r / r in r^2, |r| <= pi/4
COS = [(-1) ** k / math.factorial(2 * k) for k in range(10)]        # cos r in r^2
ATANH = [1 / (2 * k + 1) for k in range(11)]                        # atanh(s)/s in s^2, |s| < 0.172
LN2, LOG2E, TWO_OVER_PI = 0.6931471805599453, 1.4426950408889634, 0.6366197723675814
PIO2_HI, PIO2_LO = 1.5707963267948966, 6.123233995736766e-17      # pi/2 = HI + LO to ~2^-107

class Ops64(Protocol):
  """F: a double, I: an int32, P: a predicate."""
  def c(self, v: float) -> Any: ...
  def fma(self, a: Any, b: Any, c: Any) -> Any: ...
  def add(self, a: Any, b: Any) -> Any: ...
  def sub(self, a: Any, b: Any) -> Any: ...
  def mul(self, a: Any, b: Any) -> Any: ...
  def div(self, a: Any, b: Any) -> Any: ...
  def rint(self, a: Any) -> Any: ...                     # round to nearest even
  def to_i32(self, a: Any) -> Any: ...                   # truncate, saturating (cvt.rzi.s32.f64)
  def i_to_f(self, i: Any) -> Any: ...
  def i_add(self, a: Any, k: int) -> Any: ...
  def i_sub(self, a: Any, b: Any) -> Any: ...
  def i_half(self, a: Any) -> Any: ...                   # arithmetic shift right by 1
  def pow2(self, i: Any) -> Any: ...                     # the double with biased exponent i+1023 and zero mantissa
  def exponent(self, a: Any) -> Any: ...                 # the biased exponent field of a
  def with_exponent_1022(self, a: Any) -> Any: ...       # a's sign and mantissa with exponent 1022: in [1/2, 1) for a > 0
  def lt(self, a: Any, b: Any) -> Any: ...
  def ge(self, a: Any, b: Any) -> Any: ...
  def le(self, a: Any, b: Any) -> Any: ...
  def eq(self, a: Any, b: Any) -> Any: ...
  def isnan(self, a: Any) -> Any: ...
  def por(self, p: Any, q: Any) -> Any: ...
  def sel(self, p: Any, a: Any, b: Any) -> Any: ...      # p ? a : b, doubles
  def isel(self, p: Any, a: int, b: int) -> Any: ...     # p ? a : b, int32 constants
  def quadrant(self, q: Any) -> tuple[Any, Any]: ...     # (k odd, k & 2) for k = (int64)q

def horner(o: Ops64, x: Any, coeffs: list[float]) -> Any:
  p = o.c(coeffs[-1])
  for k in reversed(coeffs[:-1]): p = o.fma(p, x, o.c(k))
  return p

def exp2(o: Ops64, x: Any) -> Any:
  n = o.rint(x)
  t = o.mul(o.sub(x, n), o.c(LN2))                     # x = n + f, |f| <= 1/2, 2^f = e^t
  p = horner(o, t, EXP)
  ni = o.to_i32(n)
  n1 = o.i_half(ni)                                    # 2^n as 2^n1 * 2^n2, both normal for n in [-1080, 1024]
  r = o.mul(o.mul(p, o.pow2(n1)), o.pow2(o.i_sub(ni, n1)))
  r = o.sel(o.ge(x, o.c(1024.0)), o.c(math.inf), r)
  r = o.sel(o.le(x, o.c(-1080.0)), o.c(0.0), r)
  return o.sel(o.isnan(x), x, r)

def log2(o: Ops64, x: Any) -> Any:
  sub = o.lt(x, o.c(2.2250738585072014e-308))          # subnormal (or <= 0): scale by 2^54 first
  xx = o.sel(sub, o.mul(x, o.c(2.0 ** 54)), x)
  e = o.i_add(o.exponent(xx), -1022)
  e = o.i_sub(e, o.isel(sub, 54, 0))
  m = o.with_exponent_1022(xx)                         # xx = m * 2^e, m in [1/2, 1)
  lo = o.lt(m, o.c(0.7071067811865476))
  m = o.sel(lo, o.mul(m, o.c(2.0)), m)                 # m in [sqrt(1/2), sqrt(2))
  e = o.i_sub(e, o.isel(lo, 1, 0))
  s = o.div(o.sub(m, o.c(1.0)), o.add(m, o.c(1.0)))    # ln m = 2 atanh(s)
  t = o.mul(o.mul(o.c(2.0), s), horner(o, o.mul(s, s), ATANH))
  r = o.fma(t, o.c(LOG2E), o.i_to_f(e))
  r = o.sel(o.eq(x, o.c(math.inf)), x, r)
  r = o.sel(o.eq(x, o.c(0.0)), o.c(-math.inf), r)
  return o.sel(o.por(o.isnan(x), o.lt(x, o.c(0.0))), o.c(math.nan), r)

def sin(o: Ops64, x: Any) -> Any:
  q = o.rint(o.mul(x, o.c(TWO_OVER_PI)))               # x = q*pi/2 + r
  r = o.fma(q, o.c(-PIO2_HI), x)
  r = o.fma(q, o.c(-PIO2_LO), r)
  r2 = o.mul(r, r)
  odd, neg = o.quadrant(q)
  v = o.sel(odd, horner(o, r2, COS), o.mul(r, horner(o, r2, SIN)))
  v = o.sel(neg, o.sub(o.c(0.0), v), v)
  inf = o.eq(o.mul(x, o.c(0.0)), o.mul(x, o.c(0.0)))  # false for inf and nan (inf*0 = nan)
  return o.sel(inf, v, o.c(math.nan))

class NumpyOps64:
  """The interface on numpy float64/int32 arrays: the same operations, the same rounding, on the host."""
  def c(self, v): return np.float64(v)
  def fma(self, a, b, c):
    # exact fma through 128-bit-free error-free transforms is overkill here: numpy has no fma, so use math.fma (3.13+) or
    # an exact rational evaluation rounded once
    return np.vectorize(_fma, otypes=[np.float64])(a, b, c)
  def add(self, a, b): return np.add(a, b)
  def sub(self, a, b): return np.subtract(a, b)
  def mul(self, a, b): return np.multiply(a, b)
  def div(self, a, b): return np.divide(a, b)
  def rint(self, a): return np.rint(a)
  def to_i32(self, a):
    t = np.trunc(np.nan_to_num(a, nan=0.0, posinf=2**31 - 1, neginf=-2**31))
    return np.clip(t, -2**31, 2**31 - 1).astype(np.int32)
  def i_to_f(self, i): return np.asarray(i, np.int32).astype(np.float64)
  def i_add(self, a, k): return (np.asarray(a, np.int64) + k).astype(np.int32)
  def i_sub(self, a, b): return (np.asarray(a, np.int64) - np.asarray(b, np.int64)).astype(np.int32)
  def i_half(self, a): return np.right_shift(np.asarray(a, np.int32), 1)
  def pow2(self, i): return ((np.asarray(i, np.int64) + 1023).astype(np.uint32).astype(np.uint64) << np.uint64(52)).view(np.float64)
  def exponent(self, a): return ((np.asarray(a, np.float64).view(np.uint64) >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int32)
  def with_exponent_1022(self, a):
    b = np.asarray(a, np.float64).view(np.uint64)
    return ((b & np.uint64(0x800FFFFFFFFFFFFF)) | np.uint64(0x3FE0000000000000)).view(np.float64)
  def lt(self, a, b): return np.less(a, b)
  def ge(self, a, b): return np.greater_equal(a, b)
  def le(self, a, b): return np.less_equal(a, b)
  def eq(self, a, b): return np.equal(a, b)
  def isnan(self, a): return np.isnan(a)
  def por(self, p, q): return np.logical_or(p, q)
  def sel(self, p, a, b): return np.where(p, a, b)
  def isel(self, p, a, b): return np.where(p, np.int32(a), np.int32(b)).astype(np.int32)
  def quadrant(self, q):
    k = np.clip(np.trunc(np.nan_to_num(q, nan=0.0, posinf=2.0**63, neginf=-2.0**63)), -2.0**63, 2.0**63 - 1024).astype(np.int64)
    return (k & 1) != 0, (k & 2) != 0

def _fma(a: float, b: float, c: float) -> float:
  """a*b+c rounded once (what fma.rn.f64 does), via exact rationals; inf/nan follow IEEE through plain float math."""
  if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)): return a * b + c
  from fractions import Fraction
  exact = Fraction(a) * Fraction(b) + Fraction(c)
  r = float(exact)  # Fraction -> float rounds to nearest even
  return r if r != 0 or exact >= 0 else -0.0
