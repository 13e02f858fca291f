"""The comparison the Tensor tests share: tinycore against PyTorch on the same numpy inputs, forward and backward."""
from typing import Callable
import numpy as np
import torch
from tinycore import Tensor

def check(tc_fn: Callable, torch_fn: Callable, inputs: list[np.ndarray], dev: str, grad: bool = True, atol: float = 1e-5,
          rtol: float = 1e-4, grad_atol: float | None = None, grad_rtol: float | None = None) -> Tensor:
  """Run tc_fn on tinycore tensors and torch_fn on torch tensors made from the same numpy inputs; compare the outputs
  (NaN where torch has NaN) and, with grad, the gradients of sum(out * w) for a random w (float inputs only)."""
  tt = [Tensor(x, device=dev, requires_grad=grad and x.dtype.kind == "f") for x in inputs]
  pt = [torch.tensor(x, requires_grad=grad and x.dtype.kind == "f") for x in inputs]
  out, ref = tc_fn(*tt), torch_fn(*pt)
  assert out.shape == tuple(ref.shape), f"shape {out.shape} vs torch {tuple(ref.shape)}"
  np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), atol=atol, rtol=rtol, equal_nan=True)
  if grad and ref.numel() and ref.dtype.is_floating_point and any(p.requires_grad for p in pt):
    w = np.random.default_rng(1).standard_normal(tuple(ref.shape)).astype(np.float32)
    (out * Tensor(w, device=dev)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    for i, (t, p) in enumerate(zip(tt, pt)):
      if p.grad is None: continue
      assert t.grad is not None, f"tinycore gave no gradient for input {i}"
      np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), atol=grad_atol or atol * 10, rtol=grad_rtol or rtol * 10,
                                 equal_nan=True, err_msg=f"gradient of input {i}")
  return out
