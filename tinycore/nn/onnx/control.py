"""ONNX's control flow: If and Loop run a subgraph (a Graph attribute) that also sees the values of the graph around it.

The branch If takes and the number of Loop iterations depend on data: the condition and the trip count are read back
to the host (`item()`) before the subgraph runs, so a model with them realizes at those points. Loop's scan outputs
(the values the body yields after the loop-carried ones) are stacked along a new first dim."""
from __future__ import annotations
from typing import Any
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import ints, scalar

@onnx_op()
def If(cond: Tensor, /, *, then_branch: Any, else_branch: Any, _scope: dict[str, Tensor]) -> tuple[Tensor, ...]:
  branch = then_branch if scalar(cond) else else_branch
  values = branch.run(dict(_scope))
  return tuple(values[o] for o in branch.outputs)

@onnx_op()
def Loop(trips: Tensor | None, cond: Tensor | None, /, *carried: Tensor, body: Any, _scope: dict[str, Tensor]) -> tuple[Tensor, ...]:
  """Runs body while i < trips (when given) and the condition holds; body inputs are (i, cond, *carried)."""
  limit, go, state, scans = ints(trips), bool(scalar(cond)) if cond is not None else True, list(carried), []
  names, i = list(body.inputs), 0
  while go and (limit is None or i < limit):
    feed = {names[0]: Tensor(i, dtype=dtypes.int64), names[1]: Tensor(go, dtype=dtypes.bool), **dict(zip(names[2:], state))}
    values = body.run({**_scope, **feed})
    outs = [values[o] for o in body.outputs]
    go, state = bool(scalar(outs[0])), outs[1:1 + len(state)]
    scans.append(outs[1 + len(state):])
    i += 1
  if scans and scans[0]: return (*state, *[Tensor.stack(*[s[j] for s in scans]) for j in range(len(scans[0]))])
  if len(body.outputs) > 1 + len(state): raise NotImplementedError("ONNX Loop with scan outputs that ran zero iterations (their shape is unknown)")
  return tuple(state)

def _scan(body: Any, scope: dict[str, Tensor], state: list[Tensor], scans: list[Tensor], in_axes: list[int], in_dirs: list[int],
          out_axes: list[int], out_dirs: list[int]) -> list[Tensor]:
  """One Scan over scan inputs `scans` (each sliced along its axis, backwards where its direction is 1): the final states,
  then each scan output stacked along its axis (backwards where its direction is 1)."""
  names, n = list(body.inputs), len(state)
  steps = scans[0].shape[in_axes[0]] if scans else 0
  outs: list[list[Tensor]] = []
  for t in range(steps):
    sl = [s.shrink([(i, i + 1) if d == a else None for d in range(s.ndim)]).squeeze(a)
          for s, a, rev in zip(scans, in_axes, in_dirs) for i in [steps - 1 - t if rev else t]]
    values = body.run({**scope, **dict(zip(names, [*state, *sl]))})
    res = [values[o] for o in body.outputs]
    state, step_out = res[:n], res[n:]
    outs.append(step_out)
  if not outs: raise NotImplementedError("ONNX Scan over zero steps (its scan outputs' shapes are unknown)")
  stacked = []
  for j in range(len(outs[0])):
    seq = [o[j] for o in outs]
    if out_dirs[j]: seq = seq[::-1]
    stacked.append(Tensor.stack(*seq, dim=out_axes[j] if out_axes[j] >= 0 else out_axes[j] + seq[0].ndim + 1))
  return [*state, *stacked]

@onnx_op(since=9)
def Scan(*inputs: Tensor, body: Any, num_scan_inputs: int, scan_input_axes: list[int] | None = None,
         scan_input_directions: list[int] | None = None, scan_output_axes: list[int] | None = None,
         scan_output_directions: list[int] | None = None, _scope: dict[str, Tensor]) -> tuple[Tensor, ...]:
  """Runs body once per slice of the scan inputs, threading the state values through; body inputs are (*state, *slices),
  its outputs (*state, *scan output slices). The number of steps is the scan inputs' length: no host read."""
  m = num_scan_inputs
  state, scans = list(inputs[:len(inputs) - m]), list(inputs[len(inputs) - m:])
  k = len(body.outputs) - len(state)
  in_axes = [a + s.ndim if a < 0 else a for a, s in zip(scan_input_axes or [0] * m, scans)]
  return tuple(_scan(body, _scope, state, scans, in_axes, scan_input_directions or [0] * m, scan_output_axes or [0] * k,
                     scan_output_directions or [0] * k))

@onnx_op(since=8, until=8, name="Scan")
def Scan8(lens: Tensor | None, /, *inputs: Tensor, body: Any, num_scan_inputs: int, directions: list[int] | None = None,
          _scope: dict[str, Tensor]) -> tuple[Tensor, ...]:
  """Version 8: a batch dim first on every input and output, the scan along dim 1; sequence_lens must be absent (every
  sequence runs its full length)."""
  if lens is not None: raise NotImplementedError("ONNX Scan version 8 with sequence_lens (per-batch lengths)")
  m = num_scan_inputs
  state, scans = list(inputs[:len(inputs) - m]), list(inputs[len(inputs) - m:])
  k = len(body.outputs) - len(state)
  per_batch = [_scan(body, _scope, [s[b] for s in state], [s[b] for s in scans], [0] * m, directions or [0] * m, [0] * k, [0] * k)
               for b in range((state or scans)[0].shape[0])]
  return tuple(Tensor.stack(*[r[j] for r in per_batch]) for j in range(len(per_batch[0])))
