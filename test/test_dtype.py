"""dtypes: promotion as tinygrad does it, numpy conversion, and what a Tensor computes in each dtype."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.dtype import least_upper_dtype, to_np_dtype, from_np_dtype, f32_to_bf16, bf16_to_f32, to_dtype

def test_promotion_lattice():
  assert least_upper_dtype(dtypes.int32, dtypes.float16) == dtypes.float16
  assert least_upper_dtype(dtypes.uint8, dtypes.int8) == dtypes.int16
  assert least_upper_dtype(dtypes.bool, dtypes.int8) == dtypes.int8
  assert least_upper_dtype(dtypes.float16, dtypes.bfloat16) == dtypes.float32
  assert least_upper_dtype(dtypes.uint64, dtypes.int64) == dtypes.float16
  assert all(least_upper_dtype(d, d) == d for d in dtypes.all)

def test_numpy_conversion_round_trip():
  for d in dtypes.all:
    if d == dtypes.bfloat16: continue
    assert from_np_dtype(to_np_dtype(d)) == d

def test_bfloat16_rounding_matches_float64_reference():
  x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
  back = bf16_to_f32(f32_to_bf16(x))
  assert np.all(np.abs(back - x) <= np.abs(x) * 2.0**-8)

def test_unknown_dtype_name():
  with pytest.raises(TypeError, match="unknown dtype 'float33'"): to_dtype("float33")

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.float16, dtypes.float32, dtypes.float64])
def test_arithmetic_in_each_dtype(device, dt):
  from tinycore.device import is_dtype_supported
  if not is_dtype_supported(dt, device): pytest.skip(f"{device} does not declare {dt}")
  rng = np.random.default_rng(1)
  a = rng.integers(-50 if not dtypes.is_unsigned(dt) else 0, 50, 33).astype(to_np_dtype(dt))
  b = rng.integers(1, 9, 33).astype(to_np_dtype(dt))
  with np.errstate(all="ignore"):
    np.testing.assert_array_equal((Tensor(a) * Tensor(b) + Tensor(a)).numpy(), a * b + a)
  out = Tensor(a) + Tensor(b).cast(dtypes.float32)
  assert out.dtype == least_upper_dtype(dt, dtypes.float32)

def test_int_overflow_wraps(device):
  a = np.array([127, -128, 100], np.int8)
  np.testing.assert_array_equal((Tensor(a) + 1).numpy(), (a.astype(np.int16) + 1).astype(np.int8))

def test_dtype_min_max_properties():
  # DType.min / .max, as tinygrad 0.14 (floats: -inf/inf, bool: False/True), against numpy's limits
  for d in dtypes.ints:
    info = np.iinfo(to_np_dtype(d))
    assert (d.min, d.max) == (int(info.min), int(info.max))
  for d in dtypes.floats: assert (d.min, d.max) == (-np.inf, np.inf)
  assert (dtypes.bool.min, dtypes.bool.max) == (False, True)
  import tinygrad
  assert all((d.min, d.max) == (getattr(tinygrad.dtypes, d.name).min, getattr(tinygrad.dtypes, d.name).max) for d in dtypes.all)

def test_to_dtype_any_case():
  assert to_dtype("HALF") == dtypes.float16 and to_dtype("Float32") == dtypes.float32 and to_dtype("bfloat16") == dtypes.bfloat16

# *** bfloat16 on CLANG: emulated in float, rounded to bf16 after every op, against torch's bfloat16 ***
def _bf16_cases():
  return {"mul_add": (lambda a, b: a * b + a), "div": (lambda a, b: a / (b.abs() + 1)), "exp": (lambda a, b: a.exp()),
          "sqrt": (lambda a, b: a.abs().sqrt()), "max": (lambda a, b: a.maximum(b)), "cmp": (lambda a, b: (a < b) + (a != b) + (a.abs() <= b)),
          "sum": (lambda a, b: a.sum(1)), "matmul": (lambda a, b: a @ b.transpose(-1, -2)), "neg_sin": (lambda a, b: (-a).sin())}

@pytest.mark.parametrize("name", list(_bf16_cases()))
def test_bfloat16_ops_match_torch(name, device):
  import torch
  from tinycore.device import is_dtype_supported
  assert is_dtype_supported(dtypes.bfloat16, device), f"{device} should declare bfloat16"
  rng = np.random.default_rng(2)
  a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((5, 7)).astype(np.float32)
  f = _bf16_cases()[name]
  out = f(Tensor(a).cast(dtypes.bfloat16), Tensor(b).cast(dtypes.bfloat16))
  ref = f(torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16())
  assert out.dtype == (dtypes.bool if name == "cmp" else dtypes.bfloat16)
  assert out.shape == tuple(ref.shape)
  # elementwise ops round once, as torch; reductions and transcendentals may differ by a bf16 ulp (2^-8 relative)
  np.testing.assert_allclose(out.numpy(), ref.float().numpy(), rtol=2**-7, atol=2**-7)

@pytest.mark.parametrize("half", [dtypes.float16, dtypes.bfloat16])
def test_half_products_summed_exactly(half, device):
  # a 16-bit product of two halves rounded to half before its float32 sum lost up to half an ulp a term (ONNX's fp16
  # conv and attention tests, 1-2 ulps off numpy's reference); the products are exact in float32, as torch's and numpy's
  from tinycore.device import is_dtype_supported
  if not is_dtype_supported(half, device): pytest.skip(f"{device} has no {half}")
  rng = np.random.default_rng(3)
  a, b = (Tensor(rng.standard_normal(s).astype(np.float32)).cast(half) for s in ((6, 300), (300, 5)))
  x, w = (Tensor(rng.standard_normal(s).astype(np.float32)).cast(half) for s in ((2, 3, 9, 9), (4, 3, 3, 3)))
  a64, b64, x64, w64 = (t.cast(dtypes.float32).numpy().astype(np.float64) for t in (a, b, x, w))
  import torch
  conv64 = torch.nn.functional.conv2d(torch.from_numpy(x64), torch.from_numpy(w64)).numpy()
  for out, ref in ((a.dot(b, dtype=dtypes.float32), a64 @ b64), (x.conv2d(w, dtype=dtypes.float32), conv64)):
    assert out.dtype == dtypes.float32
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-5)  # rounded products: errors ~1e-3
  for out, ref in ((a @ b, a64 @ b64), (x.conv2d(w), conv64)):  # half out: the exact sum rounded once (summation order aside)
    assert out.dtype == half
    np.testing.assert_allclose(out.cast(dtypes.float32).numpy(), ref, rtol=2**-10 if half == dtypes.float16 else 2**-7, atol=1e-3)

def test_bfloat16_casts_and_bits(device):
  import torch
  x = np.array([1.0, -2.5, 3.0009765625, 1e-40, np.inf, -np.inf, 65504.0, 3.3895314e38], np.float32)
  t = Tensor(x).cast(dtypes.bfloat16)
  np.testing.assert_equal(t.numpy(), torch.tensor(x).bfloat16().float().numpy())
  np.testing.assert_equal(t.bitcast(dtypes.uint16).numpy(), torch.tensor(x).bfloat16().view(torch.int16).numpy().view(np.uint16))
  np.testing.assert_equal(t.cast(dtypes.int32)[:4].numpy(), [1, -2, 3, 0])
  assert np.isnan(Tensor([np.nan]).cast(dtypes.bfloat16).numpy()).all()
  bits = np.array([0x3FC0, 0xC020, 0x7F80], np.uint16)
  np.testing.assert_equal(Tensor(bits).bitcast(dtypes.bfloat16).numpy(), [1.5, -2.5, np.inf])

@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.float16, dtypes.bool])
def test_cast_of_padded_const_keeps_padding(device, dt):
  # a constant padded (a masked view of one value) then cast: the padding must stay 0 (a fold that dropped the mask
  # would fill it with the constant)
  from tinycore.device import is_dtype_supported
  if not is_dtype_supported(dt, device): pytest.skip(f"{device} does not declare {dt}")
  shapes = [((3,), ((1, 2),)), ((2, 2), ((1, 0), (0, 1)))]
  for shape, pad in shapes:
    got = Tensor.full(shape, 2.5, device=device).pad(pad).cast(dt).numpy()
    ref = np.pad(np.full(shape, 2.5, np.float64), pad).astype(to_np_dtype(dt))
    np.testing.assert_array_equal(got, ref)

def test_dtype_hash_and_equality_survive_pickling_into_another_process():
  # a dtype caches its hash; a string's hash differs per process, so a pickled dtype must work it out again when loaded
  import pickle, subprocess, sys
  data = pickle.dumps([dtypes.float32, dtypes.int8.vec(4), dtypes.float16.ptr()])
  code = ("import pickle, sys; from tinycore import dtypes; f, v, p = pickle.loads(sys.stdin.buffer.read()); "
          "assert {dtypes.float32: 1}[f] == 1 and f in {dtypes.float32} and v == dtypes.int8.vec(4) and hash(v) == hash(dtypes.int8.vec(4)); "
          "assert p == dtypes.float16.ptr() and p != dtypes.float16 and dtypes.is_float(f) and not dtypes.is_float(p)")
  subprocess.run([sys.executable, "-c", code], input=data, check=True, env={**__import__("os").environ, "PYTHONHASHSEED": "123"})
  assert dtypes.float32 == to_dtype("float") and dtypes.float32 != dtypes.float64 and (dtypes.float32 == 1.0) is False
  assert dtypes.is_int(dtypes.uint8) and dtypes.is_unsigned(dtypes.uint64) and not dtypes.is_int(dtypes.float32)

def test_bfloat16_scalar_constant_folding(device):
  """A bfloat16 expression whose scalar constants fold on the host (celu: alpha * (exp(x / alpha) - 1)) against torch's
  bfloat16: folding rounded through f32_to_bf16, which made a 0-d value 1-d, so the fold raised TypeError."""
  import torch
  from tinycore.dtype import f32_to_bf16
  assert f32_to_bf16(np.float32(1.5)).shape == np.asarray(np.float32(1.5)).shape == ()
  x = np.array([1.0, -2.0, 3.5, -0.25], np.float32)
  out = Tensor(x, device=device).cast(dtypes.bfloat16).celu(2.0)
  ref = torch.nn.functional.celu(torch.tensor(x).bfloat16(), alpha=2.0)
  np.testing.assert_allclose(out.float().numpy(), ref.float().numpy(), rtol=2**-7, atol=2**-7)

def test_unknown_dtype_name_is_a_type_and_attribute_error():
  # tinycore's TypeError, and tinygrad 0.14's AttributeError (it looks the name up on dtypes), for a name of no dtype
  for err in (TypeError, AttributeError):
    with pytest.raises(err): Tensor([1.0, 2.0]).sum(dtype="")
    with pytest.raises(err): Tensor([1.0, 2.0]).cast("float31")
