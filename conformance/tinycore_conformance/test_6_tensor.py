"""Level 6, tensor: the Tensor API on the device against numpy. Elementwise ops for every declared dtype, float math,
reductions, movement ops, matmul, convolution and pooling, softmax, backward (against hand-derived numpy gradients),
in-place assign, copies to and from the reference device, the random generator (the same numbers as on PYTHON), and
JIT replay. Each case is a Tensor expression and its numpy reference, so --repro prints exactly what ran.
In --compile-only mode every kernel of every case is scheduled, rendered and compiled, and nothing runs."""
from __future__ import annotations
import re
from dataclasses import dataclass
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore_conformance import npref as R
from tinycore_conformance.bugs import known_bug
from tinycore_conformance.tensorutil import compile_all, sources
from tinycore_conformance.values import ALL_DTYPES, dtname, BY_NAME

LAYER = 6
NAMES = "abcdefgh"

@dataclass(frozen=True)
class TC:
  """A tensor case: numpy input expressions (using `rng`), a Tensor expression of the inputs a, b, ... and its numpy
  reference; grad cases give a scalar loss, and the reference gives the gradients of every input."""
  name: str
  group: str
  inputs: tuple[str, ...]
  expr: str
  ref: str
  rtol: float = 1e-4
  atol: float = 1e-5
  dtype: str = "-"
  grad: bool = False
  exact_dtype: bool = False
  bug: str = ""
  def __str__(self) -> str: return self.name
  @property
  def cap_group(self) -> str: return self.group
  @property
  def cap_dtype(self) -> str: return self.dtype
  @property
  def seed(self) -> int: return sum((i + 1) * ord(c) for i, c in enumerate(self.name)) % 100000

def gen(dt: str, shape: tuple, kind: str = "any") -> str:
  """A numpy expression for test inputs of dtype dt (named as values.NAMES)."""
  s = repr(tuple(shape))
  if dt == "bool": return f"rng.integers(0, 2, {s}).astype(np.bool_)"
  if dt.startswith("float"):
    if kind == "pos": return f"(rng.random({s}) * 4 + 0.1).astype(np.{dt})"
    if kind == "small": return f"(rng.standard_normal({s}) * 2).astype(np.{dt})"
    return f"(rng.standard_normal({s}) * 10).astype(np.{dt})"
  info = np.iinfo(getattr(np, dt))
  if kind == "small": lo, hi = (0, 20) if info.min == 0 else (-20, 20)
  else: lo, hi = int(info.min), int(info.max)
  return f"rng.integers({lo}, {hi}, {s}, dtype=np.{dt}, endpoint=True)"

# *** elementwise ops and reductions for every dtype ***

def _acc(dt: str) -> str:
  if dt == "bool" or dt in ("int8", "int16"): return "np.int32"
  if dt in ("uint8", "uint16"): return "np.uint32"
  return f"np.{dt}"

def dtype_cases() -> list[TC]:
  out = []
  for d in ALL_DTYPES:
    dt = dtname(d)
    if dt == "bfloat16": continue  # numpy has no bfloat16 to compare with (the renderer layer covers it)
    sh = (5, 7)
    A, B = gen(dt, sh), gen(dt, sh)
    tol = dict(rtol=2e-3, atol=2e-3) if dt == "float16" else dict(rtol=1e-6, atol=0)
    ew = [("add", "a + b", "a + b"), ("mul", "a * b", "a * b"), ("maximum", "a.maximum(b)", "np.maximum(a, b)"),
          ("less", "a < b", "a < b"), ("equal", "a == b", "a == b"), ("where", "(a < b).where(a, b)", "np.where(a < b, a, b)"),
          ("cast to float32", "a.cast(dtypes.float32)", "a.astype(np.float32)"), ("max reduce", "a.max(axis=0)", "a.max(axis=0)")]
    if dt != "bool": ew += [("sub", "a - b", "a - b"), ("neg", "-a", "-a")]
    if dt != "float16": ew += [("sum reduce", "a.sum(axis=1)", f"a.sum(axis=1, dtype={_acc(dt)})")]
    else: ew += [("sum reduce", "a.sum(axis=1)", "a.astype(np.float32).sum(axis=1).astype(np.float16)")]
    for n, e, r in ew:
      ins = (A, B) if re.search(r"\bb\b", e) else (A,)
      t = dict(rtol=1e-5, atol=1e-4) if n == "sum reduce" and dt.startswith("float") and dt != "float16" else tol
      out.append(TC(f"{n} {dt}", n, ins, e, r, dtype=dt, exact_dtype=True, **t))
    if dt in ("int8", "uint8", "int16", "uint16", "int32", "int64", "float16", "float32"):
      out.append(TC(f"fused (a+b)<c {dt}", "fused (a+b)<c", (A, B, gen(dt, sh)), "(a + b) < c", "(a + b) < c", dtype=dt,
                    exact_dtype=True))
  return out + division_edge_cases()

