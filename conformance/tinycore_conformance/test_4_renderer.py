"""Level 4, renderer: every op of the op set x every declared dtype, in hand-built linear programs that the device
renders, compiles and runs, compared with the same program on the PYTHON reference. The inputs include the edges:
NaN, +-inf, -0.0, the largest and smallest normal floats, integer min/max (wrapping on overflow), shifts by 0 and by
width-1, casts between every pair of declared dtypes (where C defines them), bitcasts between equal sizes; constants
of every kind; ops fused into one expression (where C's integer promotion and excess float precision hide); loops,
accumulators, gated loads and stores, and local memory with barriers where declared.

Many cases share one kernel (compiling is the slow part of every real backend); a kernel that fails to render,
compile or run is bisected so each failure is pinned on its own case, and --repro prints that case alone."""
from __future__ import annotations
import math
import numpy as np
import pytest
from tinycore.dtype import DType, dtypes
from tinycore.ops import Ops
from tinycore.uop.uop import UOp
from tinycore_conformance.target import Case, Prog, check_result
from tinycore_conformance.repro import case_repro
from tinycore_conformance.values import (ALL_DTYPES, dtname, edges, randoms, to_storage, pairs, compare, is_float, is_int, is_signed,
                                         bits, finfo, as_float, ulp, storage_np)

LAYER = 4
NUMERIC = [d for d in ALL_DTYPES if d != dtypes.bool]
INTS = [d for d in ALL_DTYPES if is_int(d)]
FLOATS = [d for d in ALL_DTYPES if is_float(d)]

def sentinel(dt: DType, n: int) -> np.ndarray:
  """An output buffer's initial bytes (0x5A): an element the kernel never wrote shows up as a difference."""
  return np.full(n * dt.itemsize, 0x5A, np.uint8).view(storage_np(dt)).copy()

def cycle(vals: list, n: int) -> list: return [vals[i % len(vals)] for i in range(n)]

def seed_of(*parts) -> int: return sum((i + 1) * sum(map(ord, str(p))) for i, p in enumerate(parts)) % 100000

# *** elementwise cases: out[i] = f(in0[i], in1[i], ...) in a loop ***

def ew_case(key: str, ins: list[tuple[DType, np.ndarray]], out_dt: DType, fn, check, seed: int | None = None) -> Case:
  n = len(ins[0][1]) if ins else 1
  def build(p: Prog, gl: list[UOp]) -> None:
    r = p.loop(n)
    p.store(gl[0], r, fn(*[Prog.load(g, r) for g in gl[1:]]))
    p.end(r)
  def chk(got, want): check(got[0], want[0], ins)
  return Case(key, [(out_dt, sentinel(out_dt, n))] + ins, build, chk, seed=seed)

def checker(out_dt: DType, what: str, mode: str = "exact", k: float = 0, atol_fn=None):
  def chk(got, want, ins):
    atol = atol_fn(ins) if atol_fn is not None else 0.0
    compare(got, want, out_dt, mode, k, atol, what=what, inputs=ins)
  return chk

# *** the ALU ops: which dtypes each applies to, and its inputs ***

UNARY_FLOAT = [Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP]
BINARY = [Ops.ADD, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR]
ALU_OPS = UNARY_FLOAT + [Ops.NEG] + BINARY + [Ops.WHERE, Ops.MULACC]

def applies(op: Ops, dt: DType) -> bool:
  if op in UNARY_FLOAT: return is_float(dt)
  if op in (Ops.NEG, Ops.MULACC): return dt != dtypes.bool
  if op in (Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR): return is_int(dt)
  if op in (Ops.AND, Ops.OR, Ops.XOR): return not is_float(dt)
  return True  # ADD MUL MAX CMPLT CMPNE WHERE: every dtype (on bool ADD is OR and MUL is AND)

ALU_PARAMS = [(op, dt) for op in ALU_OPS for dt in ALL_DTYPES if applies(op, dt)]

def _float_binary_edges(dt: DType) -> list[float]:
  mx, tiny = finfo(dt)
  return [0.0, -0.0, 1.0, -1.0, 2.5, -3.0, math.inf, -math.inf, math.nan, mx, -mx, tiny]

