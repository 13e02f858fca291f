"""End to end: tinycore Tensors on OPENCL, scheduled, code-generated, rendered by this plugin, run, compared with numpy."""
from __future__ import annotations
import numpy as np
import pytest

@pytest.fixture(scope="module")
def T(cldev):
  from tinycore import Tensor
  from tinycore.device import Device
  Device["OPENCL"]  # opens through the registry
  return lambda x, **kw: Tensor(x, device="OPENCL", **kw)

RNG = np.random.default_rng(0)
A = RNG.standard_normal((33, 17)).astype(np.float32)
B = RNG.standard_normal((17, 9)).astype(np.float32)

def close(got, want, tol=1e-4): np.testing.assert_allclose(got, want, rtol=tol, atol=tol)

def test_device(T): assert T(A).device == "OPENCL"

def test_elementwise(T):
  a = T(A)
  close((a + 1).numpy(), A + 1)
  close((a * a - a / 3).numpy(), A * A - A / 3)
  close(a.exp().numpy(), np.exp(A))
  close(a.abs().sqrt().numpy(), np.sqrt(np.abs(A)))
  close(a.sin().numpy(), np.sin(A))
  close(a.relu().numpy(), np.maximum(A, 0))
  close(a.maximum(0.5).numpy(), np.maximum(A, 0.5))

def test_reduce(T):
  a = T(A)
  close(a.sum().numpy(), A.sum())
  close(a.sum(1).numpy(), A.sum(1))
  close(a.max(0).numpy(), A.max(0))
  close(a.mean(1).numpy(), A.mean(1))

def test_large_sums_are_accurate(T):
  # float32 accumulators stop at 2**24 ones: long sums are staged into short partial sums (on every backend)
  from tinycore import Tensor
  n = 2**27
  assert Tensor.ones(n, device="OPENCL").sum().item() == n and Tensor.ones(n, device="OPENCL").mean().item() == 1.0
  x = np.random.default_rng(0).random(2**24, dtype=np.float32)
  ref = x.astype(np.float64).sum()
  assert abs(T(x).sum().item() - ref) / ref < 1e-6  # (one float32 accumulator: off by percents)

def test_matmul(T): close((T(A) @ T(B)).numpy(), A @ B)

def test_movement(T):
  a = T(A)
  close(a.permute(1, 0).contiguous().numpy(), A.T)
  close(a.pad(((1, 2), (0, 3))).numpy(), np.pad(A, ((1, 2), (0, 3))))
  close(a.shrink(((2, 10), (3, 7))).numpy(), A[2:10, 3:7])
  close(a.flip(0).numpy(), A[::-1])
  close(a.reshape(17, 33).expand(2, 17, 33).numpy(), np.broadcast_to(A.reshape(17, 33), (2, 17, 33)))

def test_ints_and_bools(T):
  x = np.arange(-20, 20, dtype=np.int32)
  t = T(x)
  np.testing.assert_array_equal((t * 3).numpy(), x * 3)
  np.testing.assert_array_equal((t > 0).numpy(), x > 0)
  np.testing.assert_array_equal(t.sum().numpy(), x.sum())
  np.testing.assert_array_equal((T(A) > 0).where(T(A), 0.0).numpy(), np.where(A > 0, A, 0.0).astype(np.float32))

def test_backward(T):
  x = T(A, requires_grad=True)
  (x * x).sum().backward()
  close(x.grad.numpy(), 2 * A)

def test_double(T, renderer):
  from tinycore.dtype import dtypes
  if dtypes.float64 not in renderer.supported_dtypes(): pytest.skip("this device does not declare float64 (no cl_khr_fp64)")
  x = A.astype(np.float64)
  close(T(x).exp().sum(0).numpy(), np.exp(x).sum(0), tol=1e-10)

def test_bigger_matmul(T):
  # big enough that the heuristics use local dims and upcasts
  x, y = RNG.standard_normal((128, 96)).astype(np.float32), RNG.standard_normal((96, 64)).astype(np.float32)
  close((T(x) @ T(y)).numpy(), x @ y, tol=1e-3)

def test_grouped_reduce(T):
  # a long full reduction: the heuristic splits it across a work-group, with local memory and a barrier
  z = RNG.standard_normal((4096,)).astype(np.float32)
  close(T(z).sum().numpy(), z.sum(), tol=1e-3)
  close(T(z.reshape(8, 512)).max(1).numpy(), z.reshape(8, 512).max(1))

def test_conv2d(T):
  x, w = RNG.standard_normal((2, 3, 9, 9)).astype(np.float32), RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
  got = T(x).conv2d(T(w)).numpy()
  want = np.zeros((2, 4, 7, 7), np.float32)
  for i in range(7):
    for j in range(7): want[:, :, i, j] = np.einsum("bchw,ochw->bo", x[:, :, i:i + 3, j:j + 3], w)
  close(got, want, tol=1e-3)
