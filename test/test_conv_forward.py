"""A conv's forward on a CPU with vectors (codegen/conv_forward.py): the weight stored in panels of two vectors of output
channels, the register tile (rows of output columns x the panel's two vectors, sized to the declared register file),
and the results against numpy in float64, forward and the input gradient through the panels (a weight being trained is
stored in panels too)."""
import copy
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from tinycore import Tensor, Device
from tinycore.backend import Renderer
from tinycore.codegen import Kernel
from tinycore.codegen.conv_forward import conv_weight_panel
from tinycore.codegen.heuristic import hand_coded_optimizations
from tinycore.helpers import prod
from tinycore.ops import Ops
from tinycore.shape import ShapeTracker
from tinycore.tensor.conv import weight_panel

def _cpu_renderer() -> Renderer:
  r = Device[Device.DEFAULT].renderer
  if r.has_local or max(r.vector_widths) == 1: pytest.skip("a device with vectors and no thread ids (a CPU)")
  return r

def test_panel_rule():
  def cpu(widths): return Renderer(has_local=False, vector_widths=widths, vector_registers=32)
  assert conv_weight_panel(cpu((16, 8, 4)), 512) == 32 and conv_weight_panel(cpu((8, 4)), 512) == 16
  assert conv_weight_panel(cpu((16, 8, 4)), 48) == 1, "48 channels are no whole panels of 32"
  assert conv_weight_panel(cpu((1,)), 512) == 1 and conv_weight_panel(Renderer(has_local=True, vector_widths=(4,)), 512) == 1

def test_a_trained_weight_is_stored_in_panels_too():
  # its gradients read no weight layout (tensor/conv.py _conv_grads): channels-last made the training step's 7x7 and 4x4 convs 2x slower
  w = 2 * max(_cpu_renderer().vector_widths)
  assert weight_panel(Tensor.empty(2 * w, 8, 3, 3)) == w
  assert weight_panel(Tensor.empty(2 * w, 8, 3, 3, requires_grad=True)) == w, "a parameter being trained: panels as at inference"

def test_panel_view_splits_back_into_one_view():
  # a weight stored in panels and viewed in its own shape, split into its panels again (what conv2d reads): one view
  st = ShapeTracker.from_shape((2, 8, 3, 32)).permute((0, 3, 1, 2)).reshape((64, 8, 3))
  assert len(st.views) == 2
  assert len(st.reshape((2, 32, 8, 3)).views) == 1
  # not where the top view reads part of the one below (a shrink from offset 0 looks contiguous too)
  st = ShapeTracker.from_shape((3, 4)).permute((1, 0)).reshape((12,)).shrink(((0, 9),))
  assert st.reshape((3, 3)).shape == (3, 3)

@pytest.mark.parametrize("regs", [16, 32])
def test_conv_tile_fits_the_register_file(regs):
  r = copy.copy(_cpu_renderer())
  r.vector_registers = regs
  w = max(r.vector_widths)
  x, wt, b = Tensor.empty(1, 16, 7, 7), Tensor.empty(4 * w, 16, 3, 3), Tensor.empty(4 * w)
  si = [s for s in x.conv2d(wt, b, padding=1).relu().schedule() if s.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, r))
  accs = prod(k.full_shape[d] for d in k.dims("U")) // w
  # two vectors of a panel x the image's 7 columns, the window's 3 columns unrolled (was 7 x 1 vector, window rows and columns unrolled)
  assert accs == 14 and sorted(k.full_shape[d] for d in k.dims("U")) == [2, 7, w] and [k.full_shape[d] for d in k.dims("u")] == [3], \
    (k.applied_opts, k.full_shape, k.kinds)

def _conv_ref(x, w, b, stride, pad):
  xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
  win = sliding_window_view(xp, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]  # (n, cin, oy, ox, kh, kw)
  return np.einsum("ncyxhw,ochw->noyx", win, w) + b[None, :, None, None]

@pytest.mark.parametrize("n,cin,cout_vecs,hw,k,stride,residual", [(1, 16, 4, 7, 3, 1, True), (2, 8, 2, 12, 3, 2, False), (1, 3, 4, 9, 7, 2, False),
                                                                  (2, 8, 2, 14, 1, 1, True)])
def test_conv_in_panels_forward_and_input_gradient(n, cin, cout_vecs, hw, k, stride, residual):
  torch = pytest.importorskip("torch")
  cout = cout_vecs * max(_cpu_renderer().vector_widths)
  rng = np.random.default_rng(0)
  xn, wn, bn = rng.standard_normal((n, cin, hw, hw)), rng.standard_normal((cout, cin, k, k)), rng.standard_normal(cout)
  ref = _conv_ref(xn, wn, bn, stride, k // 2)
  rn = rng.standard_normal(ref.shape)
  ref = np.maximum(ref + rn if residual else ref, 0)
  x, w = Tensor(xn.astype(np.float32), requires_grad=True), Tensor(wn.astype(np.float32))  # w: requires_grad None, stored in panels
  out = x.conv2d(w, Tensor(bn.astype(np.float32)), stride=stride, padding=k // 2)
  out = (out + Tensor(rn.astype(np.float32)) if residual else out).relu()
  gn = rng.standard_normal(ref.shape)
  (out * Tensor(gn.astype(np.float32))).sum().backward()
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)
  xt = torch.tensor(xn, requires_grad=True)
  ot = torch.nn.functional.conv2d(xt, torch.tensor(wn), torch.tensor(bn), stride=stride, padding=k // 2)
  ((torch.relu(ot + torch.tensor(rn)) if residual else torch.relu(ot)) * torch.tensor(gn)).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
