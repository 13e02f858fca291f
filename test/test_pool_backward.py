"""Max pooling's input gradient where windows overlap (tensor/conv.py `_max_pool_grad`): what its kernels store, and the
values against torch in float64 and, for ties (shared evenly between the maxima, where torch gives the first), numpy."""
import itertools
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.ops import Ops

CASES = [dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=3, stride=1, padding=1), dict(kernel_size=(3, 2), stride=(2, 1)),
         dict(kernel_size=2, stride=1, dilation=2), dict(kernel_size=3, stride=2, ceil_mode=True), dict(kernel_size=5, stride=3, padding=2)]

@pytest.mark.parametrize("cfg", CASES)
def test_overlapping_max_pool_gradient_matches_torch(cfg):
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(5)
  xn = rng.standard_normal((2, 3, 11, 10)).astype(np.float32)
  x = Tensor(xn, requires_grad=True)
  out = x.max_pool2d(**cfg)
  gn = rng.standard_normal(out.shape).astype(np.float32)
  (out * Tensor(gn)).sum().backward()
  xt = torch.tensor(xn, dtype=torch.float64, requires_grad=True)
  ot = torch.nn.functional.max_pool2d(xt, **cfg)
  (ot * torch.tensor(gn, dtype=torch.float64)).sum().backward()
  np.testing.assert_allclose(out.numpy(), ot.detach().numpy(), rtol=1e-6)
  np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)

def test_max_pool_gradient_shares_ties_evenly():
  # small integers: most windows hold their max twice or more; each window's gradient is split evenly between them
  rng = np.random.default_rng(6)
  xn = rng.integers(0, 3, (2, 2, 7, 8)).astype(np.float32)
  gn = rng.standard_normal((2, 2, 4, 4)).astype(np.float32)
  x = Tensor(xn, requires_grad=True)
  (x.max_pool2d(3, 2, padding=1) * Tensor(gn)).sum().backward()
  ref = np.zeros(xn.shape)
  xp = np.pad(xn.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
  for b, c, oy, ox in itertools.product(*[range(n) for n in gn.shape]):
    win = xp[b, c, 2 * oy:2 * oy + 3, 2 * ox:2 * ox + 3]
    hits = np.argwhere(win == win.max())
    for hy, hx in hits:
      y, xx = 2 * oy + hy - 1, 2 * ox + hx - 1
      if 0 <= y < xn.shape[2] and 0 <= xx < xn.shape[3]: ref[b, c, y, xx] += gn[b, c, oy, ox] / len(hits)
  np.testing.assert_allclose(x.grad.numpy(), ref, rtol=1e-5, atol=1e-6)

def test_max_pool_gradient_stores_nothing_window_sized():
  # ResNet's 3x3/2 pool: through the windows, the gradient was a (bs, c, 28, 28, 3, 3) tensor (k*k times the output)
  # folded back per dim in four more kernels (30 ms of a 112x112 batch-16 step); by the rule, a count of each window's
  # maxima, the shares and one elementwise kernel over the input (with the forward pool here: 4 kernels)
  x = Tensor.empty(2, 8, 16, 16, requires_grad=True)
  g, = (x.max_pool2d(3, 2, padding=1) * Tensor.empty(2, 8, 8, 8)).sum().gradient(x)
  sizes = [si.outputs[0].size for si in g.schedule() if si.ast.op is Ops.SINK]
  assert max(sizes) <= x.numel() and len(sizes) <= 4, sizes

def test_max_pool_second_order():
  # the rule is built of recorded ops: the gradient of the gradient (linear in the output gradient) reaches it
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(7)
  xn, gn = rng.standard_normal((1, 2, 9, 9)).astype(np.float32), rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
  x, g = Tensor(xn, requires_grad=True), Tensor(gn, requires_grad=True)
  dx, = (x.max_pool2d(3, 2, padding=1) * g).sum().gradient(x)
  dg, = (dx * dx).sum().gradient(g)
  xt, gt = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (xn, gn))
  dxt, = torch.autograd.grad((torch.nn.functional.max_pool2d(xt, 3, 2, 1) * gt).sum(), xt, create_graph=True)
  dgt, = torch.autograd.grad((dxt * dxt).sum(), gt)
  np.testing.assert_allclose(dg.numpy(), dgt.numpy(), rtol=1e-5, atol=1e-6)

def test_max_pool_gradient_kernel_expands_its_phases():
  # the input gradient's kernel has no vector dim (its output is contiguous only along a phase dim of 2): its phase dims
  # are expanded whole (heuristic.py), each output's taps known at compile time (left as loops, every output evaluated
  # all 9 taps behind masks: 2x slower)
  from tinycore import Device
  from tinycore.codegen import Kernel
  from tinycore.codegen.heuristic import hand_coded_optimizations
  r = Device[Device.DEFAULT].renderer
  if r.has_local or max(r.vector_widths) < 4: pytest.skip("a CPU with vectors")
  x = Tensor.empty(2, 8, 16, 16, requires_grad=True)
  g, = (x.max_pool2d(3, 2, padding=1) * Tensor.empty(2, 8, 8, 8)).sum().gradient(x)
  si = [si for si in g.schedule() if si.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, r))
  assert [k.full_shape[d] for d in k.dims("U")] == [2, 2], (k.full_shape, k.applied_opts)
