"""The semantics of PTX's non-memory, non-control instructions, vectorized over the threads that execute them.

Rules the code keeps:
- integers wrap at their width; shifts clamp the amount at the width; div/rem truncate toward zero (x/0 and x%0 give all
  ones, as measured on an H100); .cc/addc/madc carry through a per-thread carry flag.
- every function here runs inside run_ptx's np.errstate(all="ignore"): float overflow and NaN are results, not warnings.
- floats round once in the named mode: f32/f64 add, sub, mul, div, sqrt, rcp are numpy's correctly rounded IEEE ops; fma
  is computed in float64 with an exact product (f32, f16, bf16) or with an error-free product (f64); f16 and bf16 compute
  in float32 and round once to nearest even. .ftz flushes f32 subnormal inputs and results to signed zero.
- NaN: f32/f16/bf16 arithmetic and conversions to or from f16/bf16 give the canonical NaN (0x7FFFFFFF, 0x7FFF); f64 and
  rcp.rn.f32 keep the payload (measured on an H100 with random bit patterns).
- cvt rounds float->int with rni/rzi/rmi/rpi and saturates (NaN -> 0, or 0x8000000000000000 for 64-bit), int->int wraps (or saturates with .sat),
  float->float narrows with rn/rz/rm/rp.
- ptxas contracts an add/sub without a rounding modifier whose operand is the only use of a mul without one into an fma
  (cuda_fp16's __hmul then __hadd become fma.rn.f16 on the GPU): the interpreter does the same (Program.contracted).
- approximate instructions, as measured on an H100 (1M inputs, 2026-11-26): sin/cos.approx.f32 are off by up to 5.7e-7 in
  [-pi, pi], 1.3e-6 for |x| <= 10, 1e-5 for |x| <= 100 (their f32 range reduction): modelled as a scaling by 1/2pi in f32
  rounded toward zero, which gives errors of that size (not the same bits). ex2.approx.f32 (<= 2 ulp measured),
  rcp/sqrt.approx.f32 (<= 1 ulp) are the exact results rounded. lg2.approx.f32 is the exact result rounded too, which is
  optimistic: the hardware's absolute error is up to 2^-22.2 in (0.5, 2), many ulp near 1. rcp.approx.ftz.f64 uses only
  the top 32 bits of its input and result, div.approx.f32 is a * (1/b) and 0 for 2^126 < |b| (as the ISA states).
- min/max on floats return the non-NaN operand (NaN only when both are, or with .NaN), and order -0 below +0."""
from __future__ import annotations
from typing import Any, Callable
import numpy as np
from tinygrad_cuda.mock.ptx_parse import Instr, PTXUnsupported
from tinygrad_cuda.mock.ptx_values import (bf16_bits, bf16_value, from_f64, is_float, is_signed, reader, round_f64_to_f32_odd, type_bytes,
                                           value_dtype, writer)

_TYPES = {"b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "f16", "f32", "f64", "bf16", "pred", "f16x2", "bf16x2"}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

def types_of(op: str) -> list[str]: return [p for p in op.split(".")[1:] if p in _TYPES]
def mods_of(op: str) -> set[str]: return {p for p in op.split(".")[1:] if p not in _TYPES}

def _ftz(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x)
  return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x).astype(np.float32)

def _as_f64(x: Any, t: str) -> np.ndarray: return np.asarray(x).astype(np.float64)

