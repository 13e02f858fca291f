"""A PTX renderer: walks the same linear UOp program the C-style renderers do and writes PTX directly, for ptxas.

Registers by class: %p predicates (bool), %r 32-bit integers (int8..uint32; 8- and 16-bit values are kept sign- or
zero-extended and re-normalized after arithmetic, so they wrap like the narrow type), %rd 64-bit integers and addresses,
%h 16-bit floats (half, bfloat16: stored as bits, computed in f32 and rounded once), %f f32, %fd f64.
Float add/mul are .rn (never contracted into fma, like the reference). f32 exp2/log2 use the .approx instructions; f32 sin goes
through f64 (sin.approx.f32 has no range reduction: off by ~1e-5 at |x| = 100, seen on an H100); f64 exp2/log2/sin,
which PTX lacks, are the instruction sequences of f64math.py."""
from __future__ import annotations
import struct
from collections import defaultdict
from typing import Any
import numpy as np
from tinycore.dtype import DType, PtrDType, dtypes, f32_to_bf16
from tinycore.helpers import prod
from tinycore.ops import Ops
from tinycore.backend import Renderer
from tinycore.uop.uop import UOp
from tinygrad_cuda.renderer import arch_number
from tinygrad_nv import f64math

_XYZ = "xyz"
_HALFS = (dtypes.float16, dtypes.bfloat16)
_SMALL = {dtypes.int8: "s8", dtypes.uint8: "u8", dtypes.int16: "s16", dtypes.uint16: "u16"}
_MEM = {dtypes.bool: "u8", dtypes.int8: "s8", dtypes.uint8: "u8", dtypes.int16: "s16", dtypes.uint16: "u16", dtypes.int32: "s32",
        dtypes.uint32: "u32", dtypes.int64: "s64", dtypes.uint64: "u64", dtypes.float16: "b16", dtypes.bfloat16: "b16",
        dtypes.float32: "f32", dtypes.float64: "f64"}
_SELP = {"h": "selp.b16", "r": "selp.b32", "rd": "selp.b64", "f": "selp.f32", "fd": "selp.f64"}
_CLASS_DECL = {"p": ".pred", "h": ".b16", "r": ".b32", "rd": ".b64", "f": ".f32", "fd": ".f64"}

def reg_class(dt: DType) -> str:
  if isinstance(dt, PtrDType): return "rd"
  if dt == dtypes.bool: return "p"
  if dt in _HALFS: return "h"
  if dt in (dtypes.int64, dtypes.uint64): return "rd"
  if dt == dtypes.float32: return "f"
  if dt == dtypes.float64: return "fd"
  return "r"

def _mov(cls: str) -> str: return {"p": "mov.pred", "h": "mov.b16", "r": "mov.b32", "rd": "mov.b64", "f": "mov.f32", "fd": "mov.f64"}[cls]
def _int_t(dt: DType) -> str:
  """The PTX type integer arithmetic on dt runs in."""
  if dt in (dtypes.int64, dtypes.uint64): return "s64" if dt == dtypes.int64 else "u64"
  return "u32" if dtypes.is_unsigned(dt) else "s32"
def _bits(dt: DType) -> str: return "b64" if dt in (dtypes.int64, dtypes.uint64) else "b32"
def f32_imm(v: float) -> str: return "0f" + struct.pack(">f", v).hex().upper()
def f64_imm(v: float) -> str: return "0d" + struct.pack(">d", v).hex().upper()

def ptx_version(arch: str) -> str:
  """The PTX ISA version to declare: 7.8 covers sm_50..sm_90; Blackwell needs 8.6 (sm_100/101) or 8.7 (sm_120)."""
  n = arch_number(arch)
  return "8.7" if n >= 120 else "8.6" if n >= 100 else "7.8"

class PTXRenderer(Renderer):
  def __init__(self, arch: str = "sm_80"):
    n = arch_number(arch)
    super().__init__(device="NV", has_local=True, has_shared=True, global_max=(0x7FFFFFFF, 65535, 65535), local_max=(1024, 1024, 64),
                     shared_max=48 * 1024, max_upcast=16, vector_widths=(1,),
                     dtypes=tuple(d for d in dtypes.all if d != dtypes.bfloat16 or n >= 80))  # cvt.rn.bf16.f32 is sm_80+
    self.arch = arch
  def render(self, name: str, uops: list[UOp]) -> str: return _Kernel(self, name, uops).render()