def division_edge_cases() -> list[TC]:
  """Integer // and % by zero (a tensor and a constant) and MIN // -1: tinycore defines them as numpy does (x // 0 ==
  x % 0 == 0, MIN // -1 == MIN), and guards the division before rendering, so no device traps or differs."""
  out = []
  for d in ALL_DTYPES:
    dt = dtname(d)
    if not dt.startswith(("int", "uint")): continue
    i = np.iinfo(getattr(np, dt))
    a = [i.min, i.min, i.max, 7, i.max - 7, 0, 5, i.min, 9]
    b = [0, -1 if i.min else 2, 0, 0, 1, 0, 3, 1, -3 if i.min else 4]
    A, B = f"np.array([{a}] * 3, np.{dt})", f"np.array([{b}] * 3, np.{dt})"
    for n, e, r in [("floordiv by zero", "a // b", "R.floordiv(a, b)"), ("mod by zero", "a % b", "R.mod(a, b)"),
                    ("floordiv by constant zero", "a // 0", "R.floordiv(a, np.zeros_like(a))"),
                    ("mod by constant zero", "a % 0", "R.mod(a, np.zeros_like(a))")]:
      out.append(TC(f"{n} {dt}", n, (A, B) if "b" in e else (A,), e, r, dtype=dt, exact_dtype=True, rtol=0, atol=0))
  return out

F32 = "float32"
def f32(*shape: int, kind: str = "any") -> str: return gen(F32, shape, kind)
def s32(*shape: int) -> str: return gen(F32, shape, "small")

def _mtol(dt: str) -> dict: return dict(rtol=3e-3, atol=3e-3) if dt == "float16" else dict(rtol=2e-5, atol=1e-6)
MATH = [TC(f"{n} {dt}", "float math", (gen(dt, (4, 9), k),), e, r, dtype=dt, **_mtol(dt))
        for dt in ("float16", "float32", "float64")
        for n, k, e, r in [("exp", "small", "a.exp()", "np.exp(a)"), ("log", "pos", "a.log()", "np.log(a)"),
                           ("sqrt", "pos", "a.sqrt()", "np.sqrt(a)"),
                           ("sin", "small", "a.sin()", "np.sin(a)"), ("reciprocal", "pos", "a.reciprocal()", "1 / a")]]
MATH += [TC(n, "float math", (f32(6, 11, kind=k),), e, r, rtol=2e-5, atol=1e-6, dtype=F32) for n, k, e, r in [
  ("cos", "small", "a.cos()", "np.cos(a)"), ("sigmoid", "small", "a.sigmoid()", "R.sigmoid(a)"), ("tanh", "small", "a.tanh()", "np.tanh(a)"),
  ("relu", "any", "a.relu()", "np.maximum(a, 0)"), ("abs", "any", "a.abs()", "np.abs(a)"), ("pow", "pos", "a ** 2.5", "a.astype(np.float64) ** 2.5"),
  ("exp2", "small", "a.exp2()", "np.exp2(a)"), ("log2", "pos", "a.log2()", "np.log2(a)"), ("clip", "any", "a.clip(-3, 4)", "np.clip(a, -3, 4)"),
  ("div", "pos", "a / (a + 1)", "a / (a + 1)"),
  ("chain", "small", "((a * 3).exp() + 1).log() - a.sqrt().abs()", "np.log(np.exp(a*3.0)+1) - np.abs(np.sqrt(a))")]]

REDUCE = [TC(n, "reduce", ins, e, r, rtol=1e-5, atol=1e-4, dtype=F32) for n, ins, e, r in [
  ("sum all", (f32(9, 13),), "a.sum()", "a.astype(np.float64).sum()"),
  ("sum axis 0", (f32(9, 13),), "a.sum(axis=0)", "a.sum(axis=0)"),
  ("sum axes (0,2) keepdim", (f32(3, 4, 5),), "a.sum(axis=(0, 2), keepdim=True)", "a.sum(axis=(0, 2), keepdims=True)"),
  ("max axis 1", (f32(9, 13),), "a.max(axis=1)", "a.max(axis=1)"),
  ("min axis 0", (f32(9, 13),), "a.min(axis=0)", "a.min(axis=0)"),
  ("mean", (f32(8, 6),), "a.mean(axis=1)", "a.mean(axis=1)"),
  ("large sum", (f32(1, 16384, kind="pos"),), "a.sum(axis=1)", "a.astype(np.float64).sum(axis=1)"),
  ("large max", (f32(4, 8192),), "a.max(axis=1)", "a.max(axis=1)"),
  ("sum of permuted", (f32(6, 10),), "a.permute(1, 0).sum(axis=1)", "a.T.sum(axis=1)"),
  ("reduce then elementwise", (f32(6, 10), f32(6, 1)), "(a.sum(axis=1, keepdim=True) * b + a).max(axis=1)",
   "(a.sum(axis=1, keepdims=True) * b + a).max(axis=1)"),
  ("argmax", (f32(5, 12),), "a.argmax(axis=1)", "a.argmax(axis=1)"),
  ("prod of nothing", (f32(0),), "a.prod()", "np.prod(a)"),
]]

