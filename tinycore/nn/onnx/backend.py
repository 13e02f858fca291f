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
from tinycore.nn.onnx.runner import OnnxRunner

def to_numpy(t: Any) -> Any:
  """A Tensor as a numpy array (bfloat16 as ml_dtypes'), a sequence as a list of them, an empty optional as None."""
  if t is None: return None
  if isinstance(t, list): return [to_numpy(x) for x in t]
  if t.dtype == dtypes.bfloat16:
    import ml_dtypes
    return t.bitcast(dtypes.uint16).numpy().view(ml_dtypes.bfloat16)
  return t.numpy()

class TinycoreRep(BackendRep):
  """A prepared model: an OnnxRunner and the order of its inputs."""
  def __init__(self, runner: OnnxRunner): self.runner = runner
  def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
    if isinstance(inputs, dict): feed = inputs
    else: feed = dict(zip(self.runner.inputs, inputs if isinstance(inputs, (list, tuple)) else [inputs]))
    out = self.runner(feed)
    return tuple(to_numpy(out[k]) for k in self.runner.outputs)

class TinycoreBackend(Backend):
  """onnx's Backend interface on tinycore."""
  @classmethod
  def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> TinycoreRep:
    return TinycoreRep(OnnxRunner(model))
  @classmethod
  def supports_device(cls, device: str) -> bool: return device == "CPU"
