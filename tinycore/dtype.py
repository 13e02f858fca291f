"""Data types, tinygrad's promotion lattice, and conversion to and from numpy."""
from __future__ import annotations
import functools, math, struct
from dataclasses import dataclass
from typing import Any
import numpy as np
from tinycore.errors import DTypeNameError
from tinycore.helpers import DEFAULT_FLOAT, DEFAULT_INT

@dataclass(frozen=True, eq=True)
class DType:
  """A scalar type (count=1) or a short vector of one (count>1, used inside kernels)."""
  priority: int
  itemsize: int
  name: str
  fmt: str | None  # struct format character, None where struct has none (bfloat16)
  count: int = 1
  # dtypes are compared and hashed on every op made (promotion, `dtype in floats`): equal by identity first, and the
  # hash (the dataclass's: of the fields) worked out once. Both give what the generated methods gave.
  def __post_init__(self) -> None: object.__setattr__(self, "_hash", hash((self.priority, self.itemsize, self.name, self.fmt, self.count)))
  def __hash__(self) -> int: return self._hash  # type: ignore[attr-defined]
  # (a str's hash differs from process to process: a pickled dtype works its hash out again where it is loaded)
  def __getstate__(self) -> dict: return {k: v for k, v in self.__dict__.items() if k != "_hash"}
  def __setstate__(self, state: dict) -> None:
    self.__dict__.update(state)
    self.__post_init__()
  def __eq__(self, o: object) -> bool:
    if self is o: return True
    if o.__class__ is not self.__class__: return NotImplemented
    return (self.priority, self.itemsize, self.name, self.fmt, self.count) == (o.priority, o.itemsize, o.name, o.fmt, o.count)  # type: ignore[attr-defined]
  def __repr__(self) -> str: return f"dtypes.{self.name}" if self.count == 1 else f"dtypes.{self.scalar().name}.vec({self.count})"
  def __lt__(self, o: DType) -> bool: return (self.priority, self.itemsize, self.name) < (o.priority, o.itemsize, o.name)
  def vec(self, sz: int) -> DType:
    if sz == 1 or self.count != 1: return self
    return DType(self.priority, self.itemsize * sz, f"{self.name}{sz}", None, sz)
  def scalar(self) -> DType: return DTYPES_DICT[self.name[:-len(str(self.count))]] if self.count > 1 else self
  def ptr(self, local: bool = False) -> PtrDType: return PtrDType(self.priority, self.itemsize, self.name, self.fmt, self.count, self, local)
  @property
  def min(self) -> Any:
    """The smallest value: -inf for floats, False for bool."""
    return dtypes.min(self)
  @property
  def max(self) -> Any:
    """The largest value: inf for floats, True for bool."""
    return dtypes.max(self)

@dataclass(frozen=True, eq=True)
class PtrDType(DType):
  """The type of a buffer argument or local memory array in a kernel."""
  base: DType = None  # type: ignore[assignment]
  local: bool = False
  def __repr__(self) -> str: return f"{self.base!r}.ptr({'local' if self.local else ''})"

class _DefaultDTypes(type):
  """dtypes.default_float / default_int read (and assigning them writes) the DEFAULT_FLOAT / DEFAULT_INT context
  variables, so `Context(DEFAULT_FLOAT="HALF")`, the environment and `dtypes.default_float = dtypes.half` all agree."""
  @property
  def default_float(cls) -> DType: return _default(DEFAULT_FLOAT, dtypes.is_float, "float")
  @default_float.setter
  def default_float(cls, dt: DType | str) -> None: DEFAULT_FLOAT.value = to_dtype(dt).name
  @property
  def default_int(cls) -> DType: return _default(DEFAULT_INT, dtypes.is_int, "integer")
  @default_int.setter
  def default_int(cls, dt: DType | str) -> None: DEFAULT_INT.value = to_dtype(dt).name

def _default(var: Any, ok: Any, kind: str) -> DType:
  dt = to_dtype(var.value)
  if not ok(dt): raise ValueError(f"{var.key}={var.value!r} is not a {kind} dtype")
  return dt

