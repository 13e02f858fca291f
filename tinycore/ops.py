"""The op set: every primitive a backend must render, plus the buffer and kernel-structure ops of the UOp IR.

A reduce is REDUCE_AXIS with arg (Ops.ADD, axes) for SUM or (Ops.MAX, axes) for MAX. Matmul and conv are not
primitives: they are movement ops (views) followed by MUL and a SUM reduce.
"""
from __future__ import annotations
import math
from enum import Enum, auto
from typing import Any, Callable
import numpy as np
from tinycore.dtype import DType, dtypes, to_np_dtype, bf16_to_f32, f32_to_bf16

class Ops(Enum):
  # unary
  EXP2 = auto(); LOG2 = auto(); SIN = auto(); SQRT = auto(); RECIP = auto(); NEG = auto(); CAST = auto(); BITCAST = auto()  # noqa: E702
  # binary
  ADD = auto(); MUL = auto(); IDIV = auto(); MOD = auto(); MAX = auto(); CMPLT = auto(); CMPNE = auto()  # noqa: E702
  AND = auto(); OR = auto(); XOR = auto(); SHL = auto(); SHR = auto()  # noqa: E702
  # ternary
  WHERE = auto(); MULACC = auto()  # noqa: E702
  # reduce
  REDUCE_AXIS = auto()
  # movement (zero-copy: they only change the ShapeTracker)
  RESHAPE = auto(); PERMUTE = auto(); EXPAND = auto(); PAD = auto(); SHRINK = auto(); FLIP = auto()  # noqa: E702
  # buffer ops of the lazy graph
  EMPTY = auto(); CONST = auto(); COPY = auto(); CONTIGUOUS = auto(); ASSIGN = auto(); BUFFER = auto()  # noqa: E702
  # indexed ops of the lazy graph (positions read from data, see tinycore.lazy): GATHER is a load at a loaded index,
  # SCATTER adds rows into a buffer in place, INDEX_CHECK records an index out of range (tinycore.index_errors)
  GATHER = auto(); SCATTER = auto(); INDEX_CHECK = auto()  # noqa: E702
  # (members are singletons compared by identity: hashed by identity too, in C, where Enum's hash is a Python call on
  # the name. Every UOp made, and every schedule looked up, hashes some)
  __hash__ = object.__hash__
  # kernel structure
  SINK = auto(); VIEW = auto(); DEFINE_GLOBAL = auto(); DEFINE_LOCAL = auto(); DEFINE_VAR = auto(); DEFINE_ACC = auto()  # noqa: E702
  SPECIAL = auto(); RANGE = auto(); ENDRANGE = auto(); LOAD = auto(); STORE = auto(); BARRIER = auto()  # noqa: E702
  VECTORIZE = auto(); GEP = auto(); NOOP = auto()  # noqa: E702
  def __repr__(self) -> str: return f"Ops.{self.name}"
  def __lt__(self, o: Ops) -> bool: return self.value < o.value

class GroupOp:
  Unary = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.NEG}
  Binary = {Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR}
  Ternary = {Ops.WHERE, Ops.MULACC}
  ALU = Unary | Binary | Ternary
  Elementwise = ALU | {Ops.CAST, Ops.BITCAST}
  Movement = {Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP}
  Commutative = {Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR}
  Comparison = {Ops.CMPLT, Ops.CMPNE}
  # ops where f(0) != 0: a padded (masked) view may not be pushed through them
  UnsafePad = {Ops.EXP2, Ops.LOG2, Ops.RECIP, Ops.IDIV, Ops.MOD, Ops.CMPLT, Ops.CMPNE, Ops.WHERE, Ops.CAST, Ops.BITCAST}
  Reduce = {Ops.ADD, Ops.MAX}

# *** the reference semantics of every ALU op, on numpy arrays or scalars ***
# Integer ops follow C: IDIV truncates toward zero, MOD takes the sign of the dividend, integers wrap.