# a float32 accumulator stops counting at 2**24 ones, and its rounding error grows with its length: long sums must stay
# exact and accurate however the backend's kernels accumulate (the core stages them into short partial sums)
REDUCE += [TC("sum of 2**27 broadcast ones", "reduce", ("np.ones(1, np.float32)",), "a.expand(2**27).sum()", "np.float32(2**27)",
              rtol=1e-7, atol=0, dtype=F32),
           TC("sum of 2**24 floats", "reduce", ("rng.random(2**24, dtype=np.float32)",), "a.sum()", "a.astype(np.float64).sum()",
              rtol=1e-6, atol=0, dtype=F32)]

MOVEMENT = [TC(n, "movement", ins, e, r, rtol=0, atol=0, dtype=F32) for n, ins, e, r in [
  ("reshape", (f32(4, 6),), "a.reshape(3, 8) + 1", "a.reshape(3, 8) + 1"),
  ("permute", (f32(2, 3, 4),), "a.permute(2, 0, 1) * 2", "a.transpose(2, 0, 1) * 2"),
  ("transpose contiguous", (f32(5, 7),), "a.T.contiguous()", "a.T"),
  ("expand", (f32(3, 1),), "a.expand(3, 5) + 0", "np.broadcast_to(a, (3, 5))"),
  ("pad", (f32(3, 4),), "a.pad(((1, 2), (0, 3)))", "np.pad(a, ((1, 2), (0, 3)))"),
  ("pad with a value", (f32(3, 4),), "a.pad(((1, 1), (2, 0)), value=-1.5)", "np.pad(a, ((1, 1), (2, 0)), constant_values=-1.5)"),
  ("shrink", (f32(6, 7),), "a.shrink(((1, 4), (2, 7)))", "a[1:4, 2:7]"),
  ("flip", (f32(4, 5),), "a.flip(1)", "a[:, ::-1]"),
  ("slice with step", (f32(9, 8),), "a[1:8:3, ::-2]", "a[1:8:3, ::-2]"),
  ("index", (f32(4, 5, 6),), "a[2, :, 3]", "a[2, :, 3]"),
  ("cat", (f32(2, 3), f32(4, 3)), "a.cat(b, dim=0)", "np.concatenate([a, b], axis=0)"),
  ("stack", (f32(2, 3), f32(2, 3)), "a.stack(b, dim=1)", "np.stack([a, b], axis=1)"),
  ("pad of a sum", (f32(3, 4),), "(a + 1).pad(((1, 1), (1, 1))).exp2()", "np.exp2(np.pad(a + 1, ((1, 1), (1, 1))))"),
  # views that select only padding: the buffer behind them is read by no kernel, the buffers after it keep their places
  ("padding only, beside a buffer", (f32(4), f32(2)), "a.pad(((0, 3),))[4:6] + b", "np.pad(a, (0, 3))[4:6] + b"),
  ("padding only, through a reshape", (f32(4), f32(1, 2)), "a.pad(((0, 2),)).reshape(2, 3)[1:2, 1:3] + b",
   "np.pad(a, (0, 2)).reshape(2, 3)[1:2, 1:3] + b"),
  ("padding element as 0-d", (f32(1),), "a.pad(((1, 0),))[0] + 0", "np.pad(a, (1, 0))[0]"),
]]
MOVEMENT = [TC(c.name, c.group, c.inputs, c.expr, c.ref, rtol=1e-6, atol=1e-6, dtype=F32) if "exp2" in c.expr else c for c in MOVEMENT]

