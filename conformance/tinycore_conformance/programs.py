"""Hand-built linear UOp programs, in the forms the code generator emits, covering what a renderer must handle:
ids, loops with accumulators, symbolic sizes, local memory and barriers, gated loads and stores, every ALU op per dtype,
every cast and bitcast, and special float constants. Backends' own compile-only tests use them (no codegen needed):
`from tinycore_conformance import programs`. They are GPU-shaped: most read thread ids (SPECIAL gidxN, lidxN, idxN), which
only a renderer with has_local=True is ever given; the code generator gives a has_local=False renderer loops instead,
and the conformance levels build their programs for what the renderer declares."""
from __future__ import annotations
import math
from tinycore.dtype import DType, dtypes
from tinycore.ops import Ops
from tinycore.uop.uop import UOp

class Prog:
  """Appends UOps in program order (each node once), as a linearizer would."""
  def __init__(self) -> None: self.uops: list[UOp] = []; self._seen: set[int] = set()
  def __call__(self, op: Ops, dtype: DType = dtypes.void, src: tuple = (), arg=None) -> UOp:
    u = UOp(op, dtype, tuple(src), arg)
    if id(u) not in self._seen: self._seen.add(id(u)); self.uops.append(u)
    return u
  def add(self, u: UOp) -> UOp: return self(u.op, u.dtype, u.src, u.arg)
  def const(self, dt: DType, v) -> UOp: return self(Ops.CONST, dt, arg=v)
  def glob(self, i: int, dt: DType) -> UOp: return self(Ops.DEFINE_GLOBAL, dt.ptr(), arg=i)
  def special(self, name: str, n: int) -> UOp: return self(Ops.SPECIAL, dtypes.int32, arg=(name, n))
  def alu(self, op: Ops, dt: DType, *src: UOp) -> UOp: return self(op, dt, src)
  def load(self, buf: UOp, idx: UOp, gate: UOp | None = None, alt: UOp | None = None) -> UOp:
    return self(Ops.LOAD, buf.dtype.base, (buf, idx) + ((gate, alt) if gate is not None else ()))
  def store(self, buf: UOp, idx: UOp, val: UOp, gate: UOp | None = None) -> UOp:
    return self(Ops.STORE, dtypes.void, (buf, idx, val) + ((gate,) if gate is not None else ()))

def _gid(p: Prog, local: int = 64, groups: int = 16) -> UOp:
  g, l = p.special("gidx0", groups), p.special("lidx0", local)
  return p.alu(Ops.ADD, dtypes.int32, p.alu(Ops.MUL, dtypes.int32, g, p.const(dtypes.int32, local)), l)

def elementwise(dt: DType = dtypes.float32, local: int = 64, groups: int = 16) -> list[UOp]:
  """data0[i] = data1[i] + data2[i], i = gidx0*local + lidx0."""
  p = Prog()
  out, a, b = p.glob(0, dt), p.glob(1, dt), p.glob(2, dt)
  i = _gid(p, local, groups)
  p.store(out, i, p.alu(Ops.ADD, dt, p.load(a, i), p.load(b, i)))
  return p.uops

def reduce_sum(dt: DType = dtypes.float32) -> list[UOp]:
  """data0[g] = sum of data1[g*n + r] for r < n, n a symbolic size: a loop, an accumulator, a DEFINE_VAR."""
  p = Prog()
  out, a = p.glob(0, dt), p.glob(1, dt)
  n = p(Ops.DEFINE_VAR, dtypes.int32, arg=("n", 1, 1024))
  g = p.special("gidx0", 32)
  r = UOp(Ops.RANGE, dtypes.int32, (p.const(dtypes.int32, 0), n), arg=0)
  acc = p(Ops.DEFINE_ACC, dt, (p.const(dt, 0), r), arg=0)  # the accumulator is declared before its loop opens
  p.add(r)
  x = p.load(a, p.alu(Ops.ADD, dtypes.int32, p.alu(Ops.MUL, dtypes.int32, g, n), r))
  p(Ops.ASSIGN, dt, (acc, p.alu(Ops.ADD, dt, acc, x)))
  p(Ops.ENDRANGE, dtypes.void, (r,))
  p.store(out, g, acc)
  return p.uops

def shared_reverse(dt: DType = dtypes.float32, n: int = 64) -> list[UOp]:
  """Reverse each block of n through local memory: store, barrier, load another thread's element."""
  p = Prog()
  out, a = p.glob(0, dt), p.glob(1, dt)
  g, l = p.special("gidx0", 8), p.special("lidx0", n)
  i = p.alu(Ops.ADD, dtypes.int32, p.alu(Ops.MUL, dtypes.int32, g, p.const(dtypes.int32, n)), l)
  smem = p(Ops.DEFINE_LOCAL, dt.ptr(local=True), arg=("temp0", n))
  p.store(smem, l, p.load(a, i))
  p(Ops.BARRIER, dtypes.void, ())
  rev = p.alu(Ops.ADD, dtypes.int32, p.const(dtypes.int32, n - 1), p.alu(Ops.MUL, dtypes.int32, l, p.const(dtypes.int32, -1)))
  p.store(out, i, p.load(smem, rev))
  return p.uops

def gated(dt: DType = dtypes.float32) -> list[UOp]:
  """out[i] = i < n ? a[i] : 0, stored only where i < n; ids as global ids ("idx0")."""
  p = Prog()
  out, a = p.glob(0, dt), p.glob(1, dt)
  n = p(Ops.DEFINE_VAR, dtypes.int32, arg=("n", 1, 4096))
  i = p.special("idx0", 4096)
  ok = p.alu(Ops.CMPLT, dtypes.bool, i, n)
  p.store(out, i, p.load(a, i, ok, p.const(dt, 0)), ok)
  return p.uops

