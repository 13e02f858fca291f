"""ONNX models on tinycore: `from tinycore.nn.onnx import OnnxRunner; outputs = OnnxRunner("model.onnx")({"input": x})`,
the same call as tinygrad 0.14's. The model is parsed with the `onnx` package (`pip install 'tinycore[onnx]'`) and every
op is built from Tensor ops. `python -m tinycore.nn.onnx model.onnx [--check]` runs a model on random inputs.

The package: runner.py loads and runs a model (OnnxRunner, Graph); registry.py holds the op table and the load-time
checks; elementwise.py, reduce.py, movement.py, nn.py, resize.py, gridsample.py, attention.py, recurrent.py,
control.py, spectral.py, detection.py, sequence.py, randomness.py and extra.py implement the ops by kind; functions.py
expands the ops ONNX defines as functions of others; tensors.py maps ONNX element types to dtypes; backend.py is
onnx's Backend interface; coverage.py writes the op coverage table of docs/onnx.md."""
from tinycore.nn.onnx.runner import OnnxRunner, Graph
from tinycore.nn.onnx.registry import REGISTRY, onnx_op

__all__ = ["OnnxRunner", "Graph", "REGISTRY", "onnx_op"]
