"""LLVM IR text from the linear UOp program (the program is documented at the top of tinycore/renderer/cstyle.py).

How the program becomes IR (one function per kernel, SSA throughout, no stack memory):
  DEFINE_GLOBAL i    `ptr noalias %data{i}` (C's restrict); a bool is i1 in registers and one byte (i8) in memory
  DEFINE_VAR         `i32 %v.{name}`, after the buffers, sorted by name
  RANGE .. ENDRANGE  blocks loopN (header: the counter's phi and the test), loopN.body, loopN.latch (the step, the jump
                     back) and loopN.exit; an accumulator assigned inside a loop but defined outside it gets a phi in
                     the header, and after the loop its value is that phi (right also for a loop that runs 0 times)
  DEFINE_ACC/ASSIGN  no memory: an accumulator is its current SSA value, replaced by each ASSIGN
  gated LOAD/STORE   a branch around the access (the load must not happen where the gate is false), a phi after a load
  vectors            `<N x T>`: every ALU op works on whole vectors; GEP is extractelement, VECTORIZE insertelements
  math               SQRT is llvm.sqrt (the instruction); EXP2, LOG2, SIN are llvm.exp2/log2/sin, which become calls to
                     libm's exp2f/log2f/sinf (exp2/log2/sin for double; within 1 ulp); on float vectors EXP2 is the
                     polynomial of VEXP2 below (CLANG's approach), as libm would be called lane by lane
  floats             IEEE: only `contract` is allowed (a*b+c may become one fma, as CLANG's -ffp-contract=fast)

Multi-core: the outermost loop, when it encloses every store, carries no accumulator and the kernel does enough work,
is cut into `chunks` pieces: the function takes two more i32 arguments `%core_id` and `%core_count` and runs only its
piece of that loop; `@{name}_chunks` (always defined, 1 for a kernel that is not cut) tells the runtime how many."""
from __future__ import annotations
import struct
from collections import defaultdict
from typing import Callable, TypeVar
import numpy as np
from tinycore.backend import Renderer
from tinycore.dtype import DType, PtrDType, dtypes, f32_to_bf16
from tinycore.ops import GroupOp, Ops
from tinycore.uop.uop import UOp

T = TypeVar("T")

SCALAR = {dtypes.bool: "i1", dtypes.int8: "i8", dtypes.uint8: "i8", dtypes.int16: "i16", dtypes.uint16: "i16", dtypes.int32: "i32",
          dtypes.uint32: "i32", dtypes.int64: "i64", dtypes.uint64: "i64", dtypes.float16: "half", dtypes.bfloat16: "bfloat",
          dtypes.float32: "float", dtypes.float64: "double"}

def ltype(dt: DType, mem: bool = False) -> str:
  """The LLVM type of a value of dt (`mem`: as stored in a buffer, where a bool is a byte); `ptr` for a buffer."""
  if isinstance(dt, PtrDType): return "ptr"
  s = "i8" if mem and dt.scalar() == dtypes.bool else SCALAR[dt.scalar()]
  return f"<{dt.count} x {s}>" if dt.count > 1 else s

def literal(x: float | int | bool, dt: DType) -> str:
  """A scalar constant as LLVM writes it: floats by their bits (a float is written as the double of equal value)."""
  with np.errstate(over="ignore"):  # a constant beyond the dtype's range is its infinity
    if dt == dtypes.float16: return f"0xH{int(np.array(x, np.float16).view(np.uint16)):04X}"
    if dt == dtypes.bfloat16: return f"0xR{int(f32_to_bf16(np.array([x], np.float32))[0]):04X}"
    if dtypes.is_float(dt): return "0x" + struct.pack(">d", float(np.float32(x)) if dt == dtypes.float32 else float(x)).hex().upper()
  if dt == dtypes.bool: return "true" if x else "false"
  bits = 8 * dt.itemsize
  v = int(x) & ((1 << bits) - 1)
  return str(v - (1 << bits) if v >> (bits - 1) else v)

def const(x: float | int | bool, dt: DType) -> str:
  """A constant of dt, a vector one splatted."""
  return f"splat ({SCALAR[dt.scalar()]} {literal(x, dt.scalar())})" if dt.count > 1 else literal(x, dt)

