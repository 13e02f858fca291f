"""Elementwise Tensor ops and activations: forward and backward against PyTorch, on CLANG and PYTHON."""
import math
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.ops import Ops
from tinycore.dtype import to_np_dtype

torch = pytest.importorskip("torch")
from torch_compare import check  # noqa: E402 (after the importorskip above)


def _rng(seed=0): return np.random.default_rng(seed)


# (name, tinycore fn, torch fn, low, high)
UNARY = [
  ("neg", lambda x: -x, lambda x: -x, -3, 3),
  ("exp", Tensor.exp, torch.exp, -3, 3),
  ("exp2", Tensor.exp2, torch.exp2, -3, 3),
  ("log", Tensor.log, torch.log, 0.1, 4),
  ("log2", Tensor.log2, torch.log2, 0.1, 4),
  ("log10", Tensor.log10, torch.log10, 0.1, 4),
  ("log1p", Tensor.log1p, torch.log1p, -0.5, 3),
  ("expm1", Tensor.expm1, torch.expm1, -2, 2),
  ("sin", Tensor.sin, torch.sin, -4, 4),
  ("cos", Tensor.cos, torch.cos, -4, 4),
  ("tan", Tensor.tan, torch.tan, -1.2, 1.2),
  ("asin", Tensor.asin, torch.asin, -0.95, 0.95),
  ("acos", Tensor.acos, torch.acos, -0.95, 0.95),
  ("atan", Tensor.atan, torch.atan, -5, 5),
  ("sinh", Tensor.sinh, torch.sinh, -3, 3),
  ("cosh", Tensor.cosh, torch.cosh, -3, 3),
  ("tanh", Tensor.tanh, torch.tanh, -3, 3),
  ("asinh", Tensor.asinh, torch.asinh, -5, 5),
  ("acosh", Tensor.acosh, torch.acosh, 1.1, 5),
  ("atanh", Tensor.atanh, torch.atanh, -0.9, 0.9),
  ("sqrt", Tensor.sqrt, torch.sqrt, 0.1, 4),
  ("rsqrt", Tensor.rsqrt, torch.rsqrt, 0.1, 4),
  ("reciprocal", Tensor.reciprocal, torch.reciprocal, 0.5, 3),
  ("square", Tensor.square, torch.square, -3, 3),
  ("abs", Tensor.abs, torch.abs, -3, 3),
  ("sign", Tensor.sign, torch.sign, -3, 3),
  ("floor", Tensor.floor, torch.floor, -5, 5),
  ("ceil", Tensor.ceil, torch.ceil, -5, 5),
  ("round", Tensor.round, torch.round, -5, 5),
  ("trunc", Tensor.trunc, torch.trunc, -5, 5),
  ("erf", Tensor.erf, torch.erf, -3, 3),
  ("relu", Tensor.relu, torch.relu, -3, 3),
  ("relu6", Tensor.relu6, torch.nn.functional.relu6, -9, 9),
  ("leaky_relu", Tensor.leaky_relu, torch.nn.functional.leaky_relu, -3, 3),
  ("leaky_relu_0.2", lambda x: x.leaky_relu(0.2), lambda x: torch.nn.functional.leaky_relu(x, 0.2), -3, 3),
  ("elu", Tensor.elu, torch.nn.functional.elu, -3, 3),
  ("elu_0.5", lambda x: x.elu(0.5), lambda x: torch.nn.functional.elu(x, 0.5), -3, 3),
  ("celu", lambda x: x.celu(0.7), lambda x: torch.nn.functional.celu(x, 0.7), -3, 3),
  ("selu", Tensor.selu, torch.nn.functional.selu, -3, 3),
  ("gelu", Tensor.gelu, lambda x: torch.nn.functional.gelu(x, approximate="tanh"), -3, 3),
  ("quick_gelu", Tensor.quick_gelu, lambda x: x * torch.sigmoid(1.702 * x), -3, 3),
  ("silu", Tensor.silu, torch.nn.functional.silu, -3, 3),
  ("swish", Tensor.swish, torch.nn.functional.silu, -3, 3),
  ("mish", Tensor.mish, torch.nn.functional.mish, -3, 3),
  ("softplus", Tensor.softplus, torch.nn.functional.softplus, -3, 3),
  ("softplus_beta", lambda x: x.softplus(2.0), lambda x: torch.nn.functional.softplus(x, 2.0), -3, 3),
  ("softsign", Tensor.softsign, torch.nn.functional.softsign, -3, 3),
  ("sigmoid", Tensor.sigmoid, torch.sigmoid, -4, 4),
  ("hardsigmoid", Tensor.hardsigmoid, torch.nn.functional.hardsigmoid, -5, 5),
  ("hardswish", Tensor.hardswish, torch.nn.functional.hardswish, -5, 5),
  ("hardtanh", Tensor.hardtanh, torch.nn.functional.hardtanh, -3, 3),
  ("hardtanh_args", lambda x: x.hardtanh(-0.5, 2), lambda x: torch.nn.functional.hardtanh(x, -0.5, 2), -3, 3),
  ("logsigmoid", Tensor.logsigmoid, torch.nn.functional.logsigmoid, -4, 4),
  ("clip", lambda x: x.clip(-1, 0.5), lambda x: x.clip(-1, 0.5), -3, 3),
  ("clip_min", lambda x: x.clip(min_=0.2), lambda x: x.clip(min=0.2), -3, 3),
  ("clamp_max", lambda x: x.clamp(max_=0.2), lambda x: x.clamp(max=0.2), -3, 3),
  ("pow_2", lambda x: x ** 2, lambda x: x ** 2, -3, 3),
  ("pow_3", lambda x: x ** 3, lambda x: x ** 3, -3, 3),
  ("pow_neg2", lambda x: x ** -2, lambda x: x ** -2, 0.5, 3),
  ("pow_0.5", lambda x: x ** 0.5, lambda x: x ** 0.5, 0.1, 3),
  ("pow_1.7", lambda x: x ** 1.7, lambda x: x ** 1.7, 0.1, 3),
  ("rpow", lambda x: 2.5 ** x, lambda x: 2.5 ** x, -2, 2),
  ("pow_0", lambda x: x ** 0, lambda x: x ** 0, -2, 2),
]