class _Kernel(f64math.Ops64):
  """The state of rendering one kernel; also the PTX implementation of f64math's instruction interface."""
  def __init__(self, ren: PTXRenderer, name: str, uops: list[UOp]):
    self.ren, self.name, self.uops = ren, name, uops
    self.lines: list[str] = []
    self.params: list[tuple[tuple, str]] = []  # (launch-order key, declaration)
    self.shared: list[str] = []
    self.counts: dict[str, int] = defaultdict(int)
    self.r: dict[UOp, str] = {}
    self.f32cache: dict[UOp, str] = {}
    self.addr: dict[tuple[UOp, UOp], str] = {}
    self.loops: dict[UOp, int] = {}
    self.scopes: list[tuple[dict, dict]] = []

  # *** registers and emission ***
  def new(self, cls: str) -> str:
    self.counts[cls] += 1
    return f"%{cls}{self.counts[cls] - 1}"
  def emit(self, line: str) -> None: self.lines.append("  " + line)
  def op(self, ins: str, cls: str, *srcs: str) -> str:
    d = self.new(cls)
    self.emit(f"{ins} {', '.join((d,) + srcs)};")
    return d

  # *** values ***
  def const(self, v: Any, dt: DType) -> str:
    cls = reg_class(dt)
    if dt == dtypes.bool: imm = "1" if v else "0"
    elif dt == dtypes.float32: imm = f32_imm(v)
    elif dt == dtypes.float64: imm = f64_imm(v)
    elif dt == dtypes.float16: imm = "0x" + np.array(v, np.float16).view(np.uint16).item().to_bytes(2, "big").hex().upper()
    elif dt == dtypes.bfloat16: imm = "0x" + int(f32_to_bf16(np.array([v], np.float32))[0]).to_bytes(2, "big").hex().upper()
    else: imm = "0x" + (int(v) & (0xFFFFFFFFFFFFFFFF if cls == "rd" else 0xFFFFFFFF)).to_bytes(8 if cls == "rd" else 4, "big").hex().upper()
    return self.op(_mov(cls), cls, imm)

  def normalize(self, dt: DType, reg: str) -> str:
    """Wrap a 32-bit register to the 8/16-bit type dt, sign- or zero-extended again."""
    if dt in _SMALL: self.emit(f"cvt.{_int_t(dt)}.{_SMALL[dt]} {reg}, {reg};")
    return reg

  def to_f32(self, reg: str, dt: DType) -> str:
    if dt == dtypes.float32: return reg
    if dt == dtypes.float16: return self.op("cvt.f32.f16", "f", reg)
    if dt == dtypes.bfloat16:  # bfloat16 is the top half of a float32
      return self.op("mov.b32", "f", self.op("shl.b32", "r", self.op("cvt.u32.u16", "r", reg), "16"))
    return self.cast(reg, dt, dtypes.float32)
  def from_f32(self, reg: str, dt: DType) -> str:
    if dt == dtypes.float32: return reg
    if dt == dtypes.float16: return self.op("cvt.rn.f16.f32", "h", reg)
    if dt == dtypes.bfloat16: return self.op("cvt.rn.bf16.f32", "h", reg)
    return self.cast(reg, dtypes.float32, dt)
  def f32_of(self, u: UOp) -> str:
    if u not in self.f32cache: self.f32cache[u] = self.to_f32(self.r[u], u.dtype)
    return self.f32cache[u]

  def cast(self, x: str, frm: DType, to: DType) -> str:
    if frm == to: return x
    if frm in _HALFS or to in _HALFS:
      if frm == dtypes.float64 and to == dtypes.float16: return self.op("cvt.rn.f16.f64", "h", x)
      if to in _HALFS: return self.from_f32(self.to_f32(x, frm), to)
      return self.cast(self.to_f32(x, frm), dtypes.float32, to)
    if to == dtypes.bool:
      if dtypes.is_float(frm): return self.op(f"setp.neu.{_MEM[frm]}", "p", x, f32_imm(0.0) if frm == dtypes.float32 else f64_imm(0.0))
      return self.op(f"setp.ne.{_int_t(frm)}", "p", x, "0")
    if frm == dtypes.bool:
      if to == dtypes.float32: return self.op("selp.f32", "f", f32_imm(1.0), f32_imm(0.0), x)
      if to == dtypes.float64: return self.op("selp.f64", "fd", f64_imm(1.0), f64_imm(0.0), x)
      return self.op(f"selp.{_bits(to)}", reg_class(to), "1", "0", x)
    if dtypes.is_float(frm) and dtypes.is_float(to):
      return self.op("cvt.f64.f32", "fd", x) if to == dtypes.float64 else self.op("cvt.rn.f32.f64", "f", x)
    if dtypes.is_float(frm): return self.normalize(to, self.op(f"cvt.rzi.{_int_t(to)}.{_MEM[frm]}", reg_class(to), x))
    if dtypes.is_float(to): return self.op(f"cvt.rn.{_MEM[to]}.{_int_t(frm)}", reg_class(to), x)
    # integer to integer
    fc, tc = reg_class(frm), reg_class(to)
    if fc == tc: return self.normalize(to, self.op(_mov(tc), tc, x)) if to in _SMALL else x
    if tc == "rd": return self.op(f"cvt.{_int_t(to)}.{_int_t(frm)}", "rd", x)       # widen by the source's signedness
    return self.normalize(to, self.op("cvt.u32.u64", "r", x))                         # truncate

  def bitcast(self, x: str, frm: DType, to: DType) -> str:
    fc, tc = reg_class(frm), reg_class(to)
    if fc == "h" and tc == "h": return self.op("mov.b16", "h", x)
    if fc == "h": return self.normalize(to, self.op("cvt.u32.u16", "r", x))
    if tc == "h": return self.op("cvt.u16.u32", "h", x)
    if fc == tc == "r": return self.normalize(to, self.op("mov.b32", "r", x))
    return self.op(f"mov.b{8 * to.itemsize}", tc, x)

  def address(self, buf: UOp, idx: UOp) -> str:
    if (buf, idx) not in self.addr:
      size = buf.dtype.base.itemsize
      wide = "mul.lo.s64" if reg_class(idx.dtype) == "rd" else "mul.wide.s32"  # 32-bit indices widen as they scale
      off = self.op(wide, "rd", self.r[idx], str(size))
      self.addr[(buf, idx)] = f"[{self.op('add.s64', 'rd', self.r[buf], off)}]"
    return self.addr[(buf, idx)]

  # *** ALU ***
  def alu(self, u: UOp) -> str:
    op, dt, src = u.op, u.dtype, u.src
    if op is Ops.WHERE:
      c, a, b = (self.r[s] for s in src)
      if dt == dtypes.bool: return self.op("or.pred", "p", self.op("and.pred", "p", c, a), self.op("and.pred", "p", self.op("not.pred", "p", c), b))
      return self.op(_SELP[reg_class(dt)], reg_class(dt), a, b, c)
    sdt = src[0].dtype
    if sdt in _HALFS:  # computed in f32, rounded once
      res = self.alu_on(op, dtypes.float32, [self.f32_of(s) for s in src])
      return res if dt == dtypes.bool else self.from_f32(res, dt)
    return self.alu_on(op, sdt, [self.r[s] for s in src])

  def alu_on(self, op: Ops, dt: DType, x: list[str]) -> str:
    """op on registers of dtype dt (not half/bfloat16); the result has dt, or bool for comparisons."""
    if dt == dtypes.bool:
      ins = {Ops.AND: "and.pred", Ops.OR: "or.pred", Ops.XOR: "xor.pred", Ops.CMPNE: "xor.pred", Ops.MAX: "or.pred", Ops.ADD: "or.pred",
             Ops.MUL: "and.pred"}
      if op in ins: return self.op(ins[op], "p", *x)
      if op is Ops.NEG: return self.op("not.pred", "p", x[0])
      if op is Ops.CMPLT: return self.op("and.pred", "p", self.op("not.pred", "p", x[0]), x[1])
      raise NotImplementedError(f"PTX: {op} on bool")
    if dtypes.is_float(dt):
      t, cls = _MEM[dt], reg_class(dt)
      if op is Ops.ADD: return self.op(f"add.rn.{t}", cls, *x)
      if op is Ops.MUL: return self.op(f"mul.rn.{t}", cls, *x)
      if op is Ops.MULACC: return self.op(f"add.rn.{t}", cls, self.op(f"mul.rn.{t}", cls, x[0], x[1]), x[2])
      if op is Ops.NEG: return self.op(f"neg.{t}", cls, x[0])
      if op is Ops.RECIP: return self.op(f"rcp.rn.{t}", cls, x[0])
      if op is Ops.SQRT: return self.op(f"sqrt.rn.{t}", cls, x[0])
      if op is Ops.CMPLT: return self.op(f"setp.lt.{t}", "p", *x)
      if op is Ops.CMPNE: return self.op(f"setp.neu.{t}", "p", *x)
      if op is Ops.MAX:  # NaN in either operand gives NaN, as numpy.maximum
        keep_a = self.op("or.pred", "p", self.op(f"setp.gt.{t}", "p", *x), self.op(f"setp.nan.{t}", "p", x[0], x[0]))
        return self.op(f"selp.{t}", cls, x[0], x[1], keep_a)
      if op in (Ops.EXP2, Ops.LOG2, Ops.SIN):
        # sin.approx.f32 is off by ~1e-5 past |x| = pi (no range reduction): f32 sin goes through the f64 sequence instead
        if dt == dtypes.float32 and op is Ops.SIN: return self.op("cvt.rn.f32.f64", "f", f64math.sin(self, self.op("cvt.f64.f32", "fd", x[0])))
        if dt == dtypes.float32: return self.op({Ops.EXP2: "ex2.approx.f32", Ops.LOG2: "lg2.approx.f32"}[op], "f", x[0])
        return {Ops.EXP2: f64math.exp2, Ops.LOG2: f64math.log2, Ops.SIN: f64math.sin}[op](self, x[0])
      raise NotImplementedError(f"PTX: {op} on {dt}")
    t, b, cls = _int_t(dt), _bits(dt), reg_class(dt)
    if op in (Ops.SHL, Ops.SHR):
      amt = x[1] if cls == "r" else self.op("cvt.u32.u64", "r", x[1])  # shift amounts are 32-bit
      return self.normalize(dt, self.op(f"shl.{b}" if op is Ops.SHL else f"shr.{t}", cls, x[0], amt))
    if op is Ops.CMPLT: return self.op(f"setp.lt.{t}", "p", *x)
    if op is Ops.CMPNE: return self.op(f"setp.ne.{t}", "p", *x)
    if op is Ops.RECIP: return self.normalize(dt, self.op(f"div.{t}", cls, "1", x[0]))
    ins = {Ops.ADD: f"add.{t}", Ops.MUL: f"mul.lo.{t}", Ops.IDIV: f"div.{t}", Ops.MOD: f"rem.{t}", Ops.MAX: f"max.{t}", Ops.AND: f"and.{b}",
           Ops.OR: f"or.{b}", Ops.XOR: f"xor.{b}", Ops.NEG: f"neg.{t.replace('u', 's')}", Ops.MULACC: f"mad.lo.{t}"}
    if op not in ins: raise NotImplementedError(f"PTX: {op} on {dt}")
    return self.normalize(dt, self.op(ins[op], cls, *x))

  # *** f64math's instruction interface ***
  def c(self, v: float) -> str: return self.const(v, dtypes.float64)
  def fma(self, a, b, c): return self.op("fma.rn.f64", "fd", a, b, c)
  def add(self, a, b): return self.op("add.rn.f64", "fd", a, b)
  def sub(self, a, b): return self.op("sub.rn.f64", "fd", a, b)
  def mul(self, a, b): return self.op("mul.rn.f64", "fd", a, b)
  def div(self, a, b): return self.op("div.rn.f64", "fd", a, b)
  def rint(self, a): return self.op("cvt.rni.f64.f64", "fd", a)
  def to_i32(self, a): return self.op("cvt.rzi.s32.f64", "r", a)
  def i_to_f(self, i): return self.op("cvt.rn.f64.s32", "fd", i)
  def i_add(self, a, k): return self.op("add.s32", "r", a, str(k))
  def i_sub(self, a, b): return self.op("sub.s32", "r", a, b)
  def i_half(self, a): return self.op("shr.s32", "r", a, "1")
  def pow2(self, i):
    return self.op("mov.b64", "fd", self.op("shl.b64", "rd", self.op("cvt.u64.u32", "rd", self.op("add.s32", "r", i, "1023")), "52"))
  def exponent(self, a):
    return self.op("cvt.u32.u64", "r", self.op("and.b64", "rd", self.op("shr.u64", "rd", self.op("mov.b64", "rd", a), "52"), "2047"))
  def with_exponent_1022(self, a):
    m = self.op("and.b64", "rd", self.op("mov.b64", "rd", a), "0x800FFFFFFFFFFFFF")
    return self.op("mov.b64", "fd", self.op("or.b64", "rd", m, "0x3FE0000000000000"))
  def lt(self, a, b): return self.op("setp.lt.f64", "p", a, b)
  def ge(self, a, b): return self.op("setp.ge.f64", "p", a, b)
  def le(self, a, b): return self.op("setp.le.f64", "p", a, b)
  def eq(self, a, b): return self.op("setp.eq.f64", "p", a, b)
  def isnan(self, a): return self.op("setp.nan.f64", "p", a, a)
  def por(self, p, q): return self.op("or.pred", "p", p, q)
  def sel(self, p, a, b): return self.op("selp.f64", "fd", a, b, p)
  def isel(self, p, a, b): return self.op("selp.s32", "r", str(a), str(b), p)
  def quadrant(self, q):
    k = self.op("cvt.rzi.s64.f64", "rd", q)
    return (self.op("setp.ne.b64", "p", self.op("and.b64", "rd", k, "1"), "0"), self.op("setp.ne.b64", "p", self.op("and.b64", "rd", k, "2"), "0"))

  # *** the walk ***
  def render(self) -> str:
    # constants first: a register set inside a loop that ran zero times would be undefined after it
    for u in self.uops:
      if u.op is Ops.CONST: self.r[u] = self.const(u.arg, u.dtype)
    for u in self.uops:
      op, dt, src = u.op, u.dtype, u.src
      if op is Ops.DEFINE_GLOBAL:
        self.params.append(((0, u.arg, ""), f".param .u64 data{u.arg}"))
        self.r[u] = self.op("cvta.to.global.u64", "rd", self.op("ld.param.u64", "rd", f"[data{u.arg}]"))
      elif op is Ops.DEFINE_VAR:
        self.params.append(((1, 0, u.arg[0]), f".param .s32 var_{u.arg[0]}"))
        self.r[u] = self.op("ld.param.s32", "r", f"[var_{u.arg[0]}]")
      elif op is Ops.DEFINE_LOCAL:
        self.shared.append(f".shared .align 16 .b8 {u.arg[0]}[{u.arg[1] * dt.base.itemsize}];")
        self.r[u] = self.op("mov.u64", "rd", u.arg[0])
      elif op is Ops.SPECIAL:
        kind, axis = u.arg[0][0], _XYZ[int(u.arg[0][-1])]
        if kind == "g": self.r[u] = self.op("mov.u32", "r", f"%ctaid.{axis}")
        elif kind == "l": self.r[u] = self.op("mov.u32", "r", f"%tid.{axis}")
        else:
          ids = [self.op("mov.u32", "r", f"%{s}.{axis}") for s in ("ctaid", "ntid", "tid")]
          self.r[u] = self.op("mad.lo.s32", "r", *ids)
      elif op is Ops.CONST: pass
      elif op is Ops.RANGE:
        k = self.loops[u] = len(self.loops)
        self.scopes.append((dict(self.f32cache), dict(self.addr)))  # what is computed inside the loop stays inside it
        self.r[u] = self.op(_mov(reg_class(dt)), reg_class(dt), self.r[src[0]])
        self.lines.append(f"LOOP_{k}:")
        self.emit(f"@{self.op(f'setp.ge.{_int_t(dt)}', 'p', self.r[u], self.r[src[1]])} bra END_{k};")
      elif op is Ops.ENDRANGE:
        rng = src[0]
        k = self.loops[rng]
        self.emit(f"add.{_int_t(rng.dtype)} {self.r[rng]}, {self.r[rng]}, 1;")
        self.emit(f"bra LOOP_{k};")
        self.lines.append(f"END_{k}:")
        self.f32cache, self.addr = self.scopes.pop()
      elif op is Ops.DEFINE_ACC: self.r[u] = self.op(_mov(reg_class(dt)), reg_class(dt), self.r[src[0]])
      elif op is Ops.ASSIGN:
        self.emit(f"{_mov(reg_class(dt))} {self.r[src[0]]}, {self.r[src[1]]};")
        self.r[u] = self.r[src[0]]
        for cache in [self.f32cache] + [c for c, _ in self.scopes]: cache.pop(src[0], None)  # its f32 copies are stale now
      elif op is Ops.LOAD: self.r[u] = self.load(u)
      elif op is Ops.STORE: self.store(u)
      elif op is Ops.BARRIER: self.emit("bar.sync 0;")
      elif op is Ops.CAST: self.r[u] = self.cast(self.r[src[0]], src[0].dtype, dt)
      elif op is Ops.BITCAST: self.r[u] = self.bitcast(self.r[src[0]], src[0].dtype, dt)
      elif op in (Ops.NOOP, Ops.SINK): pass
      else: self.r[u] = self.alu(u)
    return self.assemble()

  def space(self, buf: UOp) -> str: return "shared" if isinstance(buf.dtype, PtrDType) and buf.dtype.local else "global"

  def load(self, u: UOp) -> str:
    src = [s for s in u.src if s.op is not Ops.BARRIER]  # a BARRIER source only orders the load after it
    buf, idx, gate, alt = src[0], src[1], (src[2] if len(src) > 2 else None), (src[3] if len(src) > 3 else None)
    addr, dt = self.address(buf, idx), u.dtype
    cls = "r" if dt == dtypes.bool else reg_class(dt)
    d = self.new(cls)
    if gate is not None:
      self.emit(f"selp.b32 {d}, 1, 0, {self.r[alt]};" if dt == dtypes.bool else f"{_mov(cls)} {d}, {self.r[alt]};")
    self.emit(f"{'@' + self.r[gate] + ' ' if gate is not None else ''}ld.{self.space(buf)}.{_MEM[dt]} {d}, {addr};")
    return self.op("setp.ne.b32", "p", d, "0") if dt == dtypes.bool else d

  def store(self, u: UOp) -> None:
    buf, idx, val = u.src[0], u.src[1], u.src[2]
    v = self.r[val] if val.dtype != dtypes.bool else self.op("selp.b32", "r", "1", "0", self.r[val])
    pred = f"@{self.r[u.src[3]]} " if len(u.src) > 3 else ""
    self.emit(f"{pred}st.{self.space(buf)}.{_MEM[buf.dtype.base]} {self.address(buf, idx)}, {v};")

  def assemble(self) -> str:
    specials = [u.arg for u in self.uops if u.op is Ops.SPECIAL]
    bounds = ""
    if any(a[0][0] == "l" for a in specials) and not any(a[0][0] == "i" for a in specials):
      bounds = f".maxntid {prod(a[1] for a in specials if a[0][0] == 'l')}, 1, 1\n"
    regs = [f"  .reg {_CLASS_DECL[c]} %{c}<{n}>;" for c, n in sorted(self.counts.items())]
    return "\n".join([f"// tinycore PTX for {self.ren.arch}", f".version {ptx_version(self.ren.arch)}", f".target {self.ren.arch}",
                      ".address_size 64", "", f".visible .entry {self.name}(", ",\n".join(f"  {p}" for _, p in sorted(self.params)), f")\n{bounds}{{",
                      *regs, *(f"  {s}" for s in self.shared), *self.lines, "  ret;", "}", ""])