def kind(dt: DType) -> str:
  """f (float), b (bool), u (unsigned), s (signed): what decides an instruction's spelling."""
  return "f" if dtypes.is_float(dt) else "b" if dt.scalar() == dtypes.bool else "u" if dtypes.is_unsigned(dt) else "s"

def _ints(ins: str) -> dict[str, str]: return {"s": ins, "u": ins, "b": ins}
# binary ops as one instruction, by operand kind
BINARY: dict[Ops, dict[str, str]] = {
  Ops.ADD: {"f": "fadd contract", "s": "add", "u": "add", "b": "or"}, Ops.MUL: {"f": "fmul contract", "s": "mul", "u": "mul", "b": "and"},
  Ops.IDIV: {"s": "sdiv", "u": "udiv"}, Ops.MOD: {"f": "frem", "s": "srem", "u": "urem"},
  Ops.AND: _ints("and"), Ops.OR: _ints("or"), Ops.XOR: _ints("xor"), Ops.SHL: _ints("shl"), Ops.SHR: {"s": "ashr", "u": "lshr"},
  Ops.CMPLT: {"f": "fcmp olt", "s": "icmp slt", "u": "icmp ult", "b": "icmp ult"}, Ops.CMPNE: {"f": "fcmp une", **_ints("icmp ne")},
}
INTRINSIC = {Ops.SQRT: "sqrt", Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin"}

# exp2 on a float vector: 2^x = 2^r * 2^f with r = round(x), |f| <= 1/2; 2^f by its Taylor polynomial of degree 7
# (relative error under 1e-8 before rounding); 2^r applied as two halves so results from the smallest subnormal to
# overflow come out right; x clamped to +-160 first (beyond it the result is 0 or inf anyway); NaN stays NaN.
EXP2_TAYLOR = (1.0, 0.6931471805599453, 0.2402265069591007, 0.05550410866482158, 0.009618129107628477, 0.0013333558146428443,
               0.00015403530393381608, 1.525273380405984e-05)
def vexp2(n: int) -> str:
  """The definition of @tc.exp2.v{n}, exp2 on <n x float> (see EXP2_TAYLOR)."""
  f, i = f"<{n} x float>", f"<{n} x i32>"
  def c(x: float) -> str: return const(x, dtypes.float32.vec(n))
  body = [f"%lo = fcmp olt {f} %x, {c(-160.0)}", f"%y0 = select <{n} x i1> %lo, {f} {c(-160.0)}, {f} %x",
          f"%hi = fcmp ogt {f} %y0, {c(160.0)}", f"%y = select <{n} x i1> %hi, {f} {c(160.0)}, {f} %y0",
          f"%r0 = fadd {f} %y, {c(12582912.0)}", f"%r = fsub {f} %r0, {c(12582912.0)}", f"%f = fsub {f} %y, %r",
          f"%i = fptosi {f} %r to {i}", f"%i1 = ashr {i} %i, splat (i32 1)", f"%i2 = sub {i} %i, %i1"]
  prev = c(EXP2_TAYLOR[7])
  for k in range(6, -1, -1):
    body += [f"%m{k} = fmul contract {f} {prev}, %f", f"%p{k} = fadd contract {f} %m{k}, {c(EXP2_TAYLOR[k])}"]
    prev = f"%p{k}"
  for h in ("1", "2"):  # 2^(i{h}) built from its exponent bits
    body += [f"%e{h} = add {i} %i{h}, splat (i32 127)", f"%b{h} = shl {i} %e{h}, splat (i32 23)", f"%s{h} = bitcast {i} %b{h} to {f}"]
  body += [f"%q = fmul {f} %p0, %s1", f"%q2 = fmul {f} %q, %s2", f"%nan = fcmp uno {f} %x, %x", f"%out = select <{n} x i1> %nan, {f} %x, {f} %q2",
           f"ret {f} %out"]
  return f"define internal {f} @tc.exp2.v{n}({f} %x) alwaysinline {{\n" + "\n".join("  " + b for b in body) + "\n}"

def carried_accumulators(uops: list[UOp]) -> dict[UOp, list[UOp]]:
  """For each loop, the accumulators it carries: assigned inside it, defined before it (each needs a phi there)."""
  pos = {u: i for i, u in enumerate(uops)}
  end = {u.src[0]: i for i, u in enumerate(uops) if u.op is Ops.ENDRANGE}
  out: dict[UOp, list[UOp]] = defaultdict(list)
  for i, u in enumerate(uops):
    if u.op is not Ops.ASSIGN: continue
    acc = u.src[0]
    while acc.op is Ops.ASSIGN: acc = acc.src[0]
    for r in uops[pos[acc]:i]:
      if r.op is Ops.RANGE and end[r] > i and acc not in out[r]: out[r].append(acc)
  return out

def loop_to_split(uops: list[UOp], carried: dict[UOp, list[UOp]], min_work: int) -> UOp | None:
  """The outermost loop when the kernel may be cut along it (see the module docstring), else None."""
  ranges = [u for u in uops if u.op is Ops.RANGE]
  if not ranges or carried.get(outer := ranges[0]): return None
  start, end = uops.index(outer), next(i for i, u in enumerate(uops) if u.op is Ops.ENDRANGE and u.src[0] is outer)
  if any(u.op in (Ops.STORE, Ops.RANGE) for u in uops[:start] + uops[end + 1:]): return None
  mult, stack, work = 1, [], 0
  for u in uops[start:end]:
    if u.op is Ops.RANGE:
      stack.append(mult)
      mult *= max(1, u.src[1].vmax - u.src[0].vmin)  # a symbolic bound counts as its largest value
    elif u.op is Ops.ENDRANGE: mult = stack.pop()
    elif u.op is not Ops.CONST: work += mult
  return outer if work >= min_work else None

class LLVMRenderer(Renderer):
  """LLVM IR for the host CPU (see the module docstring): every dtype (bfloat16 only where the CPU converts float to
  bfloat16 itself: elsewhere LLVM calls compiler-rt's __truncsfbf2, which the process lacks), float32/int32/uint32
  vectors of the host's widths, no local ids. `threads` > 1 lets it cut the outer loop into threads*chunks_per_core pieces."""
  # read by the code generator: which ops stay whole vectors and which element dtypes vectors may have (int32/uint32
  # too: the random-number kernels are then vector code, 10x less IR to optimize and faster than scalar code)
  vector_alu = frozenset(GroupOp.ALU - {Ops.IDIV, Ops.MOD})  # integer divisions get the core's guard lane by lane
  vector_dtypes = (dtypes.float32, dtypes.int32, dtypes.uint32)
  def __init__(self, device: str = "LLVM", vector_widths: tuple[int, ...] = (4,), threads: int = 1, chunks_per_core: int = 4,
               min_work: int = 1 << 18, bfloat16: bool = False, vector_registers: int = 16, cache_bytes: int = 0, cpu: str = ""):
    super().__init__(device=device, has_local=False, has_shared=False, vector_widths=vector_widths, vector_registers=vector_registers,
                     cache_bytes=cache_bytes, dtypes=tuple(d for d in dtypes.all if d != dtypes.bfloat16 or bfloat16))
    self.threads, self.chunks_per_core, self.min_work, self.cpu = threads, chunks_per_core, min_work, cpu
  @property
  def cachekey(self) -> str:
    """What besides its fields changes what this renderer writes (rendered programs are cached on disk by it)."""
    # (the CPU model: a choice of opts, BEAM's too, is tuned to the CPU it was made on)
    return f"threads={self.threads}:chunks={self.chunks_per_core}:minwork={self.min_work}:cpu={self.cpu}"
  def render(self, name: str, uops: list[UOp]) -> str:
    return IRWriter(name, uops, self).source()

class IRWriter:
  """One kernel's IR, written in one walk over the program. `r` maps a UOp to its value's spelling (an SSA name or a
  constant); an accumulator's entry is its current value."""
  def __init__(self, name: str, uops: list[UOp], renderer: LLVMRenderer):
    self.name, self.uops = name, uops
    self.lines: list[str] = []
    self.r: dict[UOp, str] = {}
    self.n, self.block = 0, "entry"
    self.helpers: set[str] = set()
    self.carried = carried_accumulators(uops)
    self.split = loop_to_split(uops, self.carried, renderer.min_work) if renderer.threads > 1 else None
    self.chunks = 1
    if self.split is not None:
      lo, hi = self.split.src
      trips = hi.arg - lo.arg if lo.op is Ops.CONST and hi.op is Ops.CONST else None
      self.chunks = min(renderer.threads * renderer.chunks_per_core, trips or 1 << 30)
      if self.chunks <= 1: self.split, self.chunks = None, 1
    self.loops: dict[UOp, list[tuple[UOp, int, str, str]]] = {}

  # *** emitting ***
  def emit(self, line: str) -> None: self.lines.append("  " + line)
  def label(self, name: str) -> None:
    self.lines.append(f"{name}:")
    self.block = name
  def tmp(self) -> str:
    self.n += 1
    return f"%t{self.n}"
  def ins(self, text: str) -> str:
    """Emits `%tN = text` and returns %tN."""
    self.emit(f"{(t := self.tmp())} = {text}")
    return t
  def v(self, u: UOp) -> str:
    while u.op is Ops.ASSIGN: u = u.src[0]  # an ASSIGN stands for its accumulator's current value
    return self.r[u]
  def tv(self, u: UOp) -> str: return f"{ltype(u.dtype)} {self.v(u)}"

  # *** the walk ***
  def source(self) -> str:
    for u in self.uops:
      op = u.op
      if op is Ops.DEFINE_GLOBAL: self.r[u] = f"%data{u.arg}"
      elif op is Ops.DEFINE_VAR: self.r[u] = f"%v.{u.arg[0]}"
      elif op is Ops.CONST: self.r[u] = const(u.arg, u.dtype)
      elif op is Ops.RANGE: self.open_loop(u)
      elif op is Ops.ENDRANGE: self.close_loop(u.src[0])
      elif op is Ops.DEFINE_ACC: self.r[u] = self.v(u.src[0])
      elif op is Ops.ASSIGN:
        acc = u.src[0]
        while acc.op is Ops.ASSIGN: acc = acc.src[0]
        self.r[acc] = self.v(u.src[1])
      elif op is Ops.LOAD: self.load(u)
      elif op is Ops.STORE: self.store(u)
      elif op in (Ops.DEFINE_LOCAL, Ops.SPECIAL, Ops.BARRIER): raise NotImplementedError(f"LLVM has no local ids or memory: cannot render {op}")
      else: self.r[u] = self.alu(u)
    bufs = sorted((u for u in self.uops if u.op is Ops.DEFINE_GLOBAL), key=lambda u: u.arg)
    written = {u.src[0] for u in self.uops if u.op is Ops.STORE}
    args = [f"ptr noalias {'' if b in written else 'readonly '}%data{b.arg}" for b in bufs]
    args += [f"{ltype(u.dtype)} %v.{u.arg[0]}" for u in sorted((u for u in self.uops if u.op is Ops.DEFINE_VAR), key=lambda u: u.arg[0])]
    if self.split is not None: args += ["i32 %core_id", "i32 %core_count"]
    decls = sorted(self.helpers)
    return "\n".join([f"@{self.name}_chunks = constant i32 {self.chunks}", *decls,
                      f"define void @{self.name}({', '.join(args)}) nounwind {{", "entry:", *self.lines, "  ret void", "}"]) + "\n"

  # *** loops ***
  def open_loop(self, u: UOp) -> None:
    t, L, i = ltype(u.dtype), f"loop{u.arg}", f"%ridx{u.arg}"
    lo, hi = self.v(u.src[0]), self.v(u.src[1])
    if u is self.split: lo, hi = self.share(lo, hi, t, "%core_id"), self.share(lo, hi, t, self.ins("add i32 %core_id, 1"))
    pre = self.block
    self.emit(f"br label %{L}")
    self.label(L)
    self.emit(f"{i} = phi {t} [{lo}, %{pre}], [{i}.next, %{L}.latch]")
    self.loops[u] = []
    for acc in self.carried.get(u, []):  # the phi's back edge is known at ENDRANGE: a placeholder line until then
      self.loops[u].append((acc, len(self.lines), name := self.tmp(), f"[{self.r[acc]}, %{pre}]"))
      self.emit("")
      self.r[acc] = name
    self.r[u] = i
    self.emit(f"br i1 {self.ins(f'icmp slt {t} {i}, {hi}')}, label %{L}.body, label %{L}.exit")
    self.label(f"{L}.body")

  def close_loop(self, u: UOp) -> None:
    t, L, i = ltype(u.dtype), f"loop{u.arg}", f"%ridx{u.arg}"
    self.emit(f"br label %{L}.latch")
    self.label(f"{L}.latch")
    self.emit(f"{i}.next = add nsw {t} {i}, 1")
    self.emit(f"br label %{L}")
    for acc, line, name, entry in self.loops.pop(u):
      self.lines[line] = f"  {name} = phi {ltype(acc.dtype)} {entry}, [{self.r[acc]}, %{L}.latch]"
      self.r[acc] = name
    self.label(f"{L}.exit")

  def share(self, lo: str, hi: str, t: str, core: str) -> str:
    """lo + (hi-lo)*core/core_count: where this core's piece of the split loop starts (core+1: where it ends)."""
    lo64, hi64 = self.ins(f"sext {t} {lo} to i64"), self.ins(f"sext {t} {hi} to i64")
    n, c, cnt = self.ins(f"sub i64 {hi64}, {lo64}"), self.ins(f"sext i32 {core} to i64"), self.ins("sext i32 %core_count to i64")
    off = self.ins(f"sdiv i64 {self.ins(f'mul i64 {n}, {c}')}, {cnt}")
    return self.ins(f"trunc i64 {self.ins(f'add i64 {lo64}, {off}')} to {t}")

  # *** memory ***
  def address(self, buf: UOp, idx: UOp) -> str:
    return self.ins(f"getelementptr inbounds {ltype(buf.dtype.base.scalar(), mem=True)}, ptr {self.v(buf)}, {self.tv(idx)}")

  def gated(self, gate: UOp, then: Callable[[], T]) -> tuple[str, str, T]:
    """Runs `then` (which emits an access) in a block entered only where the gate is true; returns the block before,
    the block of the access and what `then` returned."""
    pre, L = self.block, f"gate{self.n}"
    self.emit(f"br i1 {self.v(gate)}, label %{L}.then, label %{L}.end")
    self.label(f"{L}.then")
    out = then()
    self.emit(f"br label %{L}.end")
    self.label(f"{L}.end")
    return pre, f"{L}.then", out

  def load(self, u: UOp) -> None:
    src = [x for x in u.src if x.op is not Ops.BARRIER]
    def access() -> str:
      x = self.ins(f"load {ltype(u.dtype, mem=True)}, ptr {self.address(src[0], src[1])}, align {u.dtype.scalar().itemsize}")
      return self.ins(f"trunc {ltype(u.dtype, mem=True)} {x} to {ltype(u.dtype)}") if u.dtype.scalar() == dtypes.bool else x
    if len(src) == 2:
      self.r[u] = access()
      return
    pre, then, x = self.gated(src[2], access)
    self.r[u] = self.ins(f"phi {ltype(u.dtype)} [{x}, %{then}], [{self.v(src[3])}, %{pre}]")

  def store(self, u: UOp) -> None:
    buf, idx, val = u.src[:3]
    def access() -> None:
      x = self.v(val)
      if val.dtype.scalar() == dtypes.bool: x = self.ins(f"zext {ltype(val.dtype)} {x} to {ltype(val.dtype, mem=True)}")
      self.emit(f"store {ltype(val.dtype, mem=True)} {x}, ptr {self.address(buf, idx)}, align {val.dtype.scalar().itemsize}")
    if len(u.src) > 3: self.gated(u.src[3], access)
    else: access()

  # *** values ***
  def alu(self, u: UOp) -> str:
    op, dt, src = u.op, u.dtype, u.src
    if op is Ops.VECTORIZE:
      vec = "poison"
      for i, s in enumerate(src): vec = self.ins(f"insertelement {ltype(dt)} {vec}, {self.tv(s)}, i32 {i}")
      return vec
    if op is Ops.GEP: return self.ins(f"extractelement {self.tv(src[0])}, i32 {u.arg}")
    if op is Ops.CAST: return self.cast(self.v(src[0]), src[0].dtype, dt)
    if op is Ops.BITCAST: return self.bitcast(self.v(src[0]), src[0].dtype, dt)
    sdt = src[0].dtype if op is not Ops.WHERE else dt
    k, t, a = kind(sdt), ltype(sdt), [self.v(s) for s in src]
    if op is Ops.WHERE: return self.ins(f"select {self.tv(src[0])}, {t} {a[1]}, {t} {a[2]}")
    if op is Ops.MULACC:
      m = self.ins(f"{BINARY[Ops.MUL][k]} {t} {a[0]}, {a[1]}")
      return self.ins(f"{BINARY[Ops.ADD][k]} {t} {m}, {a[2]}")
    if op is Ops.MAX:
      if k == "b": return self.ins(f"or {t} {a[0]}, {a[1]}")
      bt = ltype(dtypes.bool.vec(dt.count))
      if k == "f":  # NaN-propagating: a NaN `a` is kept (unordered with itself), a NaN `b` wins (a > NaN is false)
        c = self.ins(f"or {bt} {self.ins(f'fcmp ogt {t} {a[0]}, {a[1]}')}, {self.ins(f'fcmp uno {t} {a[0]}, {a[0]}')}")
      else: c = self.ins(f"icmp {'ugt' if k == 'u' else 'sgt'} {t} {a[0]}, {a[1]}")
      return self.ins(f"select {bt} {c}, {t} {a[0]}, {t} {a[1]}")
    if op is Ops.NEG:
      if k == "f": return self.ins(f"fneg contract {t} {a[0]}")
      return self.ins(f"xor {t} {a[0]}, {const(True, sdt)}" if k == "b" else f"sub {t} {const(0, sdt)}, {a[0]}")
    if op is Ops.RECIP: return self.ins(f"{'fdiv' if k == 'f' else 'sdiv' if k == 's' else 'udiv'} {t} {const(1, sdt)}, {a[0]}")
    if op in INTRINSIC: return self.math(INTRINSIC[op], a[0], sdt)
    if op in (Ops.SHL, Ops.SHR) and src[1].dtype != sdt: a[1] = self.cast(a[1], src[1].dtype, sdt)
    if op in BINARY and k in BINARY[op]: return self.ins(f"{BINARY[op][k]} {t} {a[0]}, {a[1]}")
    raise NotImplementedError(f"LLVM cannot render {op} on {sdt}")

  def math(self, fn: str, x: str, dt: DType) -> str:
    t = ltype(dt)
    if dt.scalar() == dtypes.bfloat16:  # computed in float, rounded once (libm has no bfloat16 functions)
      f32 = dtypes.float32.vec(dt.count)
      return self.cast(self.math(fn, self.cast(x, dt, f32), f32), f32, dt)
    if fn == "exp2" and dt.count > 1 and dt.scalar() == dtypes.float32:
      self.helpers.add(vexp2(dt.count))
      return self.ins(f"call {t} @tc.exp2.v{dt.count}({t} {x})")
    name = f"llvm.{fn}.{f'v{dt.count}' if dt.count > 1 else ''}{ {'half': 'f16', 'float': 'f32', 'double': 'f64'}[SCALAR[dt.scalar()]] }"
    self.helpers.add(f"declare {t} @{name}({t})")
    return self.ins(f"call {t} @{name}({t} {x})")

  def cast(self, x: str, a: DType, b: DType) -> str:
    """x of dtype a converted to dtype b with C's rules (see writing-a-backend.md, level 4)."""
    ta, tb, sa, sb = ltype(a), ltype(b), a.scalar(), b.scalar()
    if ta == tb and (sa == sb or not dtypes.is_float(sa)): return x  # int32 <-> uint32: the same bits
    if sb == dtypes.bool: return self.ins(f"{'fcmp une' if dtypes.is_float(sa) else 'icmp ne'} {ta} {x}, {const(0, a)}")
    fa, fb = dtypes.is_float(sa), dtypes.is_float(sb)
    if dtypes.bfloat16 in (sa, sb) and fa and fb and dtypes.float32 not in (sa, sb):  # through float: LLVM converts bfloat only to and from float
      return self.cast(self.cast(x, a, f32 := dtypes.float32.vec(a.count)), f32, b)
    if fa and fb: ins = "fpext" if sa.itemsize < sb.itemsize else "fptrunc"
    elif fa: ins = "fptoui" if dtypes.is_unsigned(sb) else "fptosi"
    elif fb: ins = "uitofp" if kind(sa) in "ub" else "sitofp"
    else: ins = "trunc" if sa.itemsize > sb.itemsize else "zext" if kind(sa) in "ub" else "sext"
    return self.ins(f"{ins} {ta} {x} to {tb}")

  def bitcast(self, x: str, a: DType, b: DType) -> str:
    if a.scalar() == dtypes.bool: return self.cast(x, a, b)  # a byte holding 0 or 1
    if b.scalar() == dtypes.bool: return self.ins(f"trunc {ltype(a)} {x} to {ltype(b)}")
    return x if ltype(a) == ltype(b) else self.ins(f"bitcast {ltype(a)} {x} to {ltype(b)}")
