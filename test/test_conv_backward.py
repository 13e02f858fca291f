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

@pytest.mark.parametrize("hw,stride", [(4, 1), (7, 1), (14, 2)])
def test_small_image_weight_gradient_loads_input_vectors(hw, stride):
  # layer2-4's weight gradients read the conv's input channels-last (codegen/conv_backward.py): the vector lanes are input
  # channels, one vector load each (as stored, 16 loads h*w apart assembled lane by lane: 1.4-1.6x slower on AVX-512)
  import copy
  from tinycore import Device
  from tinycore.backend import Renderer
  from tinycore.codegen import Kernel
  from tinycore.codegen.heuristic import hand_coded_optimizations
  from tinycore.codegen.lowerer import pick_vector_dim
  r0 = Device[Device.DEFAULT].renderer
  if r0.has_local or max(r0.vector_widths) < 8: pytest.skip("a CPU with vectors of 8 or more")
  r: Renderer = copy.copy(r0)
  x, w = Tensor.empty(2, 64, hw, hw, requires_grad=True), Tensor.empty(64, 64, 3, 3, requires_grad=True)
  o = (hw + 2 - 3) // stride + 1
  _, gw = (x.conv2d(w, stride=stride, padding=1) * Tensor.empty(2, 64, o, o)).sum().gradient(x, w)
  si = [si for si in gw.schedule() if si.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, r))
  vd = pick_vector_dim(k)
  assert vd is not None and vd[1] == max(r.vector_widths), (k.full_shape, k.applied_opts)
  loads = [k.st_for(u.src[1]).real_strides()[vd[0]] for u in k.reduceop.toposort() if u.op is Ops.LOAD]
  assert sorted(loads) == [0, 1], (loads, k.full_shape, k.applied_opts)

@pytest.mark.parametrize("hw,stride", [(4, 1), (7, 2)])
def test_small_image_weight_gradient_matches_torch(hw, stride):
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(5)
  xn, wn = rng.standard_normal((3, 32, hw, hw)).astype(np.float32), rng.standard_normal((32, 32, 3, 3)).astype(np.float32)
  o = (hw + 2 - 3) // stride + 1
  gn = rng.standard_normal((3, 32, o, o)).astype(np.float32)
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  (x.conv2d(w, stride=stride, padding=1) * Tensor(gn)).sum().backward()
  xt, wt = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (xn, wn))
  (torch.nn.functional.conv2d(xt, wt, stride=stride, padding=1) * torch.tensor(gn, dtype=torch.float64)).sum().backward()
  np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("hw,stride", [(24, 1), (12, 1), (24, 2)])
def test_weight_gradient_in_batch_groups(hw, stride):
  # a long reduce (images x pixels) is cut into groups of the batch, each a partial gradient summed after
  # (codegen/conv_backward.py conv_weight_grad_images): ResNet-18's layer1 and layer2 1.3-1.45x faster on one AVX-512 core.
  # The values against torch in float64, and on a CPU with vectors the partials (one per group) in the schedule
  torch = pytest.importorskip("torch")
  from tinycore import Device
  from tinycore.codegen.conv_backward import conv_weight_grad_images, conv_input_channels_last
  rng = np.random.default_rng(4)
  o = (hw + 2 - 3) // stride + 1
  xn, wn, gn = (rng.standard_normal(s).astype(np.float32) for s in ((4, 16, hw, hw), (32, 16, 3, 3), (4, 32, o, o)))
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  gw, = (x.conv2d(w, stride=stride, padding=1) * Tensor(gn)).sum().gradient(w)
  r = Device[Device.DEFAULT].renderer
  if conv_input_channels_last(r, 16):
    n = conv_weight_grad_images(r, 4, o * o)
    assert n == next(m for m in (1, 2, 4) if m * o * o >= 512 or m == 4)
    sizes = [si.outputs[0].size for si in gw.schedule() if si.ast.op is Ops.SINK]
    assert n == 4 or 4 // n * wn.size in sizes, sizes
  xt, wt = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (xn, wn))
  (torch.nn.functional.conv2d(xt, wt, stride=stride, padding=1) * torch.tensor(gn, dtype=torch.float64)).sum().backward()
  np.testing.assert_allclose(gw.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-4)
