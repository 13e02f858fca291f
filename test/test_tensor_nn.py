"""Processing ops: matmul, einsum, convolutions, pooling, interpolation, normalization, losses, attention vs PyTorch."""
import math
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.ops import Ops

torch = pytest.importorskip("torch")
from torch_compare import check  # noqa: E402 (after the importorskip above)
tF = torch.nn.functional


def _rng(seed=0): return np.random.default_rng(seed)
def rnd(*shape, seed=0, lo=-1.0, hi=1.0): return _rng(seed).uniform(lo, hi, shape).astype(np.float32)


# *** matmul ***
@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)),
                                   ((2, 1, 2, 3), (5, 3, 4)), ((1, 3), (3, 1)), ((2, 0), (0, 3))], ids=str)
def test_matmul(sa, sb, dev):
  check(lambda a, b: a @ b, lambda a, b: a @ b, [rnd(*sa), rnd(*sb, seed=1)], dev)
  check(lambda a, b: a.dot(b), lambda a, b: torch.matmul(a, b), [rnd(*sa), rnd(*sb, seed=1)], dev, grad=False)

def test_matmul_dtypes_and_errors(dev):
  a, b = Tensor([[1, 2], [3, 4]], device=dev), Tensor([[1, 0], [2, 1]], device=dev)
  assert (a @ b).dtype == dtypes.int32 and (a @ b).tolist() == [[5, 2], [11, 4]]
  assert (a @ b.float()).dtype == dtypes.float32
  assert a.matmul(b, dtype=dtypes.float64).dtype == dtypes.float64
  assert a.matmul(b, reverse=True).tolist() == [[1, 2], [5, 8]]
  h = Tensor(rnd(4, 8), device=dev).half() @ Tensor(rnd(8, 2, seed=1), device=dev).half()
  assert h.dtype == dtypes.float16
  np.testing.assert_allclose(h.numpy(), rnd(4, 8) @ rnd(8, 2, seed=1), atol=1e-2)
  assert ([[1.0, 2.0]] @ Tensor([[1.0], [1.0]], device=dev)).tolist() == [[3.0]]
  with pytest.raises(ValueError, match="matmul shape mismatch"): Tensor.ones(2, 3) @ Tensor.ones(2, 3)
  with pytest.raises(ValueError, match="at least 1 dim"): Tensor(1.0) @ Tensor.ones(2)
  with pytest.raises(ValueError, match="batch dims"): Tensor.ones(2, 2, 3) @ Tensor.ones(3, 3, 4)

def test_linear(dev):
  check(lambda x, w, b: x.linear(w, b), lambda x, w, b: x @ w + b, [rnd(4, 3), rnd(3, 5, seed=1), rnd(5, seed=2)], dev)
  check(lambda x, w: x.linear(w), lambda x, w: x * w, [rnd(4, 3), rnd(3, seed=1)], dev)

@pytest.mark.parametrize("formula,shapes", [
  ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]), ("i,i->", [(4,), (4,)]),
  ("i,j->ij", [(3,), (4,)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]), ("...ij,...jk->...ik", [(2, 2, 3), (3, 4)]),
  ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("ijk->", [(2, 3, 4)]), ("ij,ij,ij->i", [(2, 3), (2, 3), (2, 3)]),
  ("i...->...", [(2, 3, 4)]), ("a b, b c -> a c", [(2, 3), (3, 2)])], ids=lambda x: str(x))
def test_einsum(formula, shapes, dev):
  ins = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
  check(lambda *t: Tensor.einsum(formula, *t), lambda *t: torch.einsum(formula, *t), ins, dev)
  check(lambda *t: Tensor.einsum(formula, list(t)), lambda *t: torch.einsum(formula, *t), ins, dev, grad=False)

def test_einsum_errors():
  with pytest.raises(ValueError, match="operands"): Tensor.einsum("ij,jk->ik", Tensor.ones(2, 3))
  with pytest.raises(ValueError, match="does not match"): Tensor.einsum("ijk->i", Tensor.ones(2, 3))
  with pytest.raises(ValueError, match="sizes"): Tensor.einsum("ij,jk->ik", Tensor.ones(2, 3), Tensor.ones(4, 2))
  with pytest.raises(ValueError, match="not in the inputs"): Tensor.einsum("ij->k", Tensor.ones(2, 3))

