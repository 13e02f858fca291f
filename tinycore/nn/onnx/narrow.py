"""ONNX's narrow element types (4- and 2-bit integers, 8- and 4-bit floats, FLOAT8E8M0's powers of two), carried in a wider tinycore dtype.

tinycore has no dtype narrower than a byte, and no 8-bit float. A value of such a type is held unpacked, one element
per carrier element: the integers in int8 or uint8, the floats in float32, which holds every value of each exactly. A
value keeps to its type's set because the ops that make one put it there: Cast and CastLike (`cast`) and
QuantizeLinear (`quantize`); every other op only moves such values. Initializers and inputs are unpacked when they are
read (`to_carrier`), outputs packed back by whoever wants numpy (backend.py: `from_carrier`)."""
from __future__ import annotations
import dataclasses, math
from typing import Any
import numpy as np
from tinycore.tensor import Tensor
from tinycore.dtype import DType, dtypes

@dataclasses.dataclass(frozen=True)
class NarrowInt:
  """A two's complement (lo < 0) or unsigned integer of a few bits, in [lo, hi]."""
  name: str
  carrier: DType
  lo: int
  hi: int
  def cast(self, x: Tensor, saturate: bool, round_mode: str = "up") -> Tensor:
    """Cast (as numpy and ONNX's reference: floats truncate, then the low bits are kept: 8 as INT4 is -8)."""
    return (((x.cast(dtypes.int32) - self.lo) & (self.hi - self.lo)) + self.lo).cast(self.carrier)

@dataclasses.dataclass(frozen=True)
class NarrowFloat:
  """A float with `mantissa` stored bits, normal exponents from `emin`, largest finite value `max`; `inf`: it encodes
  infinities (else an overflow without saturation is NaN); `nan`: it encodes NaN (else NaN becomes 0)."""
  name: str
  mantissa: int
  emin: int
  max: float
  inf: bool
  nan: bool
  carrier: DType = dtypes.float32
  def cast(self, x: Tensor, saturate: bool, round_mode: str = "up") -> Tensor:
    """The nearest value of the type (ties to even); beyond `max`: +-max when saturating or when the type has neither
    infinities nor NaN, else +-inf or NaN."""
    x = x.cast(dtypes.float32)
    exponent = ((x.bitcast(dtypes.int32) >> 23) & 255) - 127
    step = ((exponent.maximum(self.emin) - self.mantissa + 127) << 23).bitcast(dtypes.float32)  # the spacing of the grid at x
    y = (x / step).round() * step
    over = x.sign() * (self.max if saturate or not (self.inf or self.nan) else math.inf if self.inf else math.nan)
    y = (y.abs() > self.max).where(over, y)
    return x.isnan().where(math.nan if self.nan else 0.0, y)

@dataclasses.dataclass(frozen=True)
class NarrowScale:
  """FLOAT8E8M0: a power of two 2^(e - 127), e in 0..254 as float32's exponent field (e = 255: NaN), sign dropped; the
  mantissa rounds as `round_mode` says (up: any fraction goes up, down: dropped, nearest: float32's guard/round/sticky
  bits), an overflow past 2^127 is NaN unless saturating (as onnx.numpy_helper.to_float8e8m0)."""
  name: str
  carrier: DType = dtypes.float32
  def cast(self, x: Tensor, saturate: bool, round_mode: str = "up") -> Tensor:
    bits = x.cast(dtypes.float32).bitcast(dtypes.int32)
    e = (bits >> 23) & 255
    if round_mode == "up": inc = (bits & 0x7FFFFF) > 0
    elif round_mode == "nearest": inc = ((bits & 0x400000) > 0) & (((bits & 0x200000) > 0) | ((bits & 0x1FFFFF) > 0) | (e > 0))
    else: inc = e < 0  # down: nothing rounds up
    if saturate: inc = inc & (e != 254)
    e = (e == 255).where(255, e + inc.cast(dtypes.int32))
    value = (e == 0).where(Tensor(0x400000, dtype=dtypes.int32, device=x.device), e << 23).bitcast(dtypes.float32)  # e = 0: 2^-127
    return (e == 255).where(math.nan, value)

Narrow = NarrowInt | NarrowFloat | NarrowScale
# TensorProto.DataType numbers -> the narrow types
NARROW: dict[int, Narrow] = {
  21: NarrowInt("UINT4", dtypes.uint8, 0, 15), 22: NarrowInt("INT4", dtypes.int8, -8, 7),
  25: NarrowInt("UINT2", dtypes.uint8, 0, 3), 26: NarrowInt("INT2", dtypes.int8, -2, 1),
  17: NarrowFloat("FLOAT8E4M3FN", 3, -6, 448.0, inf=False, nan=True), 18: NarrowFloat("FLOAT8E4M3FNUZ", 3, -7, 240.0, inf=False, nan=True),
  19: NarrowFloat("FLOAT8E5M2", 2, -14, 57344.0, inf=True, nan=True), 20: NarrowFloat("FLOAT8E5M2FNUZ", 2, -15, 57344.0, inf=False, nan=True),
  23: NarrowFloat("FLOAT4E2M1", 1, 0, 6.0, inf=False, nan=False), 24: NarrowScale("FLOAT8E8M0")}

def to_carrier(a: Any, code: int) -> np.ndarray:
  """A numpy array of ONNX element type `code` (ml_dtypes' narrow types) unpacked into its carrier's numpy type."""
  from tinycore.dtype import to_np_dtype
  return np.asarray(a).astype(to_np_dtype(NARROW[code].carrier))

def from_carrier(a: np.ndarray, code: int) -> np.ndarray:
  """A carrier array back as ONNX element type `code`'s numpy type (ml_dtypes'), as onnx's tools expect."""
  from onnx import helper
  return a.astype(helper.tensor_dtype_to_np_dtype(code))
