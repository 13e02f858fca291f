"""ONNX's sequence and optional values and the ops on them.

A sequence value is a Python list of Tensors, an optional value is None (empty) or its element (a Tensor or a list): they
live on the host, and only their Tensors are lazy. A position into a sequence (SequenceAt, SequenceInsert, SequenceErase)
is read back as a Python int, negative counting from the end; SequenceMap runs its body once per element (as Loop)."""
from __future__ import annotations
from typing import Any
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.nn.onnx.registry import onnx_op
from tinycore.nn.onnx.tensors import ints, axis_of, DTYPES

def _pos(p: Tensor | None, n: int, default: int, what: str) -> int:
  i = ints(p, default)
  i = i[0] if isinstance(i, list) else i
  if not -n <= i <= n: raise IndexError(f"ONNX {what}: position {i} outside a sequence of {n}")
  return i + n if i < 0 else i

@onnx_op()
def SequenceConstruct(*xs: Tensor) -> list[Tensor]: return list(xs)

@onnx_op(values={"dtype": tuple(DTYPES)})
def SequenceEmpty(*, dtype: int = 1) -> list[Tensor]: return []

@onnx_op()
def SequenceLength(seq: list[Tensor], /) -> Tensor: return Tensor(len(seq), dtype=dtypes.int64)

@onnx_op()
def SequenceAt(seq: list[Tensor], pos: Tensor, /) -> Tensor:
  return seq[_pos(pos, len(seq), 0, "SequenceAt")]

@onnx_op()
def SequenceInsert(seq: list[Tensor], x: Tensor, pos: Tensor | None = None, /) -> list[Tensor]:
  i = _pos(pos, len(seq), len(seq), "SequenceInsert")
  return [*seq[:i], x, *seq[i:]]

@onnx_op()
def SequenceErase(seq: list[Tensor], pos: Tensor | None = None, /) -> list[Tensor]:
  i = _pos(pos, len(seq), len(seq) - 1, "SequenceErase")
  return [*seq[:i], *seq[i + 1:]]

@onnx_op()
def SplitToSequence(x: Tensor, split: Tensor | None = None, /, *, axis: int = 0, keepdims: int = 1) -> list[Tensor]:
  """No split: pieces of 1 (the axis dropped unless keepdims); a scalar split: pieces of that size (the last smaller);
  a 1-d split: the sizes listed."""
  a = axis_of(axis, x.ndim)
  if split is None:
    parts = x.split(1, dim=a)
    return [p.squeeze(a) for p in parts] if not keepdims else list(parts)
  return list(x.split(ints(split), dim=a))

@onnx_op()
def ConcatFromSequence(seq: list[Tensor], /, *, axis: int, new_axis: int = 0) -> Tensor:
  if new_axis: return Tensor.stack(*seq, dim=axis_of(axis, seq[0].ndim + 1))
  return seq[0].cat(*seq[1:], dim=axis_of(axis, seq[0].ndim)) if len(seq) > 1 else seq[0]

@onnx_op()
def SequenceMap(seq: list[Tensor], /, *more: Any, body: Any, _scope: dict[str, Tensor]) -> tuple[list[Tensor], ...]:
  """body runs once per position of the sequence inputs; a tensor input (not a sequence) goes to every run whole."""
  names, outs = list(body.inputs), []
  for i in range(len(seq)):
    feed = [seq[i], *[m[i] if isinstance(m, list) else m for m in more]]
    values = body.run({**_scope, **dict(zip(names, feed))})
    outs.append([values[o] for o in body.outputs])
  return tuple([o[j] for o in outs] for j in range(len(body.outputs)))

@onnx_op()
def Optional(x: Any = None, /, *, type: Any = None) -> Any: return x

@onnx_op()
def OptionalHasElement(x: Any = None, /) -> Tensor: return Tensor(x is not None, dtype=dtypes.bool)

@onnx_op()
def OptionalGetElement(x: Any, /) -> Any:
  if x is None: raise ValueError("ONNX OptionalGetElement of an empty optional")
  return x