def _unary_inputs(op: Ops, dt: DType, rng) -> list:
  e = edges(dt, huge=op is not Ops.SIN)
  extra = {Ops.EXP2: [128.0, -150.0, 20.5, -20.5, 1024.0, 0.25], Ops.LOG2: [0.25, 1024.0, 3e4, 1e-2], Ops.SQRT: [0.25, 2.0, 1e4, 9.0],
           Ops.RECIP: [3.0, -7.0, 1e3, 0.1], Ops.SIN: [math.pi, -math.pi / 2, 100.0, 31.4]}.get(op, [])
  return e + extra + randoms(dt, 48, rng, scale=3.0 if op is Ops.EXP2 else 30.0)

def alu_case(op: Ops, dt: DType) -> Case:
  key = f"{op.name} {dtname(dt)}"
  seed = seed_of(op.name, dt.name)
  rng = np.random.default_rng(seed)
  out_dt = dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE) else dt
  mode, k, atol_fn = "exact", 0.0, None
  if op in UNARY_FLOAT or op is Ops.NEG:
    vals = [to_storage(_unary_inputs(op, dt, rng) if op is not Ops.NEG else edges(dt) + randoms(dt, 32, rng), dt)]
    if op in UNARY_FLOAT:
      mode = "ulp"
      k = {Ops.EXP2: 4, Ops.LOG2: 4, Ops.SIN: 4, Ops.SQRT: 3, Ops.RECIP: 3}[op] if dt in (dtypes.float32, dtypes.float64) else 2
      if op is Ops.SIN: atol_fn = lambda ins: ulp(1.0, dt)  # noqa: E731  sin near its zeros: an absolute bound
  elif op is Ops.WHERE:
    e = edges(dt)
    a, b = pairs(e, e[::-1][:4] + randoms(dt, 4, rng))
    cond = list(rng.integers(0, 2, len(a)).astype(bool))
    vals = [to_storage(cond, dtypes.bool), to_storage(a, dt), to_storage(b, dt)]
    ins = [(dtypes.bool, vals[0]), (dt, vals[1]), (dt, vals[2])]
    return ew_case(key, ins, dt, lambda c, x, y: UOp(Ops.WHERE, dt, (c, x, y)), checker(dt, key), seed)
  elif op is Ops.MULACC:
    e = [v for v in edges(dt) if not (is_float(dt) and abs(v) > 1e4 and math.isfinite(v))]
    n = 160
    trip = [list(rng.choice(np.array(e, dtype=object), n)) + randoms(dt, 48, rng, 10.0) for _ in range(3)]
    vals = [to_storage(t, dt) for t in trip]
    if is_float(dt):
      mode, k = "ulp", 1.0  # a fused multiply-add rounds once: allow the difference
      def atol_fn(ins):
        a, b, c = (as_float(x, dt) for _, x in ins)
        with np.errstate(all="ignore"): return 2 * ulp(a * b, dt) + 2 * ulp(c, dt)
    ins = [(dt, v) for v in vals]
    return ew_case(key, ins, dt, lambda a, b, c: UOp(Ops.MULACC, dt, (a, b, c)), checker(dt, key, mode, k, atol_fn), seed)
  else:  # binary
    if dt == dtypes.bool: e = [False, True]
    elif is_float(dt): e = _float_binary_edges(dt)
    else: e = edges(dt)
    a, b = pairs(e, e)
    a += randoms(dt, 48, rng)
    b += randoms(dt, 48, rng)
    if op in (Ops.SHL, Ops.SHR):
      w = bits(dt)
      amounts = [0, 1, w - 1, w // 2] + [int(x) for x in rng.integers(0, w, 8)]
      a, b = pairs(edges(dt) + randoms(dt, 8, rng), amounts)
    if op in (Ops.IDIV, Ops.MOD):  # C leaves x/0 and MIN/-1 undefined: not asked
      keep = [(x, y) for x, y in zip(a, b) if y != 0 and not (is_signed(dt) and x == dtypes.min(dt) and y == -1)]
      a, b = [x for x, _ in keep], [y for _, y in keep]
    vals = [to_storage(a, dt), to_storage(b, dt)]
    if op is Ops.MAX: mode = "nosign0"
  ins = [(dt, v) for v in vals]
  fn = (lambda *xs: UOp(op, out_dt, xs))
  return ew_case(key, ins, out_dt, fn, checker(out_dt, key, mode, k, atol_fn), seed)

def all_alu_cases(target) -> list[Case]:
  return [alu_case(op, dt) for op, dt in ALU_PARAMS if dt in target.declared]

@pytest.mark.cap("{op}")
@pytest.mark.parametrize("op,dtype", ALU_PARAMS, ids=[f"{op.name}-{dtname(dt)}" for op, dt in ALU_PARAMS])
def test_alu(target, batch, repro, op, dtype):
  target.require_dtype(dtype)
  res = batch.result("alu", lambda: all_alu_cases(target), f"{op.name} {dtname(dtype)}")
  repro.add(lambda: case_repro(res.case, target, res.src))
  check_result(res, target)

# *** casts between every pair of declared dtypes, on the values where C defines the conversion ***

CAST_PARAMS = [(s, d) for s in ALL_DTYPES for d in ALL_DTYPES if s != d]

def cast_case(src: DType, dst: DType) -> Case:
  key = f"CAST {dtname(src)} -> {dtname(dst)}"
  seed = seed_of("cast", src.name, dst.name)
  rng = np.random.default_rng(seed)
  extra = [0.1, 1 / 3, 1e-5, 65504.0, 1e30] if is_float(src) else []
  vals = to_storage(edges(src) + randoms(src, 40, rng, 1e3 if is_float(src) else 50.0) + extra, src)
  if is_float(src) and is_int(dst):  # float -> int is defined only where the truncated value fits
    f = as_float(vals, src)
    with np.errstate(invalid="ignore"): t = np.trunc(f)
    vals = vals[np.isfinite(f) & (t >= dtypes.min(dst)) & (t <= dtypes.max(dst))]
  ins = [(src, vals)]
  return ew_case(key, ins, dst, lambda x: UOp(Ops.CAST, dst, (x,)), checker(dst, key), seed)

@pytest.mark.cap("CAST to {dst}")
@pytest.mark.parametrize("dtype,dst", CAST_PARAMS, ids=[f"{dtname(s)}-{dtname(d)}" for s, d in CAST_PARAMS])
def test_cast(target, batch, repro, dtype, dst):
  target.require_dtype(dtype, dst)
  res = batch.result("cast", lambda: [cast_case(s, d) for s, d in CAST_PARAMS if s in target.declared and d in target.declared],
                     f"CAST {dtname(dtype)} -> {dtname(dst)}")
  repro.add(lambda: case_repro(res.case, target, res.src))
  check_result(res, target)

# *** bitcasts between dtypes of equal size ***

BITCAST_PARAMS = [(s, d) for s in NUMERIC for d in NUMERIC if s != d and s.itemsize == d.itemsize]

def _nan_bits(x: np.ndarray, dt: DType) -> np.ndarray:
  return np.isnan(as_float(x, dt)) if is_float(dt) else np.zeros(x.shape, bool)

def bitcast_case(src: DType, dst: DType) -> Case:
  key = f"BITCAST {dtname(src)} -> {dtname(dst)}"
  seed = seed_of("bitcast", src.name, dst.name)
  rng = np.random.default_rng(seed)
  u = f"u{src.itemsize}"
  raw = rng.integers(0, 2 ** (8 * src.itemsize), 64, dtype=np.uint64).astype(u)
  specials = to_storage([v for v in edges(src) if not (isinstance(v, float) and math.isnan(v))], src).view(u)
  pat = np.concatenate([specials, raw])
  xs, ys = pat.view(storage_np(src)), pat.view(storage_np(dst))
  keep = ~_nan_bits(xs, src) & ~_nan_bits(ys, dst)  # NaN payloads may be canonicalized: not asked
  vals = pat[keep].view(storage_np(src)).copy()
  return ew_case(key, [(src, vals)], dst, lambda x: UOp(Ops.BITCAST, dst, (x,)), checker(dst, key, "bits"), seed)

@pytest.mark.cap("BITCAST to {dst}")
@pytest.mark.parametrize("dtype,dst", BITCAST_PARAMS, ids=[f"{dtname(s)}-{dtname(d)}" for s, d in BITCAST_PARAMS])
def test_bitcast(target, batch, repro, dtype, dst):
  target.require_dtype(dtype, dst)
  res = batch.result("bitcast", lambda: [bitcast_case(s, d) for s, d in BITCAST_PARAMS if s in target.declared and d in target.declared],
                     f"BITCAST {dtname(dtype)} -> {dtname(dst)}")
  repro.add(lambda: case_repro(res.case, target, res.src))
  check_result(res, target)

# *** constants: stored directly, and used inside an expression ***

def const_values(dt: DType) -> list:
  if dt == dtypes.bool: return [False, True]
  if is_int(dt): return edges(dt)
  return edges(dt) + [0.1, 1 / 3, 1e-5, 123.456]

def const_case(dt: DType) -> Case:
  key = f"CONST {dtname(dt)}"
  cs = [dtypes.as_const(v, dt) if not (isinstance(v, float) and math.isnan(v)) else v for v in const_values(dt)]
  n = len(cs)
  ones = to_storage([1] * n, dt)
  def build(p: Prog, gl: list[UOp]) -> None:
    for i, c in enumerate(cs):
      cu = Prog.const(dt, c)
      p.store(gl[0], i, cu)
      p.store(gl[1], i, UOp(Ops.MUL, dt, (Prog.load(gl[2], Prog.i32(i)), cu)))
  ref_vals = [(dt, to_storage(cs, dt))]
  def chk(got, want):
    compare(got[0], want[0], dt, what=f"{key} stored", inputs=ref_vals)
    compare(got[1], want[1], dt, what=f"{key} times 1", inputs=ref_vals)
  return Case(key, [(dt, sentinel(dt, n)), (dt, sentinel(dt, n)), (dt, ones)], build, chk)

@pytest.mark.cap("CONST")
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtname)
def test_const(target, batch, repro, dtype):
  target.require_dtype(dtype)
  res = batch.result("const", lambda: [const_case(d) for d in ALL_DTYPES if d in target.declared], f"CONST {dtname(dtype)}")
  repro.add(lambda: case_repro(res.case, target, res.src))
  check_result(res, target)

