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