# *** convolution ***
@pytest.mark.parametrize("cfg", [
  dict(), dict(stride=2, padding=1), dict(dilation=2), dict(padding=(1, 0, 2, 1)), dict(groups=2, stride=(2, 1), padding=(1, 2)),
  dict(groups=4, padding=1, stride=2, dilation=(1, 2))], ids=str)
def test_conv2d(cfg, dev):
  groups = cfg.get("groups", 1)
  x, w, b = rnd(2, 4, 6, 5), rnd(4, 4 // groups, 3, 2, seed=1), rnd(4, seed=2)
  def tref(x, w, b):
    p = cfg.get("padding", 0)
    if isinstance(p, tuple) and len(p) == 4: x, p = tF.pad(x, p), 0
    return tF.conv2d(x, w, b, stride=cfg.get("stride", 1), padding=p, dilation=cfg.get("dilation", 1), groups=groups)
  check(lambda x, w, b: x.conv2d(w, b, **cfg), tref, [x, w, b], dev, atol=1e-5)

# the input gradient is a convolution per phase of the stride (tensor/conv.py _conv_input_grad): small images, strides
# 1-3 with and without padding, dilations that share a factor with the stride, groups, asymmetric padding
@pytest.mark.parametrize("hw,k,cfg", [
  (7, 3, dict(padding=1)), (7, 3, dict(stride=2, padding=1)), (4, 3, dict(padding=1)), (1, 1, dict()), (1, 3, dict(padding=1)),
  (2, 3, dict(stride=2, padding=1)), (5, 1, dict(stride=2)), (8, 3, dict(stride=2, padding=1, dilation=2)),
  (9, 3, dict(stride=3, padding=2, dilation=2)), (6, 2, dict(stride=2)), (7, 3, dict(padding=1, groups=2)),
  (6, 3, dict(stride=2, padding=1, groups=4)), (3, 1, dict(stride=3, padding=1)), (2, 1, dict(stride=3, padding=1)),
  (7, 4, dict(stride=2, padding=3, dilation=3)), (6, 3, dict(stride=(2, 1), padding=(1, 2, 0, 1)))], ids=str)
def test_conv2d_gradients(hw, k, cfg, dev):
  groups = cfg.get("groups", 1)
  x, w = rnd(2, 4, hw, hw + 1), rnd(8, 4 // groups, k, k, seed=1)
  def tref(x, w):
    p = cfg.get("padding", 0)
    if isinstance(p, tuple) and len(p) == 4: x, p = tF.pad(x, p), 0
    return tF.conv2d(x, w, stride=cfg.get("stride", 1), padding=p, dilation=cfg.get("dilation", 1), groups=groups)
  check(lambda x, w: x.conv2d(w, **cfg), tref, [x, w], dev, atol=1e-5)

@pytest.mark.parametrize("kh,kw", [(2, 1), (2, 3), (3, 3), (3, 5)])
def test_conv2d_one_input_channel_gradient_of_a_sum(kh, kw, dev):
  # tinygrad's test_conv2d_bs_1_cin_1: the output gradient of .sum() is a constant, the input gradient a convolution
  # of that padded constant with the flipped weight, whose kernel GCC 12's loop vectorizer got wrong (see the CLANG
  # plugin's _workarounds); checked against torch
  x, w = rnd(1, 1, 5, 7), rnd(6, 1, kh, kw, seed=1)
  tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
  tF.conv2d(tx, tw).sum().backward()
  X, W = Tensor(x, device=dev, requires_grad=True), Tensor(w, device=dev, requires_grad=True)
  X.conv2d(W).sum().backward()
  np.testing.assert_allclose(X.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(W.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)

def test_conv2d_second_order(dev):
  # the gradient rule is built of differentiable ops: the input gradient's own gradient matches torch's
  x, w = rnd(2, 3, 6, 6), rnd(4, 3, 3, 3, seed=1)
  tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
  gx, = torch.autograd.grad(tF.conv2d(tx, tw, stride=2, padding=1).square().sum(), tx, create_graph=True)
  gx.square().sum().backward()
  X, W = Tensor(x, device=dev, requires_grad=True), Tensor(w, device=dev, requires_grad=True)
  GX, = X.conv2d(W, stride=2, padding=1).square().sum().gradient(X)
  GX.square().sum().backward()
  np.testing.assert_allclose(X.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(W.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-3)

def test_conv2d_input_gradient_writes_no_windows():
  # through the windows, the input gradient was a reduce into a (bs, cin, out, 3, 3) tensor, 9x the input, and folds of it
  x, w = Tensor(rnd(2, 16, 7, 7), requires_grad=True), Tensor(rnd(8, 16, 3, 3, seed=1), requires_grad=True)
  gx, = x.conv2d(w, padding=1).square().sum().gradient(x)
  assert max(si.bufs[0].size for si in gx.schedule()) <= x.numel()

def test_conv1d_conv3d(dev):
  check(lambda x, w: x.conv2d(w, stride=2, padding=1), lambda x, w: tF.conv1d(x, w, stride=2, padding=1), [rnd(2, 3, 9), rnd(4, 3, 3, seed=1)], dev)
  check(lambda x, w, b: x.conv2d(w, b, padding=1), lambda x, w, b: tF.conv3d(x, w, b, padding=1), [rnd(1, 2, 3, 4, 3), rnd(2, 2, 2, 2, 2, seed=1),
                                                                                                      rnd(2, seed=2)], dev)

def test_conv2d_errors():
  x = Tensor.ones(1, 4, 5, 5)
  with pytest.raises(ValueError, match="channels"): x.conv2d(Tensor.ones(2, 3, 3, 3))
  with pytest.raises(ValueError, match="divisible by groups"): x.conv2d(Tensor.ones(3, 2, 3, 3), groups=2)
  with pytest.raises(ValueError, match="bias"): x.conv2d(Tensor.ones(2, 4, 3, 3), Tensor.ones(3))
  with pytest.raises(ValueError, match="same number of dims"): x.conv2d(Tensor.ones(2, 4, 3))
  with pytest.raises(ValueError, match="does not fit"): x.conv2d(Tensor.ones(2, 4, 7, 7))
  with pytest.raises(ValueError, match="padding"): x.conv2d(Tensor.ones(2, 4, 3, 3), padding=(1, 2, 3))

@pytest.mark.parametrize("cfg", [dict(), dict(stride=2, padding=1, output_padding=1), dict(dilation=2, padding=1), dict(groups=2, stride=(2, 1)),
                                 dict(stride=3, padding=(2, 1), dilation=(1, 2), output_padding=(1, 0))], ids=str)
def test_conv_transpose2d(cfg, dev):
  groups = cfg.get("groups", 1)
  x, w, b = rnd(2, 4, 4, 3), rnd(4, 6 // groups, 3, 2, seed=1), rnd(6 if groups == 1 else 6, seed=2)
  check(lambda x, w, b: x.conv_transpose2d(w, b, **cfg), lambda x, w, b: tF.conv_transpose2d(x, w, b, **cfg), [x, w, b], dev, atol=1e-5)

# *** pooling ***
@pytest.mark.parametrize("cfg", [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=(1, 2)), dict(kernel_size=3, stride=2, ceil_mode=True),
                                 dict(kernel_size=2, dilation=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)], ids=str)
def test_max_pool2d(cfg, dev):
  x = rnd(1, 2, 7, 6)
  check(lambda t: t.max_pool2d(**cfg), lambda t: tF.max_pool2d(t, **cfg), [x], dev)
  out, idx = Tensor(x, device=dev).max_pool2d(**cfg, return_indices=True)
  _, tidx = tF.max_pool2d(torch.tensor(x), **cfg, return_indices=True)
  assert idx.dtype == dtypes.int32  # as tinygrad 0.14 (torch: int64)
  np.testing.assert_equal(idx.numpy(), tidx.numpy())

@pytest.mark.parametrize("cfg", [dict(kernel_size=2), dict(kernel_size=3, stride=1), dict(kernel_size=3, padding=1),
                                 dict(kernel_size=3, padding=1, count_include_pad=False), dict(kernel_size=3, stride=2, ceil_mode=True),
                                 dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                 dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), dict(kernel_size=(2, 3), stride=(2, 1))], ids=str)
def test_avg_pool2d(cfg, dev):
  check(lambda t: t.avg_pool2d(**cfg), lambda t: tF.avg_pool2d(t, **cfg), [rnd(2, 2, 7, 6)], dev)

@pytest.mark.parametrize("cfg", [dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=3, stride=1), dict(kernel_size=3, stride=2, dilation=2),
                                 dict(kernel_size=(4, 2), stride=(3, 1), dilation=(2, 1))], ids=str)
def test_overlapping_window_gradient_is_elementwise(cfg, dev):
  # overlapping windows' gradient (tensor/conv.py _fold_taps): shifted slices per phase of the stride, no reduce over the
  # window copies (a fold, 0.1-0.4 GFLOP/s)
  check(lambda t: t.max_pool2d(**cfg), lambda t: tF.max_pool2d(t, **cfg), [rnd(2, 2, 9, 8)], dev)
  x = Tensor(rnd(2, 2, 9, 8), device=dev, requires_grad=True)
  gx, = (x.avg_pool2d(**cfg) * Tensor(rnd(*x.avg_pool2d(**cfg).shape, seed=1), device=dev)).sum().gradient(x)
  assert not any(u.op is Ops.REDUCE_AXIS for si in gx.schedule() for u in si.ast.toposort()), "the window gradient is elementwise"

def test_pool_1d_3d_and_ints(dev):
  check(lambda t: t.max_pool2d((3,), 2), lambda t: tF.max_pool1d(t, 3, 2), [rnd(2, 3, 9)], dev)
  check(lambda t: t.avg_pool2d((2, 2, 2)), lambda t: tF.avg_pool3d(t, 2), [rnd(1, 2, 4, 4, 4)], dev)
  i = Tensor(np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4), device=dev)
  assert i.max_pool2d(padding=1).dtype == dtypes.int32
  np.testing.assert_equal(i.max_pool2d().numpy(), [[[[5, 7], [13, 15]]]])
  np.testing.assert_equal(i.max_pool2d(3, 1, padding=1).numpy(), tF.max_pool2d(torch.arange(16.0).reshape(1, 1, 4, 4), 3, 1, 1).int().numpy())
  with pytest.raises(ValueError, match="does not fit"): Tensor.ones(1, 1, 2, 2).max_pool2d(3)

@pytest.mark.parametrize("cfg", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=2, stride=1)], ids=str)
def test_max_unpool2d(cfg, dev):
  x = rnd(1, 2, 6, 6)
  out, idx = Tensor(x, device=dev).max_pool2d(**cfg, return_indices=True)
  tout, tidx = tF.max_pool2d(torch.tensor(x), **cfg, return_indices=True)
  check(lambda t: t.max_unpool2d(Tensor(tidx.numpy(), device=dev), **cfg, output_size=(6, 6)),
        lambda t: tF.max_unpool2d(t, tidx, **cfg, output_size=(6, 6)), [tout.numpy()], dev)
  up = out.max_unpool2d(idx, **cfg, output_size=(6, 6))
  np.testing.assert_allclose(up.numpy(), tF.max_unpool2d(tout, tidx, **cfg, output_size=(6, 6)).numpy(), rtol=1e-6)