@pytest.mark.parametrize("name,fn,tfn,lo,hi", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fn, tfn, lo, hi, dev):
  x = _rng().uniform(lo, hi, (3, 5)).astype(np.float32)
  if name in ("relu", "relu6", "leaky_relu", "leaky_relu_0.2", "hardtanh", "hardsigmoid", "hardswish", "clip"): x[np.abs(x) < 0.05] = 0.3
  check(fn, tfn, [x], dev, atol=2e-5, rtol=2e-4)

SPECIAL = np.array([math.nan, math.inf, -math.inf, 0.0, 1.0, -1.0, 0.5, -0.5, 30.0, -30.0, 1e-3, 2.5], dtype=np.float32)
SPECIAL_FNS = ["exp", "exp2", "log", "log2", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs", "sign", "floor", "ceil", "round", "trunc",
               "atan", "asin", "acos", "asinh", "acosh", "atanh", "sinh", "cosh", "erf", "softplus", "logsigmoid", "elu", "leaky_relu",
               "relu6", "hardtanh", "hardsigmoid", "hardswish", "log1p", "reciprocal", "rsqrt", "square", "neg", "clip"]

@pytest.mark.parametrize("name", SPECIAL_FNS)
def test_unary_special_values(name, dev):
  """NaN, +-inf, 0 and large values behave as in PyTorch."""
  fn, tfn = next((u[1], u[2]) for u in UNARY if u[0] == name)
  out = fn(Tensor(SPECIAL, device=dev)).numpy()
  ref = tfn(torch.tensor(SPECIAL)).numpy()
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-6, equal_nan=True)

def test_special_isnan_isinf_isfinite(dev):
  t = Tensor(SPECIAL, device=dev)
  p = torch.tensor(SPECIAL)
  np.testing.assert_equal(t.isnan().numpy(), torch.isnan(p).numpy())
  np.testing.assert_equal(t.isinf().numpy(), torch.isinf(p).numpy())
  np.testing.assert_equal(t.isinf(detect_negative=False).numpy(), torch.isposinf(p).numpy())
  np.testing.assert_equal(t.isinf(detect_positive=False).numpy(), torch.isneginf(p).numpy())
  np.testing.assert_equal(t.isfinite().numpy(), torch.isfinite(p).numpy())
  i = Tensor([1, 2, 3], device=dev)
  assert not i.isnan().numpy().any() and i.isfinite().numpy().all() and i.isnan().dtype == dtypes.bool

def test_round_half_to_even(dev):
  x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, -3.5000002], dtype=np.float32)
  np.testing.assert_equal(Tensor(x, device=dev).round().numpy(), np.round(x))

def test_trunc_float32_needs_no_int64(dev):
  # int64 is optional (WebGPU lacks it): float32 rounds through int32, also at and beyond 2^23 where floats are integral
  x = np.array([-2.0**31, -8388609.0, -8388607.5, -2.7, -0.0, 0.5, 8388607.5, 8388608.0, 3e9, np.inf, -np.inf, np.nan], dtype=np.float32)
  t = Tensor(x, device=dev).trunc()
  si = [s for s in t.schedule() if s.ast.op is Ops.SINK][-1]
  assert dtypes.int64 not in {u.dtype for u in si.ast.toposort()}
  np.testing.assert_equal(t.numpy(), np.trunc(x))

def test_rounding_gradients_are_zero(dev):
  for fn in (Tensor.floor, Tensor.ceil, Tensor.round, Tensor.trunc, Tensor.sign):
    x = Tensor([0.3, -1.7, 2.5], device=dev, requires_grad=True)
    (fn(x) * 3).sum().backward()
    np.testing.assert_equal(x.grad.numpy(), [0, 0, 0])

BINARY = [
  ("add", lambda a, b: a + b, lambda a, b: a + b),
  ("sub", lambda a, b: a - b, lambda a, b: a - b),
  ("mul", lambda a, b: a * b, lambda a, b: a * b),
  ("div", lambda a, b: a / b, lambda a, b: a / b),
  ("maximum", Tensor.maximum, torch.maximum),
  ("minimum", Tensor.minimum, torch.minimum),
  ("pow", lambda a, b: a.abs() ** b, lambda a, b: a.abs() ** b),
  ("copysign", Tensor.copysign, torch.copysign),
  ("lerp", lambda a, b: a.lerp(b, 0.3), lambda a, b: torch.lerp(a, b, 0.3)),
  ("lerp_t", lambda a, b: a.lerp(b, b.sigmoid()), lambda a, b: torch.lerp(a, b, b.sigmoid())),
  ("fmod", Tensor.fmod, torch.fmod),
  ("mod", lambda a, b: a % b, lambda a, b: torch.remainder(a, b)),
]

