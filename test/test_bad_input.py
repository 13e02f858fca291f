"""Bad input and edge values (issue 11): Python ints that do not fit, integer division by zero and MIN // -1, and a
differential test of every ALU op on edge values (0, -0.0, MIN, MAX, the dtype's limits, NaN, inf, denormals) against
numpy, on every runnable device, the devices agreeing."""
import math
import numpy as np
import pytest
import torch
from tinycore import Device, Tensor, dtypes
from tinycore.device import is_dtype_supported
from tinycore.ops import Ops

EXECUTED = ("CLANG", "PYTHON", "OPENCL", "LLVM", "WEBGPU")  # the differential tests compare every device that runs here
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]

def _runnable(dev: str) -> str:
  try:
    if Device.can_open(dev):
      Tensor([1], device=dev).numpy()
      return dev
  except Exception as e:  # noqa: BLE001  any reason a device cannot run here is reported in the skip
    pytest.skip(f"{dev} cannot run here: {type(e).__name__}: {e}")
  pytest.skip(f"{dev} cannot run here")

@pytest.fixture(params=["CLANG", "PYTHON", "OPENCL", "LLVM"])
def anydev(request) -> str:
  return _runnable(request.param)

# *** Python ints that do not fit: int64 where torch picks it, else OverflowError; never a silent truncation ***

def test_big_int_list_is_int64_like_torch():
  for data in ([2**40], [[1, -2**40], [3, 4]], [2**31], [-2**31 - 1], 2**40):
    t, ref = Tensor(data), torch.tensor(data)
    assert t.dtype == dtypes.int64 and str(ref.dtype) == "torch.int64"
    np.testing.assert_array_equal(t.numpy(), ref.numpy())
  assert Tensor([2**31 - 1]).dtype == dtypes.int32 and Tensor.full((2,), 2**40).numpy().tolist() == [2**40] * 2

@pytest.mark.parametrize("make", [
  lambda: Tensor([1, 2]) + 2**40, lambda: Tensor([1, 2]) * 2**31, lambda: 2**40 - Tensor([1, 2]),
  lambda: Tensor([1, 2], dtype=dtypes.uint8) + 300, lambda: Tensor([1, 2], dtype=dtypes.uint8) + (-1),
  lambda: Tensor([2**63]), lambda: Tensor([[1], [2**70]]), lambda: Tensor([2**40], dtype=dtypes.int32), lambda: Tensor(2**40, dtype=dtypes.int32),
  lambda: Tensor([-1], dtype=dtypes.uint32), lambda: Tensor.full((2,), 2**40, dtype=dtypes.int32),
])
def test_int_that_does_not_fit_raises(make):
  with pytest.raises(OverflowError, match="does not fit"): make()

def test_int_that_does_not_fit_numpy_agrees():
  with pytest.raises(OverflowError): np.array([1, 2], np.int32) + 2**40  # numpy raises for the same input
  assert Tensor([2**63], dtype=dtypes.uint64).numpy().tolist() == [2**63]  # it fits the dtype asked for

def test_compare_with_int_outside_dtype():
  a = np.array([0, 1, 200, 255], np.uint8)
  t = Tensor(a)
  for y in (-1, 300, 2**40, -2**70):
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
      np.testing.assert_array_equal(getattr(t, op)(y).numpy(), getattr(a, op)(y), err_msg=f"{op} {y}")

def test_zero_d_numpy_stays_zero_d():
  for x in (np.array(2.5, np.float32), np.float32(1.0), np.array(False), np.int64(3)):
    assert Tensor(x).shape == tuple(torch.tensor(x).shape) == ()

# *** integer division: numpy's answer on every device, no trap ***