def test_max_unpool2d_is_a_scatter(dev):
  # O(input) writes into zeros, no one-hot over the output: an index past the output raises at the next sync
  x = Tensor(rnd(1, 1, 2, 2), device=dev)
  up = x.max_unpool2d(Tensor(np.array([[[[0, 3], [15, 16]]]], np.int32), device=dev), output_size=(4, 4))
  with pytest.raises(IndexError): up.numpy()
  from tinycore.ops import Ops
  assert any(si.ast.src[0].op is Ops.SCATTER for si in x.max_unpool2d(Tensor(np.array([[[[0, 3], [14, 15]]]], np.int32), device=dev)).schedule())

@pytest.mark.parametrize("size,mode,ac", [((5, 7), "linear", False), ((3, 2), "linear", False), ((5, 7), "linear", True), ((8, 3), "nearest", False),
                                          ((2, 5), "nearest", False), ((7, 9), "nearest-exact", False), ((1, 1), "linear", True)], ids=str)
def test_interpolate(size, mode, ac, dev):
  tmode = {"linear": "bilinear", "nearest": "nearest", "nearest-exact": "nearest-exact"}[mode]
  kw = {"align_corners": ac} if mode == "linear" else {}
  check(lambda t: t.interpolate(size, mode=mode, align_corners=ac), lambda t: tF.interpolate(t, size=size, mode=tmode, **kw), [rnd(1, 2, 4, 5)], dev)