class dtypes(metaclass=_DefaultDTypes):
  """Namespace of the scalar dtypes and helpers about them."""
  bool = DType(0, 1, "bool", "?")
  int8 = DType(1, 1, "char", "b")
  uint8 = DType(2, 1, "uchar", "B")
  int16 = DType(3, 2, "short", "h")
  uint16 = DType(4, 2, "ushort", "H")
  int32 = DType(5, 4, "int", "i")
  uint32 = DType(6, 4, "uint", "I")
  int64 = DType(7, 8, "long", "q")
  uint64 = DType(8, 8, "ulong", "Q")
  float16 = DType(9, 2, "half", "e")
  bfloat16 = DType(10, 2, "bfloat16", None)
  float32 = DType(11, 4, "float", "f")
  float64 = DType(12, 8, "double", "d")
  void = DType(-1, 0, "void", None)
  # aliases, as tinygrad spells them
  half, float, double, char, uchar, short, ushort, int, uint, long, ulong = \
    float16, float32, float64, int8, uint8, int16, uint16, int32, uint32, int64, uint64

  # (membership in sets of the tuples below: one hash instead of an __eq__ per member)
  @staticmethod
  def is_float(x: DType) -> bool: return x.scalar() in _FLOATS
  @staticmethod
  def is_int(x: DType) -> bool: return x.scalar() in _INTS
  @staticmethod
  def is_unsigned(x: DType) -> bool: return x.scalar() in _UINTS
  @staticmethod
  def is_bool(x: DType) -> bool: return x.scalar() == dtypes.bool
  @staticmethod
  def from_py(x: Any) -> DType:
    if isinstance(x, (list, tuple)): return max((dtypes.from_py(v) for v in x), default=dtypes.default_float)
    if isinstance(x, bool): return dtypes.bool
    if isinstance(x, int): return dtypes.default_int
    if isinstance(x, float): return dtypes.default_float
    raise TypeError(f"cannot infer a dtype from python value {x!r} of type {type(x).__name__}")
  @staticmethod
  def as_const(val: Any, dtype: DType) -> Any:
    """Convert a python scalar to the value a constant of `dtype` holds (ints wrap like the hardware does)."""
    if isinstance(val, tuple): return tuple(dtypes.as_const(v, dtype) for v in val)
    if dtypes.is_bool(dtype): return bool(val)
    if dtypes.is_int(dtype):
      if isinstance(val, float) and not math.isfinite(val): return 0
      v, bits = int(val), 8 * dtype.itemsize
      v &= (1 << bits) - 1
      return v - (1 << bits) if not dtypes.is_unsigned(dtype) and v >= 1 << (bits - 1) else v
    return float(val)
  @staticmethod
  def min(dtype: DType) -> Any:
    if dtypes.is_int(dtype): return 0 if dtypes.is_unsigned(dtype) else -2 ** (dtype.itemsize * 8 - 1)
    return -math.inf if dtypes.is_float(dtype) else False
  @staticmethod
  def max(dtype: DType) -> Any:
    if dtypes.is_int(dtype): return 2 ** (dtype.itemsize * 8 - (0 if dtypes.is_unsigned(dtype) else 1)) - 1
    return math.inf if dtypes.is_float(dtype) else True
  @staticmethod
  def finfo(dtype: DType) -> tuple[int, int]:
    """(exponent bits, mantissa bits) of a float dtype."""
    return {dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7), dtypes.float32: (8, 23), dtypes.float64: (11, 52)}[dtype]
  @staticmethod
  def fields() -> dict[str, DType]: return DTYPES_DICT

dtypes.uints = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)  # type: ignore[attr-defined]
dtypes.sints = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)  # type: ignore[attr-defined]
dtypes.ints = dtypes.uints + dtypes.sints  # type: ignore[attr-defined]
dtypes.floats = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)  # type: ignore[attr-defined]
dtypes.all = (dtypes.bool,) + dtypes.ints + dtypes.floats  # type: ignore[attr-defined]
_FLOATS, _INTS, _UINTS = frozenset(dtypes.floats), frozenset(dtypes.ints), frozenset(dtypes.uints)  # type: ignore[attr-defined]