MATMUL = [TC(n, "matmul", ins, e, r, rtol=1e-4, atol=1e-4, dtype=dt) for n, ins, e, r, dt in [
  ("matmul 7x13 @ 13x5", (s32(7, 13), s32(13, 5)), "a @ b", "a.astype(np.float64) @ b", F32),
  ("matmul 1x1", (s32(1, 1), s32(1, 1)), "a @ b", "a @ b", F32),
  ("matmul 64x64", (s32(64, 64), s32(64, 64)), "a @ b", "a.astype(np.float64) @ b", F32),
  ("batched matmul", (s32(2, 3, 4), s32(2, 4, 5)), "a @ b", "a.astype(np.float64) @ b", F32),
  ("vector @ matrix", (s32(6), s32(6, 3)), "a @ b", "a.astype(np.float64) @ b", F32),
  ("matmul of a transpose", (s32(8, 5), s32(8, 3)), "a.T @ b", "a.T.astype(np.float64) @ b", F32),
  ("linear with bias", (s32(4, 6), s32(6, 3), s32(3)), "a.linear(b, c)", "a.astype(np.float64) @ b + c", F32),
  ("int32 matmul", (gen("int32", (5, 6), "small"), gen("int32", (6, 4), "small")), "a @ b", "a @ b", "int32"),
]]

CONV = [TC(n, "conv2d / pool", ins, e, r, rtol=1e-4, atol=1e-4, dtype=F32) for n, ins, e, r in [
  ("conv2d", (s32(2, 3, 9, 9), s32(4, 3, 3, 3)), "a.conv2d(b)", "R.conv2d(a, b)"),
  ("conv2d bias, padding 1", (s32(1, 2, 6, 7), s32(3, 2, 3, 3), s32(3)), "a.conv2d(b, c, padding=1)", "R.conv2d(a, b, c, padding=1)"),
  ("conv2d stride 2", (s32(1, 3, 9, 9), s32(2, 3, 3, 3)), "a.conv2d(b, stride=2)", "R.conv2d(a, b, stride=2)"),
  ("conv2d dilation 2", (s32(1, 2, 9, 9), s32(2, 2, 3, 3)), "a.conv2d(b, dilation=2)", "R.conv2d(a, b, dilation=2)"),
  ("conv2d groups 2", (s32(1, 4, 6, 6), s32(4, 2, 3, 3)), "a.conv2d(b, groups=2)", "R.conv2d(a, b, groups=2)"),
  ("conv2d 1x1", (s32(2, 8, 5, 5), s32(6, 8, 1, 1)), "a.conv2d(b)", "R.conv2d(a, b)"),
  ("max_pool2d", (s32(2, 3, 8, 8),), "a.max_pool2d(2)", "R.max_pool2d(a, 2)"),
  ("avg_pool2d", (s32(2, 3, 8, 8),), "a.avg_pool2d(2)", "R.avg_pool2d(a, 2)"),
  ("max_pool2d 3 stride 2", (s32(1, 2, 9, 9),), "a.max_pool2d(3, stride=2)", "R.max_pool2d(a, 3, 2)"),
]]

ONEHOT = "np.eye(7, dtype=np.float32)[rng.integers(0, 7, 6)]"
SOFTMAX = [TC(n, "softmax", ins, e, r, rtol=1e-4, atol=1e-5, dtype=F32) for n, ins, e, r in [
  ("softmax", (f32(6, 7),), "a.softmax()", "R.softmax(a)"),
  ("softmax axis 0", (f32(6, 7),), "a.softmax(axis=0)", "R.softmax(a, axis=0)"),
  ("log_softmax", (f32(6, 7),), "a.log_softmax()", "R.log_softmax(a)"),
  ("logsumexp", (f32(6, 7),), "a.logsumexp(axis=1)", "R.logsumexp(a, axis=1)"),
  ("cross entropy", (f32(6, 7), ONEHOT), "-(a.log_softmax() * b).sum() / 6", "-(R.log_softmax(a) * b).sum() / 6"),
  ("softmax of large values", ("(rng.standard_normal((3, 50)) * 300).astype(np.float32)",), "a.softmax()", "R.softmax(a)"),
]]

# every pair of these as (base, exponent): C's pow on the edge values (0 ** 0, (-inf) ** 0.3, -0.0 to odd powers, NaN),
# where exp2(e * log2|b|) alone is NaN or loses the sign; the backend's exp2 and log2 at 0, 1 and inf decide it
_EDGES = "[0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 0.3, -0.3, 3.0, -3.0, np.inf, -np.inf, np.nan]"
POW_EDGES = (f"np.repeat(np.array({_EDGES}, np.float32), 14)", f"np.tile(np.array({_EDGES}, np.float32), 14)")
MATH += [TC("pow edge values", "float math", POW_EDGES, "a ** b", "np.power(a, b)", rtol=1e-5, atol=1e-6, dtype=F32)]