def test_interpolate_1d_3d(dev):
  check(lambda t: t.interpolate((7,)), lambda t: tF.interpolate(t, size=(7,), mode="linear"), [rnd(2, 2, 5)], dev)
  check(lambda t: t.interpolate((3, 4, 2)), lambda t: tF.interpolate(t, size=(3, 4, 2), mode="trilinear"), [rnd(1, 1, 2, 3, 4)], dev)
  with pytest.raises(ValueError, match="mode"): Tensor.ones(1, 1, 2, 2).interpolate((3, 3), mode="cubic")

@pytest.mark.parametrize("shape,size", [((1, 2, 5, 7), (9, 11)), ((1, 2, 5, 7), (3, 4)), ((1, 2, 5, 7), (5, 14)), ((2, 3, 64, 64), (10, 10)),
                                        ((1, 6, 13, 17), (5, 29))], ids=str)
@pytest.mark.parametrize("mode,ac", [("linear", False), ("linear", True), ("nearest", False), ("nearest-exact", False)])
def test_interpolate_keeps_uint8(shape, size, mode, ac, dev):
  # an image stays uint8, computed with torch's fixed-point weights, rounded after each dim (tinygrad 0.14 keeps the dtype too)
  x = np.random.default_rng(3).integers(0, 256, shape).astype(np.uint8)
  out = Tensor(x, device=dev).interpolate(size, mode=mode, align_corners=ac)
  tmode = {"linear": "bilinear"}.get(mode, mode)
  ref = tF.interpolate(torch.tensor(x), size=size, mode=tmode, **({"align_corners": ac} if mode == "linear" else {}))
  assert out.dtype == dtypes.uint8 and out.shape == tuple(ref.shape)
  np.testing.assert_equal(out.numpy(), ref.numpy())
  assert Tensor(x.astype(np.int32), device=dev).interpolate(size, mode=mode).dtype == dtypes.int32