def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Veltkamp split of float64 values into high and low halves (hi + lo == x exactly, 26 bits each)."""
  c = np.float64(134217729.0) * x
  hi = c - (c - x)
  return hi, x - hi

def fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
  """a*b+c for float64 with the product's rounding error carried (Dekker): the correctly rounded result except in rare
  double-rounding ties; inf/NaN/overflow cases fall back to the plain expression."""
  a, b, c = (np.asarray(v, np.float64) for v in (a, b, c))
  p = a * b
  ah, al = _split(a)
  bh, bl = _split(b)
  e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # p + e == a*b exactly
  s = p + c
  bb = s - p
  err = (p - (s - bb)) + (c - bb)  # s + err == p + c exactly
  r = s + (err + e)
  plain = p + c
  exact = (np.abs(a) < 1e295) & (np.abs(b) < 1e295) & (np.abs(p) < 1e300) & ((np.abs(p) > 1e-290) | (p == 0))  # the split and e are exact
  return np.where(exact & np.isfinite(r) & np.isfinite(plain), r, plain)

_CANON = {"f32": np.uint32(0x7FFFFFFF).view(np.float32), "f16": np.uint16(0x7FFF).view(np.float16), "bf16": np.uint32(0x7FFF0000).view(np.float32)}

def canonical_nan(v: np.ndarray, t: str) -> np.ndarray:
  """f32/f16/bf16 arithmetic returns the canonical NaN (all payload bits set, sign clear), as the hardware does (measured on
  an H100); f64 keeps the payload."""
  if t not in _CANON: return v
  v = np.asarray(v)
  nan = v != v
  return np.where(nan, _CANON[t], v).astype(v.dtype) if nan.any() else v

def _fma(a, b, c, t: str) -> np.ndarray:
  if t == "f64": return fma64(a, b, c)
  return from_f64(np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64), t)

def _mulhi(a: np.ndarray, b: np.ndarray, t: str) -> np.ndarray:
  """The high half of the double-width product."""
  w = type_bytes(t)
  if w <= 4:
    wide = np.int64 if is_signed(t) else np.uint64
    return (np.asarray(a).astype(wide) * np.asarray(b).astype(wide) >> wide(8 * w)).astype(value_dtype(t))
  ua, ub = np.asarray(a).astype(np.int64).view(np.uint64), np.asarray(b).astype(np.int64).view(np.uint64)
  m32 = np.uint64(0xFFFFFFFF)
  a0, a1, b0, b1 = ua & m32, ua >> np.uint64(32), ub & m32, ub >> np.uint64(32)
  lo = a0 * b0
  mid1, mid2 = a1 * b0, a0 * b1
  carry = ((lo >> np.uint64(32)) + (mid1 & m32) + (mid2 & m32)) >> np.uint64(32)
  hi = a1 * b1 + (mid1 >> np.uint64(32)) + (mid2 >> np.uint64(32)) + carry
  if is_signed(t):  # signed high half: subtract the other operand for each negative one
    hi = hi - np.where(np.asarray(a) < 0, ub, np.uint64(0)) - np.where(np.asarray(b) < 0, ua, np.uint64(0))
    return hi.view(np.int64)
  return hi

def _int_div(a, b, t: str, rem: bool) -> np.ndarray:
  a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
  vd = value_dtype(t)
  zero = b == 0
  bs = np.where(zero, vd(1), b)
  if is_signed(t):
    q = np.abs(a.astype(np.int64)) // np.abs(bs.astype(np.int64)) if type_bytes(t) < 8 else None
    if q is not None:
      q = np.where((a < 0) != (bs < 0), -q, q)
    else:  # 64-bit: numpy floors; move toward zero where the signs differ and it was inexact
      with np.errstate(all="ignore"):
        q = a // bs
        q = np.where(((a % bs) != 0) & ((a < 0) != (bs < 0)), q + vd(1), q)
    q = q.astype(vd)
    r = (a - q * bs).astype(vd)
  else:
    q, r = a // bs, a % bs
  if rem: return np.where(zero, vd(-1) if is_signed(t) else np.iinfo(vd).max, r).astype(vd)  # x % 0: all ones (measured)
  return np.where(zero, vd(-1) if is_signed(t) else np.iinfo(vd).max, q).astype(vd)

def _shift(a, b, t: str, left: bool) -> np.ndarray:
  w = 8 * type_bytes(t)
  vd = value_dtype(t)
  amt = np.minimum(np.asarray(b).astype(np.uint64), np.uint64(w))
  a = np.asarray(a)
  if left:
    U = _UINT[type_bytes(t)]
    r = np.where(amt >= w, U(0), a.view(U) << np.minimum(amt, w - 1).astype(U))
    return np.asarray(r).astype(U).view(vd)
  if is_signed(t): return (a >> np.minimum(amt, w - 1).astype(vd)).astype(vd)
  return np.where(amt >= w, vd(0), a >> np.minimum(amt, w - 1).astype(vd)).astype(vd)

def _fminmax(a, b, t: str, is_max: bool, nan: bool) -> np.ndarray:
  a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
  r = (np.fmax if is_max else np.fmin)(a, b)
  both0 = (a == 0) & (b == 0)
  if both0.any():  # -0 < +0
    neg = np.signbit(a) & np.signbit(b) if is_max else np.signbit(a) | np.signbit(b)
    r = np.where(both0, np.where(neg, -np.abs(a), np.abs(a)), r)
  if nan: r = np.where(np.isnan(a) | np.isnan(b), np.float32("nan"), r)
  return r.astype(a.dtype)

_CMP_INT = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal}

def compare(cmp: str, a, b, t: str) -> np.ndarray:
  if is_float(t):
    a, b = np.asarray(a), np.asarray(b)
    unordered = np.isnan(a) | np.isnan(b)
    if cmp == "num": return ~unordered
    if cmp == "nan": return unordered
    base = cmp[:-1] if cmp.endswith("u") else cmp
    r = _CMP_INT[base](a, b)
    return (r | unordered) if cmp.endswith("u") else (r & ~unordered) if base == "ne" else r
  if cmp in ("lo", "ls", "hi", "hs") and is_signed(t):
    U = _UINT[type_bytes(t)]
    a, b = np.asarray(a).view(U), np.asarray(b).view(U)
  return _CMP_INT[cmp](a, b)

def _float_unary(name: str, t: str, mods: set[str]) -> Callable:
  """ex2/lg2/sin/cos/rcp/sqrt/rsqrt: computed in float64 and rounded once."""
  def f(x):
    x64 = np.asarray(x).astype(np.float64)
    if "ftz" in mods and t == "f32": x64 = _ftz(x64.astype(np.float32)).astype(np.float64)
    with np.errstate(all="ignore"):
      if name in ("sin", "cos"):
        if t != "f32": raise PTXUnsupported(f"PTX {name}.approx.{t}")
        turns = round_toward_zero_f32(x64 * np.float64(np.float32(0.15915494309189535)))  # FMUL.RZ by 1/2pi
        y = (np.sin if name == "sin" else np.cos)(turns.astype(np.float64) * (2 * np.pi))
        y = np.where(np.isinf(x64), np.nan, y)
      elif name == "ex2": y = np.exp2(x64)
      elif name == "lg2": y = np.log2(x64)
      elif name == "sqrt": y = np.sqrt(x64) if t != "f64" else np.sqrt(np.asarray(x, np.float64))
      elif name == "rsqrt": y = 1.0 / np.sqrt(x64)
      elif name == "rcp":
        if t == "f64" and "approx" in mods:  # only the top 32 bits of input and result
          xb = (np.asarray(x, np.float64).view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)
          y = 1.0 / xb
          y = np.where(np.abs(xb) < np.finfo(np.float64).tiny, np.copysign(np.inf, xb), y)
          return (y.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)
        y = 1.0 / x64 if t != "f64" else 1.0 / np.asarray(x, np.float64)
      else: raise PTXUnsupported(f"PTX {name}.{t}")
    r = from_f64(y, t)
    r = r if name == "rcp" else canonical_nan(r, t)  # rcp.rn.f32 keeps the NaN payload (measured)
    return _ftz(r) if "ftz" in mods and t == "f32" else r
  return f

def round_toward_zero_f32(x64: np.ndarray) -> np.ndarray:
  r = x64.astype(np.float32)
  return np.where((np.abs(r.astype(np.float64)) > np.abs(x64)) & np.isfinite(x64), np.nextafter(r, np.float32(0)), r).astype(np.float32)

def _round_float(x64: np.ndarray, t: str, rnd: str) -> np.ndarray:
  """float64 -> float type t in rounding mode rnd (rn rz rm rp)."""
  r = from_f64(x64, t)
  if rnd == "rn" or t == "f64": return r
  back = r.astype(np.float64)
  fin = np.isfinite(x64)
  if rnd == "rz": adj = fin & (np.abs(back) > np.abs(x64)); toward = 0.0
  elif rnd == "rm": adj = fin & (back > x64); toward = -np.inf
  else: adj = fin & (back < x64); toward = np.inf
  if t == "bf16": raise PTXUnsupported(f"PTX cvt.{rnd}.bf16")
  return np.where(adj, np.nextafter(r, r.dtype.type(toward)), r).astype(r.dtype)

def convert(x, dt: str, st: str, mods: set[str]) -> np.ndarray:
  """cvt's value conversion from type st to type dt."""
  x = np.asarray(x)
  vd = value_dtype(dt)
  if is_float(st) and not is_float(dt):  # float -> int: round, saturate, NaN -> 0
    x64 = x.astype(np.float64)
    if "ftz" in mods and st == "f32": x64 = _ftz(x.astype(np.float32)).astype(np.float64)
    rnd = next((m for m in mods if m in ("rni", "rzi", "rmi", "rpi")), "rzi")
    x64 = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd](x64)
    info = np.iinfo(vd)
    nan = np.isnan(x64)
    x64 = np.where(nan, 0.0, x64)
    big = x64 >= float(info.max)
    top = float(info.max) if info.bits < 64 else np.nextafter(float(info.max), 0.0)  # 2**63 and 2**64 are not representable
    out = np.where(big, vd(info.max), np.clip(x64, float(info.min), top).astype(vd)).astype(vd)
    if info.bits == 64: out = np.where(nan, np.uint64(1 << 63).astype(vd), out).astype(vd)  # NaN -> 0x8000000000000000 (measured)
    return out
  if not is_float(st) and is_float(dt):  # int -> float
    rnd = next((m for m in mods if m in ("rn", "rz", "rm", "rp")), "rn")
    if rnd != "rn": raise PTXUnsupported(f"PTX cvt.{rnd}.{dt}.{st}")
    if dt == "bf16": return bf16_value(bf16_bits(round_f64_to_f32_odd(x.astype(np.float64)))) if type_bytes(st) < 8 else \
      bf16_value(bf16_bits(x.astype(np.float32)))
    return x.astype(vd)
  if is_float(st) and is_float(dt):
    if "sat" in mods: x = np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(x.dtype)
    x64 = x.astype(np.float64)
    if "ftz" in mods and st == "f32": x64 = _ftz(x.astype(np.float32)).astype(np.float64)
    irnd = next((m for m in mods if m in ("rni", "rzi", "rmi", "rpi")), None)
    if irnd: return canonical_nan(from_f64({"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[irnd](x64), dt), dt)
    rnd = next((m for m in mods if m in ("rn", "rz", "rm", "rp")), "rn")
    r = _round_float(x64, dt, rnd)
    if {dt, st} & {"f16", "bf16"}: r = canonical_nan(r, dt)  # conversions to and from 16-bit floats canonicalize NaN (measured)
    return _ftz(r) if "ftz" in mods and dt == "f32" else r
  # int -> int: wrap (the source is already read at its own width), or saturate
  if "sat" in mods:
    info = np.iinfo(vd)
    return np.clip(x.astype(np.float64) if type_bytes(st) == 8 else x.astype(np.int64), info.min, info.max).astype(vd)
  return x.astype(vd)

def _carry_add(a, b, cin, t: str) -> tuple[np.ndarray, np.ndarray]:
  U = _UINT[type_bytes(t)]
  a, b = np.asarray(a).view(U) if np.asarray(a).dtype != U else np.asarray(a), np.asarray(b).astype(U)
  s1 = (a + b).astype(U)
  c1 = s1 < a
  s2 = (s1 + np.asarray(cin).astype(U)).astype(U)
  c2 = s2 < s1
  return s2.view(value_dtype(t)), c1 | c2

def _carry_sub(a, b, bin_, t: str) -> tuple[np.ndarray, np.ndarray]:
  U = _UINT[type_bytes(t)]
  a, b = np.asarray(a).astype(U), np.asarray(b).astype(U)
  bin_ = np.asarray(bin_).astype(U)
  d1 = (a - b).astype(U)
  b1 = a < b
  d2 = (d1 - bin_).astype(U)
  b2 = d1 < bin_
  return d2.view(value_dtype(t)), b1 | b2

def _bits_u(x, t: str) -> np.ndarray: return np.asarray(x).astype(value_dtype(t)).view(_UINT[type_bytes(t)])

def clz(x, t: str) -> np.ndarray:
  w = 8 * type_bytes(t)
  U = _UINT[type_bytes(t)]
  y = _bits_u(x, t).copy()
  n = np.zeros(y.shape, np.uint32)
  s = w // 2
  while s:
    top0 = y < (U(1) << U(w - s))
    n += np.where(top0, s, 0).astype(np.uint32)
    y = np.where(top0, y << U(s), y)
    s //= 2
  return np.where(_bits_u(x, t) == 0, np.uint32(w), n).astype(np.uint32)

def popc(x, t: str) -> np.ndarray:
  b = _bits_u(x, t)
  return np.unpackbits(np.ascontiguousarray(b).view(np.uint8).reshape(b.size, -1), axis=1).sum(axis=1).astype(np.uint32).reshape(b.shape)

def bfi(f, b, pos, ln, t: str) -> np.ndarray:
  w = 8 * type_bytes(t)
  U = _UINT[type_bytes(t)]
  pos, ln = np.asarray(pos).astype(np.uint64) & np.uint64(0xFF), np.asarray(ln).astype(np.uint64) & np.uint64(0xFF)
  ln = np.minimum(ln, np.uint64(w))
  mask = np.where(ln >= w, ~U(0), ((U(1) << np.minimum(ln, w - 1).astype(U)) - U(1)).astype(U)).astype(U)
  mask = np.where(pos >= w, U(0), (mask << np.minimum(pos, w - 1).astype(U)).astype(U)).astype(U)
  fb = np.where(pos >= w, U(0), (_bits_u(f, t) << np.minimum(pos, w - 1).astype(U)).astype(U))
  return ((fb & mask) | (_bits_u(b, t) & ~mask)).astype(U).view(value_dtype(t))

def alu(ins: Instr, prog, site: tuple[Any, int]) -> Callable:
  """fn(machine, sel) executing an arithmetic, logic, compare, select, convert or move instruction; site: (function, index
  in its body), where ptxas's contraction of a mul into this add is looked for."""
  parts = ins.op.split(".")
  name, ts, mods = parts[0], types_of(ins.op), mods_of(ins.op)
  if not ts: raise PTXUnsupported(f"PTX instruction {ins.op} (no type)")
  t = ts[-1]
  A = ins.args
  R = lambda i, tt=None: reader(A[i], tt or t, prog)  # noqa: E731
  W = lambda i, tt=None: writer(A[i], tt or t, prog)  # noqa: E731
  fl = is_float(t)
  ftz = "ftz" in mods and t == "f32"
  fz = _ftz if ftz else (lambda v: v)

  if name == "mov":
    if t == "pred": r, w = R(1), W(0)
    else:
      bt = t if not fl else f"b{8 * type_bytes(t)}"
      r, w = R(1, bt), W(0, bt)
    return lambda m, sel: w(m, sel, r(m, sel))
  if name == "cvt":
    dt, st = ts[0], ts[1]
    r, w = R(1, st), W(0, dt)
    return lambda m, sel: w(m, sel, convert(r(m, sel), dt, st, mods))
  if name == "cvta":  # between a state space's window and generic addresses
    r, w = R(1), W(0)
    space = next(p for p in parts[1:] if p in ("global", "shared", "local", "const", "param"))
    base = np.uint64(prog.window(space))
    to = "to" in parts
    U = value_dtype(t)
    def cvta(m, sel):
      a = np.asarray(r(m, sel)).astype(np.uint64)
      w(m, sel, (a - base if to else a + base).astype(U))
    return cvta
  if name in ("setp", "set"):
    cmp = parts[1]
    bop = next((p for p in parts[2:] if p in ("and", "or", "xor")), None)
    st = ts[-1]
    ra, rb = R(1, st), R(2, st)
    rc = reader(A[3], "pred", prog) if bop and len(A) > 3 else None
    if name == "set":
      dt = ts[0]
      w = W(0, dt)
      true = np.float32(1.0) if dt == "f32" else value_dtype(dt)(-1) if is_signed(dt) else ~value_dtype(dt)(0)
      return lambda m, sel: w(m, sel, np.where(compare(cmp, ra(m, sel), rb(m, sel), st), true, value_dtype(dt)(0)))
    dest = A[0]
    from tinygrad_cuda.mock.ptx_parse import Vec
    pw = writer(dest.items[0] if isinstance(dest, Vec) else dest, "pred", prog)
    qw = writer(dest.items[1], "pred", prog) if isinstance(dest, Vec) and len(dest.items) > 1 else None
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(bop or "")
    def setp(m, sel):
      c = compare(cmp, ra(m, sel), rb(m, sel), st)
      if rc is not None:
        cc = rc(m, sel)
        p, q = comb(c, cc), comb(~c, cc)
      else: p, q = c, ~c
      pw(m, sel, p)
      if qw is not None: qw(m, sel, q)
    return setp
  if name == "selp":
    ra, rb, rc, w = R(1), R(2), reader(A[3], "pred", prog), W(0)
    return lambda m, sel: w(m, sel, np.where(rc(m, sel), ra(m, sel), rb(m, sel)))
  if name in ("and", "or", "xor"):
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[name]
    ra, rb, w = R(1), R(2), W(0)
    return lambda m, sel: w(m, sel, f(ra(m, sel), rb(m, sel)))
  if name in ("not", "cnot"):
    ra, w = R(1), W(0)
    if name == "cnot": return lambda m, sel: w(m, sel, (np.asarray(ra(m, sel)) == 0).astype(value_dtype(t)))
    return lambda m, sel: w(m, sel, np.logical_not(ra(m, sel)) if t == "pred" else np.invert(ra(m, sel)))
  if name in ("shl", "shr"):
    ra, rb, w = R(1), R(2, "u32"), W(0)
    return lambda m, sel: w(m, sel, _shift(ra(m, sel), rb(m, sel), t, name == "shl"))
  if name in ("clz", "popc"):
    ra, w = R(1), W(0, "u32")
    fn = clz if name == "clz" else popc
    return lambda m, sel: w(m, sel, fn(ra(m, sel), t))
  if name == "shf":  # funnel shift of the 64 bits b:a (b high), by c mod 32 (wrap) or at most 32 (clamp)
    ra, rb, rc, w = R(1), R(2), R(3, "u32"), W(0)
    left, wrap = "l" in parts[1:], "wrap" in parts
    def shf(m, sel):
      v = (np.asarray(rb(m, sel)).astype(np.uint64) << np.uint64(32)) | np.asarray(ra(m, sel)).astype(np.uint64)
      c = np.asarray(rc(m, sel)).astype(np.uint64)
      n = c & np.uint64(31) if wrap else np.minimum(c, np.uint64(32))
      r = (v << n) >> np.uint64(32) if left else v >> n
      w(m, sel, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    return shf
  if name == "bfi":
    rf, rb, rp, rl, w = R(1), R(2), R(3, "u32"), R(4, "u32"), W(0)
    return lambda m, sel: w(m, sel, bfi(rf(m, sel), rb(m, sel), rp(m, sel), rl(m, sel), t))

  if fl:
    if t in ("f16x2", "bf16x2"): raise PTXUnsupported(f"PTX packed instruction {ins.op}")
    ct = np.float32 if t in ("f16", "bf16") else value_dtype(t)  # f16/bf16 compute in f32, round once
    def rnd(v): return canonical_nan(from_f64(np.asarray(v, np.float64), t) if t in ("f16", "bf16") else fz(np.asarray(v).astype(ct)), t)
    ins_f = lambda i: (lambda rr: (lambda m, sel: fz(np.asarray(rr(m, sel)).astype(ct))))(R(i))  # noqa: E731
    w = W(0)
    if name in ("add", "sub") and (fused := prog.contracted(ins, site)) is not None:  # ptxas fuses an unrounded mul into this add
      fa, fb = (reader(x, t, prog) for x in fused[0])
      rc = ins_f(fused[1])
      neg = name == "sub" and fused[1] == 1  # c - a*b
      def contracted(m, sel):
        a, b = np.asarray(fa(m, sel)).astype(ct), np.asarray(fb(m, sel)).astype(ct)
        v = canonical_nan(_fma(-a if neg else a, b, -rc(m, sel) if name == "sub" and not neg else rc(m, sel), t), t)
        w(m, sel, _ftz(v) if ftz else v)
      return contracted
    if name in ("add", "sub", "mul", "div"):
      ra, rb = ins_f(1), ins_f(2)
      if name == "div" and "approx" in mods:
        def divap(m, sel):
          a, b = ra(m, sel), rb(m, sel)
          q = a * (np.float32(1) / b)
          q = np.where((np.abs(b) > np.float32(2.0 ** 126)) & np.isfinite(b), np.where(np.isinf(a), np.nan, 0 * a), q)
          w(m, sel, rnd(q))
        return divap
      f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[name]
      def arith(m, sel): w(m, sel, rnd(f(ra(m, sel), rb(m, sel))))  # run_ptx ignores float warnings
      return arith
    if name in ("fma", "mad"):
      ra, rb, rc = ins_f(1), ins_f(2), ins_f(3)
      def fma(m, sel):
        v = canonical_nan(_fma(ra(m, sel), rb(m, sel), rc(m, sel), t), t)
        w(m, sel, _ftz(v) if ftz else v)
      return fma
    if name in ("neg", "abs"):
      U = _UINT[type_bytes(t)]
      sign = U(1) << U(8 * type_bytes(t) - 1)
      rb_ = R(1, f"b{8 * type_bytes(t)}")
      wb = W(0, f"b{8 * type_bytes(t)}")
      if ftz:
        rf = ins_f(1)
        return lambda m, sel: w(m, sel, -rf(m, sel) if name == "neg" else np.abs(rf(m, sel)))
      if t in ("f16", "bf16"):  # these give the canonical NaN (measured); f32/f64 only flip or clear the sign bit
        rf = R(1)
        def neg16(m, sel):
          x = np.asarray(rf(m, sel))
          w(m, sel, canonical_nan(np.where(np.isnan(x), x, -x if name == "neg" else np.abs(x)), t))
        return neg16
      if name == "neg": return lambda m, sel: wb(m, sel, np.asarray(rb_(m, sel)) ^ sign)
      return lambda m, sel: wb(m, sel, np.asarray(rb_(m, sel)) & ~sign)
    if name in ("min", "max"):
      ra, rb = ins_f(1), ins_f(2)
      return lambda m, sel: w(m, sel, rnd(_fminmax(ra(m, sel), rb(m, sel), t, name == "max", "NaN" in mods)))
    if name in ("ex2", "lg2", "sin", "cos", "rcp", "sqrt", "rsqrt"):
      if name in ("ex2", "lg2", "sin", "cos", "rsqrt") and "approx" not in mods: raise PTXUnsupported(f"PTX {ins.op} (not .approx)")
      f = _float_unary(name, t, mods)
      ra = R(1)
      return lambda m, sel: w(m, sel, f(ra(m, sel)))
    if name == "testp":
      ra, wp = R(1), W(0, "pred")
      k = parts[1]
      def testp(m, sel):
        x = np.asarray(ra(m, sel))
        tiny = np.finfo(x.dtype).tiny
        r = {"finite": np.isfinite(x), "infinite": np.isinf(x), "number": ~np.isnan(x), "notanumber": np.isnan(x),
             "normal": np.isfinite(x) & (np.abs(x) >= tiny), "subnormal": (np.abs(x) < tiny) & (x != 0)}[k]
        wp(m, sel, r)
      return testp
    if name == "copysign":
      ra, rb = R(1), R(2)
      return lambda m, sel: w(m, sel, np.copysign(rb(m, sel), ra(m, sel)))
    raise PTXUnsupported(f"PTX instruction {ins.op}")

  # integers
  vd = value_dtype(t)
  w = W(0)
  if name in ("add", "sub") and not ({"cc"} & mods):
    ra, rb = R(1), R(2)
    f = np.add if name == "add" else np.subtract
    if "sat" in mods: raise PTXUnsupported(f"PTX {ins.op}")
    return lambda m, sel: w(m, sel, f(ra(m, sel), rb(m, sel), dtype=vd))
  if name in ("add", "addc", "sub", "subc"):
    ra, rb = R(1), R(2)
    cin = name.endswith("c")
    cout = "cc" in mods
    carry = _carry_add if name.startswith("add") else _carry_sub
    def addc(m, sel):
      d, c = carry(ra(m, sel), rb(m, sel), m.carry[sel] if cin else 0, t)
      w(m, sel, d)
      if cout: m.carry[sel] = c
    return addc
  if name in ("mul", "mad", "madc"):
    mode = next((p for p in parts[1:] if p in ("lo", "hi", "wide")), "lo")
    ra, rb = R(1), R(2)
    if mode == "wide":
      wt = t[0] + str(16 * type_bytes(t))
      w = W(0, wt)
      WD = value_dtype(wt)
      prod = lambda m, sel: np.multiply(np.asarray(ra(m, sel)).astype(WD), np.asarray(rb(m, sel)).astype(WD), dtype=WD)  # noqa: E731
      ot = wt
    elif mode == "hi": prod, ot = (lambda m, sel: _mulhi(ra(m, sel), rb(m, sel), t)), t
    else: prod, ot = (lambda m, sel: np.multiply(ra(m, sel), rb(m, sel), dtype=vd)), t
    if name == "mul": return lambda m, sel: w(m, sel, prod(m, sel))
    rc = R(3, ot)
    cin, cout = name == "madc", "cc" in mods
    if not cin and not cout:
      OD = value_dtype(ot)
      return lambda m, sel: w(m, sel, np.add(prod(m, sel), rc(m, sel), dtype=OD))
    def madc(m, sel):
      d, c = _carry_add(prod(m, sel), rc(m, sel), m.carry[sel] if cin else 0, ot)
      w(m, sel, d)
      if cout: m.carry[sel] = c
    return madc
  if name in ("div", "rem"):
    ra, rb = R(1), R(2)
    return lambda m, sel: w(m, sel, _int_div(ra(m, sel), rb(m, sel), t, name == "rem"))
  if name in ("min", "max"):
    ra, rb = R(1), R(2)
    f = np.minimum if name == "min" else np.maximum
    return lambda m, sel: w(m, sel, f(ra(m, sel), rb(m, sel)))
  if name in ("neg", "abs"):
    ra = R(1)
    if name == "neg": return lambda m, sel: w(m, sel, np.subtract(vd(0), ra(m, sel), dtype=vd))
    return lambda m, sel: w(m, sel, np.where(np.asarray(ra(m, sel)) < 0, np.subtract(vd(0), ra(m, sel), dtype=vd), ra(m, sel)))
  raise PTXUnsupported(f"PTX instruction {ins.op}")
