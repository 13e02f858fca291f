"""ONNX's classical machine learning ops (domain ai.onnx.ml) that the backend test suite holds: Binarizer,
ArrayFeatureExtractor and TreeEnsemble (the other ai.onnx.ml ops are refused at load by the registry).

TreeEnsemble is data-independent control flow turned into masks: the trees' structure is in the node's attributes, so
every root-to-leaf path is listed on the host, each path's decisions are compared for all samples at once, and a
sample reaches the leaf whose path's decisions all hold (one per tree). The aggregate over the leaves reached is then
a masked sum, mean, min or max per target. Comparisons run in float64 where the device has it: the splits are doubles
in ONNX's reference, and a float32 split would round (1.2 <= 1.2f is not the reference's answer)."""
from __future__ import annotations
import math
from typing import Any
import numpy as np
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes, to_np_dtype
from tinycore.device import is_dtype_supported
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import int_list, read

DOMAIN = "ai.onnx.ml"

@onnx_op(domain=DOMAIN)
def Binarizer(x: Tensor, /, *, threshold: float = 0.0) -> Tensor: return (x > threshold).cast(x.dtype)

@onnx_op(domain=DOMAIN)
def ArrayFeatureExtractor(x: Tensor, indices: Tensor, /) -> Tensor:
  """x[..., indices] with the indices flattened; a 1-d x gives one row (as ONNX's reference and onnxruntime)."""
  idx = indices.flatten()
  return x[..., idx].reshape(*(x.shape[:-1] if x.ndim > 1 else (1,)), idx.shape[0])

_COMPARE = {0: Tensor.__le__, 1: Tensor.__lt__, 2: Tensor.__ge__, 3: Tensor.__gt__, 4: Tensor.__eq__, 5: Tensor.__ne__}

Path = list[tuple[int, bool]]  # (node, the branch taken) from a root

def _paths(root: int, true_ids: list[int], false_ids: list[int], true_leaf: list[int], false_leaf: list[int]) -> list[tuple[int, Path]]:
  """(leaf index, [(node, branch taken)...]) for every path from `root`; a root whose two branches are the same leaf is itself leaf `root`."""
  if true_leaf[root] and false_leaf[root] and true_ids[root] == false_ids[root]: return [(root, [])]
  out: list[tuple[int, Path]] = []
  stack: list[tuple[int, Path]] = [(root, [])]
  while stack:
    node, path = stack.pop()
    for branch, nxt, leaf in ((True, true_ids[node], true_leaf[node]), (False, false_ids[node], false_leaf[node])):
      if leaf: out.append((nxt, [*path, (node, branch)]))
      else: stack.append((nxt, [*path, (node, branch)]))
  return out

def _member_sets(modes: list[int], members: list[float] | None) -> dict[int, list[float]]:
  """{node: its members} for the MEMBER nodes, in node order from the NaN-separated list."""
  sets, cur = [], []
  for v in members or []:
    if math.isnan(v): sets, cur = [*sets, cur], []
    else: cur.append(v)
  return dict(zip([i for i, m in enumerate(modes) if m == 6], sets))

@onnx_op(domain=DOMAIN, values={"aggregate_function": (0, 1, 2, 3), "post_transform": (0,)})
def TreeEnsemble(x: Tensor, /, *, nodes_splits: Tensor, nodes_featureids: list[int], nodes_modes: Tensor, nodes_truenodeids: list[int],
                 nodes_falsenodeids: list[int], nodes_trueleafs: list[int], nodes_falseleafs: list[int], leaf_targetids: list[int],
                 leaf_weights: Tensor, tree_roots: list[int], n_targets: int, aggregate_function: int = 1, post_transform: int = 0,
                 nodes_hitrates: Any = None, nodes_missing_value_tracks_true: list[int] | None = None,
                 membership_values: Tensor | None = None) -> Tensor:
  """Y (N, n_targets): the trees' leaf weights per target, aggregated (0 average, 1 sum, 2 min, 3 max)."""
  modes, splits, weights = int_list(nodes_modes), read(nodes_splits), read(leaf_weights)
  members = _member_sets(modes, read(membership_values) if membership_values is not None else None)
  missing = nodes_missing_value_tracks_true or [0] * len(modes)
  xc = x.cast(dtypes.float64) if is_dtype_supported(dtypes.float64, x.device) else x.cast(dtypes.float32)
  cache: dict[int, Tensor] = {}
  def decision(node: int) -> Tensor:
    if node not in cache:
      v = xc[:, nodes_featureids[node]]
      if modes[node] == 6: hit = Tensor.zeros(v.shape, dtype=dtypes.bool, device=x.device) if not members[node] else \
          _any([v == m for m in members[node]])
      else: hit = _COMPARE[modes[node]](v, splits[node])
      cache[node] = hit | v.isnan() if missing[node] else hit
    return cache[node]
  leaves = [p for r in tree_roots for p in _paths(r, nodes_truenodeids, nodes_falsenodeids, nodes_trueleafs, nodes_falseleafs)]
  reached = Tensor.stack(*[_all([decision(n) if b else decision(n).logical_not() for n, b in path], x.shape[0], x.device)
                           for _, path in leaves], dim=1)  # (N, paths)
  w = Tensor([weights[leaf] for leaf, _ in leaves], dtype=x.dtype, device=x.device)
  onehot = Tensor([[leaf_targetids[leaf] == k for k in range(n_targets)] for leaf, _ in leaves], dtype=dtypes.bool, device=x.device)
  if aggregate_function in (0, 1):
    y = (reached.cast(x.dtype) * w).matmul(onehot.cast(x.dtype))
    return y / len(tree_roots) if aggregate_function == 0 else y
  big = float(np.finfo(to_np_dtype(x.dtype)).max) * (1 if aggregate_function == 2 else -1)  # a target no leaf gives: as ONNX's reference
  picked = (reached.unsqueeze(2) & onehot).where(w.reshape(1, -1, 1), big)  # (N, paths, targets)
  return picked.min(1) if aggregate_function == 2 else picked.max(1)

def _any(ts: list[Tensor]) -> Tensor:
  out = ts[0]
  for t in ts[1:]: out = out | t
  return out

def _all(ts: list[Tensor], n: int, device: str) -> Tensor:
  out = Tensor.ones(n, dtype=dtypes.bool, device=device)
  for t in ts: out = out & t
  return out
