"""Test values and comparisons: the edge values of every dtype, host storage of device data, and the comparisons
that decide pass or fail (bit-exact where IEEE or two's complement defines the result, ulp-bounded where it does not).

Host arrays hold values in the device's storage format: numpy's own dtype, except bfloat16 (uint16 bit patterns) and
bool (one byte that must be exactly 0 or 1)."""
from __future__ import annotations
import numpy as np
from tinycore.dtype import DType, dtypes, to_np_dtype, bf16_to_f32, f32_to_bf16

ALL_DTYPES: tuple[DType, ...] = tuple(dtypes.all)

NAMES = {dtypes.bool: "bool", dtypes.int8: "int8", dtypes.uint8: "uint8", dtypes.int16: "int16", dtypes.uint16: "uint16",
         dtypes.int32: "int32", dtypes.uint32: "uint32", dtypes.int64: "int64", dtypes.uint64: "uint64", dtypes.float16: "float16",
         dtypes.bfloat16: "bfloat16", dtypes.float32: "float32", dtypes.float64: "float64"}
BY_NAME = {v: k for k, v in NAMES.items()}

def dtname(dt: DType) -> str:
  """numpy-style name of a tinycore dtype (tinycore's own names are C's: 'float', 'uchar', ...)."""
  return NAMES.get(dt.scalar(), dt.name)

def dtcode(dt: DType) -> str:
  """Python code that builds this dtype (for reproductions)."""
  from tinycore.dtype import PtrDType
  if isinstance(dt, PtrDType): return f"{dtcode(dt.base)}.ptr({'local=True' if dt.local else ''})"
  if dt == dtypes.void: return "dtypes.void"
  return f"dtypes.{dtname(dt)}" if dt.count == 1 else f"dtypes.{dtname(dt.scalar())}.vec({dt.count})"

def is_float(dt: DType) -> bool: return dtypes.is_float(dt)
def is_int(dt: DType) -> bool: return dtypes.is_int(dt)
def is_signed(dt: DType) -> bool: return dtypes.is_int(dt) and not dtypes.is_unsigned(dt)
def bits(dt: DType) -> int: return 8 * dt.itemsize

def storage_np(dt: DType) -> type: return to_np_dtype(dt)  # bfloat16 -> uint16

def to_storage(vals, dt: DType) -> np.ndarray:
  """Values (python numbers or any numpy array) as the host storage of `dt`; ints wrap, floats round to nearest."""
  if dt == dtypes.bfloat16: return f32_to_bf16(np.asarray(vals, dtype=np.float64).astype(np.float32))
  if dt == dtypes.bool: return np.asarray(vals).astype(np.bool_)
  if is_int(dt):
    a = np.asarray(vals, dtype=object)
    return wrap_int(np.array([int(v) for v in a.reshape(-1)], dtype=object).reshape(a.shape), dt)
  with np.errstate(over="ignore"): return np.asarray(vals, dtype=np.float64).astype(to_np_dtype(dt))

def wrap_int(a: np.ndarray, dt: DType) -> np.ndarray:
  """Two's complement wrap of integers into dt."""
  m = 1 << bits(dt)
  a = np.asarray(a, dtype=object)
  out = [(int(v) % m) for v in a.reshape(-1)]
  if is_signed(dt): out = [v - m if v >= m >> 1 else v for v in out]
  return np.array(out, dtype=to_np_dtype(dt)).reshape(a.shape)

def as_float(x: np.ndarray, dt: DType) -> np.ndarray:
  """Stored floats as float64 for comparing (bfloat16 bit patterns decoded)."""
  if dt == dtypes.bfloat16: return bf16_to_f32(np.asarray(x, dtype=np.uint16)).astype(np.float64)
  return np.asarray(x).astype(np.float64)

def finfo(dt: DType) -> tuple[float, float]:
  """(largest finite, smallest normal) of a float dtype."""
  if dt == dtypes.bfloat16: return float(bf16_to_f32(np.array([0x7F7F], np.uint16))[0]), 2.0 ** -126
  fi = np.finfo(to_np_dtype(dt))
  return float(fi.max), float(fi.smallest_normal)

def ulp(x: np.ndarray, dt: DType) -> np.ndarray:
  """The spacing of dt's floats at |x| (at least the spacing at the smallest normal: subnormals are not asked of anyone)."""
  mant = {dtypes.float16: 10, dtypes.bfloat16: 7, dtypes.float32: 23, dtypes.float64: 52}[dt.scalar()]
  _, tiny = finfo(dt)
  ax = np.maximum(np.abs(np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)), tiny)
  return 2.0 ** (np.floor(np.log2(ax)) - mant)

# *** edge values ***