# *** ops fused into one expression: each op's result must be of its dtype before the next op sees it ***

def _wider_float(target) -> DType: return dtypes.float64 if dtypes.float64 in target.declared else dtypes.float32

FUSED: dict[str, tuple] = {
  # name: (applies to, arity, builder(dt, wide) -> fn(*loads) -> UOp, float tolerance mode)
  "(a+b)<c": (NUMERIC, 3, lambda dt, w: lambda a, b, c: UOp(Ops.CMPLT, dtypes.bool, (UOp(Ops.ADD, dt, (a, b)), c)), "exact"),
  "(a*b)<c": (NUMERIC, 3, lambda dt, w: lambda a, b, c: UOp(Ops.CMPLT, dtypes.bool, (UOp(Ops.MUL, dt, (a, b)), c)), "exact"),
  "(a+b)!=c": (NUMERIC, 3, lambda dt, w: lambda a, b, c: UOp(Ops.CMPNE, dtypes.bool, (UOp(Ops.ADD, dt, (a, b)), c)), "exact"),
  "-a<b": (NUMERIC, 2, lambda dt, w: lambda a, b: UOp(Ops.CMPLT, dtypes.bool, (UOp(Ops.NEG, dt, (a,)), b)), "exact"),
  "max(a+b,c)": (NUMERIC, 3, lambda dt, w: lambda a, b, c: UOp(Ops.MAX, dt, (UOp(Ops.ADD, dt, (a, b)), c)), "nosign0"),
  "cast(a*b)": (NUMERIC, 2, lambda dt, w: lambda a, b: UOp(Ops.CAST, w, (UOp(Ops.MUL, dt, (a, b)),)), "exact"),
  "(a+b)//c": (INTS, 3, lambda dt, w: lambda a, b, c: UOp(Ops.IDIV, dt, (UOp(Ops.ADD, dt, (a, b)), c)), "exact"),
  "(a<<c)>>c": (INTS, 3, lambda dt, w: lambda a, b, c: UOp(Ops.SHR, dt, (UOp(Ops.SHL, dt, (a, c)), c)), "exact"),
  # an operand on both sides: a compiler that takes signed overflow for impossible folds these to b<0 and a (C's UB)
  "(a+b)<a": (INTS, 2, lambda dt, w: lambda a, b: UOp(Ops.CMPLT, dtypes.bool, (UOp(Ops.ADD, dt, (a, b)), a)), "exact"),
  "(a*b)//b": (INTS, 2, lambda dt, w: lambda a, b: UOp(Ops.IDIV, dt, (UOp(Ops.MUL, dt, (a, b)), b)), "exact"),
  "(a*b)+c": (NUMERIC, 3, lambda dt, w: lambda a, b, c: UOp(Ops.ADD, dt, (UOp(Ops.MUL, dt, (a, b)), c)), "fma"),
}
FUSED_PARAMS = [(name, dt) for name, (dts, *_) in FUSED.items() for dt in dts]