BACKWARD = [TC(n, "backward", ins, e, r, rtol=1e-4, atol=1e-4, dtype=F32, grad=True) for n, ins, e, r in [
  ("grad of pow on edge values", POW_EDGES, "(a ** b).sum()", "R.pow_grads(a, b)"),
  ("grad of sum(a*b)", (s32(4, 5), s32(5)), "(a * b).sum()", "(np.broadcast_to(b, a.shape), a.sum(axis=0))"),
  ("grad of matmul relu", (s32(5, 6), s32(6, 4)), "(a @ b).relu().sum()",
   "(((a @ b) > 0) @ b.T, a.T @ ((a @ b) > 0))"),
  ("grad of log(exp+1) mean", (s32(3, 7),), "((a.exp() + 1).log()).mean()", "(R.sigmoid(a) / a.size,)"),
  ("grad of max", (s32(4, 9),), "a.max(axis=1).sum()", "((a == a.max(axis=1, keepdims=True)).astype(np.float32),)"),
  ("grad of cross entropy", (s32(6, 7), ONEHOT), "-(a.log_softmax() * b).sum() / 6",
   "((R.softmax(a) * b.sum(axis=1, keepdims=True) - b) / 6, -R.log_softmax(a) / 6)"),
  ("grad of conv2d", (s32(2, 2, 6, 6), s32(3, 2, 3, 3)), "(a.conv2d(b) * a.conv2d(b)).sum()",
   "R.conv2d_grads(a, b, 2 * R.conv2d(a, b))"),
  # the output gradient of a sum is a constant: the input gradient convolves it, padded, with the flipped weight (GCC 12's
  # loop vectorizer summed that kernel wrong for one input channel: tinygrad's test_conv2d_bs_1_cin_1)
  ("grad of conv2d sum, one input channel", (s32(1, 1, 5, 7), s32(6, 1, 2, 3)), "a.conv2d(b).sum()",
   "R.conv2d_grads(a, b, np.ones((1, 6, 4, 5), np.float32))"),
  ("grad through movement", (s32(4, 6),), "(a.permute(1, 0).pad(((1, 0), (0, 2))) * 3).reshape(-1)[5:17].sum()",
   "(np.pad(np.ones(12), (5, 7 * 6 - 17))[:7 * 6].reshape(7, 6)[1:, :4].T * 3,)"),
  # a log-depth scan's gradient: many kernels of hundreds of nodes (one kernel of ~10,000 nodes before the size limit)
  ("grad of a long cumprod", ("rng.uniform(0.99, 1.01, (600,)).astype(np.float32)",), "a.cumprod(0).sum()",
   "(np.cumsum(np.cumprod(a.astype(np.float64))[::-1])[::-1] / a,)"),
]]

# indexing is a load at a loaded address (Ops.GATHER), its gradient a serial scatter-add (Ops.SCATTER): every backend
# renders both; repeated indices add up in index order, so the gradient is exact
_IDX = "np.array([1, 1, 5, 1, 0, -1, -6, 1], np.int32)"
INDEXED = [TC(n, "gather / scatter-add", ins, e, r, rtol=0, atol=0, dtype=F32, grad=g) for n, ins, e, r, g in [
  ("gather of random indices", (f32(50, 8), "rng.integers(-50, 50, (3, 10)).astype(np.int32)"), "a[b]", "a[b]", False),
  ("gather along axis 1", (f32(6, 7), "rng.integers(-7, 7, (6, 9)).astype(np.int32)"), "a.gather(1, b)",
   "np.take_along_axis(a, b % 7, 1)", False),
  ("gather int64 indices, then add", (f32(40, 5), "rng.integers(0, 40, (4, 3)).astype(np.int64)", f32(3, 5)), "a[b] + c", "a[b] + c", False),
  ("scatter-add of repeated indices (gather gradient)", (f32(6, 4), f32(8, 4)), f"(a[Tensor({_IDX}, device=a.device)] * b).sum()",
   f"(R.scatter_add((6, 4), {_IDX}, b), a[{_IDX}])", True),
  # a scatter that multiplies (scatter_reduce 'prod'): repeated and negative indices, one product per element in index order
  ("scatter_reduce prod of repeated indices", (f32(6, 4), "rng.integers(-6, 6, (9, 4)).astype(np.int32)", f32(9, 4)),
   "a.scatter_reduce(0, b, c, 'prod')", "R.scatter_prod(a, b, c)", False),
]]

CASES = dtype_cases() + MATH + REDUCE + MOVEMENT + MATMUL + CONV + SOFTMAX + BACKWARD + INDEXED

# *** running a case ***

