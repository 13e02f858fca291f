"""The GPT training step's non-matmul kernels: a reduce across rows (a bias's or a LayerNorm weight's gradient, summed
over tokens) takes vectors along its output features (codegen/heuristic.py `_column_tile`); GELU's gradient is given
by a rule from x alone (tensor/elementwise.py `_gelu_grad`), so the forward stores GELU's value and nothing else; a
value that reaches two kernels only through a refused fusion is computed once where recomputing costs more
(engine/schedule.py `_recompute_costs_more`: the attention's softmax gradient). Values against numpy / torch in
float64, NOOPT on and off."""
import copy
import numpy as np
import pytest
from tinycore import Tensor, Device
from tinycore.codegen import Kernel
from tinycore.codegen.heuristic import hand_coded_optimizations
from tinycore.helpers import Context, prod
from tinycore.ops import Ops

def _cpu_renderer():
  r = Device[Device.DEFAULT].renderer
  if r.has_local or max(r.vector_widths) == 1: pytest.skip("a device with vectors and no thread ids (a CPU)")
  return r

def _kernels(*ts: Tensor) -> list:
  return [si for si in ts[0].schedule(*ts[1:]) if si.ast.op is Ops.SINK]

@pytest.mark.parametrize("regs", [16, 32])
@pytest.mark.parametrize("product", [False, True])
def test_column_reduce_takes_vectors_along_its_outputs(regs, product):
  # GPT's MLP bias gradient, (1024 tokens, 1024 features).sum(0): lane by lane, each output read a column of floats 4 KB
  # apart (4.9 ms on one AVX-512 core; 0.24 ms with vectors along the features)
  r = copy.copy(_cpu_renderer())
  r.vector_registers = regs
  x, y = Tensor.empty(1024, 1024), Tensor.empty(1024, 1024)
  k = hand_coded_optimizations(Kernel(_kernels((x * y if product else x).sum(0))[-1].ast, r))
  U = k.dims("U")
  assert U and prod(k.full_shape[d] for d in U) % max(r.vector_widths) == 0, (k.applied_opts, k.full_shape, k.kinds)

