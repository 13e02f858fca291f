"""ONNX's training ops (domain ai.onnx.preview.training): the optimizer steps Adagrad, Adam and Momentum, and Gradient.

An optimizer node updates n tensors at once: its inputs are the learning rate R and the step count T (scalars), then
the n tensors X, their n gradients G and the optimizer's n state tensors of each kind; its outputs are the n new X and
the n new states of each kind. The formulas are ONNX's (its operator docs), with the step count's conditions as
`where`s, so that nothing is read back. Gradient differentiates a value of the graph (attribute y) by the graph values
its inputs name (attribute xs) with tinycore's autograd (Tensor.gradient)."""
from __future__ import annotations
from typing import Any
from tinycore.tensor import Tensor
from tinycore.nn.onnx.registry import onnx_op

DOMAIN = "ai.onnx.preview.training"

def _groups(rest: tuple[Tensor, ...], kinds: int) -> list[tuple[Tensor, ...]]:
  """(X, G, state...) per updated tensor from the node's inputs after R and T: `kinds` lists of n, one after another."""
  n = len(rest) // kinds
  return [tuple(rest[k * n + i] for k in range(kinds)) for i in range(n)]

def _outputs(per_tensor: list[tuple[Tensor, ...]]) -> tuple[Tensor, ...]:
  """All new X, then all new states of each kind, as ONNX orders the outputs."""
  return tuple(t for kind in zip(*per_tensor) for t in kind)

@onnx_op(domain=DOMAIN)
def Adagrad(r: Tensor, t: Tensor, /, *rest: Tensor, decay_factor: float = 0.0, epsilon: float = 0.0,
            norm_coefficient: float = 0.0) -> tuple[Tensor, ...]:
  """x -= r / (1 + t * decay_factor) * g' / (sqrt(h + g'^2) + epsilon), g' = g + norm_coefficient * x; h += g'^2."""
  out = []
  for x, g, h in _groups(rest, 3):
    lr, gr = r.cast(x.dtype) / (t.cast(x.dtype) * decay_factor + 1), g + x * norm_coefficient
    h2 = h + gr * gr
    out.append((x - lr * gr / (h2.sqrt() + epsilon), h2))
  return _outputs(out)

def _power(b: float, t: Tensor) -> Tensor: return Tensor(b, dtype=t.dtype, device=t.device).pow(t)

@onnx_op(domain=DOMAIN)
def Adam(r: Tensor, t: Tensor, /, *rest: Tensor, alpha: float = 0.9, beta: float = 0.999, epsilon: float = 0.0, norm_coefficient: float = 0.0,
         norm_coefficient_post: float = 0.0) -> tuple[Tensor, ...]:
  """v = alpha v + (1 - alpha) g', h = beta h + (1 - beta) g'^2, x -= r' v / (sqrt(h) + epsilon), r' with the bias
  correction sqrt(1 - beta^t) / (1 - alpha^t) from step 1 on, then x *= 1 - norm_coefficient_post."""
  out = []
  for x, g, v, h in _groups(rest, 4):
    tf = t.cast(x.dtype)
    lr = (t > 0).where(r * (1 - _power(beta, tf)).sqrt() / (1 - _power(alpha, tf)), r)
    gr = g + x * norm_coefficient
    v2, h2 = v * alpha + gr * (1 - alpha), h * beta + gr * gr * (1 - beta)
    out.append(((x - lr.cast(x.dtype) * v2 / (h2.sqrt() + epsilon)) * (1 - norm_coefficient_post), v2, h2))
  return _outputs(out)

@onnx_op(domain=DOMAIN, values={"mode": ("standard", "nesterov")})
def Momentum(r: Tensor, t: Tensor, /, *rest: Tensor, alpha: float, beta: float, mode: str, norm_coefficient: float) -> tuple[Tensor, ...]:
  """v = alpha v + beta' g' (beta' = 1 at step 0), x -= r v (standard) or r (g' + alpha v) (nesterov)."""
  out = []
  for x, g, v in _groups(rest, 3):
    gr = g + x * norm_coefficient
    v2 = v * alpha + gr * (t > 0).where(beta, 1.0).cast(x.dtype)
    out.append((x - r.cast(x.dtype) * (v2 if mode == "standard" else gr + v2 * alpha), v2))
  return _outputs(out)

@onnx_op(domain=DOMAIN)
def Gradient(*xs_and_zs: Tensor, xs: list[str], y: str, zs: list[str] | None = None, _scope: Any = None) -> tuple[Tensor, ...]:
  """d y / d x for each x named by xs (the graph values, not copies: the inputs are their Tensors)."""
  return tuple(_scope[y].gradient(*[_scope[x] for x in xs]))