@pytest.mark.parametrize("name,fn,tfn", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((4,), (2, 3, 4)), ((), (2, 3))], ids=["same", "outer", "lead", "scalar"])
def test_binary(name, fn, tfn, shapes, dev):
  r = _rng(2)
  a = r.uniform(-3, 3, shapes[0]).astype(np.float32)
  b = r.uniform(-3, 3, shapes[1]).astype(np.float32)
  if name in ("div", "fmod", "mod", "pow"): b = np.where(np.abs(b) < 0.5, 1.3, b).astype(np.float32)
  if name in ("maximum", "minimum"): b = b + 0.01  # no ties
  grad = name not in ("fmod", "mod", "copysign")
  check(fn, tfn, [a, b], dev, grad=grad, atol=1e-5, rtol=1e-4)

def test_fmod_mod_gradients(dev):
  # d/da fmod(a, b) = 1 and d/da remainder = 1 away from the jumps
  a = Tensor([5.3, -5.3, 2.2], device=dev, requires_grad=True)
  (a.fmod(2.0) + a % 2.0).sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), [2, 2, 2])

def test_copysign_signed_zero(dev):
  a = Tensor([1.0, 2.0, -3.0, 0.0], device=dev)
  b = Tensor([-0.0, 0.0, 1.0, -1.0], device=dev)
  np.testing.assert_equal(np.signbit(a.copysign(b).numpy()), [True, False, False, True])

@pytest.mark.parametrize("op", ["add", "mul", "maximum", "minimum", "div", "sub", "pow"])
def test_binary_nan_inf(op, dev):
  a = np.array([math.nan, math.inf, -math.inf, 1.0, math.inf, 0.0, 2.0], np.float32)
  b = np.array([1.0, math.nan, 2.0, math.inf, -math.inf, 0.0, -math.inf], np.float32)
  fn = {"add": lambda x, y: x + y, "mul": lambda x, y: x * y, "maximum": lambda x, y: x.maximum(y) if isinstance(x, Tensor) else torch.maximum(x, y),
        "minimum": lambda x, y: x.minimum(y) if isinstance(x, Tensor) else torch.minimum(x, y), "div": lambda x, y: x / y,
        "sub": lambda x, y: x - y, "pow": lambda x, y: x ** y}[op]
  np.testing.assert_allclose(fn(Tensor(a, device=dev), Tensor(b, device=dev)).numpy(), fn(torch.tensor(a), torch.tensor(b)).numpy(), equal_nan=True)

def test_pow_negative_base_and_zero(dev):
  a = np.array([-2.0, -2.0, -8.0, 0.0, 0.0, 0.0, 3.0], np.float32)
  b = np.array([2.0, 3.0, 1 / 3, 0.0, -1.0, 2.0, -1.0], np.float32)
  ref = (torch.tensor(a) ** torch.tensor(b)).numpy()
  np.testing.assert_allclose((Tensor(a, device=dev) ** Tensor(b, device=dev)).numpy(), ref, rtol=1e-6, equal_nan=True)

@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64, np.uint8])
def test_int_arithmetic(dt, dev):
  r = _rng(3)
  info = np.iinfo(dt)
  a = r.integers(max(info.min, -50), min(info.max, 50), (4, 5)).astype(dt)
  b = r.integers(1, min(info.max, 7), (4, 5)).astype(dt)
  if info.min < 0: b = (b * np.where(r.random((4, 5)) < 0.5, -1, 1)).astype(dt)
  ta, tb = Tensor(a, device=dev), Tensor(b, device=dev)
  pa, pb = torch.tensor(a), torch.tensor(b)
  for f in (lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x // y, lambda x, y: x % y,
            lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y, lambda x, y: x.maximum(y) if isinstance(x, Tensor) else torch.maximum(x, y),
            lambda x, y: x.minimum(y) if isinstance(x, Tensor) else torch.minimum(x, y), lambda x, y: x < y, lambda x, y: x >= y,
            lambda x, y: x == y):
    out = f(ta, tb)
    ref = f(pa, pb)
    assert out.dtype.name == {np.int8: "char", np.int32: "int", np.int64: "long", np.uint8: "uchar"}[dt] or out.dtype == dtypes.bool
    np.testing.assert_equal(out.numpy(), ref.numpy())
  np.testing.assert_equal((ta.fmod(tb)).numpy(), torch.fmod(pa, pb).numpy())
  np.testing.assert_equal(ta.abs().numpy(), pa.abs().numpy() if info.min < 0 else pa.numpy())
  np.testing.assert_equal((~ta).numpy(), (~pa).numpy())
  np.testing.assert_equal(ta.sign().numpy(), pa.sign().numpy())

def test_int_pow(dev):
  a = np.array([2, -3, 5, 0, 1, -1, 7], np.int32)
  e = np.array([3, 3, 0, 4, 9, 5, 2], np.int32)
  out = Tensor(a, device=dev) ** Tensor(e, device=dev)
  assert out.dtype == dtypes.int32
  np.testing.assert_equal(out.numpy(), a ** e)
  assert (Tensor(a, device=dev) ** 2).dtype == dtypes.int32
  np.testing.assert_equal((Tensor(a, device=dev) ** 3).numpy(), a ** 3)
  neg = Tensor([1, -1, -1, 2], device=dev) ** Tensor([-2, -3, -2, -1], device=dev)
  np.testing.assert_equal(neg.numpy(), [1, -1, 1, 0])

def test_shifts(dev):
  a = Tensor(np.array([1, 7, 255, 1024], np.int32), device=dev)
  np.testing.assert_equal((a << 3).numpy(), np.array([1, 7, 255, 1024]) << 3)
  np.testing.assert_equal((a >> 2).numpy(), np.array([1, 7, 255, 1024]) >> 2)
  sh = Tensor([1, 2, 3, 4], device=dev, dtype=dtypes.int32)
  np.testing.assert_equal(a.lshift(sh).numpy(), np.array([1, 7, 255, 1024]) << np.array([1, 2, 3, 4]))
  with pytest.raises(TypeError, match="integer"): Tensor([1.0]) << 2