def fused_case(name: str, dt: DType, wide: DType) -> Case:
  dts, arity, mk, fmode = FUSED[name]
  key = f"fused {name} {dtname(dt)}"
  seed = seed_of(name, dt.name)
  rng = np.random.default_rng(seed)
  e = edges(dt)
  if is_float(dt): e = [v for v in e if not (isinstance(v, float) and abs(v) == finfo(dt)[1])]  # subnormal sums are FTZ's business
  n = 200
  cols = [list(rng.choice(np.array(e, dtype=object), n)) + randoms(dt, 40, rng, 20.0) for _ in range(arity)]
  if name in ("(a+b)//c",): cols[2] = [v if v not in (0, -1) else 3 for v in cols[2]]
  if name == "(a*b)//b": cols[1] = [v if v not in (0, -1) else 2 for v in cols[1]]
  if name == "(a<<c)>>c": cols[2] = list(rng.integers(0, bits(dt), len(cols[2])))
  if fmode == "fma" and is_float(dt):  # where a*b overflows, a fused multiply-add and a*b+c differ by design: not asked
    mx = finfo(dt)[0]
    keep = [i for i in range(len(cols[0])) if not (abs(float(cols[0][i]) * float(cols[1][i])) > mx / 2
                                                      and math.isfinite(float(cols[0][i])) and math.isfinite(float(cols[1][i])))]
    cols = [[c[i] for i in keep] for c in cols]
  ins = [(dt, to_storage(c, dt)) for c in cols]
  fn = mk(dt, wide)
  out_dt = fn(*[UOp(Ops.CONST, dt, arg=0)] * arity).dtype
  mode, k, atol_fn = ("exact", 0.0, None)
  if is_float(dt) and fmode == "fma":
    mode, k = "ulp", 1.0
    def atol_fn(ins):
      a, b, c = (as_float(x, dt) for _, x in ins)
      with np.errstate(all="ignore"): return 2 * ulp(a * b, dt) + 2 * ulp(c, dt)
  elif fmode == "nosign0": mode = "nosign0"
  return ew_case(key, ins, out_dt, fn, checker(out_dt, key, mode, k, atol_fn), seed)

