"""conv2d's backward in a training step (tensor/conv.py `_conv_grads`): what its gradient kernels read, and the values
against torch in float64."""
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.ops import Ops

def _loaded_buffers(ast) -> set:
  return {u.src[0].arg for u in ast.toposort() if u.op is Ops.LOAD}

def test_gradient_kernels_read_the_output_gradient_stored():
  # conv -> ReLU -> a scale: the output gradient is an expression (the upstream gradient times the ReLU's mask, which
  # reads the conv's output). Fused into the two gradient kernels, it was recomputed at every load of the reduce, once
  # per tap and vector of channels; stored first, each gradient kernel reads two buffers
  x, w = Tensor.empty(2, 32, 6, 6, requires_grad=True), Tensor.empty(32, 32, 3, 3, requires_grad=True)
  gx, gw = (x.conv2d(w, padding=1).relu() * Tensor.empty(2, 32, 6, 6)).sum().gradient(x, w)
  for g in (gx, gw):
    reduces = [si.ast for si in g.schedule() if si.ast.op is Ops.SINK and any(u.op is Ops.REDUCE_AXIS for u in si.ast.toposort())]
    assert reduces and len(_loaded_buffers(reduces[-1])) == 2, [_loaded_buffers(a) for a in reduces]

@pytest.mark.parametrize("stride", [1, 2])
def test_conv_bn_relu_gradients_match_torch(stride):
  # the training step's block: conv -> BatchNorm (batch statistics) -> ReLU, gradients of the input, weight and BN's affine
  torch = pytest.importorskip("torch")
  from tinycore import nn
  rng = np.random.default_rng(3)
  xn, wn = rng.standard_normal((4, 16, 9, 9)).astype(np.float32), rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1
  o = (9 + 2 - 3) // stride + 1
  gn = rng.standard_normal((4, 32, o, o)).astype(np.float32)
  x, w, bn = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True), nn.BatchNorm2d(32)
  bn.weight.requires_grad = True
  with Tensor.train(): (bn(x.conv2d(w, stride=stride, padding=1)).relu() * Tensor(gn)).sum().backward()
  xt, wt = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (xn, wn))
  bt = torch.nn.BatchNorm2d(32).double().train()
  (bt(torch.nn.functional.conv2d(xt, wt, stride=stride, padding=1)).relu() * torch.tensor(gn, dtype=torch.float64)).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-3, atol=1e-3)
  np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-3, atol=1e-3)
  np.testing.assert_allclose(bn.weight.grad.numpy(), bt.weight.grad.numpy(), rtol=1e-3, atol=1e-3)
