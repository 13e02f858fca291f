"""A matmul's weight gradient x^T @ grad (reduced over x's rows, a Linear's tokens) computed with grad stored transposed
first (function.Dot, codegen/matmul.py `matmul_grad_transposed`), and the register tile of such a transposed copy
(`_transpose_tile`): gradients against numpy in float64, with the rule on and off, NOOPT on and off."""
import copy
import numpy as np
import pytest
from tinycore import Tensor, Device
from tinycore.backend import Renderer
from tinycore.codegen import Kernel
from tinycore.codegen.heuristic import hand_coded_optimizations
from tinycore.codegen.matmul import matmul_grad_transposed
from tinycore.helpers import Context
from tinycore.ops import Ops

def cpu(widths=(16, 8, 4), regs=32, cache=2 << 20) -> Renderer:
  return Renderer(has_local=False, vector_widths=widths, vector_registers=regs, cache_bytes=cache)

def _cpu_renderer() -> Renderer:
  r = Device[Device.DEFAULT].renderer
  if r.has_local or max(r.vector_widths) == 1: pytest.skip("a device with vectors and no thread ids (a CPU)")
  return r

def test_grad_transposed_rule():
  # GPT's MLP over 1024 tokens (rows of 4 KB: every row in the same cache sets) takes the copy; its qkv (3 KB rows) and a
  # 256x256 weight's operands (2 MB: in the cache) are read in place
  assert matmul_grad_transposed(cpu(), 1024, 256, 1024, 4) and matmul_grad_transposed(cpu(), 1024, 1024, 256, 4)
  assert not matmul_grad_transposed(cpu(), 1024, 256, 768, 4), "rows 3 KB apart spread over the cache sets"
  assert not matmul_grad_transposed(cpu(), 1024, 256, 256, 4), "operands that fit the cache are read in place"
  assert not matmul_grad_transposed(cpu(), 64, 4096, 4096, 4), "too few rows for the copy to pay"
  assert not matmul_grad_transposed(cpu(cache=0), 1024, 1024, 1024, 4) and not matmul_grad_transposed(cpu(widths=(1,)), 1024, 1024, 1024, 4)
  assert not matmul_grad_transposed(Renderer(has_local=True, local_max=(256, 256, 64), vector_widths=(4,), cache_bytes=1 << 20), 1024, 1024, 1024, 4)

def _sinks(t: Tensor) -> list:
  return [s for s in t.schedule() if s.ast.op is Ops.SINK]

def test_weight_gradient_reads_grad_transposed(monkeypatch):
  r = _cpu_renderer()
  monkeypatch.setattr(r, "cache_bytes", 4096)
  x, w = Tensor.empty(2, 128, 1024), Tensor.empty(48, 1024, requires_grad=True)
  x.linear(w.T).backward(Tensor.empty(2, 128, 48))
  ks = _sinks(w.grad)
  # grad copied into its transpose (48, 256) first: the matmul reads it along the reduce (in place it steps 48 a token)
  red = [s for s in ks if any(u.op is Ops.REDUCE_AXIS for u in s.ast.toposort())]
  assert len(red) == 1 and len(ks) >= 2, [s.ast.op for s in ks]
  k = Kernel(red[0].ast, r)
  strides = [k.st_for(u.src[1]).real_strides()[k.dims("r")[-1]] for u in k.ast.toposort() if u.op is Ops.LOAD]
  assert 1 in strides, f"an operand streams along the reduce: {strides}"

@pytest.mark.parametrize("widths,regs", [((16, 8, 4), 32), ((8, 4), 16)])
def test_transposed_copy_reads_whole_cache_lines(widths, regs):
  # a transposed copy's lanes (the output's contiguous dim) read the input a row apart: the input's contiguous dim is
  # upcast by a vector width too, so that each input line feeds a whole block (a 1024x1024 copy: 6 -> 1.6 ms, one core)
  r = copy.copy(_cpu_renderer())
  r.vector_widths, r.vector_registers = widths, regs
  k = hand_coded_optimizations(Kernel(_sinks(Tensor.empty(256, 512).T.contiguous())[-1].ast, r))
  (st,) = [k.st_for(u.src[1]) for u in k.ast.toposort() if u.op is Ops.LOAD]
  U = k.dims("U")
  assert [st.real_strides()[d] for d in U] == [1, 512] and [k.full_shape[d] for d in U] == [widths[0]] * 2, (k.full_shape, k.kinds)

def _linear_grads(xn: np.ndarray, wn: np.ndarray, gn: np.ndarray) -> tuple[np.ndarray, ...]:
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  out = x.linear(w.T)
  (out * Tensor(gn)).sum().backward()
  return out.numpy(), x.grad.numpy(), w.grad.numpy()

@pytest.mark.parametrize("noopt", [0, 1])
@pytest.mark.parametrize("cache", [4096, 0])
def test_linear_forward_and_backward(monkeypatch, cache, noopt):
  # the rule on (a small cache) and off (none): the same values, as numpy's float64 ones, with and without optimizations
  monkeypatch.setattr(_cpu_renderer(), "cache_bytes", cache)
  rng = np.random.default_rng(0)
  xn, wn, gn = (rng.standard_normal(s).astype(np.float32) for s in ((3, 100, 1024), (80, 1024), (3, 100, 80)))
  with Context(NOOPT=noopt): out, gx, gw = _linear_grads(xn, wn, gn)
  x64, w64, g64 = xn.astype(np.float64), wn.astype(np.float64), gn.astype(np.float64)
  np.testing.assert_allclose(out, x64 @ w64.T, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(gx, g64 @ w64, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(gw, np.einsum("btn,btk->nk", g64, x64), rtol=1e-4, atol=1e-4)

def test_second_order_through_the_transposed_gradient(monkeypatch):
  # the gradients are matmuls recorded like any other computation: d/dx of sum(dL/dW) against torch in float64
  torch = pytest.importorskip("torch")
  monkeypatch.setattr(_cpu_renderer(), "cache_bytes", 4096)
  rng = np.random.default_rng(1)
  xn, wn = rng.standard_normal((300, 1024)).astype(np.float32), rng.standard_normal((24, 1024)).astype(np.float32)
  x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
  (gw,) = (x @ w.T).square().sum().gradient(w) if hasattr(Tensor, "gradient") else pytest.skip("no Tensor.gradient")
  gw.sum().backward()
  xt, wt = torch.tensor(xn, dtype=torch.float64, requires_grad=True), torch.tensor(wn, dtype=torch.float64, requires_grad=True)
  (gwt,) = torch.autograd.grad((xt @ wt.T).square().sum(), wt, create_graph=True)
  gwt.sum().backward()
  # (float32 sums of 300 and 1024 terms of size ~30: in NOOPT's sequential order a few land 2e-3 from float64)
  np.testing.assert_allclose(gw.numpy(), gwt.detach().numpy(), rtol=1e-3, atol=3e-3)
  np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-3, atol=3e-3)