def int_edges(dt: DType) -> list[int]:
  lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
  cand = [0, 1, 2, 3, 7, 100, lo, hi, lo + 1, hi - 1, hi // 2, hi // 2 + 1] + ([-1, -2, -7, -100, lo // 2] if is_signed(dt) else [])
  return sorted({v for v in cand if lo <= v <= hi})

def float_edges(dt: DType, huge: bool = True) -> list[float]:
  mx, tiny = finfo(dt)
  out = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.25, -100.0, 1e-3, np.inf, -np.inf, np.nan, tiny, -tiny]
  if huge: out += [mx, -mx, mx / 2]
  return out

def edges(dt: DType, huge: bool = True) -> list:
  if dt == dtypes.bool: return [False, True]
  if is_int(dt): return int_edges(dt)
  return float_edges(dt, huge)

def randoms(dt: DType, n: int, rng: np.random.Generator, scale: float = 50.0) -> list:
  """n random values of dt: full-range bits for ints, normals (times scale) for floats, fair coins for bool."""
  if dt == dtypes.bool: return list(rng.integers(0, 2, n).astype(bool))
  if is_int(dt):
    lo, hi = int(dtypes.min(dt)), int(dtypes.max(dt))
    return [int(v) for v in rng.integers(lo, hi, n, dtype=np.uint64 if not is_signed(dt) else np.int64, endpoint=True)]
  return list(rng.standard_normal(n) * scale)

def pairs(xs: list, ys: list) -> tuple[list, list]:
  a, b = zip(*[(x, y) for x in xs for y in ys]) if xs and ys else ((), ())
  return list(a), list(b)

# *** comparison ***

class Mismatch(AssertionError):
  pass

def _fmt(v, dt: DType) -> str:
  if dt == dtypes.bool: return str(bool(v)) if int(v) in (0, 1) else f"byte {int(v)} (a bool must be stored as 0 or 1)"
  if is_float(dt):
    f = float(as_float(np.array([v]), dt)[0])
    return "-0.0" if f == 0 and np.signbit(f) else repr(f)
  return str(int(v))

def compare(got: np.ndarray, want: np.ndarray, dt: DType, mode: str = "exact", k: float = 0.0, atol: np.ndarray | float = 0.0,
            what: str = "", inputs: list[tuple[DType, np.ndarray]] | None = None, max_show: int = 3) -> None:
  """Raise Mismatch naming the first differing elements (with their inputs) unless got matches want.

  mode 'exact': bit-exact for ints and bools; for floats equal values with equal signs of zero, NaN where NaN is
  expected (any payload), and an expected subnormal may come back flushed to a zero of the same sign.
  mode 'nosign0': as exact, but +0.0 and -0.0 are equal.  mode 'ulp': finite results within k ulps (+atol) of the
  expected value, non-finite results exactly.  mode 'bits': the raw bit patterns are equal."""
  got, want = np.asarray(got).reshape(-1), np.asarray(want).reshape(-1)
  if got.shape != want.shape: raise Mismatch(f"{what}: got {got.size} values, expected {want.size}")
  if mode == "bits" or (dt == dtypes.bool) or is_int(dt):
    if dt == dtypes.bool:
      gb, wb = got.view(np.uint8), want.astype(np.bool_).view(np.uint8)
      bad = gb != wb
    else: bad = got.view(f"u{got.dtype.itemsize}") != want.astype(got.dtype).view(f"u{got.dtype.itemsize}") if mode == "bits" else got != want
  else:
    g, w = as_float(got, dt), as_float(want, dt)
    gn, wn = np.isnan(g), np.isnan(w)
    _, tiny = finfo(dt)
    with np.errstate(invalid="ignore"):
      if mode == "ulp":
        fin = np.isfinite(w)
        tol = k * ulp(w, dt) + atol
        close = np.where(fin, (np.abs(g - w) <= tol) | ((np.abs(w) < tiny) & (g == 0)), g == w)
      else:
        close = (g == w) & ((np.signbit(g) == np.signbit(w)) | (mode == "nosign0") | (w != 0))
        close |= (np.abs(w) < tiny) & (w != 0) & (g == 0) & ((np.signbit(g) == np.signbit(w)) | (mode == "nosign0"))  # flushed subnormal
    bad = np.where(wn, ~gn, gn | ~close)
  if not bad.any(): return
  idx = np.nonzero(bad)[0]
  shown = []
  if dt == dtypes.bool: got = got.view(np.uint8)  # show the byte a bool buffer really holds
  for i in idx[:max_show]:
    ins = "" if not inputs else "(" + ", ".join(_fmt(np.asarray(x).reshape(-1)[i], d) for d, x in inputs) + ")"
    shown.append(f"[{i}]{ins}: got {_fmt(got[i], dt)}, expected {_fmt(want[i], dt)}")
  tolmsg = f" (within {k:g} ulp)" if mode == "ulp" else ""
  raise Mismatch(f"{what}: {len(idx)} of {got.size} {dtname(dt)} values differ{tolmsg}; " + "; ".join(shown))