def test_bool_logic(dev):
  a = Tensor([True, False, True, False], device=dev)
  b = Tensor([True, True, False, False], device=dev)
  np.testing.assert_equal((a & b).numpy(), [True, False, False, False])
  np.testing.assert_equal((a | b).numpy(), [True, True, True, False])
  np.testing.assert_equal((a ^ b).numpy(), [False, True, True, False])
  np.testing.assert_equal((~a).numpy(), [False, True, False, True])
  np.testing.assert_equal(a.logical_not().numpy(), [False, True, False, True])
  np.testing.assert_equal(a.logical_and(b).numpy(), [True, False, False, False])
  np.testing.assert_equal(a.logical_or(b).numpy(), [True, True, True, False])
  np.testing.assert_equal(a.logical_xor(b).numpy(), [False, True, True, False])
  assert (a + 1).dtype == dtypes.int32
  np.testing.assert_equal((a + b).numpy(), [True, True, True, False])

def test_comparisons_with_nan(dev):
  a = np.array([1.0, math.nan, 2.0, math.inf, -0.0], np.float32)
  b = np.array([1.0, 1.0, math.nan, math.inf, 0.0], np.float32)
  ta, tb, pa, pb = Tensor(a, device=dev), Tensor(b, device=dev), torch.tensor(a), torch.tensor(b)
  for f in (lambda x, y: x < y, lambda x, y: x <= y, lambda x, y: x > y, lambda x, y: x >= y, lambda x, y: x == y, lambda x, y: x != y):
    out = f(ta, tb)
    assert out.dtype == dtypes.bool
    np.testing.assert_equal(out.numpy(), f(pa, pb).numpy())
  np.testing.assert_equal((ta.eq(tb)).numpy(), torch.eq(pa, pb).numpy())
  np.testing.assert_equal((ta.ne(1.0)).numpy(), torch.ne(pa, 1.0).numpy())
  np.testing.assert_equal((ta.ge(1.0)).numpy(), torch.ge(pa, 1.0).numpy())
  np.testing.assert_equal((ta.le(1.0)).numpy(), torch.le(pa, 1.0).numpy())
  np.testing.assert_equal((ta.gt(1.0)).numpy(), torch.gt(pa, 1.0).numpy())
  np.testing.assert_equal((ta.lt(1.0)).numpy(), torch.lt(pa, 1.0).numpy())

@pytest.mark.parametrize("a_dt,b_dt,expect", [
  (dtypes.int32, dtypes.float32, dtypes.float32), (dtypes.int8, dtypes.int16, dtypes.int16), (dtypes.bool, dtypes.int32, dtypes.int32),
  (dtypes.float16, dtypes.float32, dtypes.float32), (dtypes.int64, dtypes.float16, dtypes.float16), (dtypes.uint8, dtypes.int8, dtypes.int16),
  (dtypes.int32, dtypes.uint32, dtypes.int64), (dtypes.uint32, dtypes.int32, dtypes.int64)])
def test_dtype_promotion(a_dt, b_dt, expect):
  out = Tensor([1, 0], dtype=a_dt) + Tensor([1, 1], dtype=b_dt)
  assert out.dtype == expect

@pytest.mark.parametrize("dt,scalar,expect", [
  (dtypes.int8, 3, dtypes.int8), (dtypes.int32, 2.5, dtypes.float32), (dtypes.float16, 2.5, dtypes.float16), (dtypes.bool, 1, dtypes.int32),
  (dtypes.bool, True, dtypes.bool), (dtypes.uint8, 7, dtypes.uint8)])
def test_python_scalar_promotion(dt, scalar, expect):
  assert (Tensor([1, 0], dtype=dt) * scalar).dtype == expect
  assert (scalar * Tensor([1, 0], dtype=dt)).dtype == expect