@pytest.mark.cap("fused {name}")
@pytest.mark.parametrize("name,dtype", FUSED_PARAMS, ids=[f"{n}-{dtname(d)}" for n, d in FUSED_PARAMS])
def test_fused(target, batch, repro, name, dtype):
  target.require_dtype(dtype)
  wide = _wider_float(target)
  res = batch.result("fused", lambda: [fused_case(n, d, wide) for n, d in FUSED_PARAMS if d in target.declared], f"fused {name} {dtname(dtype)}")
  repro.add(lambda: case_repro(res.case, target, res.src))
  check_result(res, target)

# *** kernel structure: accumulators, gated loads and stores, nested loops ***

def acc_case(dt: DType) -> Case:
  """out_sum[i] = sum_j x[i*M+j], out_max[i] = max_j x[i*M+j]: DEFINE_ACC/ASSIGN in a loop nested in another."""
  key = f"accumulate {dtname(dt)}"
  N, M = 6, 37
  seed = seed_of("acc", dt.name)
  rng = np.random.default_rng(seed)
  x = to_storage(cycle(edges(dt, huge=False), N * M - 60) + randoms(dt, 60, rng, 10.0), dt)
  if is_float(dt): x = to_storage(np.nan_to_num(as_float(x, dt), nan=1.0, posinf=3.0, neginf=-3.0), dt)
  def build(p: Prog, gl: list[UOp]) -> None:
    i = p.loop(N)
    j = p.range(M)
    s = p.acc(dt, 0, j)
    m = p.acc(dt, dtypes.min(dt), j)
    p.begin(j)
    v = Prog.load(gl[2], UOp(Ops.ADD, dtypes.int32, (UOp(Ops.MUL, dtypes.int32, (i, Prog.i32(M))), j)))
    a1 = p.assign(s, UOp(Ops.ADD, dt, (s, v)))
    a2 = p.assign(m, UOp(Ops.MAX, dt, (m, v)))
    p.end(j)
    p.store(gl[0], i, a1)
    p.store(gl[1], i, a2)
    p.end(i)
  def chk(got, want):
    if is_float(dt):
      tol = M * ulp(np.abs(as_float(x, dt)).reshape(N, M).max(axis=1), dt)
      compare(got[0], want[0], dt, "ulp", 1.0, tol, what=f"{key}: sum")
    else: compare(got[0], want[0], dt, what=f"{key}: sum")
    compare(got[1], want[1], dt, "nosign0", what=f"{key}: max")
  return Case(key, [(dt, sentinel(dt, N)), (dt, sentinel(dt, N)), (dt, x)], build, chk, seed=seed)

