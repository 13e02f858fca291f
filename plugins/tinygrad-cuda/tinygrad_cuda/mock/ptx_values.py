"""Typed values of the PTX interpreter: how a register holds bits, and how an instruction type reads and writes them.

A register is an array over threads of unsigned integers of its declared width (b16/u16/s16/f16 -> uint16, 32-bit ->
uint32, 64-bit -> uint64, 8-bit -> uint16 like the hardware's smallest register; .pred -> bool). An instruction reads it
as its own type: a narrower type takes the low bits; a wider one (a load or a cvt into a bigger register) extends by
the type's signedness. Values are numpy arrays of the type's value dtype: int/uint of the width, float16/float32/float64;
bf16 values are float32 (they are exact there) and are rounded to nearest-even when written."""
from __future__ import annotations
import functools
from typing import Any, Callable
import numpy as np
from tinygrad_cuda.mock.ptx_parse import Imm, PTXUnsupported, Reg, Special, Sym, Vec, type_bytes

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SINT = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}
_FLOAT = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "bf16": np.float32}

@functools.cache
def value_dtype(t: str) -> Any:
  """The numpy dtype an instruction of type t computes in."""
  if t == "pred": return np.bool_
  if t in _FLOAT: return _FLOAT[t]
  if t in ("f16x2", "bf16x2"): return np.uint32
  return (_SINT if t[0] == "s" else _UINT)[type_bytes(t)]

def storage_dtype(t: str) -> Any:
  """The numpy dtype a register declared with type t holds its bits in."""
  if t == "pred": return np.bool_
  return _UINT[max(2, type_bytes(t))]

def is_float(t: str) -> bool: return t in _FLOAT
def is_signed(t: str) -> bool: return t[0] == "s"

def bf16_bits(x: np.ndarray) -> np.ndarray:
  """float32 values -> bfloat16 bits, rounded to nearest even; NaN stays NaN (quiet)."""
  b = np.asarray(x, np.float32).view(np.uint32)
  r = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
  return np.where(np.isnan(np.asarray(x, np.float32)), (b >> np.uint32(16)).astype(np.uint16) | np.uint16(0x40), r)

def bf16_value(bits: np.ndarray) -> np.ndarray: return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)

def round_f64_to_f32_odd(x: np.ndarray) -> np.ndarray:
  """float64 -> float32 rounded to odd (truncated, low bit set when inexact): a later rounding to a narrower format then
  rounds once, as if from the exact value."""
  x = np.asarray(x, np.float64)
  r = x.astype(np.float32)
  over = np.abs(r.astype(np.float64)) > np.abs(x)
  r = np.where(over & np.isfinite(x), np.nextafter(r, np.float32(0)), r)
  inexact = (r.astype(np.float64) != x) & np.isfinite(x)
  return np.where(inexact, (r.view(np.uint32) | np.uint32(1)).view(np.float32), r)

def from_f64(x: np.ndarray, t: str) -> np.ndarray:
  """float64 values rounded once to float type t."""
  if t == "f64": return np.asarray(x, np.float64)
  if t == "bf16": return bf16_value(bf16_bits(round_f64_to_f32_odd(x)))
  return np.asarray(x, np.float64).astype(_FLOAT[t])

def imm_value(text: str, t: str) -> Any:
  """A PTX immediate as a numpy scalar of type t's value dtype."""
  neg = text.startswith("-")
  s = text[1:] if neg else text
  if s[:2] in ("0f", "0F"):
    v = np.array(int(s[2:], 16), np.uint32).view(np.float32)[()]
    v = -v if neg else v
    return np.float64(v).astype(value_dtype(t)) if is_float(t) else np.array(v, np.float32).view(np.uint32).astype(value_dtype(t))[()]
  if s[:2] in ("0d", "0D"):
    v = np.array(int(s[2:], 16), np.uint64).view(np.float64)[()]
    v = -v if neg else v
    return np.float64(v).astype(value_dtype(t)) if is_float(t) else np.array(v, np.float64).view(np.uint64).astype(value_dtype(t))[()]
  if "." in s or "e" in s.lower() and not s.lower().startswith("0x"):
    return value_dtype(t)(-float(s) if neg else float(s))
  v = int(s.rstrip("U"), 0) * (-1 if neg else 1)
  if t == "pred": return np.bool_(v != 0)
  if t == "bf16": return bf16_value(np.array(v & 0xFFFF, np.uint16))[()]
  w = type_bytes(t)
  bits = np.array(v & ((1 << (8 * w)) - 1), _UINT[w])
  return bits.view(value_dtype(t))[()] if t != "bf16" else bits