def test_int_division_promotes(dev):
  out = Tensor([1, 2, 3], device=dev) / 2
  assert out.dtype == dtypes.float32
  np.testing.assert_allclose(out.numpy(), [0.5, 1.0, 1.5])
  np.testing.assert_equal(Tensor([-7, 7], device=dev).div(2, rounding_mode="floor").numpy(), [-4, 3])
  np.testing.assert_equal(Tensor([-7, 7], device=dev).div(2, rounding_mode="trunc").numpy(), [-3, 3])
  np.testing.assert_equal(Tensor([-7.5, 7.5], device=dev).div(2, rounding_mode="floor").numpy(), [-4, 3])
  np.testing.assert_equal(Tensor([-7, 7], device=dev).idiv(2).numpy(), [-3, 3])

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.float64])
def test_other_float_dtypes(dt, dev):
  x = _rng(4).uniform(0.2, 2, (3, 4))
  t = Tensor(x, device=dev, dtype=dt)
  for f, nf in ((Tensor.exp, np.exp), (Tensor.log, np.log), (Tensor.sqrt, np.sqrt), (Tensor.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
                (Tensor.sin, np.sin), (lambda v: v * 2 + 1, lambda v: v * 2 + 1)):
    out = f(t)
    assert out.dtype == dt
    tol = 2e-3 if dt == dtypes.float16 else 1e-10
    xin = x.astype(np.float16).astype(np.float64) if dt == dtypes.float16 else x
    np.testing.assert_allclose(out.numpy().astype(np.float64), nf(xin), rtol=tol, atol=tol)

def test_noncontiguous_inputs(dev):
  x = _rng(5).standard_normal((4, 6)).astype(np.float32)
  check(lambda a: a.permute(1, 0).exp() * 2, lambda a: a.permute(1, 0).exp() * 2, [x], dev)
  check(lambda a: a[1:3, ::2].sigmoid(), lambda a: a[1:3, ::2].sigmoid(), [x], dev)
  check(lambda a: a[:, :1].expand(4, 5).tanh(), lambda a: a[:, :1].expand(4, 5).tanh(), [x], dev)

def test_empty_and_size1(dev):
  e = Tensor.zeros(0, 3, device=dev)
  assert (e + 1).shape == (0, 3) and (e.exp() * 2).numpy().shape == (0, 3)
  one = Tensor([[2.0]], device=dev, requires_grad=True)
  (one.exp() * one).sum().backward()
  np.testing.assert_allclose(one.grad.numpy(), [[3 * math.exp(2)]], rtol=1e-5)

def test_errors():
  with pytest.raises(ValueError, match="broadcast"): Tensor.ones(2, 3) + Tensor.ones(4)
  with pytest.raises(TypeError, match="cannot combine"): Tensor.ones(2) + "a"
  with pytest.raises(TypeError, match="integer or bool"): Tensor([1.0]) & Tensor([2.0])
  with pytest.raises(TypeError, match="bool"): Tensor([True]) - Tensor([False])
  with pytest.raises(ValueError, match="at least one"): Tensor([1.0]).clip()
  with pytest.raises(ValueError, match="different devices"): Tensor([1.0], device="CLANG") + Tensor([1.0], device="PYTHON")
  with pytest.raises(TypeError, match="ambiguous"): bool(Tensor([1.0]))
  with pytest.raises(ValueError, match="rounding_mode"): Tensor([1.0]).div(2, rounding_mode="up")
  with pytest.raises(TypeError, match="idiv"): Tensor([1.0]).idiv(2)

def test_where(dev):
  r = _rng(6)
  c = r.random((3, 4)) > 0.5
  a, b = r.standard_normal((3, 4)).astype(np.float32), r.standard_normal((1, 4)).astype(np.float32)
  tc = Tensor(c, device=dev)
  ta, tb = Tensor(a, device=dev, requires_grad=True), Tensor(b, device=dev, requires_grad=True)
  pa, pb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
  out = tc.where(ta, tb)
  ref = torch.where(torch.tensor(c), pa, pb)
  np.testing.assert_allclose(out.numpy(), ref.detach().numpy())
  out.sum().backward(); ref.sum().backward()
  np.testing.assert_allclose(ta.grad.numpy(), pa.grad.numpy())
  np.testing.assert_allclose(tb.grad.numpy(), pb.grad.numpy())
  np.testing.assert_equal(tc.where(1, 0).numpy(), c.astype(np.int32))
  assert tc.where(1, 0).dtype == dtypes.int32 and tc.where(1.0, 0).dtype == dtypes.float32
  np.testing.assert_allclose(tc.where(ta, 2.5).numpy(), np.where(c, a, 2.5))
  np.testing.assert_allclose(Tensor(c.astype(np.float32), device=dev).where(ta, -1).numpy(), np.where(c, a, -1))
  with pytest.raises(ValueError, match="broadcast"): Tensor.ones(3, dtype=dtypes.bool).where(Tensor.ones(4), 0)

def test_masked_fill(dev):
  x = _rng(7).standard_normal((3, 4)).astype(np.float32)
  m = _rng(8).random((1, 4)) > 0.5
  out = Tensor(x, device=dev).masked_fill(Tensor(m, device=dev), -math.inf)
  np.testing.assert_equal(out.numpy(), torch.tensor(x).masked_fill(torch.tensor(m), -math.inf).numpy())
  with pytest.raises(TypeError, match="bool"): Tensor(x).masked_fill(Tensor([1, 0, 1, 0]), 0)

def test_compare_where_with_nan_constant(dev):
  x = Tensor([-1.0, 2.0], device=dev)
  np.testing.assert_equal(((x == 5).where(math.nan, x) < 0).numpy(), [True, False])

def test_isclose_allclose_sequential(dev):
  a = np.array([1.0, 1.0 + 1e-6, math.inf, math.nan, 2.0, -math.inf], np.float32)
  b = np.array([1.0, 1.0, math.inf, math.nan, 2.1, math.inf], np.float32)
  for kw in ({}, {"equal_nan": True}, {"rtol": 0.1}, {"atol": 0.2}):
    ref = torch.isclose(torch.tensor(a), torch.tensor(b), **kw).numpy()
    np.testing.assert_equal(Tensor(a, device=dev).isclose(Tensor(b, device=dev), **kw).numpy(), ref)
  # a 0-d bool Tensor, as tinygrad 0.14 (torch returns a python bool)
  close = Tensor([1.0, 2.0], device=dev).allclose(Tensor([1.0, 2.0 + 1e-7], device=dev))
  assert close.shape == () and close.dtype == dtypes.bool and close.item() is True
  assert Tensor([1, 2], device=dev).allclose([1, 3]).item() is False
  out = Tensor([1.0, -2.0], device=dev).sequential([lambda t: t * 2, Tensor.relu, lambda t: t + 1])
  assert out.tolist() == [3.0, 1.0]

def test_lazy_cast_of_padded_const(dev):
  lb = Tensor.ones(3, device=dev).pad(((1, 0),)).lazydata
  np.testing.assert_equal(Tensor(lb.cast(dtypes.int32)).numpy(), [0, 1, 1, 1])

def test_cast_of_padded_const(dev):
  np.testing.assert_equal(Tensor.ones(3, device=dev).pad(((1, 0),)).cast(dtypes.int32).numpy(), [0, 1, 1, 1])
  np.testing.assert_equal(Tensor.ones(2, device=dev).pad((1, 1), value=5.0).int().numpy(), [5, 1, 1, 5])

# *** tinygrad 0.14 semantics (issue 10): error classes, new ops ***
T23 = np.ones((2, 3), np.float32)
# (name, tinycore call, torch call, the class tinycore raised before): both must raise RuntimeError, and ours still the old class
RUNTIME_ERRORS = [
  ("matmul", lambda T: T(T23) @ T(T23), TypeError if False else ValueError),
  ("dot", lambda T: T(np.ones(3, np.float32)).dot(T(np.ones(2, np.float32))) if T is Tensor else T(np.ones(3)).dot(T(np.ones(2))), ValueError),
  ("permute", lambda T: T(T23).permute(0, 0), ValueError),
  ("reshape_two_minus_one", lambda T: T(T23).reshape(-1, -1), ValueError),
  ("flip_repeated", lambda T: T(T23).flip(0, 0) if T is Tensor else torch.flip(T(T23), (0, 0)), ValueError),
  ("roll", lambda T: T(T23).roll((1, 2), (0,)), ValueError),
  ("gather_ndim", lambda T: T(T23).gather(0, T(np.array([1, 0]))), ValueError),
  ("gather_float_index", lambda T: T(T23).gather(0, T(np.zeros((1, 3), np.float32))), TypeError),
  ("conv_dilation", lambda T: T(np.ones((1, 1, 3, 3), np.float32)).conv2d(T(np.ones((1, 1, 2, 2), np.float32)), dilation=3) if T is Tensor else
   torch.nn.functional.conv2d(T(np.ones((1, 1, 3, 3), np.float32)), T(np.ones((1, 1, 2, 2), np.float32)), dilation=3), ValueError),
  ("einsum_sizes", lambda T: (Tensor.einsum if T is Tensor else torch.einsum)("ij,jk->ik", T(T23), T(np.ones((4, 5), np.float32))), ValueError),
  ("sdpa_mask_and_causal", lambda T: (T(T23).scaled_dot_product_attention if T is Tensor else
   lambda k, v, **kw: torch.nn.functional.scaled_dot_product_attention(T(T23), k, v, **kw))(T(T23), T(T23), attn_mask=T(np.ones((2, 2), np.float32)),
   is_causal=True), ValueError),
  ("cross_entropy_target", lambda T: T(T23).cross_entropy(T(np.array([1, 2, 0]))), ValueError),  # (torch: ValueError; tinygrad: RuntimeError)
  ("scatter_ndim", lambda T: T(T23).scatter(0, T(np.array([1, 0, 1])), T(np.ones((1, 3), np.float32))), ValueError),
  ("scatter_reduce_name", lambda T: T(T23).scatter_reduce(0, T(np.array([[1, 0, 1]])), T(np.ones((1, 3), np.float32)), reduce="foo"), ValueError),
  ("rounding_mode", lambda T: T(T23).div(2, rounding_mode="up"), ValueError),
  ("shift_float", lambda T: T(T23) << 1, TypeError),
  ("int_pow_negative_int", lambda T: T(np.array([2, 3])) ** -1, None),
  ("unfold_step", lambda T: T(T23).unfold(1, 2, 0), ValueError),
]

@pytest.mark.parametrize("name,fn,old", RUNTIME_ERRORS, ids=[e[0] for e in RUNTIME_ERRORS])
def test_runtime_error_classes(name, fn, old):
  if name == "cross_entropy_target":
    import tinygrad
    tinygrad.helpers.DEV.value = "CPU"
    with pytest.raises(RuntimeError): fn(tinygrad.Tensor)
  else:
    with pytest.raises(RuntimeError): fn(torch.tensor)
  with pytest.raises(RuntimeError) as e: fn(Tensor)
  if old is not None: assert isinstance(e.value, old), f"{type(e.value).__name__} should still be a {old.__name__}"
  assert len(str(e.value)) > 10  # our message, naming the problem

def test_error_classes_module():
  from tinycore.errors import ShapeError, ArgumentError, DTypeError
  assert issubclass(ShapeError, RuntimeError) and issubclass(ShapeError, ValueError)
  assert issubclass(ArgumentError, RuntimeError) and issubclass(ArgumentError, ValueError)
  assert issubclass(DTypeError, RuntimeError) and issubclass(DTypeError, TypeError)

def test_int_pow_python_float_and_negative(dev):
  a = np.array([1, 2, 3, -4], np.int32)
  for e in (2.0, 0.5, -1.0, 3.0):
    out, ref = Tensor(a, device=dev) ** e, torch.tensor(a) ** e
    assert out.dtype == dtypes.float32 and ref.dtype == torch.float32
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6, equal_nan=True)
  import tinygrad
  tinygrad.helpers.DEV.value = "CPU"
  with pytest.raises(RuntimeError): tinygrad.Tensor([2, 3]) ** -1
  with pytest.raises(RuntimeError, match="negative integer power"): Tensor([2, 3], device=dev) ** -2
  np.testing.assert_equal((Tensor(a, device=dev) ** 0).numpy(), a ** 0)  # non-negative powers stay ints