# *** normalization ***
@pytest.mark.parametrize("axis", [-1, (1, 2), 1])
def test_layernorm(axis, dev):
  x = rnd(2, 3, 4) * 3
  dims = axis if isinstance(axis, tuple) else (axis,)
  check(lambda t: t.layernorm(axis, eps=1e-5), lambda t: (t - t.mean(dims, keepdim=True)) / (t.var(dims, keepdim=True, correction=0) + 1e-5).sqrt(),
        [x], dev)
  check(lambda t: t.layernorm(), lambda t: tF.layer_norm(t, (4,)), [x], dev)

def test_batchnorm(dev):
  x, w, b, m, v = rnd(4, 3, 2, 2), rnd(3, seed=1), rnd(3, seed=2), rnd(3, seed=3), rnd(3, seed=4, lo=0.5, hi=2)
  # torch takes running stats without gradients: they are closed over, x, weight and bias are checked
  tm, tv = torch.tensor(m), torch.tensor(v)
  check(lambda x, w, b: x.batchnorm(w, b, Tensor(m, device=dev), (Tensor(v, device=dev) + 1e-5).rsqrt()),
        lambda x, w, b: tF.batch_norm(x, tm, tv, w, b, eps=1e-5), [x, w, b], dev)
  check(lambda x: x.batchnorm(None, None, Tensor(m, device=dev), (Tensor(v, device=dev) + 1e-5).rsqrt()),
        lambda x: tF.batch_norm(x, tm, tv, eps=1e-5), [x], dev)
  x2 = rnd(5, 3)
  check(lambda x, m, v: x.batchnorm(None, None, m, v.rsqrt(), axis=1), lambda x, m, v: (x - m) * v.rsqrt(), [x2, m, v], dev)
  with pytest.raises(ValueError, match="does not fit"): Tensor(x).batchnorm(None, None, Tensor.ones(4), Tensor.ones(3))

