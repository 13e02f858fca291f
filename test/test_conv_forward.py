"""A conv's forward on a CPU with vectors (codegen/conv_forward.py): the weight stored in panels of two vectors of output
channels, the register tile (rows of output columns x the panel's two vectors, sized to the declared register file),
and the results against numpy in float64, forward and the gradients through the panels (a weight being trained is in
panels too); a narrow image's tile (its columns x rows), and the max pool's vector lanes (lowerer's pick_vector_dim)."""
import copy
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from tinycore import Tensor, Device
from tinycore.backend import Renderer
from tinycore.codegen import Kernel, get_program
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

def test_a_trained_weight_in_panels_too():
  # (it was stored channels-last whole: each reduce step of layer4's conv on a 4x4 image read 2 vectors out of 512-wide
  # rows, a new page almost every step; its gradients read the weight as it is, not the forward's copy)
  w = 2 * max(_cpu_renderer().vector_widths)
  assert weight_panel(Tensor.empty(2 * w, 8, 3, 3)) == w
  assert weight_panel(Tensor.empty(2 * w, 8, 3, 3, requires_grad=True)) == w, "a parameter being trained: panels too"
  assert weight_panel(Tensor.empty(3 * w // 2, 8, 3, 3, requires_grad=True)) == 3 * w // 2, "no whole panels: channels-last"

def test_panel_view_splits_back_into_one_view():
  # a weight stored in panels and viewed in its own shape, split into its panels again (what conv2d reads): one view
  st = ShapeTracker.from_shape((2, 8, 3, 32)).permute((0, 3, 1, 2)).reshape((64, 8, 3))
  assert len(st.views) == 2
  assert len(st.reshape((2, 32, 8, 3)).views) == 1
  # not where the top view reads part of the one below (a shrink from offset 0 looks contiguous too)
  st = ShapeTracker.from_shape((3, 4)).permute((1, 0)).reshape((12,)).shrink(((0, 9),))
  assert st.reshape((3, 3)).shape == (3, 3)

def _conv_tile(regs: int, n: int, hw: int) -> tuple[Kernel, int]:
  r = copy.copy(_cpu_renderer())
  r.vector_registers = regs
  w = max(r.vector_widths)
  x, wt, b = Tensor.empty(n, 16, hw, hw), Tensor.empty(4 * w, 16, 3, 3), Tensor.empty(4 * w)
  si = [s for s in x.conv2d(wt, b, padding=1).relu().schedule() if s.ast.op is Ops.SINK][-1]
  return hand_coded_optimizations(Kernel(si.ast, r)), w

@pytest.mark.parametrize("regs", [16, 32])
def test_conv_tile_fits_the_register_file(regs):
  k, w = _conv_tile(regs, 1, 7)
  accs = prod(k.full_shape[d] for d in k.dims("U")) // w
  # two vectors of a panel x the image's 7 columns, the window's 3 columns unrolled (was 7 x 1 vector, window rows and columns unrolled)
  assert accs == 14 and sorted(k.full_shape[d] for d in k.dims("U")) == [2, 7, w] and [k.full_shape[d] for d in k.dims("u")] == [3], \
    (k.applied_opts, k.full_shape, k.kinds)

@pytest.mark.parametrize("hw", [11, 13])
def test_conv_tile_on_odd_columns_with_16_registers(hw):
  # the digits CNN's second conv (11 columns) and its input gradient (13) at AVX2: the columns whole x 1 vector of output
  # channels (11, 13 accumulators; was 4 images x 2 vectors from heuristic.py, 2x slower)
  k, w = _conv_tile(16, 2, hw)
  assert sorted(k.full_shape[d] for d in k.dims("U")) == sorted([hw, w]) and [k.full_shape[d] for d in k.dims("u")] == [3], \
    (k.applied_opts, k.full_shape, k.kinds)

@pytest.mark.parametrize("regs", [16, 32])
def test_conv_tile_on_a_narrow_image(regs):
  # a 4x4 image (layer4 of a 112x112 ResNet): its 4 columns x 2 of its rows x the panel's two vectors (16 accumulators);
  # the vector lanes along the output channels, not the 4 columns the output is contiguous along (the weight's vectors
  # then were gathers of 4 values). With 16 registers too (AVX2: the 8 accumulators that leave two registers free ran
  # heuristic.py's 4 images x 2 vectors, 1.7x slower than this tile on a Zen 4 core)
  k, w = _conv_tile(regs, 2, 4)
  assert sorted(k.full_shape[d] for d in k.dims("U")) == [2, 2, 4, w], (k.applied_opts, k.full_shape, k.kinds)
  from tinycore.codegen.lowerer import pick_vector_dim
  assert pick_vector_dim(k) == (k.dims("U")[[k.full_shape[d] for d in k.dims("U")].index(w)], w)

def test_conv_loop_order_keeps_a_big_weight_panel_for_every_image():
  # a weight bigger than the batch's input (ResNet's layer4 at batch 8: 9.4 MB against 0.8 MB): the panels loop
  # outermost, the images and rows inside it (the images were outermost: the whole weight was read again per image)
  k, w = _conv_tile(32, 4, 7)
  assert [k.full_shape[d] for d in k.dims("t")] == [4, 7], ("the images, then the rows, inside the panels", k.full_shape, k.kinds)
  weight = next(st for st in (k.st_for(u.src[1]) for u in k.reduceop.toposort() if u.op is Ops.LOAD) if st.real_strides()[k.dims("t")[0]] == 0)
  assert len(k.dims("g")) == 1 and weight.real_strides()[k.dims("g")[0]] != 0, (k.applied_opts, k.full_shape, k.kinds)
  # at batch 1 the panels are outermost already; an input bigger than the weight keeps the images outermost
  for n, hw in ((1, 7), (4, 28)):
    k, w = _conv_tile(32, n, hw)
    assert not k.dims("t") and k.full_shape[k.dims("g")[0]] == (n if n > 1 else 2), (n, hw, k.full_shape, k.kinds)

def test_conv_tile_accumulates_both_vectors_of_a_column_back_to_back():
  # the outputs (and their accumulators) in the order of the upcast dims by length, the shortest innermost (lowerer.py):
  # the panel's two vectors of one column take the same broadcast inputs one after the other and each input dies at once;
  # in the dims' own order (the vectors outermost) every input of a stride-2 step (29 over 14 columns) stayed live until
  # the second vector's pass and was spilled (ResNet-18's 3x3/2 convs 1.3x slower on Zen 4)
  r = _cpu_renderer()
  w = max(r.vector_widths)
  si = [s for s in Tensor.empty(1, 16, 28, 28).conv2d(Tensor.empty(2 * w, 16, 3, 3), stride=2, padding=1).schedule() if s.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, r))
  assert 2 in [k.full_shape[d] for d in k.dims("U")], ("the panel's two vectors", k.applied_opts, k.full_shape, k.kinds)
  assigns = [u for u in get_program(k, Device.DEFAULT).uops if u.op is Ops.ASSIGN]
  def inputs(u): return {s for s in u.sparents() if s.op is Ops.LOAD and s.dtype.count == 1}  # (the weight's loads are vectors)
  assert inputs(assigns[0]) and inputs(assigns[0]) == inputs(assigns[1]), "the first two accumulators: one column's two vectors"

def test_max_pool_gets_vector_lanes():
  # a 3x3/2 max pool reads every other column: no input is contiguous along an output dim; its lanes gather (was scalar)
  r = _cpu_renderer()
  si = [s for s in Tensor.empty(1, 4, 64, 64).max_pool2d(3, 2, padding=1).schedule() if s.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, r))
  from tinycore.codegen.lowerer import pick_vector_dim
  assert pick_vector_dim(k) is not None, (k.applied_opts, k.full_shape, k.kinds)
  xn = np.random.default_rng(0).standard_normal((2, 3, 17, 32)).astype(np.float32)  # (16 columns out: 16 lanes on AVX-512)
  xn[0, 1, 4, 5] = np.nan
  xp = np.pad(xn, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
  ref = sliding_window_view(xp, (3, 3), axis=(2, 3))[:, :, ::2, ::2].max(axis=(-1, -2))
  np.testing.assert_array_equal(Tensor(xn).max_pool2d(3, 2, padding=1).numpy(), ref)

def _conv_ref(x, w, b, stride, pad):
  xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
  win = sliding_window_view(xp, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]  # (n, cin, oy, ox, kh, kw)
  return np.einsum("ncyxhw,ochw->noyx", win, w) + b[None, :, None, None]

@pytest.mark.parametrize("n,cin,cout_vecs,hw,k,stride,residual", [(1, 16, 4, 7, 3, 1, True), (2, 8, 2, 12, 3, 2, False), (1, 3, 4, 9, 7, 2, False),
                                                                  (2, 8, 2, 14, 1, 1, True), (3, 8, 2, 4, 3, 1, True),
                                                                  (4, 16, 4, 7, 3, 1, True)])
@pytest.mark.parametrize("trained", [False, True])
def test_conv_in_panels_forward_and_gradients(n, cin, cout_vecs, hw, k, stride, residual, trained):
  torch = pytest.importorskip("torch")
  cout = cout_vecs * max(_cpu_renderer().vector_widths)
  rng = np.random.default_rng(0)
  xn, wn, bn = rng.standard_normal((n, cin, hw, hw)), rng.standard_normal((cout, cin, k, k)), rng.standard_normal(cout)
  ref = _conv_ref(xn, wn, bn, stride, k // 2)
  rn = rng.standard_normal(ref.shape)
  ref = np.maximum(ref + rn if residual else ref, 0)
  x, w = Tensor(xn.astype(np.float32), requires_grad=True), Tensor(wn.astype(np.float32), requires_grad=trained or None)  # in panels
  out = x.conv2d(w, Tensor(bn.astype(np.float32)), stride=stride, padding=k // 2)
  out = (out + Tensor(rn.astype(np.float32)) if residual else out).relu()
  gn = rng.standard_normal(ref.shape)
  (out * Tensor(gn.astype(np.float32))).sum().backward()
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)
  xt, wt = torch.tensor(xn, requires_grad=True), torch.tensor(wn, requires_grad=True)
  ot = torch.nn.functional.conv2d(xt, wt, torch.tensor(bn), stride=stride, padding=k // 2)
  ((torch.relu(ot + torch.tensor(rn)) if residual else torch.relu(ot)) * torch.tensor(gn)).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
  if trained: np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-3)

# *** few input channels (conv_forward.py conv_output_channels_last / conv_few_taps_tile) ***

def test_few_taps_rule():
  from tinycore.codegen.conv_forward import conv_output_channels_last
  def cpu(widths): return Renderer(has_local=False, vector_widths=widths, vector_registers=32)
  assert conv_output_channels_last(cpu((16, 8)), 16, 27) and conv_output_channels_last(cpu((8, 4)), 32, 9)
  assert not conv_output_channels_last(cpu((16, 8)), 16, 64 * 9), "a long reduce (ResNet's 64 x 3x3): its stores are cheap"
  assert not conv_output_channels_last(cpu((16, 8)), 24, 27), "24 channels are no whole vectors of 16"
  assert not conv_output_channels_last(Renderer(has_local=True, vector_widths=(4,)), 16, 27)

@pytest.mark.parametrize("regs", [16, 32])
def test_seed_conv_stores_vectors_of_channels(regs):
  # the seed conv (16,3,64,64) x (16,3,3,3): its reduce is 27 taps. Stored (bs, cout, oy, ox) with the vector lanes along
  # the output channels, each output value was a scalar store (16 a vector against 1.7 vector multiply-adds: 11 GFLOP/s
  # on AVX-512); stored channels-last, a vector store, the lanes the output channels, rows of pixels and images
  r = copy.copy(_cpu_renderer())
  r.vector_registers = regs
  w = max(r.vector_widths)
  si = [s for s in Tensor.empty(16, 3, 64, 64).conv2d(Tensor.empty(w, 3, 3, 3)).schedule() if s.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, r))
  out = k.st_for(si.ast.src[0].src[1])
  from tinycore.codegen.lowerer import pick_vector_dim
  vd = pick_vector_dim(k)
  assert vd is not None and vd[1] == w and out.real_strides()[vd[0]] == 1, (k.applied_opts, k.full_shape, k.kinds)
  accs = prod(k.full_shape[d] for d in k.dims("U")) // w
  assert accs == 8 and [k.full_shape[d] for d in k.dims("u")][-1:] == [3], (k.applied_opts, k.full_shape, k.kinds)

@pytest.mark.parametrize("xs,ws,kw", [((16, 3, 64, 64), (16, 3, 3, 3), {}), ((4, 1, 28, 28), (32, 1, 3, 3), {}),
                                      ((3, 3, 11, 13), (16, 3, 3, 3), dict(stride=2, padding=1)),
                                      ((2, 2, 9, 7), (32, 2, 3, 3), dict(padding=(1, 2))), ((2, 3, 10, 10), (8, 3, 2, 2), dict(dilation=2)),
                                      ((2, 1, 7, 9), (16, 1, 5, 5), dict(padding=2)), ((2, 4, 6, 6), (16, 4, 2, 2), dict(stride=2))])
@pytest.mark.parametrize("bias", [False, True])
def test_few_channel_conv_forward_and_gradients(xs, ws, kw, bias):
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(0)
  xn, wn, bn = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
  x, w = Tensor(xn.astype(np.float32), requires_grad=True), Tensor(wn.astype(np.float32), requires_grad=True)
  b = Tensor(bn.astype(np.float32), requires_grad=True) if bias else None
  out = x.conv2d(w, b, **kw).relu()
  xt, wt, bt = (torch.tensor(v, requires_grad=True) for v in (xn, wn, bn))
  ot = torch.relu(torch.nn.functional.conv2d(xt, wt, bt if bias else None, **kw))
  gn = rng.standard_normal(ot.shape)
  (out * Tensor(gn.astype(np.float32))).sum().backward()
  (ot * torch.tensor(gn)).sum().backward()
  np.testing.assert_allclose(out.numpy(), ot.detach().numpy(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-3)
  if bias: np.testing.assert_allclose(b.grad.numpy(), bt.grad.numpy(), rtol=1e-4, atol=1e-3)