def test_logaddexp(dev):
  a, b = _rng(1).standard_normal((3, 4)).astype(np.float32) * 5, _rng(2).standard_normal((4,)).astype(np.float32) * 5
  check(lambda x, y: x.logaddexp(y), torch.logaddexp, [a, b], dev)
  e = np.array([-np.inf, np.inf, -np.inf, 0.0, 1e30], np.float32)
  f = np.array([-np.inf, np.inf, 3.0, -np.inf, 1e30], np.float32)
  ref = torch.logaddexp(torch.tensor(e), torch.tensor(f)).numpy()
  np.testing.assert_allclose(Tensor(e, device=dev).logaddexp(Tensor(f, device=dev)).numpy(), ref)
  assert Tensor([1, 2], device=dev).logaddexp(3).dtype == dtypes.float32

def test_softmin_normalize_gelu_none(dev):
  x = _rng(3).standard_normal((3, 5)).astype(np.float32)
  check(lambda t: t.softmin(), lambda t: torch.nn.functional.softmin(t, -1), [x], dev)
  check(lambda t: t.softmin(0), lambda t: torch.nn.functional.softmin(t, 0), [x], dev)
  for p, d in ((2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1)):
    check(lambda t, p=p, d=d: t.normalize(p, d), lambda t, p=p, d=d: torch.nn.functional.normalize(t, p, d), [x], dev)
  z = np.zeros((2, 3), np.float32)
  np.testing.assert_equal(Tensor(z, device=dev).normalize().numpy(), torch.nn.functional.normalize(torch.tensor(z)).numpy())
  g = np.linspace(-5, 5, 41, dtype=np.float32)
  check(lambda t: t.gelu(approximate="none"), lambda t: torch.nn.functional.gelu(t), [g], dev, atol=1e-6)
  check(lambda t: t.gelu(approximate="tanh"), lambda t: torch.nn.functional.gelu(t, approximate="tanh"), [g], dev, atol=1e-6)
  with pytest.raises(RuntimeError, match="approximate"): Tensor(g).gelu(approximate="exact")