def gated_load_case(dt: DType) -> Case:
  """out[i] = i >= 3 ? x[i-3] : alt; the load is never performed (index -3..-1) where the gate is false."""
  key = f"gated LOAD {dtname(dt)}"
  n = 40
  x = to_storage(cycle(edges(dt), n - 3), dt)
  alt = [v for v in edges(dt) if v][-1]
  def build(p: Prog, gl: list[UOp]) -> None:
    r = p.loop(n)
    gate = UOp(Ops.CMPLT, dtypes.bool, (Prog.i32(2), r))
    idx = UOp(Ops.ADD, dtypes.int32, (r, Prog.i32(-3)))
    alt_c = dtypes.as_const(alt, dt) if not (isinstance(alt, float) and math.isnan(alt)) else alt
    p.store(gl[0], r, Prog.load(gl[1], idx, gate, Prog.const(dt, alt_c)))
    p.end(r)
  return Case(key, [(dt, sentinel(dt, n)), (dt, x)], build, lambda got, want: compare(got[0], want[0], dt, what=key))

def gated_store_case(dt: DType) -> Case:
  """if (i < n/2) out[i] = x[i]: the other half keeps what was there."""
  key = f"gated STORE {dtname(dt)}"
  n = 40
  x = to_storage(cycle(edges(dt), n), dt)
  def build(p: Prog, gl: list[UOp]) -> None:
    r = p.loop(n)
    p.store(gl[0], r, Prog.load(gl[1], r), UOp(Ops.CMPLT, dtypes.bool, (r, Prog.i32(n // 2))))
    p.end(r)
  return Case(key, [(dt, sentinel(dt, n)), (dt, x)], build, lambda got, want: compare(got[0], want[0], dt, "bits", what=key))

STRUCT = {"accumulate": acc_case, "gated LOAD": gated_load_case, "gated STORE": gated_store_case}
STRUCT_PARAMS = [(k, dt) for k in STRUCT for dt in ALL_DTYPES if k != "accumulate" or True]

@pytest.mark.cap("{kind}")
@pytest.mark.parametrize("kind,dtype", STRUCT_PARAMS, ids=[f"{k.replace(' ', '_')}-{dtname(d)}" for k, d in STRUCT_PARAMS])
def test_structure(target, batch, repro, kind, dtype):
  target.require_dtype(dtype)
  res = batch.result("structure", lambda: [STRUCT[k](d) for k, d in STRUCT_PARAMS if d in target.declared], f"{kind} {dtname(dtype)}")
  repro.add(lambda: case_repro(res.case, target, res.src))
  check_result(res, target)

def nested_case() -> Case:
  A, B, C = 3, 4, 5
  def build(p: Prog, gl: list[UOp]) -> None:
    i = p.loop(A)
    j = p.loop(B)
    k = p.loop(C)
    i32 = dtypes.int32
    idx = UOp(Ops.ADD, i32, (UOp(Ops.MUL, i32, (UOp(Ops.ADD, i32, (UOp(Ops.MUL, i32, (i, Prog.i32(B))), j)), Prog.i32(C))), k))
    val = UOp(Ops.ADD, i32, (UOp(Ops.ADD, i32, (UOp(Ops.MUL, i32, (i, Prog.i32(100))), UOp(Ops.MUL, i32, (j, Prog.i32(10))))), k))
    p.store(gl[0], idx, val)
    p.end(k)
    p.end(j)
    p.end(i)
  want = np.array([i * 100 + j * 10 + k for i in range(A) for j in range(B) for k in range(C)], np.int32)
  def chk(got, ref):
    compare(ref[0], want, dtypes.int32, what="nested loops: the PYTHON reference")
    compare(got[0], want, dtypes.int32, what="nested loops")
  return Case("nested loops", [(dtypes.int32, sentinel(dtypes.int32, A * B * C))], build, chk)

@pytest.mark.cap("nested loops")
def test_nested_loops(target, batch, repro):
  target.require_dtype(dtypes.int32)
  res = batch.result("nested", lambda: [nested_case()], "nested loops")
  repro.add(lambda: case_repro(res.case, target, res.src))
  check_result(res, target)

# *** local memory and barriers (where declared) ***

def local_case(dt: DType, L: int) -> Case:
  """Each thread of a group stores its element to local memory; after a barrier it reads its neighbour's."""
  key = f"local memory {dtname(dt)}"
  G = 4
  x = to_storage(cycle(edges(dt), G * L), dt)
  def build(p: Prog, gl: list[UOp]) -> None:
    g, lid = p.special("gidx0", G), p.special("lidx0", L)
    tmp = p.local(f"lm_{dtname(dt)}", dt, L)
    i32 = dtypes.int32
    idx = UOp(Ops.ADD, i32, (UOp(Ops.MUL, i32, (g, Prog.i32(L))), lid))
    st = p.store(tmp, lid, Prog.load(gl[1], idx))
    b = p.barrier(st)
    nb = UOp(Ops.MOD, i32, (UOp(Ops.ADD, i32, (lid, Prog.i32(1))), Prog.i32(L)))
    p.store(gl[0], idx, Prog.load(tmp, nb, barrier=b))
  want = x.reshape(G, L)[:, list(range(1, L)) + [0]].reshape(-1)
  def chk(got, ref):
    compare(ref[0], want, dt, "bits", what=f"{key}: the PYTHON reference")
    compare(got[0], want, dt, "bits", what=key)
  return Case(key, [(dt, sentinel(dt, G * L)), (dt, x)], build, chk, launch=((G, 1, 1), (L, 1, 1)))

@pytest.mark.cap("local memory + BARRIER")
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtname)
def test_local_memory(target, batch, repro, dtype):
  r = target.renderer
  target.require(r.has_local and r.has_shared, "local memory (has_local and has_shared)")
  target.require_dtype(dtype)
  L = min(16, r.local_max[0]) if r.local_max else 16
  res = batch.result("local", lambda: [local_case(d, L) for d in ALL_DTYPES if d in target.declared], f"local memory {dtname(dtype)}")
  repro.add(lambda: case_repro(res.case, target, res.src))
  check_result(res, target)

# *** argument order: DEFINE_GLOBAL arg=i is kernel argument i, wherever the program lists it ***

@pytest.mark.cap("DEFINE_GLOBAL order")
@pytest.mark.parametrize("order", [(0, 2, 1), (2, 1, 0), (1, 0, 2)], ids=lambda o: "-".join(map(str, o)))
def test_argument_order(target, repro, order):
  """out[i] = in1[i] - in2[i] (ADD of a NEG), with the DEFINE_GLOBALs listed in the order given: the kernel must take
  buffer i as argument i (the core's linearizer does not promise to list them sorted)."""
  target.require_dtype(dtypes.int32)
  i32 = dtypes.int32
  p = Prog("argorder")
  g = [p.glob(i32) for _ in range(3)]
  r = p.loop(16)
  p.store(g[0], r, UOp(Ops.ADD, i32, (Prog.load(g[1], r), UOp(Ops.NEG, i32, (Prog.load(g[2], r),)))))
  p.end(r)
  uops = [g[k] for k in order] + p.uops()[3:]
  bufs = [sentinel(i32, 16), np.arange(16, dtype=np.int32) * 10, np.arange(16, dtype=np.int32)]
  from tinycore_conformance.repro import program_repro
  src_box: list = [None]
  repro.add(lambda: program_repro("DEFINE_GLOBAL order " + str(order), uops, bufs, target.device, target.compile_only, src_box[0],
                                  local_size=target.local_size))
  src, lib = target.compile("argorder", uops)
  src_box[0] = src
  target.require_runtime()
  got = target.execute("argorder", lib, bufs)[0][0]
  compare(got, np.arange(16, dtype=np.int32) * 9, i32, what=f"DEFINE_GLOBALs listed in order {order}: out = in1 - in2")

# *** vectors (where declared): vector loads and stores, the ops declared for whole vectors, VECTORIZE and GEP, vector
# constants (the code generator makes them, e.g. for the random numbers of level 6) ***

VEC_WIDTHS = (2, 4, 8, 16)
VEC_OPS = [Ops.ADD, Ops.MUL, Ops.MAX, Ops.NEG, Ops.RECIP, Ops.MULACC, Ops.CMPLT, Ops.SQRT, Ops.EXP2]
VEC_LANES = ["GEP/VECTORIZE", "CONST"]  # cases that need no op in vector_alu
VEC_PARAMS = [(w, op, dt) for w in VEC_WIDTHS for op in VEC_OPS + VEC_LANES for dt in ALL_DTYPES if op in VEC_LANES or applies(op, dt)]

def _vector_const(dt: DType):
  """A constant that needs its dtype's spelling: the largest int (a uint32 needs its suffix), 1.5, True."""
  return True if dt == dtypes.bool else 1.5 if is_float(dt) else dtypes.max(dt)

def _np_ref(op: Ops, dt: DType, *xs: np.ndarray) -> np.ndarray:
  from tinycore.ops import exec_alu
  out_dt = dtypes.bool if op is Ops.CMPLT else dt
  return np.asarray(exec_alu(op, out_dt, list(xs))).astype(storage_np(out_dt))

def vector_case(w: int, op, dt: DType) -> Case:
  """out[i:i+w] = op(a[i:i+w], b[i:i+w], ...) on dt.vec(w) values; GEP/VECTORIZE reverses the lanes of each vector;
  CONST stores a vector constant."""
  name = op if isinstance(op, str) else op.name
  key = f"vector {w} {name} {dtname(dt)}"
  n = 4 * w
  seed = seed_of("vec", w, name, dt.name)
  rng = np.random.default_rng(seed)
  arity = 1 if name in ("GEP/VECTORIZE", "CONST", "NEG", "RECIP", "SQRT", "EXP2") else 3 if name == "MULACC" else 2
  ins = [to_storage(cycle(edges(dt, huge=False), n // 2) + randoms(dt, n - n // 2, rng, 5.0), dt) for _ in range(arity)]
  if name in ("RECIP", "SQRT"): ins = [to_storage(np.abs(as_float(x, dt)) + 0.5, dt) for x in ins]
  out_dt = dtypes.bool if name == "CMPLT" else dt
  vdt, vout = dt.vec(w), out_dt.vec(w)
  def build(p: Prog, gl: list[UOp]) -> None:
    r = p.loop(n // w)
    base = UOp(Ops.MUL, dtypes.int32, (r, Prog.i32(w)))
    vs = [UOp(Ops.LOAD, vdt, (g, base)) for g in gl[1:]]
    if name == "GEP/VECTORIZE": val = UOp(Ops.VECTORIZE, vdt, tuple(UOp(Ops.GEP, dt, (vs[0],), w - 1 - k) for k in range(w)))
    elif name == "CONST": val = UOp(Ops.CONST, vdt, arg=_vector_const(dt))
    else: val = UOp(op, vout, tuple(vs))
    p.store(gl[0], base, val)
    p.end(r)
  def expected() -> list[np.ndarray]:
    if name == "GEP/VECTORIZE": out = ins[0].reshape(-1, w)[:, ::-1].reshape(-1).copy()
    elif name == "CONST": out = to_storage([_vector_const(dt)] * n, dt)
    else:
      with np.errstate(all="ignore"): out = _np_ref(op, dt, *ins)
    return [out] + ins
  mode, k = ("ulp", 4.0) if name in ("RECIP", "SQRT", "EXP2") else ("ulp", 1.0) if name == "MULACC" and is_float(dt) else ("exact", 0.0)
  def chk(got, want):
    atol = 0.0
    if name == "MULACC" and is_float(dt):  # a fused multiply-add rounds once
      a, b, c = (as_float(x, dt) for x in ins)
      atol = 2 * ulp(a * b, dt) + 2 * ulp(c, dt)
    compare(got[0], want[0], out_dt, mode, k, atol, what=key, inputs=[(dt, x) for x in ins])
  return Case(key, [(out_dt, sentinel(out_dt, n))] + [(dt, x) for x in ins], build, chk, seed=seed, expected=expected)

def _vector_decl(target, w: int, op, dt: DType) -> tuple[bool, str]:
  r = target.renderer
  if w not in tuple(r.vector_widths): return False, f"vectors of width {w} (vector_widths={tuple(r.vector_widths)})"
  if dt not in tuple(getattr(r, "vector_dtypes", ())): return False, f"vectors of {dtname(dt)} (vector_dtypes)"
  if op not in VEC_LANES and op not in getattr(r, "vector_alu", frozenset()): return False, f"{op.name} on whole vectors (vector_alu)"
  return True, ""

@pytest.mark.cap("vector {w} {op}")
@pytest.mark.parametrize("w,op,dtype", VEC_PARAMS, ids=[f"{w}-{op if isinstance(op, str) else op.name}-{dtname(d)}" for w, op, d in VEC_PARAMS])
def test_vector(target, batch, repro, w, op, dtype):
  ok, what = _vector_decl(target, w, op, dtype)
  target.require(ok, what)
  name = op if isinstance(op, str) else op.name
  res = batch.result("vector", lambda: [vector_case(w_, o_, d_) for w_, o_, d_ in VEC_PARAMS if _vector_decl(target, w_, o_, d_)[0]],
                     f"vector {w} {name} {dtname(dtype)}")
  repro.add(lambda: case_repro(res.case, target, res.src))
  check_result(res, target)