# *** losses ***
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy(reduction, smoothing, dev):
  logits = rnd(5, 4) * 3
  y = np.array([1, 0, 3, 3, 2])
  check(lambda t: t.cross_entropy(Tensor(y, device=dev), reduction, smoothing),
        lambda t: tF.cross_entropy(t, torch.tensor(y), reduction=reduction, label_smoothing=smoothing), [logits], dev)
  probs = _rng(3).dirichlet(np.ones(4), 5).astype(np.float32)
  check(lambda t: t.cross_entropy(Tensor(probs, device=dev), reduction, smoothing),
        lambda t: tF.cross_entropy(t, torch.tensor(probs), reduction=reduction, label_smoothing=smoothing), [logits], dev)

def test_cross_entropy_spatial(dev):
  logits = rnd(2, 3, 4, 2)
  y = _rng(4).integers(0, 3, (2, 4, 2))
  check(lambda t: t.cross_entropy(Tensor(y, device=dev)), lambda t: tF.cross_entropy(t, torch.tensor(y)), [logits], dev)
  with pytest.raises(ValueError, match="target of shape"): Tensor(logits).cross_entropy(Tensor([0, 1]))
  with pytest.raises(TypeError, match="integers"): Tensor(logits).cross_entropy(Tensor(y.astype(np.float32)))

@pytest.mark.parametrize("ignore_index,smoothing,reduction", [(-1, 0.0, "mean"), (2, 0.0, "mean"), (-1, 0.1, "mean"), (1, 0.3, "sum"),
                                                              (-1, 0.0, "none"), (0, 0.0, "none")])
def test_sparse_categorical_crossentropy(ignore_index, smoothing, reduction, dev):
  logits = rnd(6, 4) * 2
  y = np.array([1, 2, 3, 0, 2, 1])
  tref = lambda t: tF.cross_entropy(t, torch.tensor(y), ignore_index=ignore_index, label_smoothing=smoothing, reduction=reduction)
  check(lambda t: t.sparse_categorical_crossentropy(Tensor(y, device=dev), ignore_index, smoothing, reduction), tref, [logits], dev)

def test_sparse_categorical_crossentropy_nd_and_errors(dev):
  logits = rnd(2, 3, 5)
  y = _rng(5).integers(0, 5, (2, 3))
  check(lambda t: t.sparse_categorical_crossentropy(Tensor(y, device=dev)), lambda t: tF.cross_entropy(t.permute(0, 2, 1), torch.tensor(y)),
        [logits], dev)
  with pytest.raises(IndexError, match="out of bounds"): Tensor(logits).sparse_categorical_crossentropy(Tensor(np.full((2, 3), 5))).item()
  with pytest.raises(ValueError, match="do not match"): Tensor(logits).sparse_categorical_crossentropy(Tensor([0, 1]))
  with pytest.raises(ValueError, match="reduction"): Tensor(logits).sparse_categorical_crossentropy(Tensor(y), reduction="avg")
  with pytest.raises(ValueError, match="label_smoothing"): Tensor(logits).sparse_categorical_crossentropy(Tensor(y), label_smoothing=1.5)

@pytest.mark.parametrize("weighted,ignore_index,reduction", [(False, None, "mean"), (True, None, "mean"), (True, 1, "mean"), (False, 2, "sum"),
                                                             (True, None, "none")])
