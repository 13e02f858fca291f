"""Fixes found by the compat suite's differential test, each checked against torch (or tinygrad 0.14 where torch has no answer)."""
import numpy as np, pytest, torch
from tinycore import Tensor, dtypes

def test_std_gradient_zero_where_std_is_zero():
  x = np.random.default_rng(0).standard_normal((1, 3)).astype(np.float32)
  a, ta = Tensor(x), torch.tensor(x, requires_grad=True)
  s, m = a.expand(2, 3).std_mean(0, keepdim=True)
  ts, tm = torch.std_mean(ta.expand(2, 3), dim=0, keepdim=True)
  (ts.sum() + tm.sum()).backward()
  np.testing.assert_allclose((s.sum() + m.sum()).gradient(a)[0].numpy(), ta.grad.numpy(), rtol=1e-6)

@pytest.mark.parametrize("fn,shape", [(lambda x: x.diag(), (0,)), (lambda x: x.unfold(0, 0, 1), (4,)), (lambda x: x.diagonal(), (2, 0))],
                         ids=["diag", "unfold", "diagonal"])
def test_empty_result_still_gives_zero_grad(fn, shape):
  x = Tensor.randn(*shape)
  out = fn(x)
  (out * 2).sum().backward()
  assert x.grad is not None and x.grad.shape == x.shape and not x.grad.numpy().any()

def test_unfold_size0_shape():
  assert Tensor.randn(7).unfold(0, 0, 2).shape == torch.randn(7).unfold(0, 0, 2).shape

def test_rearrange_unit_axes():
  x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
  np.testing.assert_equal(Tensor(x).rearrange("a b -> b a 1").numpy(), x.T[:, :, None])
  np.testing.assert_equal(Tensor(x[:, None]).rearrange("a 1 b -> b a").numpy(), x.T)

def test_logcumsumexp_axis_none_and_round_bool():
  np.testing.assert_allclose(Tensor(1.5).logcumsumexp(None).numpy(), 1.5)
  x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
  np.testing.assert_allclose(Tensor(x).logcumsumexp(None).numpy(), torch.tensor(x).flatten().logcumsumexp(0).numpy(), rtol=1e-5)
  r = Tensor([True, False]).round()
  assert r.dtype == dtypes.default_float and r.tolist() == [1.0, 0.0]

def test_error_classes():
  with pytest.raises(IndexError): Tensor.randn(3).tril()
  with pytest.raises(IndexError): Tensor(1.0).bitcast(dtypes.uint8)
  with pytest.raises(TypeError): Tensor.zeros(3, 4).scatter(1, Tensor([[0]]), 1.0, reduce="bad")

@pytest.mark.parametrize("pads", [(3, 6, 0, 0), (3, -5, 1, -5)], ids=["wraps_twice", "negative_crops_to_empty"])
def test_circular_pad_wrapping_more_than_once(pads):
  # the class torch raises for the first (for the second torch 2.13 returns uninitialized memory), tinygrad 0.14's (ValueError)
  # and the one tinygrad's later tests ask for (NotImplementedError)
  for cls in (RuntimeError, ValueError, NotImplementedError):
    with pytest.raises(cls, match="wrap around more than once"): Tensor.randn(1, 1, 5, 5).pad(pads, mode="circular")

def test_assign_to_a_view_of_a_buffer():
  """An assign to a view of a realized buffer wrote a copy only (the buffer kept its values, silently): a reshape of the
  whole buffer now writes through (as tinygrad 0.14 and torch); other views are refused with UnsupportedError."""
  rng = np.random.default_rng(3)
  src = rng.standard_normal(8).astype(np.float32)
  c = Tensor.zeros(2, 4).contiguous().realize()
  c.reshape(8).assign(Tensor(src)).realize()
  np.testing.assert_array_equal(c.numpy(), src.reshape(2, 4))
  c = Tensor.zeros(2, 4).contiguous().realize()
  with pytest.raises(NotImplementedError, match="does not write through"): c.shrink(((0, 2), (1, 3))).assign(Tensor.ones(2, 2))
  with pytest.raises(NotImplementedError, match="does not write through"): c.T.assign(Tensor.ones(4, 2))
  np.testing.assert_array_equal(c.numpy(), np.zeros((2, 4), np.float32))
