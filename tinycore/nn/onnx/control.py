"""ONNX's control flow: If and Loop run a subgraph (a Graph attribute) that also sees the values of the graph around it.

The branch If takes and the number of Loop iterations depend on data: the condition and the trip count are read back
to the host (`item()`) before the subgraph runs, so a model with them realizes at those points. Loop's scan outputs
(the values the body yields after the loop-carried ones) are stacked along a new first dim."""
from __future__ import annotations
from typing import Any
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import ints

@onnx_op()
def If(cond: Tensor, /, *, then_branch: Any, else_branch: Any, _scope: dict[str, Tensor]) -> tuple[Tensor, ...]:
  branch = then_branch if cond.item() else else_branch
  values = branch.run(dict(_scope))
  return tuple(values[o] for o in branch.outputs)

@onnx_op()
def Loop(trips: Tensor | None, cond: Tensor | None, /, *carried: Tensor, body: Any, _scope: dict[str, Tensor]) -> tuple[Tensor, ...]:
  """Runs body while i < trips (when given) and the condition holds; body inputs are (i, cond, *carried)."""
  limit, go, state, scans = ints(trips), bool(cond.item()) if cond is not None else True, list(carried), []
  names, i = list(body.inputs), 0
  while go and (limit is None or i < limit):
    feed = {names[0]: Tensor(i, dtype=dtypes.int64), names[1]: Tensor(go, dtype=dtypes.bool), **dict(zip(names[2:], state))}
    values = body.run({**_scope, **feed})
    outs = [values[o] for o in body.outputs]
    go, state = bool(outs[0].item()), outs[1:1 + len(state)]
    scans.append(outs[1 + len(state):])
    i += 1
  if scans and scans[0]: return (*state, *[Tensor.stack(*[s[j] for s in scans]) for j in range(len(scans[0]))])
  if len(body.outputs) > 1 + len(state): raise NotImplementedError("ONNX Loop with scan outputs that ran zero iterations (their shape is unknown)")
  return tuple(state)
