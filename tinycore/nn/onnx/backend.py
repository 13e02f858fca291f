"""tinycore as an ONNX backend (onnx.backend.base.Backend): what onnx's own backend test suite and other ONNX tools call.

`Backend.prepare(model)` loads a model into an OnnxRunner on tinycore's default device (ONNX's device names, CPU and
CUDA, do not choose tinycore devices: DEV does); `rep.run([x, ...])` takes the inputs in the graph's order and returns
the outputs as numpy arrays in the graph's order. Importing this module imports onnx."""
from __future__ import annotations
from typing import Any
import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep
from tinycore.dtype import dtypes
from tinycore.nn.onnx.runner import OnnxRunner, elem_type
from tinycore.nn.onnx.narrow import NARROW, from_carrier

def to_numpy(t: Any, code: int = 0) -> Any:
  """A Tensor as a numpy array (bfloat16 as ml_dtypes'), a sequence as a list of them, an empty optional as None;
  `code`, the value's ONNX element type, packs a narrow type's carrier back into ml_dtypes' type (narrow.py)."""
  if t is None: return None
  if isinstance(t, list): return [to_numpy(x, code) for x in t]
  if t.dtype == dtypes.bfloat16:
    import ml_dtypes
    return t.bitcast(dtypes.uint16).numpy().view(ml_dtypes.bfloat16)
  return from_carrier(t.numpy(), code) if code in NARROW else t.numpy()

class TinycoreRep(BackendRep):
  """A prepared model: an OnnxRunner, the order of its inputs and its outputs' ONNX element types."""
  def __init__(self, runner: OnnxRunner, output_types: dict[str, int]): self.runner, self.output_types = runner, output_types
  def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
    if isinstance(inputs, dict): feed = inputs
    else: feed = dict(zip(self.runner.inputs, inputs if isinstance(inputs, (list, tuple)) else [inputs]))
    out = self.runner(feed)
    return tuple(to_numpy(out[k], self.output_types.get(k, 0)) for k in self.runner.outputs)

class TinycoreBackend(Backend):
  """onnx's Backend interface on tinycore."""
  @classmethod
  def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> TinycoreRep:
    types = {o.name: elem_type(o.type) for o in model.graph.output}
    return TinycoreRep(OnnxRunner(model), types)
  @classmethod
  def supports_device(cls, device: str) -> bool: return device == "CPU"
