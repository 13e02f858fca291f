"""Load-time rewrites of a Graph that make every run cheaper without changing what it computes (up to float rounding).

Applied by Graph once its nodes are checked, in this order:
- a Conv whose only consumer is an inference BatchNormalization, with the weights, bias and the normalization's four
  parameters all constants, becomes one Conv with the normalization folded into its weights and bias
  (w * scale / sqrt(var + eps) per output channel, (b - mean) * scale / sqrt(var + eps) + bias), as onnxruntime does;
- constant folding: a node whose inputs are all constants (initializers, Constant nodes, outputs of folded nodes) runs
  once at load and its outputs become initializers, realized. Not folded: random ops (each run draws anew), ops that
  run subgraphs, outputs that are not Tensors (sequences, optionals), and outputs larger than the node's inputs
  together and than FOLD_MAX_ELEMENTS (an Expand or ConstantOfShape stays a lazy broadcast rather than a big buffer).
  A node whose folding raises stays in the graph (it raises when the model runs, as it would have).
- a constant Conv weight is stored in the layout Tensor.conv2d reads it in, panels of output channels (`_conv_weights_in_conv_layout`).
Initializers no node, output or subgraph uses any more are dropped. The rewrites never remove a value a subgraph may
read from the outer scope: nodes whose outputs a subgraph names are left as they are."""
from __future__ import annotations
from typing import Any
from tinycore.tensor import Tensor
from tinycore.tensor.conv import weight_panel, weight_in_panels

Graph = Any  # a tinycore.nn.onnx.runner.Graph (not imported: the runner imports this module)

FOLD_MAX_ELEMENTS = 1 << 16
RANDOM_OPS = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial", "Dropout"})

def optimize(g: Graph) -> None:
  """Fold BatchNormalization into Conv, then constants, in place."""
  inner = _subgraph_reads(g)
  _fold_batchnorm(g, inner)
  _fold_constants(g, inner)
  _conv_weights_in_conv_layout(g)
  used = {i for _, n, _, _ in g.nodes for i in n.input} | set(g.outputs) | inner
  g.initializers = {k: v for k, v in g.initializers.items() if k in used}

def _subgraph_reads(g: Graph) -> set[str]:
  """Every value name a node of a subgraph (at any depth) reads: a superset of what they read from outer scopes."""
  out: set[str] = set()
  for _, _, attrs, _ in g.nodes:
    for sub in attrs.values():
      if type(sub) is type(g): out |= {i for _, n, _, _ in sub.nodes for i in n.input} | set(sub.outputs) | _subgraph_reads(sub)
  return out

def _fold_batchnorm(g: Graph, inner: set[str]) -> None:
  from onnx import helper
  consumers: dict[str, int] = {}
  for _, n, _, _ in g.nodes:
    for i in n.input: consumers[i] = consumers.get(i, 0) + 1
  by_input = {n.input[0]: k for k, (impl, n, _, _) in enumerate(g.nodes) if impl.name == "BatchNormalization" and n.input}
  drop: set[int] = set()
  for k, (impl, n, attrs, private) in enumerate(g.nodes):
    if impl.name != "Conv" or len(n.output) != 1 or (out := n.output[0]) not in by_input or consumers.get(out) != 1 or out in g.outputs: continue
    if out in inner: continue
    bk = by_input[out]
    _, bn, battrs, _ = g.nodes[bk]
    params = [g.initializers.get(p) for p in bn.input[1:5]]
    w, b = g.initializers.get(n.input[1]), (g.initializers.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None)
    if len(bn.output) != 1 or battrs.get("training_mode", 0) or battrs.get("spatial", 1) != 1: continue
    if any(p is None for p in params) or w is None or (len(n.input) > 2 and n.input[2] and b is None): continue
    scale, bias, mean, var = params
    factor = (var + battrs.get("epsilon", 1e-5)).rsqrt() * scale
    w2 = (w * factor.reshape(-1, *[1] * (w.ndim - 1))).cast(w.dtype).contiguous().realize()
    b2 = (((b if b is not None else mean * 0) - mean) * factor + bias).cast(w.dtype).contiguous().realize()
    wn, bname = f"{bn.output[0]}/folded_weight", f"{bn.output[0]}/folded_bias"
    g.initializers[wn], g.initializers[bname] = w2, b2
    node = helper.make_node("Conv", [n.input[0], wn, bname], [bn.output[0]], name=n.name)
    node.attribute.extend(n.attribute)
    g.nodes[k] = (impl, node, attrs, private)
    drop.add(bk)
  g.nodes = [e for k, e in enumerate(g.nodes) if k not in drop]

def _fold_constants(g: Graph, inner: set[str]) -> None:
  kept = []
  for impl, n, attrs, private in g.nodes:
    ins = [i for i in n.input if i]
    if impl.name in RANDOM_OPS or impl.scoped or not all(i in g.initializers for i in ins) or set(n.output) & inner:
      kept.append((impl, n, attrs, private))
      continue
    outs = _run(impl, n, attrs, private, [g.initializers[i] if i else None for i in n.input])
    limit = max(sum(g.initializers[i].numel() for i in ins), FOLD_MAX_ELEMENTS)
    if outs is None or any(not isinstance(t, Tensor) or t.numel() > limit for t in outs):
      kept.append((impl, n, attrs, private))
      continue
    for name, t in zip(n.output, outs):
      if name: g.initializers[name] = t
  g.nodes = kept

def _conv_weights_in_conv_layout(g: Graph) -> None:
  """A constant Conv weight stored once in the layout Tensor.conv2d copies it to (panels of output channels on a CPU
  with vectors: tensor.conv `weight_panel`) and given as a view of that buffer in ONNX's shape: conv2d's copy is then a
  view of a contiguous buffer, no kernel, instead of a copy of every weight on every run (ResNet-18: 20 kernels, 11M
  floats a run)."""
  for impl, n, attrs, _ in g.nodes:
    if impl.name != "Conv" or attrs.get("group", 1) != 1 or len(n.input) < 2 or n.input[1] not in g.initializers: continue
    w = g.initializers[n.input[1]]
    if (panel := weight_panel(w)) > 1: g.initializers[n.input[1]] = weight_in_panels(w, panel).realize()

def _run(impl: Any, n: Any, attrs: dict[str, Any], private: dict[str, Any], args: list[Any]) -> tuple[Any, ...] | None:
  """The node's outputs, realized, or None where computing them raises."""
  try:
    out = impl.fn(*args, **attrs, **private)
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) < len(n.output): return None
    outs = outs[:len(n.output)]
    return tuple(t.contiguous().realize() if isinstance(t, Tensor) else t for t in outs)
  except Exception:
    return None