@pytest.mark.parametrize("noopt", [0, 1])
@pytest.mark.parametrize("shape", [(1024, 256), (7, 96), (130, 48), (3, 5, 64), (33, 17)])
def test_column_reduce_values(shape, noopt):
  rng = np.random.default_rng(0)
  xn, yn = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
  with Context(NOOPT=noopt):
    s, p = Tensor(xn).sum(0).numpy(), (Tensor(xn) * Tensor(yn)).sum(0).numpy()
    s2 = Tensor(xn).sum(tuple(range(len(shape) - 1))).numpy()
  np.testing.assert_allclose(s, xn.astype(np.float64).sum(0), rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(p, (xn.astype(np.float64) * yn).sum(0), rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(s2, xn.astype(np.float64).sum(tuple(range(len(shape) - 1))), rtol=1e-5, atol=1e-4)

@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_forward_stores_only_its_value(approximate):
  # through its pieces, GELU's forward stored 6 tensors of x's size for the backward (GPT's MLP: 6 kernels of 1M floats
  # a layer); with the rule, y and x's gradient are one kernel each
  x, g = Tensor.empty(64, 256, requires_grad=True), Tensor.empty(64, 256)
  y = x.gelu(approximate)
  (y * g).sum().backward()
  assert len(_kernels(y, x.grad)) == 2

@pytest.mark.parametrize("noopt", [0, 1])
@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("shape", [(37, 53), (5,), (), (0, 4), (2, 3, 16)])
def test_gelu_gradient_matches_torch(shape, approximate, noopt):
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(1)
  xn, gn = (rng.standard_normal(shape) * 4).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
  with Context(NOOPT=noopt):
    x = Tensor(xn, requires_grad=True)
    y = x.gelu(approximate)
    (y * Tensor(gn)).sum().backward()
    yv, gx = y.numpy(), x.grad.numpy()
  xt = torch.tensor(xn, dtype=torch.float64, requires_grad=True)
  yt = torch.nn.functional.gelu(xt, approximate=approximate)
  (yt * torch.tensor(gn, dtype=torch.float64)).sum().backward()
  np.testing.assert_allclose(yv, yt.detach().numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-5, atol=2e-5)

@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_second_order_matches_torch(approximate):
  torch = pytest.importorskip("torch")
  xn = np.random.default_rng(2).standard_normal((6, 7)).astype(np.float32) * 2
  x = Tensor(xn, requires_grad=True)
  (gx,) = x.gelu(approximate).sum().gradient(x)
  (gx * gx).sum().backward()
  xt = torch.tensor(xn, dtype=torch.float64, requires_grad=True)
  (gt,) = torch.autograd.grad(torch.nn.functional.gelu(xt, approximate=approximate).sum(), xt, create_graph=True)
  (gt * gt).sum().backward()
  np.testing.assert_allclose(gx.numpy(), gt.detach().numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)

def _split_attention(xt, lib):
  B, T, H, D = xt.shape[0], xt.shape[1], 4, xt.shape[2] // 12
  q, k, v = [z.reshape(B, T, H, D).transpose(1, 2) for z in xt.split(H * D, dim=-1)]
  if lib == "tc": return q.scaled_dot_product_attention(k, v, is_causal=True)
  import torch
  return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

def test_attention_gradient_computes_softmax_once():
  # q, k, v sliced from one tensor (GPT's qkv): their gradients meet in one concat kernel, which refused the q and k
  # gradient reduces; the softmax and its gradient, reaching both only through them, were recomputed (exp and all)
  # inside every step of both attention matmuls (GPT size, forward + backward of the attention: 40 -> 7.5 ms)
  x = Tensor.empty(2, 32, 192, requires_grad=True)
  o = _split_attention(x, "tc")
  gx, = (o * Tensor.empty(*o.shape)).sum().gradient(x)
  assert sum(any(u.op is Ops.EXP2 for u in si.ast.toposort()) for si in _kernels(gx)) == 1

@pytest.mark.parametrize("noopt", [0, 1])
def test_attention_gradient_matches_torch(noopt):
  torch = pytest.importorskip("torch")
  rng = np.random.default_rng(3)
  xn, gn = rng.standard_normal((2, 24, 96)).astype(np.float32), rng.standard_normal((2, 4, 24, 8)).astype(np.float32)
  with Context(NOOPT=noopt):
    x = Tensor(xn, requires_grad=True)
    (_split_attention(x, "tc") * Tensor(gn)).sum().backward()
    gx = x.grad.numpy()
  xt = torch.tensor(xn, dtype=torch.float64, requires_grad=True)
  (_split_attention(xt, "torch") * torch.tensor(gn, dtype=torch.float64)).sum().backward()
  np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)

@pytest.mark.parametrize("noopt", [0, 1])
def test_mlp_input_gradients_through_panels_match_torch(noopt):
  # GPT's MLP: the input gradients g @ W read W (k, n) row-major with n = 256 (fc's, from fc2's gradient) and n = 1024;
  # from PANEL_ROWS rows W is repacked into zero-padded panels though it fits the cache (codegen/matmul.py `matmul_panel`),
  # its padded columns cut off before the GELU gradient; 130 rows pad to whole row tiles too
  torch = pytest.importorskip("torch")
  from tinycore.codegen.matmul import matmul_panel
  r = _cpu_renderer()
  assert matmul_panel(r, 130, 64, 256, 4) and matmul_panel(r, 130, 256, 64, 4, transposed=True)
  rng = np.random.default_rng(4)
  xn, w1n, w2n, gn = (rng.standard_normal(s).astype(np.float32) / 8 for s in ((130, 64), (256, 64), (64, 256), (130, 64)))
  with Context(NOOPT=noopt):
    x, w1, w2 = (Tensor(a, requires_grad=True) for a in (xn, w1n, w2n))
    out = (x @ w1.T).gelu(approximate="tanh") @ w2.T
    (out * Tensor(gn)).sum().backward()
    got = [out.numpy()] + [t.grad.numpy() for t in (x, w1, w2)]
  xt, w1t, w2t = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (xn, w1n, w2n))
  ot = torch.nn.functional.gelu(xt @ w1t.T, approximate="tanh") @ w2t.T
  (ot * torch.tensor(gn, dtype=torch.float64)).sum().backward()
  for a, b in zip(got, [ot.detach().numpy(), xt.grad.numpy(), w1t.grad.numpy(), w2t.grad.numpy()]):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
