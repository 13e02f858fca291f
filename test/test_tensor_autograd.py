"""Autograd: backward, gradient(), requires_grad semantics, no_grad contexts, and end-to-end gradients vs PyTorch and
finite differences."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes


def _rng(seed=0): return np.random.default_rng(seed)

def test_backward_scalar(dev):
  x = Tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
  y = (x * x).sum()
  assert y.requires_grad is True
  y.backward()
  np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
  assert x.grad.requires_grad is False and x.grad.device == dev

def test_backward_explicit_gradient_and_errors(dev):
  x = Tensor([[1.0, 2.0]], device=dev, requires_grad=True)
  y = x * 3
  with pytest.raises(RuntimeError, match="scalar"): y.backward()
  with pytest.raises(ValueError, match="gradient shape"): y.backward(Tensor([1.0, 2.0], device=dev))
  y.backward(Tensor([[1.0, -1.0]], device=dev))
  np.testing.assert_allclose(x.grad.numpy(), [[3.0, -3.0]])

def test_grad_accumulates(dev):
  x = Tensor([2.0], device=dev, requires_grad=True)
  (x * 3).sum().backward()
  (x * x).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [3.0 + 4.0])
  x.grad = None
  (x * 5).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [5.0])

def test_tensor_used_twice(dev):
  x = Tensor([1.5, -2.0], device=dev, requires_grad=True)
  y = x * x.exp() + x.sin() * x
  y.sum().backward()
  v = np.array([1.5, -2.0])
  np.testing.assert_allclose(x.grad.numpy(), np.exp(v) * (1 + v) + np.cos(v) * v + np.sin(v), rtol=1e-5)

def test_requires_grad_semantics(dev):
  a = Tensor([1.0], device=dev)
  assert a.requires_grad is None
  b = Tensor([2.0], device=dev, requires_grad=True)
  c = Tensor([3.0], device=dev, requires_grad=False)
  out = (a * b * c).sum()
  out.backward()
  # b is marked, so PyTorch's rule: the marked leaves only (without b, a would get one too: see test_autograd_semantics)
  assert a.grad is None and c.grad is None
  np.testing.assert_allclose(b.grad.numpy(), [3.0])
  # a float tensor is differentiable by default: a * c is recorded; c * c is not (nothing in it is differentiable)
  assert (a * c).requires_grad is None and (a * c)._ctx is not None
  assert (c * c).requires_grad is False and (c * c)._ctx is None  # no link: nothing differentiable behind it
  (a * c * c).sum().backward()
  assert c.grad is None
  np.testing.assert_allclose(a.grad.numpy(), [9.0])
  d = Tensor([1.0], device=dev).requires_grad_()
  assert d.requires_grad is True and d.requires_grad_(False).requires_grad is False

def test_intermediate_grads(dev):
  # tinygrad's rule (nothing marked requires_grad=True): intermediates get .grad too
  x = Tensor([1.0, 2.0], device=dev)
  h = x * 2
  (h * h).sum().backward()
  np.testing.assert_allclose(h.grad.numpy(), [4.0, 8.0])
  np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0])
  # PyTorch's rule (x marked): only the marked leaf
  x = Tensor([1.0, 2.0], device=dev, requires_grad=True)
  h = x * 2
  (h * h).sum().backward()
  assert h.grad is None
  np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0])

def test_no_grad_contexts(dev):
  x = Tensor([1.0, 2.0], device=dev, requires_grad=True)
  assert Tensor.no_grad is False
  with Tensor.test():
    assert Tensor.no_grad is True
    y = x * 2
    assert y._ctx is None
  assert Tensor.no_grad is False
  Tensor.no_grad = True
  try: assert (x * 2)._ctx is None
  finally: Tensor.no_grad = False
  @Tensor.test()
  def f(t): return t * 2
  assert f(x)._ctx is None and (x * 2)._ctx is not None

def test_detach_stops_gradient(dev):
  x = Tensor([3.0], device=dev, requires_grad=True)
  y = (x * x.detach()).sum()
  y.backward()
  np.testing.assert_allclose(x.grad.numpy(), [3.0])

def test_gradient_function(dev):
  x = Tensor([1.0, 2.0], device=dev, requires_grad=True)
  w = Tensor([[1.0, -1.0], [0.5, 2.0]], device=dev, requires_grad=True)
  z = Tensor([7.0], device=dev, requires_grad=True)
  y = (x @ w).square().sum()
  gx, gw = y.gradient(x, w)
  h = (np.array([1.0, 2.0]) @ np.array([[1.0, -1.0], [0.5, 2.0]]))
  np.testing.assert_allclose(gx.numpy(), np.array([[1.0, -1.0], [0.5, 2.0]]) @ (2 * h))
  np.testing.assert_allclose(gw.numpy(), np.outer([1.0, 2.0], 2 * h))
  assert x.grad is None and w.grad is None
  gz, = y.gradient(z)  # a target y does not depend on: zeros (as tinygrad)
  assert gz.tolist() == [0.0]
  # the graph survives gradient(): backward still works afterwards
  y.backward()
  np.testing.assert_allclose(x.grad.numpy(), gx.numpy())
  v = x * 3
  gv, = v.gradient(x, gradient=Tensor([1.0, 2.0], device=dev))
  np.testing.assert_allclose(gv.numpy(), [3.0, 6.0])

def test_half_grads(dev):
  x = Tensor([1.0, 2.0], device=dev, dtype=dtypes.float16, requires_grad=True)
  (x * x).sum().backward()
  assert x.grad.dtype == dtypes.float16
  np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])

def test_grad_through_movement_and_contiguous(dev):
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=dev, requires_grad=True)
  y = x.permute(1, 0).contiguous()[1:3].flip(0).reshape(6).pad((1, 1)).clone().contiguous_backward()
  (y * Tensor(np.arange(8, dtype=np.float32), device=dev)).sum().backward()
  g = np.zeros((3, 4), np.float32)
  ref = np.arange(12, dtype=np.float32).reshape(3, 4).T[1:3][::-1].reshape(6)
  w = np.arange(8, dtype=np.float32)[1:7]
  for val, wi in zip(ref, w): g[np.where(np.arange(12).reshape(3, 4) == val)] += wi
  np.testing.assert_allclose(x.grad.numpy(), g)

@pytest.mark.parametrize("fn", [
  lambda x: x.asin(), lambda x: x.acos(), lambda x: x.atan(), lambda x: x.erf(), lambda x: x.mish(), lambda x: x.logcumsumexp(0),
  lambda x: x.cumprod(0), lambda x: x.sort()[0] * Tensor.arange(5, device=x.device), lambda x: x.prod(), lambda x: x.std(),
  lambda x: x.reshape(1, 1, 5).interpolate((7,)), lambda x: x.softplus(3.0),
  lambda x: x.pad((1, 2), mode="reflect"), lambda x: x.roll(2), lambda x: x.repeat(2) * Tensor.arange(10, device=x.device)],
  ids=["asin", "acos", "atan", "erf", "mish", "logcumsumexp", "cumprod", "sort", "prod", "std", "interpolate", "softplus", "reflect", "roll",
       "repeat"])
def test_finite_differences(fn, dev):
  """Analytic gradients of composed ops against central differences, in float64."""
  x0 = _rng(3).uniform(-0.8, 0.8, 5)
  x = Tensor(x0, device=dev, dtype=dtypes.float64, requires_grad=True)
  fn(x).sum().backward()
  eps = 1e-6
  num = np.zeros(5)
  for i in range(5):
    xp, xm = x0.copy(), x0.copy()
    xp[i] += eps
    xm[i] -= eps
    fp, fm = (fn(Tensor(v, device=dev, dtype=dtypes.float64)).sum().item() for v in (xp, xm))
    num[i] = (fp - fm) / (2 * eps)
  np.testing.assert_allclose(x.grad.numpy(), num, rtol=2e-4, atol=2e-5)

def test_mlp_training_step_matches_torch(dev):
  torch = pytest.importorskip("torch")
  r = _rng(4)
  X, Y = r.standard_normal((6, 5)).astype(np.float32), r.integers(0, 3, 6)
  W1, B1, W2 = r.standard_normal((5, 8)).astype(np.float32) * 0.5, np.zeros(8, np.float32), r.standard_normal((8, 3)).astype(np.float32) * 0.5
  params = [Tensor(p, device=dev, requires_grad=True) for p in (W1, B1, W2)]
  tparams = [torch.tensor(p, requires_grad=True) for p in (W1, B1, W2)]
  def fwd(x, p, lib):
    h = x @ p[0] + p[1]
    h = h.relu() if lib == "tc" else torch.relu(h)
    return h @ p[2]
  loss = fwd(Tensor(X, device=dev), params, "tc").sparse_categorical_crossentropy(Tensor(Y, device=dev))
  tloss = torch.nn.functional.cross_entropy(fwd(torch.tensor(X), tparams, "torch"), torch.tensor(Y))
  loss.backward()
  tloss.backward()
  np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
  for p, tp in zip(params, tparams): np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-6)

def test_bias_gradient(dev):
  # the bias gradient sums the upstream gradient over the batch
  x = Tensor(np.ones((4, 3), np.float32) * 2, device=dev, requires_grad=True)
  b = Tensor(np.zeros(3, np.float32), device=dev, requires_grad=True)
  ((x + b) * Tensor(_rng(5).standard_normal((4, 3)).astype(np.float32), device=dev)).sum().backward()
  assert b.grad.shape == (3,) and x.grad.shape == (4, 3)
  np.testing.assert_allclose(b.grad.numpy(), x.grad.numpy().sum(0), rtol=1e-6)

def test_bias_gradient_of_sum_loss(dev):
  # the upstream gradient is a broadcast constant: its reduce must still count the batch
  x = Tensor(np.ones((6, 3), np.float32), device=dev, requires_grad=True)
  b = Tensor(np.zeros(3, np.float32), device=dev, requires_grad=True)
  (x + b).sum().backward()
  np.testing.assert_allclose(b.grad.numpy(), [6.0, 6.0, 6.0])