def test_nll_loss(weighted, ignore_index, reduction, dev):
  lp = np.log(_rng(6).dirichlet(np.ones(4), 5)).astype(np.float32)
  y = np.array([1, 0, 3, 1, 2])
  wt = rnd(4, lo=0.5, hi=2, seed=7)
  kw = {"ignore_index": ignore_index} if ignore_index is not None else {}
  check(lambda t: t.nll_loss(Tensor(y, device=dev), Tensor(wt, device=dev) if weighted else None, ignore_index, reduction),
        lambda t: tF.nll_loss(t, torch.tensor(y), torch.tensor(wt) if weighted else None, reduction=reduction, **kw), [lp], dev)
  lp2 = rnd(2, 3, 4)
  y2 = _rng(8).integers(0, 3, (2, 4))
  check(lambda t: t.nll_loss(Tensor(y2, device=dev)), lambda t: tF.nll_loss(t, torch.tensor(y2)), [lp2], dev)

def test_nll_loss_targets_checked_on_the_device(dev):
  """nll_loss gathers each target's log-probability: nothing is read back while the graph is built, a target out of
  range raises IndexError at the next sync (a negative one is reported as the number of classes), an ignored one is
  left out, and -inf at another class does not reach the loss (as torch)."""
  from tinycore.helpers import GlobalCounters
  lp = Tensor(np.log(_rng(6).dirichlet(np.ones(4), 3)).astype(np.float32), device=dev).realize()
  before = GlobalCounters.kernel_count
  loss = lp.nll_loss(Tensor([1, 7, 0], device=dev))
  assert GlobalCounters.kernel_count == before
  with pytest.raises(IndexError, match="index 7 is out of bounds for size 4"): loss.item()
  with pytest.raises(IndexError, match="index 4 is out of bounds for size 4"): lp.nll_loss(Tensor([1, -1, 0], device=dev)).item()
  x = np.array([[-np.inf, -0.5, -1.0], [-0.2, -np.inf, -3.0]], np.float32)
  for ii in (None, 2):
    want = tF.nll_loss(torch.tensor(x), torch.tensor([1, 2]), **({"ignore_index": ii} if ii is not None else {})).item()
    assert math.isclose(Tensor(x, device=dev).nll_loss(Tensor([1, 2], device=dev), ignore_index=ii).item(), want, rel_tol=1e-6)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_crossentropy(reduction, dev):
  p = rnd(3, 4, lo=0.05, hi=0.95)
  y = (_rng(9).random((3, 4)) > 0.5).astype(np.float32)
  check(lambda t: t.binary_crossentropy(Tensor(y, device=dev), reduction), lambda t: tF.binary_cross_entropy(t, torch.tensor(y), reduction=reduction),
        [p], dev)
  logits = rnd(3, 4) * 5
  check(lambda t: t.binary_crossentropy_logits(Tensor(y, device=dev), reduction),
        lambda t: tF.binary_cross_entropy_with_logits(t, torch.tensor(y), reduction=reduction), [logits], dev)
  pw = rnd(4, lo=0.5, hi=3, seed=10)
  check(lambda t: t.binary_crossentropy_logits(Tensor(y, device=dev), reduction, pos_weight=Tensor(pw, device=dev)),
        lambda t: tF.binary_cross_entropy_with_logits(t, torch.tensor(y), reduction=reduction, pos_weight=torch.tensor(pw)), [logits], dev)

def test_bce_extremes(dev):
  p = np.array([0.0, 1.0, 0.5], np.float32)
  y = np.array([1.0, 0.0, 1.0], np.float32)
  np.testing.assert_allclose(Tensor(p, device=dev).binary_crossentropy(Tensor(y, device=dev), "none").numpy(),
                             tF.binary_cross_entropy(torch.tensor(p), torch.tensor(y), reduction="none").numpy(), rtol=1e-6)
  big = np.array([100.0, -100.0, 0.0], np.float32)
  np.testing.assert_allclose(Tensor(big, device=dev).binary_crossentropy_logits(Tensor(y, device=dev), "none").numpy(),
                             tF.binary_cross_entropy_with_logits(torch.tensor(big), torch.tensor(y), reduction="none").numpy(), rtol=1e-6, atol=1e-30)
  with pytest.raises(ValueError, match="does not match"): Tensor(p).binary_crossentropy(Tensor([1.0]))