DTYPES_DICT: dict[str, DType] = {k: v for k, v in dtypes.__dict__.items() if isinstance(v, DType) and not k.startswith("default")
                                 and k != "void"}
# canonical names first so DTYPES_DICT[dtype.name] works for every scalar
DTYPES_DICT.update({d.name: d for d in dtypes.all})

def to_dtype(x: DType | str) -> DType:
  """A DType, or one named by a string in any case ("float32", "HALF", "bfloat16")."""
  if isinstance(x, DType): return x
  if isinstance(x, str) and (x in DTYPES_DICT or x.lower() in DTYPES_DICT): return DTYPES_DICT.get(x, DTYPES_DICT.get(x.lower()))  # type: ignore[arg-type]
  raise DTypeNameError(f"unknown dtype {x!r}, expected a DType or one of {sorted(DTYPES_DICT)}")

# *** promotion: the lattice tinygrad uses, upcasting to the least upper bound ***
_PROMO = {dtypes.bool: [dtypes.int8, dtypes.uint8], dtypes.int8: [dtypes.int16], dtypes.int16: [dtypes.int32],
          dtypes.int32: [dtypes.int64], dtypes.int64: [dtypes.float16, dtypes.bfloat16], dtypes.uint8: [dtypes.int16, dtypes.uint16],
          dtypes.uint16: [dtypes.int32, dtypes.uint32], dtypes.uint32: [dtypes.int64, dtypes.uint64],
          dtypes.uint64: [dtypes.float16, dtypes.bfloat16], dtypes.float16: [dtypes.float32], dtypes.bfloat16: [dtypes.float32],
          dtypes.float32: [dtypes.float64], dtypes.float64: []}

@functools.cache
def _parents(t: DType) -> set[DType]: return {t}.union(*(_parents(p) for p in _PROMO[t]))

@functools.cache
def least_upper_dtype(*ds: DType) -> DType:
  """The smallest dtype every input promotes to without loss, as in tinygrad (e.g. int32+float16 -> float16)."""
  common = set.intersection(*(_parents(d.scalar()) for d in ds))
  return min(common) if common else dtypes.float64

def least_upper_float(dt: DType) -> DType: return dt if dtypes.is_float(dt) else least_upper_dtype(dt, dtypes.default_float)

# *** numpy conversion. numpy has no bfloat16: it is stored as uint16 bit patterns ***
_NP = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16,
       dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64, dtypes.uint64: np.uint64,
       dtypes.float16: np.float16, dtypes.bfloat16: np.uint16, dtypes.float32: np.float32, dtypes.float64: np.float64}

def to_np_dtype(dt: DType) -> type: return _NP[dt.scalar()]
def from_np_dtype(npdt: Any) -> DType:
  npdt = np.dtype(npdt)
  for k, v in _NP.items():
    if k != dtypes.bfloat16 and np.dtype(v) == npdt: return k
  raise TypeError(f"numpy dtype {npdt} has no tinycore equivalent")

def bf16_to_f32(x: np.ndarray) -> np.ndarray: return (x.astype(np.uint32) << 16).view(np.float32)
def f32_to_bf16(x: np.ndarray) -> np.ndarray:
  """Round to nearest even, as hardware bfloat16 conversion does; NaN stays NaN."""
  b = np.asarray(x, dtype=np.float32).view(np.uint32)  # (not ascontiguousarray: it makes a 0-d array 1-d)
  rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
  return np.where(np.isnan(x), np.uint16(0x7FC0), rounded).astype(np.uint16)

def bytes_of(vals: list, dt: DType) -> bytes:
  if dt == dtypes.bfloat16: return f32_to_bf16(np.array(vals, dtype=np.float32)).tobytes()
  return struct.pack(f"{len(vals)}{dt.fmt}", *vals)