Reader = Callable[[Any, Any], Any]
Writer = Callable[[Any, Any, Any], None]

def reader(op, t: str, prog) -> Reader:
  """fn(machine, sel) -> the operand's values as type t for the selected threads (an array, or a scalar for constants)."""
  vd = value_dtype(t)
  if isinstance(op, Imm):
    v = imm_value(op.text, t)
    return lambda m, sel: v
  if isinstance(op, Special): return lambda m, sel: m.special(op.name, sel).astype(vd)
  if isinstance(op, Sym):
    addr = prog.symbol_address(op.name)
    v = np.array(addr, np.uint64).astype(vd)[()]
    return lambda m, sel: v
  if isinstance(op, Vec):  # packed: element 0 in the low bits
    n = len(op.items)
    w = type_bytes(t) // n
    parts = [reader(x, f"b{8 * w}", prog) for x in op.items]
    wide = _UINT[type_bytes(t)]
    def rd_vec(m, sel):
      acc = None
      for i, p in enumerate(parts):
        v = np.asarray(p(m, sel)).astype(wide) << wide(8 * w * i)
        acc = v if acc is None else acc | v
      return np.asarray(acc).view(vd) if t != "bf16" else bf16_value(np.asarray(acc))
    return rd_vec
  if not isinstance(op, Reg): raise PTXUnsupported(f"PTX operand {op} read as .{t}")
  name, rt = op.name, prog.regs[op.name]
  if t == "pred" or rt == "pred":
    if t != rt: raise PTXUnsupported(f"PTX: predicate register {name} read as .{t}")
    return lambda m, sel: m.r[name][sel]
  S = storage_dtype(rt)
  sw, w = np.dtype(S).itemsize, type_bytes(t)
  if t == "bf16": return lambda m, sel: bf16_value(m.r[name][sel].astype(np.uint16))
  if w == sw: return lambda m, sel: m.r[name][sel].view(vd)
  if w < sw:
    U = _UINT[w]
    return lambda m, sel: m.r[name][sel].astype(U).view(vd)
  if is_signed(t):
    SI = _SINT[sw]
    return lambda m, sel: m.r[name][sel].view(SI).astype(vd)
  return lambda m, sel: m.r[name][sel].astype(vd)

def writer(op, t: str, prog) -> Writer:
  """fn(machine, sel, values) storing values of type t into the operand (a register, a vector of them, or `_`)."""
  if op is None: return lambda m, sel, v: None
  if isinstance(op, Vec):
    n = len(op.items)
    w = type_bytes(t) // n
    parts = [writer(x, f"b{8 * w}", prog) for x in op.items]
    U, wide = _UINT[w], _UINT[type_bytes(t)]
    def wr_vec(m, sel, v):
      bits = np.asarray(v).astype(value_dtype(t)).view(wide) if t != "bf16" else bf16_bits(v)
      for i, p in enumerate(parts): p(m, sel, (bits >> wide(8 * w * i)).astype(U))
    return wr_vec
  if not isinstance(op, Reg): raise PTXUnsupported(f"PTX operand {op} written as .{t}")
  name, rt = op.name, prog.regs[op.name]
  if t == "pred" or rt == "pred":
    if t != rt: raise PTXUnsupported(f"PTX: predicate register {name} written as .{t}")
    def wr_pred(m, sel, v): m.r[name][sel] = v
    return wr_pred
  S = storage_dtype(rt)
  sw, w, vd = np.dtype(S).itemsize, type_bytes(t), value_dtype(t)
  if t == "bf16":
    def wr_bf16(m, sel, v): m.r[name][sel] = bf16_bits(v).astype(S)
    return wr_bf16
  U = _UINT[w]
  if w == sw:
    def wr_same(m, sel, v): m.r[name][sel] = np.asarray(v, vd).view(S)
    return wr_same
  if w > sw:
    def wr_trunc(m, sel, v): m.r[name][sel] = np.asarray(v, vd).view(U).astype(S)
    return wr_trunc
  if is_signed(t):
    SI = _SINT[sw]
    def wr_sext(m, sel, v): m.r[name][sel] = np.asarray(v).astype(vd, copy=False).astype(SI).view(S)
    return wr_sext
  def wr_zext(m, sel, v): m.r[name][sel] = np.asarray(v).astype(vd, copy=False).view(U).astype(S)
  return wr_zext