def make_inputs(case: TC) -> list[np.ndarray]:
  rng = np.random.default_rng(case.seed)
  return [np.asarray(eval(s, {"np": np, "rng": rng})) for s in case.inputs]

def close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, what: str, exact_dtype: bool = False) -> None:
  want = np.asarray(want)
  if exact_dtype: assert got.dtype == want.dtype, f"{what}: result dtype {got.dtype}, expected {want.dtype}"
  assert got.shape == want.shape, f"{what}: result shape {got.shape}, expected {want.shape}"
  if got.dtype.kind in "biu" and want.dtype.kind in "biu":
    bad = got != want
  else:
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore"):
      bad = ~((np.abs(g - w) <= atol + rtol * np.abs(w)) | (np.isnan(g) & np.isnan(w)) | (g == w))
  if bad.any():
    i = tuple(int(x) for x in np.argwhere(bad)[0])
    raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} values differ (rtol {rtol}, atol {atol}); "
                         f"first at {i}: got {got[i]!r}, expected {want[i]!r}")

def case_repro(case: TC, target) -> str:
  dev = target.device
  lines = [f"# reproduction: tensor case {case.name!r} on {dev} (seed {case.seed})", "import numpy as np",
           "from tinycore import Tensor, dtypes", "from tinycore_conformance import npref as R",
           f"rng = np.random.default_rng({case.seed})"]
  names = NAMES[:len(case.inputs)]
  for n, s in zip(names, case.inputs): lines.append(f"{n}_np = {s}  # shape and dtype as generated")
  rg = ", requires_grad=True" if case.grad else ""
  for n in names: lines.append(f"{n} = Tensor({n}_np, device={dev!r}{rg})")
  lines.append(f"out = {case.expr}")
  ref_args = ", ".join(names)
  lines.append(f"want = (lambda {ref_args}: {case.ref})({', '.join(n + '_np' for n in names)})")
  if case.grad:
    lines += ["out.backward()", f"for t, w in zip([{', '.join(names)}], want):",
              f"  np.testing.assert_allclose(t.grad.numpy(), w, rtol={case.rtol}, atol={case.atol})"]
  else: lines.append(f"np.testing.assert_allclose(out.numpy(), want, rtol={case.rtol}, atol={case.atol})")
  # the kernels, rendered by the device's renderer (from unrealized inputs)
  ts = [Tensor.empty(*x.shape, device=dev, dtype=BY_NAME[str(x.dtype)], requires_grad=case.grad or None) for x in make_inputs(case)]
  outs = _apply(case, ts)
  return "\n".join(lines) + "\n\n# --- the kernels, as the renderer of " + dev + " renders them ---\n" + sources(target, outs)

def _apply(case: TC, ts: list) -> list:
  out = eval(case.expr, {"Tensor": Tensor, "dtypes": dtypes, "np": np}, dict(zip(NAMES, ts)))
  if case.grad:
    out.backward()
    return [t.grad for t in ts]
  return list(out) if isinstance(out, (tuple, list)) else [out]

@pytest.mark.cap("{case}")
@pytest.mark.parametrize("case", CASES, ids=str)
def test_tensor(target, repro, request, case: TC):
  for x in make_inputs(case):
    d = BY_NAME.get(str(x.dtype))
    if d is not None: target.require_dtype(d)
  if case.bug: known_bug(request, case.bug, target, BY_NAME.get(case.dtype))
  repro.add(lambda: case_repro(case, target))
  ins = make_inputs(case)
  if target.compile_only:
    ts = [Tensor.empty(*x.shape, device=target.device, dtype=BY_NAME[str(x.dtype)], requires_grad=case.grad or None) for x in ins]
    compile_all(target, _apply(case, ts))
    return
  ts = [Tensor(x, device=target.device, requires_grad=case.grad or None) for x in ins]
  outs = _apply(case, ts)
  want = eval(case.ref, {"np": np, "R": R}, dict(zip(NAMES, ins)))
  wants = list(want) if case.grad or isinstance(want, tuple) else [want]
  assert len(outs) == len(wants), f"{len(outs)} results, {len(wants)} references"
  for i, (o, w) in enumerate(zip(outs, wants)):
    what = f"{case.name}" + (f": gradient of input {NAMES[i]}" if case.grad else "")
    got = o.numpy()
    close(got, np.asarray(w) if case.exact_dtype else np.asarray(w).astype(got.dtype), case.rtol, case.atol, what, case.exact_dtype)

# *** stateful and cross-device behaviour ***