def _ops_for(dt: DType) -> tuple[list[Ops], list[Ops]]:
  """(binary ops, unary ops) defined on dt."""
  if dt == dtypes.bool: return [Ops.AND, Ops.OR, Ops.XOR, Ops.MAX], [Ops.NEG]
  common = [Ops.ADD, Ops.MUL, Ops.MAX]
  if dtypes.is_float(dt): return common, [Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.NEG]
  return common + [Ops.IDIV, Ops.MOD, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR], [Ops.NEG]

def all_ops(dt: DType) -> list[UOp]:
  """Every ALU op defined on dt, WHERE, MULACC, both comparisons, and the edge constants of dt.
  data0[k*N+i] gets the k-th dt result, data3[k*N+i] the k-th comparison."""
  p = Prog()
  out, a, b, cmp_out = p.glob(0, dt), p.glob(1, dt), p.glob(2, dt), p.glob(3, dtypes.bool)
  i = p.special("idx0", 256)
  x, y = p.load(a, i), p.load(b, i)
  binary, unary = _ops_for(dt)
  results = [p.alu(op, dt, x, y) for op in binary] + [p.alu(op, dt, x) for op in unary]
  if dt != dtypes.bool: results.append(p.alu(Ops.MULACC, dt, x, y, x))
  cmps = [p.alu(Ops.CMPLT, dtypes.bool, x, y), p.alu(Ops.CMPNE, dtypes.bool, x, y)]
  results.append(p.alu(Ops.WHERE, dt, cmps[0], x, y))
  if dtypes.is_float(dt): consts = [math.inf, -math.inf, math.nan, 0.5, -0.0]
  elif dt == dtypes.bool: consts = [True, False]
  else: consts = [dtypes.min(dt), dtypes.max(dt), 0, 1]
  results += [p.alu(Ops.ADD if dt != dtypes.bool else Ops.OR, dt, x, p.const(dt, c)) for c in consts]
  for k, r in enumerate(results): p.store(out, p.alu(Ops.ADD, dtypes.int32, i, p.const(dtypes.int32, 256 * k)), r)
  for k, c in enumerate(cmps): p.store(cmp_out, p.alu(Ops.ADD, dtypes.int32, i, p.const(dtypes.int32, 256 * k)), c)
  return p.uops

def casts(src: DType, targets: tuple[DType, ...]) -> list[UOp]:
  """data{k+1}[i] = (targets[k])data0[i] for every target; then bitcasts of data0 to the same-sized targets."""
  p = Prog()
  a = p.glob(0, src)
  outs = [p.glob(k + 1, t) for k, t in enumerate(targets)]
  i = p.special("idx0", 256)
  x = p.load(a, i)
  for o, t in zip(outs, targets): p.store(o, i, p.alu(Ops.CAST, t, x) if t != src else x)
  for o, t in zip(outs, targets):
    if t != src and t.itemsize == src.itemsize and dtypes.bool not in (t, src):
      p.store(o, p.alu(Ops.ADD, dtypes.int32, i, p.const(dtypes.int32, 256)), p(Ops.BITCAST, t, (x,)))
  return p.uops

def suite(dts: tuple[DType, ...]) -> dict[str, list[UOp]]:
  """Every kernel above for the given dtypes, by name."""
  ks = {"elementwise": elementwise(), "reduce_sum": reduce_sum(), "shared_reverse": shared_reverse(), "gated": gated()}
  for dt in dts:
    ks[f"all_ops_{dt.name}"] = all_ops(dt)
    ks[f"casts_{dt.name}"] = casts(dt, dts)
    if dt != dtypes.bool: ks[f"shared_reverse_{dt.name}"] = shared_reverse(dt)
  return ks

def codegen_programs(renderer) -> dict[str, str]:
  """Source of the kernels the core's own pipeline makes for `renderer` (scheduled on the PYTHON device, optimized with the
  renderer's capabilities: locals, grouped reduces with barriers, upcasts): name -> rendered source."""
  from tinycore import Tensor
  from tinycore.codegen import get_kernel, get_program
  D = "PYTHON"
  a, b = Tensor.empty(64, 64, device=D), Tensor.empty(64, 64, device=D)  # empty: nothing is computed to make inputs
  exprs = {"add": a + b, "sum_axis": a.sum(axis=1), "sum_all": Tensor.empty(4096, device=D).sum(), "max_axis": a.max(axis=0),
           "matmul": a @ b, "conv2d": Tensor.empty(2, 3, 16, 16, device=D).conv2d(Tensor.empty(4, 3, 3, 3, device=D)),
           "half_exp": (a.cast(dtypes.half) * 2).exp(), "int_arith": Tensor.arange(256, device=D) * 7 // 3 % 5,
           "where_sqrt_log": (a > 0.5).where(a, b).sqrt().log()}
  if dtypes.bfloat16 in renderer.supported_dtypes(): exprs["bf16_sin"] = a.cast(dtypes.bfloat16).sin()
  progs: dict[str, str] = {}
  for name, t in exprs.items():
    for si in t.schedule():
      if si.ast.op is not Ops.SINK: continue
      p = get_program(get_kernel(si.ast, renderer), renderer.device)
      progs[f"{name}:{p.name}"] = p.src
  return progs