def test_one_hot(dev):
  y = np.array([[0, 2], [1, 3]])
  oh = Tensor(y, device=dev).one_hot(5)
  assert oh.dtype == dtypes.int32 and oh.shape == (2, 2, 5)
  np.testing.assert_equal(oh.numpy(), tF.one_hot(torch.tensor(y), 5).numpy())
  # num_classes -1 (the default) is the largest value + 1, as torch (tinygrad 0.14 required it and refused -1)
  for arg in ((), (-1,)): np.testing.assert_equal(Tensor(y, device=dev).one_hot(*arg).numpy(), tF.one_hot(torch.tensor(y), *arg).numpy())
  with pytest.raises(RuntimeError): tF.one_hot(torch.tensor([], dtype=torch.int64))
  with pytest.raises(ValueError, match="num_classes"): Tensor([], dtype=dtypes.int32, device=dev).one_hot()
  with pytest.raises(ValueError, match="num_classes"): Tensor(y, device=dev).one_hot(-2)
  with pytest.raises(IndexError, match="index 5 is out of bounds for size 5"): Tensor([0, 5]).one_hot(5).numpy()  # at the next sync
  with pytest.raises(IndexError, match="index 5 is out of bounds"): Tensor([-1, 2]).one_hot(5).numpy()  # a negative one as num_classes
  with pytest.raises(RuntimeError): tF.one_hot(torch.tensor([-1, 2]), 5)
  with pytest.raises(TypeError, match="integer"): Tensor([0.0, 1.0]).one_hot(2)

# *** attention ***
@pytest.mark.parametrize("kind", ["plain", "causal", "bool_mask", "float_mask"])
def test_scaled_dot_product_attention(kind, dev):
  q, k, v = rnd(2, 2, 3, 4), rnd(2, 2, 5, 4, seed=1), rnd(2, 2, 5, 6, seed=2)
  if kind == "causal": k, v = k[:, :, :3], v[:, :, :3]
  mask = _rng(3).random((3, 5)) > 0.3
  mask[:, 0] = True
  fmask = rnd(3, 5, seed=4)
  kw = {"plain": {}, "causal": {"is_causal": True}, "bool_mask": {"attn_mask": mask}, "float_mask": {"attn_mask": fmask}}[kind]
  tkw = {a: (Tensor(b, device=dev) if isinstance(b, np.ndarray) else b) for a, b in kw.items()}
  pkw = {a: (torch.tensor(b) if isinstance(b, np.ndarray) else b) for a, b in kw.items()}
  check(lambda q, k, v: q.scaled_dot_product_attention(k, v, **tkw), lambda q, k, v: tF.scaled_dot_product_attention(q, k, v, **pkw),
        [q, k, v], dev)

def test_attention_gqa_and_errors(dev):
  q, k, v = rnd(1, 4, 3, 2), rnd(1, 2, 3, 2, seed=1), rnd(1, 2, 3, 2, seed=2)
  check(lambda q, k, v: q.scaled_dot_product_attention(k, v, enable_gqa=True),
        lambda q, k, v: tF.scaled_dot_product_attention(q, k, v, enable_gqa=True), [q, k, v], dev)
  with pytest.raises(ValueError, match="either attn_mask or is_causal"):
    Tensor(q).scaled_dot_product_attention(Tensor(q), Tensor(q), attn_mask=Tensor.ones(3, 3), is_causal=True)
  with pytest.raises(ValueError, match="dim"): Tensor(q).scaled_dot_product_attention(Tensor.ones(1, 4, 3, 5), Tensor(q))

def test_attention_dropout_in_training(dev):
  q = Tensor(rnd(1, 2, 4), device=dev)
  with Tensor.train():
    Tensor.manual_seed(0)
    out = q.scaled_dot_product_attention(q, q, dropout_p=0.5).numpy()
  ref = q.scaled_dot_product_attention(q, q).numpy()
  assert out.shape == ref.shape and not np.allclose(out, ref)
  np.testing.assert_allclose(q.scaled_dot_product_attention(q, q, dropout_p=0.5).numpy(), ref)