def _idiv(x: Any, y: Any) -> Any:
  q = np.floor_divide(x, y)
  return q + ((np.mod(x, y) != 0) & ((x < 0) != (y < 0))).astype(q.dtype)
def _shr(x: Any, y: Any) -> Any: return np.right_shift(x, y)
def _max(x: Any, y: Any) -> Any: return np.maximum(x, y)

_ALU_FXN: dict[Ops, Callable[..., Any]] = {
  Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin, Ops.SQRT: np.sqrt, Ops.NEG: np.negative,
  Ops.RECIP: lambda x: np.reciprocal(x) if x.dtype.kind == "f" else np.floor_divide(1, x),
  Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: _max, Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal,
  Ops.AND: np.bitwise_and, Ops.OR: np.bitwise_or, Ops.XOR: np.bitwise_xor, Ops.SHL: np.left_shift, Ops.SHR: _shr,
  Ops.IDIV: _idiv, Ops.MOD: np.fmod,
  Ops.WHERE: np.where, Ops.MULACC: lambda a, b, c: a * b + c,
}

def np_cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
  """CAST with C semantics for the values that have them (float->int truncates, bool is x!=0)."""
  if src == dtypes.bfloat16: x, src = bf16_to_f32(x), dtypes.float32
  if dst == dtypes.bool: return x != 0
  if dst == dtypes.bfloat16: return f32_to_bf16(x.astype(np.float32))
  if dtypes.is_float(src) and dtypes.is_int(dst):
    with np.errstate(invalid="ignore"): return np.trunc(x).astype(to_np_dtype(dst))
  return x.astype(to_np_dtype(dst))

def exec_alu(op: Ops, dtype: DType, srcs: list[Any]) -> Any:
  """Evaluate one ALU op on numpy values of the given result dtype, with C semantics for integers."""
  with np.errstate(all="ignore"):
    if dtype.scalar() == dtypes.bfloat16 and op is not Ops.WHERE:
      srcs = [bf16_to_f32(s) if isinstance(s, np.ndarray) and s.dtype == np.uint16 else s for s in srcs]
      return f32_to_bf16(np.asarray(_ALU_FXN[op](*srcs), dtype=np.float32))
    if op in (Ops.SHL, Ops.SHR) and dtypes.is_int(dtype):
      ndt = to_np_dtype(dtype)
      return _ALU_FXN[op](np.asarray(srcs[0], ndt), np.asarray(srcs[1]).astype(ndt))
    ret = _ALU_FXN[op](*srcs)
    return ret if op in GroupOp.Comparison else np.asarray(ret).astype(to_np_dtype(dtype), copy=False)

def python_alu(op: Ops, dtype: DType, *vals: Any) -> Any:
  """exec_alu on python scalars, returning a python scalar: used for constant folding."""
  nd = to_np_dtype(dtype) if dtype.scalar() != dtypes.bfloat16 else np.float32
  def conv(v: Any) -> Any: return np.asarray(v, dtype=nd) if op not in GroupOp.Comparison and op is not Ops.WHERE else np.asarray(v)
  args = [np.asarray(vals[0], bool), conv(vals[1]), conv(vals[2])] if op is Ops.WHERE else [conv(v) for v in vals]
  if op in GroupOp.Comparison: args = [np.asarray(v) for v in vals]
  if op is Ops.RECIP and dtypes.is_float(dtype): args = [np.asarray(vals[0], dtype=nd)]
  with np.errstate(all="ignore"):
    ret = _ALU_FXN[op](*args)
  out = ret.item() if hasattr(ret, "item") else ret
  if dtype.scalar() == dtypes.bfloat16 and isinstance(out, float): out = float(bf16_to_f32(f32_to_bf16(np.float32(out))))
  return dtypes.as_const(out, dtype) if not (isinstance(out, float) and math.isnan(out)) else out