def test_api_round2_tinygrad_semantics():
  """assign broadcasts and sends the gradient to the new value; the in-place shift/floordiv operators keep the tensor
  object; data() has the shape and format; allclose is a Tensor; copysign keeps an int dtype; T swaps dims 0 and 1."""
  from tinycore.errors import DTypeError, DataError
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.uniform(1, 2, 3).astype(np.float32)
  x, y = Tensor(a), Tensor(b)
  x0 = x
  x /= y
  assert x is x0
  g = x.sum().gradient(y)[0]  # (built before x is realized: realizing writes into the buffer the old x was read from)
  np.testing.assert_allclose(g.numpy(), (-a / b ** 2).sum(0), rtol=1e-5)
  np.testing.assert_allclose(x.numpy(), a / b, rtol=1e-6)
  t = Tensor(a).contiguous().realize()
  t.assign(y)
  # as tinygrad 0.14: before the write is realized the gradient reaches the new value; once realized, t is a leaf
  np.testing.assert_allclose((t * 3).sum().gradient(y)[0].numpy(), np.full(3, 6.0))
  np.testing.assert_allclose(t.numpy(), np.broadcast_to(b, (2, 3)))
  np.testing.assert_allclose((t * 3).sum().gradient(y)[0].numpy(), np.zeros(3))
  with pytest.raises(ValueError): Tensor(a[:, :1].copy()).__ifloordiv__(Tensor(a[:1]))
  with pytest.raises(RuntimeError): Tensor([True, False]).__ilshift__(1)
  with pytest.raises(DTypeError): Tensor(a).assign(Tensor([[1, 2, 3]] * 2))
  i = Tensor([5, 9]); i0 = i; i >>= 1; i <<= 2; i //= 3
  assert i is i0 and i.tolist() == [(5 >> 1 << 2) // 3, (9 >> 1 << 2) // 3]
  assert Tensor(a).data().tolist() == a.tolist() and Tensor(np.int8(-1)).data().tolist() == -1
  c = Tensor(a).allclose(Tensor(a))
  assert isinstance(c, Tensor) and c.shape == () and c.item() is True
  s = Tensor([3, -4], dtype=dtypes.int8).copysign(Tensor([-1, 2], dtype=dtypes.int8))
  assert s.dtype == dtypes.int8 and s.tolist() == [-3, 4]
  assert Tensor.ones(2, 3, 4).T.shape == (3, 2, 4)
  with pytest.raises(ValueError): Tensor([[1, 2], [3]])
  with pytest.raises(DataError): Tensor([[1, 2], [3]])

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.int64, dtypes.bool])
def test_python_scalar_of_the_tensors_kind_matches_numpy(dt, dev):
  # an int with an int tensor and a bool with a bool tensor take the tensor's dtype (made on the lazy graph directly)
  rng = _rng(7)
  lo = -100 if dtypes.min(dt) < 0 else 0
  x = rng.integers(0, 2, (3, 5)).astype(bool) if dt == dtypes.bool else rng.integers(lo, 100, (3, 5)).astype(to_np_dtype(dt))
  t = Tensor(x, device=dev, dtype=dt)
  s = True if dt == dtypes.bool else 100
  for out, ref in (((t * s), x * x.dtype.type(s)), ((s * t), x.dtype.type(s) * x), ((t != s), x != s), ((t < s), x < s), ((s > t), s > x),
                   ((t == s).where(t, s), np.where(x == s, x, x.dtype.type(s)))):
    assert out.dtype == (dtypes.bool if ref.dtype == np.bool_ else dt)
    with np.errstate(over="ignore"): np.testing.assert_equal(out.numpy(), ref)
  if dt != dtypes.bool:
    with pytest.raises(OverflowError): t + (dtypes.max(dt) + 1)

def test_clip_gradient_on_the_bounds(dev):
  # a value equal to a bound is inside the range: gradient 1 as torch (a maximum/minimum tie gave 0.5)
  x = np.array([-3.0, -2.5, 0.0, 1.5, 2.0], np.float32)
  check(lambda t: t.clip(-2.5, 1.5), lambda t: t.clip(-2.5, 1.5), [x], dev)
  check(lambda t: t.clip(None, 1.5), lambda t: t.clip(None, 1.5), [x], dev)