@pytest.mark.parametrize("dt", INT_DTYPES)
def test_int_division_by_zero_and_overflow(anydev, dt):
  info = np.iinfo(dt)
  a = np.array([7, info.max, info.min, 0, info.min, info.max, 5, info.min], dt)
  b = np.array([0, 0, 0, 0, 1, 1, 3, -1 if info.min else 2], dt)
  x, y = Tensor(a, device=anydev), Tensor(b, device=anydev)
  with np.errstate(all="ignore"):
    np.testing.assert_array_equal((x // y).numpy(), a // b)
    np.testing.assert_array_equal((x % y).numpy(), a % b)
    np.testing.assert_array_equal((x // 0).numpy(), a // np.array(0, dt))  # a constant zero (once a SIGILL)
    np.testing.assert_array_equal((x % 0).numpy(), a % np.array(0, dt))
  trunc = [0 if q == 0 else _wrap(_trunc_div(p, q), dt) for p, q in zip(a.tolist(), b.tolist())]
  np.testing.assert_array_equal(x.idiv(y).numpy(), np.array(trunc, dt))
  # the identity where the divisor is not zero (MIN // -1 aside: MIN * -1 overflows, which OpenCL C leaves undefined)
  assert ((x // y) * y + x % y == x).numpy()[4:7].all()

def _trunc_div(p: int, q: int) -> int: return abs(p) // abs(q) * (1 if (p < 0) == (q < 0) else -1)

@pytest.mark.parametrize("dt", ["int32", "int64"])
def test_signed_overflow_wraps_where_an_operand_repeats(anydev, dt):
  """C calls signed overflow undefined, and clang folded (a+1)<a to false and (a*2)//2 to a on CLANG and OPENCL; the
  op set says integers wrap (numpy's answer)."""
  i = np.iinfo(dt)
  a = np.array([i.max, i.max - 1, 5, -7, i.min, i.min + 1, 0], dt)
  x = Tensor(a, device=anydev)
  with np.errstate(over="ignore"):
    np.testing.assert_array_equal(((x + 1) < x).numpy(), (a + 1) < a)
    np.testing.assert_array_equal(((x * 2) // 2).numpy(), (a * 2) // 2)
    np.testing.assert_array_equal((-x < 0).numpy(), -a < 0)
    np.testing.assert_array_equal(((x << 1) >> 1).numpy(), (a << 1) >> 1)

def test_float_floordiv_mod_match_numpy_and_torch(anydev):
  a = np.array([7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 5.0, np.inf, 1.0, np.nan, -1.0, 1.0, 0.75], np.float32)
  b = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.0, 2.0, np.inf, 1.0, np.inf, -np.inf, 0.25], np.float32)
  x, y = Tensor(a, device=anydev), Tensor(b, device=anydev)
  with np.errstate(all="ignore"): ref_div, ref_mod = a // b, a % b
  np.testing.assert_array_equal((x // y).numpy(), ref_div)  # floor(a / b) gave inf for inf // 2 and -0 for -1 // inf
  np.testing.assert_array_equal((torch.tensor(a) // torch.tensor(b)).numpy(), ref_div)  # torch agrees with numpy
  np.testing.assert_array_equal((x % y).numpy(), ref_mod)
  rng = np.random.default_rng(0)
  a, b = rng.integers(-400, 400, 4000).astype(np.float32) / 4, rng.integers(-40, 40, 4000).astype(np.float32) / 8  # exact quotients and remainders
  with np.errstate(divide="ignore", invalid="ignore"): ref = a // b
  np.testing.assert_array_equal((Tensor(a, device=anydev) // Tensor(b, device=anydev)).numpy(), ref)

def test_float_floordiv_inexact_divisor(anydev):
  """1 // 0.1 is 9 in numpy and torch (0.1 is a little above a tenth): the remainder must be exact, a - q*b with one
  rounding. Only CLANG (through FMA contraction) got it until the product was taken in float64."""
  rng = np.random.default_rng(1)
  for dt in ("float32", "float16"):
    if not is_dtype_supported(getattr(dtypes, dt), anydev): continue
    a = np.concatenate([[1.0, 0.3, -0.3, 7.0], rng.uniform(-50, 50, 500)]).astype(dt)
    b = np.concatenate([[0.1, 0.1, 0.1, 0.7], rng.uniform(0.01, 3, 500) * rng.choice([-1, 1], 500)]).astype(dt)
    x, y = Tensor(a, device=anydev), Tensor(b, device=anydev)
    with np.errstate(divide="ignore", invalid="ignore"): ref_div, ref_mod, ref_fmod = a // b, a % b, np.fmod(a, b)
    np.testing.assert_array_equal((x // y).numpy(), ref_div, err_msg=dt)
    np.testing.assert_array_equal((x % y).numpy(), ref_mod, err_msg=dt)
    np.testing.assert_array_equal(x.fmod(y).numpy(), ref_fmod, err_msg=dt)

# *** differential test: every ALU op on edge values, against numpy, every device ***

def _int_edges(dt: str) -> np.ndarray:
  i = np.iinfo(dt)
  return np.array(sorted({0, 1, 2, 7, i.max, i.max - 1, i.min, i.min + 1} | ({-1, -2, -7} if i.min else set())), dt)

def _float_edges(dt: str) -> np.ndarray:
  f = np.finfo(dt)
  return np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, f.max, -f.max, f.tiny, -f.tiny, f.smallest_subnormal, -f.smallest_subnormal * 3,
                   np.inf, -np.inf, np.nan, 1e30 if dt == "float32" else 1e300], dt)

def _wrap(v: int, dt: str) -> int:
  bits = np.dtype(dt).itemsize * 8
  v &= (1 << bits) - 1
  return v - (1 << bits) if np.iinfo(dt).min and v >= 1 << (bits - 1) else v

def _int_ref(op: Ops, dt: str, a: int, b: int) -> int | bool:
  """The integer ALU ops, in Python ints: C semantics with wrapping, and numpy's 0 for a division by zero."""
  bits = np.dtype(dt).itemsize * 8
  return {Ops.ADD: lambda: _wrap(a + b, dt), Ops.MUL: lambda: _wrap(a * b, dt), Ops.MAX: lambda: max(a, b),
          Ops.IDIV: lambda: 0 if b == 0 else _wrap(_trunc_div(a, b), dt), Ops.MOD: lambda: 0 if b == 0 else a - _trunc_div(a, b) * b,
          Ops.CMPLT: lambda: a < b, Ops.CMPNE: lambda: a != b, Ops.AND: lambda: _wrap(a & b, dt), Ops.OR: lambda: _wrap(a | b, dt),
          Ops.XOR: lambda: _wrap(a ^ b, dt), Ops.SHL: lambda: _wrap(a << (b % bits), dt), Ops.SHR: lambda: a >> (b % bits)}[op]()

INT_TENSOR_OPS = {Ops.ADD: lambda x, y: x + y, Ops.MUL: lambda x, y: x * y, Ops.MAX: lambda x, y: x.maximum(y), Ops.IDIV: lambda x, y: x.idiv(y),
                  Ops.MOD: lambda x, y: x.fmod(y), Ops.CMPLT: lambda x, y: x < y, Ops.CMPNE: lambda x, y: x != y, Ops.AND: lambda x, y: x & y,
                  Ops.OR: lambda x, y: x | y, Ops.XOR: lambda x, y: x ^ y}

@pytest.mark.parametrize("dt", INT_DTYPES)
def test_int_alu_edges(dt):
  """Every binary integer ALU op on every pair of edge values; shifts by amounts inside the width (a shift past it is
  undefined in C and not defined by tinycore either). The devices give numpy's (C's wrapping) answer, identically."""
  e = _int_edges(dt)
  a, b = np.repeat(e, len(e)), np.tile(e, len(e))
  bits = np.dtype(dt).itemsize * 8
  sh = (np.abs(b.astype(np.int64)) % bits).astype(dt)
  results = {}
  for dev in EXECUTED:
    try:
      if not is_dtype_supported(getattr(dtypes, dt), _runnable(dev)): continue  # WEBGPU: no 64-bit ints
      x, y, s = Tensor(a, device=dev), Tensor(b, device=dev), Tensor(sh, device=dev)
    except pytest.skip.Exception: continue
    out = {op: f(x, y).numpy() for op, f in INT_TENSOR_OPS.items()}
    out[Ops.SHL], out[Ops.SHR] = (x << s).numpy(), (x >> s).numpy()
    out[Ops.NEG] = (-x).numpy() if np.iinfo(dt).min else None
    results[dev] = out
  for op in INT_TENSOR_OPS:
    ref = [_int_ref(op, dt, p, q) for p, q in zip(a.tolist(), b.tolist())]
    for dev, out in results.items(): np.testing.assert_array_equal(out[op], np.array(ref, out[op].dtype), err_msg=f"{op} {dt} on {dev}")
  for op in (Ops.SHL, Ops.SHR):
    ref = [_int_ref(op, dt, p, q) for p, q in zip(a.tolist(), sh.tolist())]
    for dev, out in results.items(): np.testing.assert_array_equal(out[op], np.array(ref, out[op].dtype), err_msg=f"{op} {dt} on {dev}")
  if np.iinfo(dt).min:  # -MIN wraps to MIN (a documented choice: C leaves it undefined, every backend here wraps)
    for dev, out in results.items(): np.testing.assert_array_equal(out[Ops.NEG], np.array([_wrap(-v, dt) for v in a.tolist()], dt), err_msg=dev)

FLOAT_BINARY = {Ops.ADD: (lambda x, y: x + y, np.add), Ops.MUL: (lambda x, y: x * y, np.multiply), Ops.MAX: (lambda x, y: x.maximum(y), np.maximum),
                Ops.CMPLT: (lambda x, y: x < y, np.less), Ops.CMPNE: (lambda x, y: x != y, np.not_equal),
                Ops.MULACC: (lambda x, y: x * y + x, lambda a, b: a * b + a)}
FLOAT_UNARY = {Ops.NEG: (lambda x: -x, np.negative), Ops.RECIP: (lambda x: x.reciprocal(), np.reciprocal), Ops.SQRT: (lambda x: x.sqrt(), np.sqrt),
               Ops.EXP2: (lambda x: x.exp2(), np.exp2), Ops.LOG2: (lambda x: x.log2(), np.log2), Ops.SIN: (lambda x: x.sin(), np.sin)}

def _close(got: np.ndarray, ref: np.ndarray, exact: bool, msg: str) -> None:
  """Same NaNs, same infinities and signs of zero; finite values equal (exact ops) or within 1e-6 relative / one
  float32 tiny absolute (transcendentals). Zero and subnormal results may be flushed: the only deliberate difference
  allowed is a subnormal result read as a zero of the same sign (a device that flushes denormals)."""
  got, ref = got.astype(np.float64), ref.astype(np.float64)
  assert (np.isnan(got) == np.isnan(ref)).all(), f"{msg}: NaN where numpy has {ref[np.isnan(got) != np.isnan(ref)]}"
  fin = np.isfinite(ref)
  np.testing.assert_array_equal(got[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)], err_msg=msg)
  if exact: np.testing.assert_array_equal(got[fin], ref[fin], err_msg=msg)
  else: np.testing.assert_allclose(got[fin], ref[fin], rtol=2e-6, atol=2e-38, err_msg=msg)
  zero = fin & (ref == 0)
  assert (np.signbit(got[zero]) == np.signbit(ref[zero])).all(), f"{msg}: sign of zero"

@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_float_alu_edges(dt):
  e = _float_edges(dt)
  a, b = np.repeat(e, len(e)), np.tile(e, len(e))
  per_dev = {}
  for dev in EXECUTED:
    try:
      if not is_dtype_supported(getattr(dtypes, dt), _runnable(dev)): continue  # WEBGPU: no float64
      x, y = Tensor(a, device=dev), Tensor(b, device=dev)
    except pytest.skip.Exception: continue
    per_dev[dev] = ({op: f(x, y).numpy() for op, (f, _) in FLOAT_BINARY.items()}, {op: f(x).numpy() for op, (f, _) in FLOAT_UNARY.items()})
  with np.errstate(all="ignore"):
    for dev, (bins, unas) in per_dev.items():
      for op, (_, ref) in FLOAT_BINARY.items():
        exp = ref(a, b)
        if op is Ops.MULACC:  # a*b+a may run fused (one rounding): allow either rounding
          _close(bins[op], exp, False, f"{op} {dt} {dev}")
        elif op in (Ops.CMPLT, Ops.CMPNE): np.testing.assert_array_equal(bins[op], exp, err_msg=f"{op} {dt} {dev}")
        else: _close(bins[op], exp.astype(dt), True, f"{op} {dt} {dev}")
      for op, (_, ref) in FLOAT_UNARY.items():
        exp = ref(e.astype(np.float64)).astype(dt) if op in (Ops.SIN, Ops.EXP2, Ops.LOG2) else ref(e)
        got = unas[op][::len(e)]  # a repeats each edge len(e) times
        if op in (Ops.SIN,): got, exp = got[np.abs(e) < 1e4], exp[np.abs(e) < 1e4]  # sin of a huge argument: range reduction differs
        _close(got, exp, op in (Ops.NEG, Ops.SQRT, Ops.RECIP), f"{op} {dt} {dev}")
  assert per_dev, "no device ran"

def test_float_to_int_cast_in_range(anydev):
  """CAST float -> int truncates toward zero for every value that fits (outside the range C leaves it undefined)."""
  a = np.array([0.0, -0.0, 0.5, -0.5, 1.9, -1.9, 127.0, -128.0, 2.0**31 - 128, -2.0**31], np.float32)
  np.testing.assert_array_equal(Tensor(a, device=anydev).cast(dtypes.int32).numpy(), np.trunc(a).astype(np.int32))
  assert math.isnan(Tensor([float("nan")], device=anydev).numpy()[0])

def test_kernel_past_int32_index_indexes_in_int64(anydev):
  """Found by the vocab-50257 GPT step: the staged sum of a (1024 x 50257) @ (50257 x 256) matmul views 13e9 elements,
  past int32 index arithmetic; it wrapped around and segfaulted. Such a kernel now indexes in int64 where the renderer
  declares it: here a view whose offset lies past 2**32 (ten elements of a virtual 2**32-element broadcast)."""
  x = Tensor.arange(4, device=anydev).reshape(1, 4, 1).expand(2**20, 4, 2**10).reshape(-1)
  f = np.arange(2**32 - 1030, 2**32 - 1020)
  np.testing.assert_array_equal((x[2**32 - 1030:2**32 - 1020] + 0).numpy(), (f // 1024) % 4)
  small = np.random.default_rng(0).standard_normal((3, 40000)).astype(np.float32)  # a staged sum under the limit still runs
  np.testing.assert_allclose((Tensor(small) @ Tensor(small.T)).numpy(), small.astype(np.float64) @ small.T.astype(np.float64), rtol=1e-4)

def test_kernel_past_int32_index_is_refused_without_int64():
  """A renderer that declares no int64 cannot index past int32: the kernel is refused by name, before anything runs."""
  from tinycore.backend import Renderer
  from tinycore.codegen import get_kernel
  from tinycore.codegen.lowerer import lower
  from tinycore.engine.schedule import create_schedule
  x = Tensor.arange(4).reshape(1, 4, 1).expand(2**20, 4, 2**10).reshape(-1)
  ast = create_schedule([(x[2**32 - 1030:2**32 - 1020] + 0).lazydata])[-1].ast
  with pytest.raises(OverflowError, match="int32 index arithmetic.*declares no int64"): lower(get_kernel(ast, Renderer()))