@pytest.mark.cap("assign (in place)")
def test_assign(target, repro):
  repro.add(f"import numpy as np\nfrom tinycore import Tensor\nw = Tensor(np.arange(6, dtype=np.float32), device={target.device!r}).realize()\n"
            "for _ in range(3): w.assign(w * 2 + 1).realize()\nprint(w.numpy())  # expected [7 15 23 31 39 47]")
  target.require_runtime()
  w = Tensor(np.arange(6, dtype=np.float32), device=target.device).realize()
  for _ in range(3): w.assign(w * 2 + 1).realize()
  close(w.numpy(), np.arange(6) * 8.0 + 7, 0, 0, "three in-place w.assign(w*2+1)")

@pytest.mark.cap("assign (two, each reading the other's old value)")
def test_assign_old_values(target, repro):
  """Two in-place updates built from the old values of both buffers (SGD over parameters whose gradients depend on
  each other): the scheduler orders (and, where they would wait on each other, splits) the kernels so both see the old values."""
  repro.add(f"import numpy as np\nfrom tinycore import Tensor\na = Tensor(np.arange(4, dtype=np.float32), device={target.device!r}).realize()\n"
            f"b = Tensor(np.arange(4, dtype=np.float32) * 2 + 1, device={target.device!r}).realize()\nna, nb = a - b * 0.5, b - a * 0.25\n"
            "a.assign(na)\nb.assign(nb)\nTensor.realize(a, b)\nprint(a.numpy(), b.numpy())  # expected [-0.5 -0.5 -0.5 -0.5] [1. 2.75 4.5 6.25]")
  target.require_runtime()
  an, bn = np.arange(4, dtype=np.float32), np.arange(4, dtype=np.float32) * 2 + 1
  a, b = Tensor(an, device=target.device).realize(), Tensor(bn, device=target.device).realize()
  na, nb = a - b * 0.5, b - a * 0.25
  a.assign(na)
  b.assign(nb)
  Tensor.realize(a, b)
  close(a.numpy(), an - bn * 0.5, 0, 0, "a.assign(a - b*0.5) beside b.assign(b - a_old*0.25)")
  close(b.numpy(), bn - an * 0.25, 0, 0, "b.assign(b - a_old*0.25) beside a.assign(a - b*0.5)")

@pytest.mark.cap("assign (three outputs of one kernel: an Adam update)")
def test_assign_three_outputs(target, repro):
  """A parameter and its two moments updated together, each reading the others' new values element for element: the
  scheduler writes all three from one kernel (several stores, on a length that is no multiple of a vector width)."""
  repro.add(f"import numpy as np\nfrom tinycore import Tensor\nrng = np.random.default_rng(6)\n"
            f"p, m, v, g = (Tensor(rng.standard_normal(1003).astype(np.float32), device={target.device!r}).realize() for _ in range(4))\n"
            "m.assign(m * 0.9 + g * 0.1); v.assign(v * 0.99 + g * g * 0.01); p.assign(p - m / (v.abs().sqrt() + 1e-8) * 0.01)\n"
            "Tensor.realize(p, m, v)\nprint(p.numpy()[:4], m.numpy()[:4], v.numpy()[:4])")
  target.require_runtime()
  rng = np.random.default_rng(6)
  pn, mn, vn, gn = (rng.standard_normal(1003).astype(np.float32) for _ in range(4))
  p, m, v, g = (Tensor(x, device=target.device).realize() for x in (pn, mn, vn, gn))
  m.assign(m * 0.9 + g * 0.1)
  v.assign(v * 0.99 + g * g * 0.01)
  p.assign(p - m / (v.abs().sqrt() + 1e-8) * 0.01)
  Tensor.realize(p, m, v)
  pd, md, vd, gd = (x.astype(np.float64) for x in (pn, mn, vn, gn))
  m_new, v_new = md * 0.9 + gd * 0.1, vd * 0.99 + gd * gd * 0.01
  close(m.numpy(), m_new, 1e-5, 1e-6, "m.assign(m*0.9 + g*0.1)")
  close(v.numpy(), v_new, 1e-5, 1e-6, "v.assign(v*0.99 + g*g*0.01)")
  close(p.numpy(), pd - m_new / (np.sqrt(np.abs(v_new)) + 1e-8) * 0.01, 1e-4, 1e-5, "p.assign(p - m_new/(sqrt|v_new|+1e-8)*0.01)")

@pytest.mark.cap("copy to and from PYTHON")
def test_cross_device(target, repro):
  target.require_runtime()
  x = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)
  t = Tensor(x, device=target.device)
  back = ((t * 2).to("PYTHON") + 1).to(target.device) * 3
  close(back.numpy(), (x * 2 + 1) * 3, 1e-6, 1e-6, f"{target.device} -> PYTHON -> {target.device}")