def test_clip_without_bounds_is_a_runtime_error(dev):
  with pytest.raises(RuntimeError): torch.zeros(2).clip(None, None)
  with pytest.raises(RuntimeError): Tensor.zeros(2, device=dev).clip(None, None)

def test_copysign_gradient_at_zero(dev):
  # |x| has gradient 0 at x = 0 in torch, so copysign(+-0, y) does too
  x, y = np.array([0.0, -0.0, 0.0, 2.0, -1.0], np.float32), np.array([1.0, 1.0, -1.0, -1.0, 0.0], np.float32)
  check(lambda t: t.copysign(Tensor(y, device=dev)), lambda t: torch.copysign(t, torch.tensor(y)), [x], dev)

@pytest.mark.parametrize("shape", [(3, 2), (2, 3), (4, 4), (2, 4, 3), (1, 1)])
def test_qr_against_numpy(shape, dev):
  # Householder QR: Q orthogonal, R upper triangular, Q R = A; R's diagonal equals numpy's up to sign (the sign convention
  # is tinygrad's: each reflection sends the column to -sign(x_k)|x|)
  a = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
  q, r = (t.numpy() for t in Tensor(a, device=dev).qr())
  m = shape[-2]
  assert q.shape == (*shape[:-2], m, m) and r.shape == shape
  np.testing.assert_allclose(q @ r, a, atol=1e-5)
  np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(m), q.shape), atol=1e-5)
  np.testing.assert_allclose(np.tril(r, -1), 0, atol=1e-5)
  ref = np.linalg.qr(a.astype(np.float64), mode="complete")[1]
  np.testing.assert_allclose(np.abs(np.diagonal(r, axis1=-2, axis2=-1)), np.abs(np.diagonal(ref, axis1=-2, axis2=-1)), atol=1e-5)

def test_qr_gradient_against_torch(dev):
  a = np.random.default_rng(4).standard_normal((3, 3)).astype(np.float32)  # torch differentiates complete QR of square ones
  # torch's R differs from ours by row signs: compare a sign-free function of R, the squares of its entries
  check(lambda t: t.qr()[1].square(), lambda t: torch.linalg.qr(t, mode="complete")[1].square(), [a], dev, atol=1e-4)

def _conditioned(shape: tuple[int, ...], cond: float, seed: int) -> np.ndarray:
  """A random matrix (batch) with singular values spread geometrically from 1 down to 1/cond."""
  r = np.random.default_rng(seed)
  m, n = shape[-2:]
  u, _ = np.linalg.qr(r.standard_normal((*shape[:-2], m, m)))
  v, _ = np.linalg.qr(r.standard_normal((*shape[:-2], n, n)))
  s = np.zeros((*shape[:-2], m, n))
  for i in range(min(m, n)): s[..., i, i] = cond ** (-i / max(min(m, n) - 1, 1))
  return (u @ s @ v).astype(np.float32)

@pytest.mark.parametrize("shape,cond", [((3, 2), 0), ((2, 3), 0), ((2, 4, 3), 0), ((1, 1), 0), ((6, 3), 1e4), ((4, 4), 1e5)], ids=str)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_against_numpy(shape, cond, full_matrices, dev):
  # one-sided Jacobi: S as numpy's (float64) within float32 precision, U and V orthonormal, U S Vh = A; shapes as numpy
  a = _conditioned(shape, cond, 5) if cond else np.random.default_rng(5).standard_normal(shape).astype(np.float32)
  u, s, vh = (t.numpy() for t in Tensor(a, device=dev).svd(full_matrices))
  ru, rs, rvh = np.linalg.svd(a.astype(np.float64), full_matrices=full_matrices)
  assert (u.shape, s.shape, vh.shape) == (ru.shape, rs.shape, rvh.shape)
  np.testing.assert_allclose(s, rs, atol=2e-6 * rs.max(), rtol=0)
  k = s.shape[-1]
  np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=3e-6 * rs.max())
  for g in (np.swapaxes(u, -1, -2) @ u, vh @ np.swapaxes(vh, -1, -2)):
    np.testing.assert_allclose(g, np.broadcast_to(np.eye(g.shape[-1]), g.shape), atol=3e-6)
  # the vectors equal numpy's up to the sign of each pair, within float32's eps * |A| / (the gap to the nearest other value)
  sign = np.sign(np.sum(u[..., :, :k] * ru[..., :, :k], axis=-2, keepdims=True))
  gap = np.min(np.abs(rs[..., :, None] - rs[..., None, :]) + np.eye(k) * rs.max(), axis=-1)
  assert (np.abs(u[..., :, :k] * sign - ru[..., :, :k]) <= 2e-5 + 5e-6 * rs.max(-1, keepdims=True)[..., None] / gap[..., None, :]).all()

def test_svd_gradient_against_torch():
  # gradients follow the Jacobi rotations; torch differentiates the reduced svd with distinct singular values: compare
  # sign-free functions of S and U (CLANG only: the unrolled graph is slow to differentiate on the PYTHON device)
  a = np.random.default_rng(6).standard_normal((2, 3, 2)).astype(np.float32)
  check(lambda t: t.svd()[1], lambda t: torch.linalg.svd(t)[1], [a[:, :2]], "CLANG", atol=1e-5)
  check(lambda t: t.svd(False)[1], lambda t: torch.linalg.svd(t, full_matrices=False)[1], [a], "CLANG", atol=1e-5)
  check(lambda t: t.svd(False)[0].square(), lambda t: torch.linalg.svd(t, full_matrices=False)[0].square(), [a], "CLANG", atol=1e-4)

def test_svd_needs_a_matrix():
  with pytest.raises(RuntimeError, match="2 dims"): Tensor.ones(3).svd()
