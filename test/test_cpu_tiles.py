"""CPU kernel choices that follow the target: register tiles sized to the declared register file, and a matmul's
row-major operand repacked into panels when it exceeds the declared cache (codegen/heuristic.py)."""
import copy
import numpy as np
import pytest
from tinycore import Tensor, Device
from tinycore.backend import Renderer
from tinycore.codegen import Kernel
from tinycore.codegen.heuristic import hand_coded_optimizations
from tinycore.codegen.matmul import matmul_panel, tile_lanes
from tinycore.codegen.lowerer import pick_vector_dim
from tinycore.ops import Ops
from tinycore.helpers import prod

def cpu(widths=(16, 8, 4), regs=32, cache=2 << 20) -> Renderer:
  return Renderer(has_local=False, vector_widths=widths, vector_registers=regs, cache_bytes=cache)

def _check_matmul(out: Tensor, x: Tensor, w: Tensor, xn: np.ndarray, wn: np.ndarray, gn: np.ndarray) -> None:
  """out = x @ w and its gradients for the upstream gradient gn, against numpy in float64."""
  (out * Tensor(gn)).sum().backward()
  x64, w64, g64 = xn.astype(np.float64), wn.astype(np.float64), gn.astype(np.float64)
  np.testing.assert_allclose(out.numpy(), x64 @ w64, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(x.grad.numpy(), g64 @ w64.T, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(w.grad.numpy(), x64.T @ g64, rtol=1e-4, atol=1e-4)

def test_panel_rule():
  # three vectors wide (the register tile's, codegen/matmul.py register_tile), 2048 columns zero-padded to whole panels
  assert matmul_panel(cpu(), 2048, 2048, 2048, 4) == 48 and matmul_panel(cpu((8, 4), regs=16), 2048, 2048, 2048, 4) == 24
  assert matmul_panel(cpu(), 512, 384, 768, 4) == 0, "an operand that fits the cache and the tile's width is read as it is"
  assert matmul_panel(cpu((8, 4), regs=16), 512, 384, 384, 4) == 0

def test_panel_rule_in_the_cache_follows_the_tile():
  # in place the register tile's vectors must divide n: 256 and 1024 columns take 4 x 4 vectors on AVX-512 (8 x 3 in
  # panels), 4 x 2 on AVX2 (4 x 3): repacked from PANEL_ROWS rows of x whatever the size (GPT's input gradients)
  for n in (256, 512, 1024):
    assert matmul_panel(cpu(), 1024, 256, n, 4) == 48 and matmul_panel(cpu((8, 4), regs=16), 1024, 256, n, 4) == 24
  assert matmul_panel(cpu(), 64, 256, 256, 4) == 0, "too few rows of x for the copy to pay"
  assert matmul_panel(cpu(), 256, 1024, 256, 4, x_contiguous=False) == 0, "x^T (a weight gradient) takes the generic tile in place"
  assert tile_lanes(cpu(), 768, panels=False) == tile_lanes(cpu(), 768, panels=True) == 384
  assert matmul_panel(cpu(cache=0), 2048, 2048, 2048, 4) == 0 and matmul_panel(cpu(widths=(1,)), 2048, 2048, 2048, 4) == 0
  assert matmul_panel(Renderer(has_local=True, local_max=(256, 256, 64), vector_widths=(4,), cache_bytes=1 << 20), 2048, 2048, 2048, 4) == 0

def _cpu_renderer():
  r = Device[Device.DEFAULT].renderer
  if r.has_local or max(r.vector_widths) == 1: pytest.skip("a device with vectors and no thread ids (a CPU)")
  return r

@pytest.mark.parametrize("regs", [16, 32])
def test_register_tile_fits_the_register_file(regs):
  r = copy.copy(_cpu_renderer())
  r.vector_registers = regs
  for a, b in ((Tensor.empty(256, 256), Tensor.empty(256, 256)),
               (Tensor.empty(2, 16, 12, 12).conv2d(Tensor.empty(32, 16, 3, 3), padding=1), None)):
    out = a @ b if b is not None else a
    si = [s for s in out.schedule() if s.ast.op is Ops.SINK][-1]
    k = hand_coded_optimizations(Kernel(si.ast, r))
    U = k.dims("U")
    accs = prod(k.full_shape[d] for d in U) // max(r.vector_widths)  # vector accumulators (one U dim is the lanes, a full vector)
    assert 2 <= accs <= regs - 2, (k.applied_opts, k.full_shape, k.kinds)

def test_repacked_matmul_forward_and_backward(monkeypatch):
  r = _cpu_renderer()
  monkeypatch.setattr(r, "cache_bytes", 4096)  # a small matmul gets repacked
  rng = np.random.default_rng(0)
  xn, wn, gn = (rng.standard_normal(s).astype(np.float32) for s in ((48, 96), (96, 64), (48, 64)))
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  out = x @ w
  assert len([s for s in out.schedule() if s.ast.op is Ops.SINK]) == 2, "the repack is a kernel of its own"
  out = x @ w
  _check_matmul(out, x, w, xn, wn, gn)

def test_channels_last_conv_forward_and_backward():
  r = _cpu_renderer()
  torch = pytest.importorskip("torch")
  cout = 2 * max(r.vector_widths)
  rng = np.random.default_rng(1)
  xn, wn = rng.standard_normal((2, 8, 10, 10)).astype(np.float32), rng.standard_normal((cout, 8, 3, 3)).astype(np.float32)
  gn = rng.standard_normal((2, cout, 10, 10)).astype(np.float32)
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  out = x.conv2d(w, padding=1)
  (out * Tensor(gn)).sum().backward()
  xt, wt = torch.tensor(xn, dtype=torch.float64, requires_grad=True), torch.tensor(wn, dtype=torch.float64, requires_grad=True)
  ot = torch.nn.functional.conv2d(xt, wt, padding=1)
  (ot * torch.tensor(gn, dtype=torch.float64)).sum().backward()
  np.testing.assert_allclose(out.numpy(), ot.detach().numpy(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-4)

def test_odd_image_conv_vectorizes_over_output_channels():
  # an 11x11 output has no vector width in its columns: the vectors go along the output channels (channels-last weight)
  from tinycore.codegen.lowerer import pick_vector_dim
  r = _cpu_renderer()
  # (the digits CNN's second conv: 32 -> 64 channels of a pooled 13x13 image, batch 128, with its bias and relu)
  x, w, b = Tensor.empty(128, 32, 13, 13), Tensor.empty(4 * max(r.vector_widths), 32, 3, 3), Tensor.empty(4 * max(r.vector_widths))
  si = [s for s in x.conv2d(w, b).relu().schedule() if s.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, r))
  vd = pick_vector_dim(k)
  assert vd is not None and vd[1] == max(r.vector_widths), (k.applied_opts, k.full_shape, k.kinds)
  assert k.st_for(si.ast.src[0].src[1]).real_strides()[vd[0]] == 11 * 11, "the lanes are output channels, not images of the batch"

def test_short_dims_expanded_where_no_vector_fits():
  # a pool's overlapping 3x3 windows on a 13x13 output: its 13 columns and 3-tap window are expanded (the / and % of
  # the windows' index fold away)
  r = _cpu_renderer()
  ks = [hand_coded_optimizations(Kernel(si.ast, r)) for si in Tensor.empty(4, 8, 27, 27).max_pool2d(3, 2).schedule() if si.ast.op is Ops.SINK]
  assert ks and all(k.dims("U") or k.dims("u") for k in ks if k.reduceop is not None), [(k.full_shape, k.kinds) for k in ks]

@pytest.mark.parametrize("hw", [4, 7])
def test_input_gradient_tiled_as_the_forward_conv(hw):
  # the input gradient of conv(relu(x)) is a convolution of the output gradient (tensor/conv.py); its ReLU mask, read
  # once per output and strided along the channels the vectors take, must not cost it the conv microkernel (it took the
  # gathered-lanes tile: 2.4x slower on layer4's 4x4 images)
  r = _avx512_like()
  x, w = Tensor.empty(16, 64, hw, hw, requires_grad=True), Tensor.empty(64, 64, 3, 3)
  gx, = (x.relu().conv2d(w, padding=1) * Tensor.empty(16, 64, hw, hw)).sum().gradient(x)
  def last_kernel(t): return [hand_coded_optimizations(Kernel(si.ast, r)) for si in t.schedule() if si.ast.op is Ops.SINK][-1]
  fwd, bwd = last_kernel(Tensor.empty(16, 64, hw, hw).conv2d(w, padding=1)), last_kernel(gx)
  assert bwd.applied_opts == fwd.applied_opts, (bwd.full_shape, bwd.applied_opts, fwd.applied_opts)

@pytest.mark.parametrize("hw", [11, 13])
def test_odd_image_conv_forward_and_backward(hw):
  r = _cpu_renderer()
  torch = pytest.importorskip("torch")
  cout = 2 * max(r.vector_widths)
  rng = np.random.default_rng(2)
  xn, wn = rng.standard_normal((3, 5, hw, hw)).astype(np.float32), rng.standard_normal((cout, 5, 3, 3)).astype(np.float32)
  gn = rng.standard_normal((3, cout, hw - 2, hw - 2)).astype(np.float32)
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  out = x.conv2d(w)
  (out * Tensor(gn)).sum().backward()
  xt, wt = torch.tensor(xn, dtype=torch.float64, requires_grad=True), torch.tensor(wn, dtype=torch.float64, requires_grad=True)
  ot = torch.nn.functional.conv2d(xt, wt)
  (ot * torch.tensor(gn, dtype=torch.float64)).sum().backward()
  np.testing.assert_allclose(out.numpy(), ot.detach().numpy(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=1e-4)

def test_panel_rule_pads_a_width_with_no_vector_factor():
  assert matmul_panel(cpu(), 64, 256, 50257, 4) == 48, "padded panels, whatever the size"
  assert matmul_panel(cpu((8, 4), regs=16), 64, 64, 1009, 4) == 24
  assert matmul_panel(cpu(), 64, 256, 10, 4) == 0, "narrower than two vectors: read as it is"
  assert matmul_panel(cpu(), 64, 64, 1000, 4) == 0, "1000 = 125 x 8: a vector width fits, small enough for the cache"

@pytest.mark.parametrize("n", [1009, 50257])
def test_odd_width_matmul_vectorizes(n):
  # a width with no vector factor (a GPT-2 vocabulary) is repacked into zero-padded panels: its matmul kernel has vectors
  from tinycore.codegen.lowerer import pick_vector_dim
  r = _cpu_renderer()
  kernels = [hand_coded_optimizations(Kernel(si.ast, r)) for si in (Tensor.empty(32, 64) @ Tensor.empty(64, n)).schedule()
             if si.ast.op is Ops.SINK and si.ast.src[0].src[2].op is Ops.REDUCE_AXIS]
  for k in kernels:
    vd = pick_vector_dim(k)
    assert vd is not None and k.st_for(k.ast.src[0].src[1]).real_strides()[vd[0]] == 1, ("vector stores along n", k.full_shape, k.applied_opts)
  assert kernels

def test_odd_width_matmul_forward_and_backward():
  _cpu_renderer()
  rng = np.random.default_rng(3)
  xn, wn, gn = (rng.standard_normal(s).astype(np.float32) for s in ((24, 40), (40, 1009), (24, 1009)))
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  out = x @ w
  _check_matmul(out, x, w, xn, wn, gn)

@pytest.mark.parametrize("regs", [16, 32])
def test_one_dim_matmul_takes_rows_to_the_register_file(regs):
  # x @ E.T with E (50257-like, k): the odd dim takes no rows, the other dim 8 (was 4: 80-90 -> 59 ms on one AVX-512
  # core); a matrix-vector product (decoding a token) 16 rows on AVX-512, 8 on AVX2 (its vector operand loaded once per row block)
  r = copy.copy(_cpu_renderer())
  r.vector_registers = regs
  mv = 16 if regs == 32 else 8
  cases = ((Tensor.empty(64, 256), Tensor.empty(1009, 256), 8, 1009), (Tensor.empty(1, 256), Tensor.empty(1024, 256), mv, 1024 // mv))
  for x, w, rows, kept in cases:
    si = [s for s in (x @ w.T).schedule() if s.ast.op is Ops.SINK][-1]
    k = hand_coded_optimizations(Kernel(si.ast, r))
    assert prod(k.full_shape[d] for d in k.dims("U")) == rows and kept in k.full_shape, (k.full_shape, k.kinds, k.applied_opts)

def _avx512_like():
  r = copy.copy(_cpu_renderer())
  r.vector_widths, r.vector_registers = (16, 8, 4), 32
  return r

def _weight_gradient_kernel(r, n, cin, cout, hw):
  x, w = Tensor.empty(n, cin, hw, hw, requires_grad=True), Tensor.empty(cout, cin, 3, 3, requires_grad=True)
  (x.conv2d(w, padding=1) * Tensor.empty(n, cout, hw, hw)).sum().backward()
  si = [si for si in w.grad.schedule() if si.ast.op is Ops.SINK][-1]
  return hand_coded_optimizations(Kernel(si.ast, r))

@pytest.mark.parametrize("hw", [4, 7])
def test_small_image_weight_gradient_keeps_its_rows(hw):
  # a 3x3 conv's weight gradient on layer4's 4x4 images: lanes along the input channels (read channels-last where the
  # device has vectors, tensor/conv.py), a row per output channel; its short reduce over the image stays a loop
  # (unrolled, it took the lanes the rows need: 1 row, 9x slower)
  k = _weight_gradient_kernel(_avx512_like(), 2, 64, 64, hw)
  U, (_, vw) = k.dims("U"), pick_vector_dim(k)
  assert vw == 16 and prod(k.full_shape[d] for d in U) // vw >= 8 and not k.dims("u"), (k.full_shape, k.kinds, k.applied_opts)

@pytest.mark.parametrize("widths,regs", [((8, 4), 16), ((16, 8, 4), 32)])
def test_stem_weight_gradient_feeds_each_gather_to_many_accumulators(widths, regs):
  # a 7x7/2 stem's weight gradient (3 input channels: read as stored, the lanes gather the output gradient along the
  # output channels): 3 input channels x 7 window columns of accumulators whatever the register file (16 registers
  # took the 3 that fit beside the gather, 2.1x slower at AVX2 on a Zen 4 core)
  r = copy.copy(_cpu_renderer())
  r.vector_widths, r.vector_registers = widths, regs
  w = max(widths)
  x, wt = Tensor.empty(2, 3, 32, 32, requires_grad=True), Tensor.empty(4 * w, 3, 7, 7, requires_grad=True)
  _, gw = (x.conv2d(wt, stride=2, padding=3) * Tensor.empty(2, 4 * w, 16, 16)).sum().gradient(x, wt)
  si = [si for si in gw.schedule() if si.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, r))
  assert prod(k.full_shape[d] for d in k.dims("U")) == 21 * w, (k.full_shape, k.kinds, k.applied_opts)

def test_scalar_reduce_sums_several_outputs_side_by_side():
  # BatchNorm's statistics on 7x7 images (ResNet-18's layer3 at 112x112): 49 columns hold no vector width and the channels
  # are 49 apart, so the reduce stays scalar; one output at a time, each add waited on the one before (3x slower)
  xn = np.random.default_rng(5).standard_normal((16, 64, 7, 7)).astype(np.float32)
  out = Tensor(xn).sum((0, 2, 3))
  si = [s for s in out.schedule() if s.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, _cpu_renderer()))
  assert prod(k.full_shape[d] for d in k.dims("U")) == 8, (k.full_shape, k.kinds, k.applied_opts)
  np.testing.assert_allclose(out.numpy(), xn.astype(np.float64).sum((0, 2, 3)), rtol=1e-5, atol=1e-4)

def test_weight_copy_into_input_channel_panels_reads_whole_blocks():
  # a 3x3 conv's input gradient reads its weight flipped, in panels of two vectors of input channels: the copy's lanes
  # gather the weight 9 apart (its input channels) along its 9 flipped taps; those taps whole x the panel's two vectors
  # read 2 x lanes x 9 contiguous floats an iteration (lane by lane: ResNet-18's layer4 weight 2-3x slower at AVX2, Zen 4)
  r = _cpu_renderer()  # (the panels' width follows the device's renderer at schedule time)
  widths = r.vector_widths
  c = 4 * max(widths)
  x, wt = Tensor.empty(2, c, 4, 4, requires_grad=True), Tensor.empty(c, c, 3, 3, requires_grad=True)
  gx, _ = (x.conv2d(wt, padding=1) * Tensor.empty(2, c, 4, 4)).sum().gradient(x, wt)
  copies = [hand_coded_optimizations(Kernel(si.ast, r)) for si in gx.schedule() if si.ast.op is Ops.SINK]
  copies = [k for k in copies if k.reduceop is None and 9 in [k.full_shape[d] for d in k.dims("U")]]
  assert len(copies) == 1 and prod(copies[0].full_shape[d] for d in copies[0].dims("U")) == 2 * max(widths) * 9, \
    [(k.full_shape, k.kinds, k.applied_opts) for k in copies]

def test_epilogue_loads_leave_the_conv_its_rows():
  # loads after the reduce (a mask, a residual) are expanded over the output lanes only, not the unrolled 3x3 window:
  # counted as reduce loads, LANE_LOADS_MAX cut this conv's tile to 2 rows x 2 vectors (ResNet: 4 kernels of the step)
  a, b, w = Tensor.empty(16, 64, 4, 4), Tensor.empty(16, 64, 4, 4), Tensor.empty(64, 64, 3, 3)
  out = (a + b).conv2d(w, padding=1) * Tensor.empty(16, 64, 4, 4) + Tensor.empty(16, 64, 4, 4)
  si = [s for s in out.schedule() if s.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, _avx512_like()))
  U = k.dims("U")
  assert prod(k.full_shape[d] for d in U[:-1]) >= 8, (k.full_shape, k.applied_opts)

@pytest.mark.parametrize("hw,stride,padding", [(14, 2, 1), (13, 1, 0)])
def test_weight_gradient_lanes_along_input_channels(hw, stride, padding):
  # ResNet's stride-2 3x3 weight gradient, the digits CNN's 32 -> 64 on 13x13: lanes along the input channels (stores 9
  # apart), a row per output channel (lanes along the output channels, closer in the output gradient, left 9 rows of
  # masked window taps: 2-3x slower on AVX-512)
  r = _avx512_like()
  x, w = Tensor.empty(2, 32, hw, hw, requires_grad=True), Tensor.empty(64, 32, 3, 3, requires_grad=True)
  o = (hw + 2 * padding - 3) // stride + 1
  _, gw = (x.conv2d(w, stride=stride, padding=padding) * Tensor.empty(2, 64, o, o)).sum().gradient(x, w)
  si = [si for si in gw.schedule() if si.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, r))
  U, (vd, vw) = k.dims("U"), pick_vector_dim(k)
  assert k.st_for(si.ast.src[0].src[1]).real_strides()[vd] == 9 and prod(k.full_shape[d] for d in U) // vw >= 8, (k.full_shape, k.applied_opts)

@pytest.mark.parametrize("hw", [4, 7])
def test_small_image_conv_forward_and_backward(hw):
  r = _cpu_renderer()
  c = max(r.vector_widths)
  rng = np.random.default_rng(4)
  xn, wn = rng.standard_normal((3, c, hw, hw)).astype(np.float32), rng.standard_normal((c, c, 3, 3)).astype(np.float32)
  gn = rng.standard_normal((3, c, hw, hw)).astype(np.float32)
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  out = x.conv2d(w, padding=1)
  (out * Tensor(gn)).sum().backward()
  # numpy float64 reference: windows of the padded input
  xp = np.pad(xn.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
  win = np.stack([np.stack([xp[:, :, i:i + hw, j:j + hw] for j in range(3)], -1) for i in range(3)], -2)  # (n, cin, h, w, 3, 3)
  g64 = gn.astype(np.float64)
  np.testing.assert_allclose(out.numpy(), np.einsum("nchwij,ocij->nohw", win, wn.astype(np.float64)), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(w.grad.numpy(), np.einsum("nchwij,nohw->ocij", win, g64), rtol=1e-4, atol=1e-4)
  gx = np.zeros_like(xp)
  for i in range(3):
    for j in range(3): gx[:, :, i:i + hw, j:j + hw] += np.einsum("nohw,oc->nchw", g64, wn[:, :, i, j].astype(np.float64))
  np.testing.assert_allclose(x.grad.numpy(), gx[:, :, 1:-1, 1:-1], rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("regs,rows", [(32, 8), (16, 4)])
def test_transposed_matmul_tile_grows_with_the_register_file(regs, rows):
  # x @ W.T (a Linear layer): both operands contiguous along the reduce; rows x 2 vector accumulators, the rows as many
  # as fit beside the step's loaded vectors (8 x 2 measured 1.5x over 2 x 2 on AVX-512); 64 rows of x: from 128 on, W.T is
  # repacked into panels first (codegen/matmul.py PANEL_ROWS)
  r = _avx512_like()
  r.vector_registers = regs
  si = [s for s in (Tensor.empty(64, 128) @ Tensor.empty(512, 128).T).schedule() if s.ast.op is Ops.SINK][-1]
  k = hand_coded_optimizations(Kernel(si.ast, r))
  assert sorted(k.full_shape[d] for d in k.dims("U")) == [2, rows], (k.full_shape, k.kinds, k.applied_opts)

def test_transposed_matmul_forward_and_backward():
  _cpu_renderer()
  rng = np.random.default_rng(5)
  xn, wn, gn = (rng.standard_normal(s).astype(np.float32) for s in ((48, 128), (80, 128), (48, 80)))
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  (x @ w.T * Tensor(gn)).sum().backward()
  x64, w64, g64 = xn.astype(np.float64), wn.astype(np.float64), gn.astype(np.float64)
  np.testing.assert_allclose((x @ w.T).numpy(), x64 @ w64.T, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(x.grad.numpy(), g64 @ w64, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(w.grad.numpy(), g64.T @ x64, rtol=1e-4, atol=1e-4)