@pytest.mark.cap("random numbers (same as PYTHON)")
def test_random(target, repro):
  """The generator is counter-based: a seed gives the same numbers on every device (uint32 shifts, xors and adds)."""
  repro.add(f"from tinycore import Tensor\nTensor.manual_seed(42)\na = Tensor.rand(257, device={target.device!r}).numpy()\n"
            "Tensor.manual_seed(42)\nb = Tensor.rand(257, device='PYTHON').numpy()\nprint((a != b).sum(), 'differ')")
  target.require_runtime()
  Tensor.manual_seed(42)
  a = Tensor.rand(257, device=target.device).numpy()
  a2 = Tensor.randn(3, 5, device=target.device).numpy()
  Tensor.manual_seed(42)
  b = Tensor.rand(257, device="PYTHON").numpy()
  b2 = Tensor.randn(3, 5, device="PYTHON").numpy()
  close(a, b, 0, 0, "Tensor.rand after manual_seed(42), against the PYTHON device")
  close(a2, b2, 1e-5, 1e-6, "Tensor.randn after manual_seed(42), against the PYTHON device")
  assert 0 <= a.min() and a.max() < 1 and 0.3 < a.mean() < 0.7, f"rand values are not uniform in [0, 1): mean {a.mean()}"

@pytest.mark.cap("JIT replay")
def test_jit(target, repro):
  """A TinyJit'd function captured on its second call and replayed on new inputs gives numpy's results every time."""
  from tinycore import TinyJit
  repro.add(f"""import numpy as np
from tinycore import Tensor, TinyJit
@TinyJit
def f(x, w): return ((x @ w).relu() + x.sum(axis=1, keepdim=True)).realize()
rng = np.random.default_rng(5)
for i in range(5):
  x, w = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32)
  out = f(Tensor(x, device={target.device!r}), Tensor(w, device={target.device!r})).numpy()
  np.testing.assert_allclose(out, np.maximum(x @ w, 0) + x.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-4)""")
  target.require_runtime()
  @TinyJit
  def f(x, w): return ((x @ w).relu() + x.sum(axis=1, keepdim=True)).realize()
  rng = np.random.default_rng(5)
  for i in range(5):
    x, w = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32)
    out = f(Tensor(x, device=target.device), Tensor(w, device=target.device)).numpy()
    close(out, np.maximum(x.astype(np.float64) @ w, 0) + x.sum(axis=1, keepdims=True), 1e-4, 1e-4, f"call {i + 1} of the jitted function")
  assert f.captured is not None and len(f.jit_cache) > 0, "the jitted function captured no kernels"

@pytest.mark.cap("index out of range (raised at the next sync)")
def test_index_out_of_range(target, repro):
  """An index out of range is checked on the device: the next read raises IndexError naming it (the kernels clamp the
  address, so nothing outside the buffer is read), with TinyJit too; the error is then cleared."""
  from tinycore import TinyJit
  dev = target.device
  repro.add(f"""import numpy as np
from tinycore import Tensor
x = Tensor(np.arange(12, dtype=np.float32).reshape(4, 3), device={dev!r})
try: x[Tensor([0, 9], device={dev!r})].numpy()
except IndexError as e: print("raised:", e)
else: raise AssertionError("no IndexError")""")
  if target.compile_only:
    x, i, j = Tensor.empty(4, 3, device=dev), Tensor.empty(2, dtype=dtypes.int32, device=dev), Tensor.empty(4, 1, dtype=dtypes.int32, device=dev)
    compile_all(target, [x[i], (x.gather(1, j) * 2).sum(), i.one_hot(4)])
    return
  x = Tensor(np.arange(12, dtype=np.float32).reshape(4, 3), device=dev)
  with pytest.raises(IndexError, match="index 9 is out of bounds for size 4"): x[Tensor([0, 9], device=dev)].numpy()
  close(x[Tensor([-1], device=dev)].numpy(), np.array([[9, 10, 11]], np.float32), 0, 0, "a gather after the error")
  with pytest.raises(IndexError, match="index -4 is out of bounds for size 3"): x.gather(1, Tensor([[0], [1], [2], [-4]], device=dev)).sum().item()
  with pytest.raises(IndexError, match="index 7 is out of bounds for size 4"): Tensor([1, 7], device=dev).one_hot(4).numpy()
  @TinyJit
  def f(i): return (x[i] * 2).realize()
  for _ in range(3): f(Tensor([3, 0], device=dev)).numpy()
  out = f(Tensor([0, 4], device=dev))
  with pytest.raises(IndexError, match="index 4"): out.numpy()
