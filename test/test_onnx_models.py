"""Real architectures on tinycore's OnnxRunner against onnxruntime on the same inputs:
- the `light` models the onnx wheel ships (ONNX's Real set: AlexNet, DenseNet-121, Inception v1/v2, ResNet-50,
  ShuffleNet, SqueezeNet, VGG-19, ZFNet-512; their weights are constants), also against the output the wheel stores,
  with the inputs and tolerances ONNX's backend test uses for them;
- ResNet-18, MobileNetV2 and a Transformer encoder written in torch with seeded random weights and exported by
  torch.onnx.export: max |tinycore - onnxruntime| / max |onnxruntime| within 1e-4 in float32, on the first call and on
  a replay of the runner's TinyJit.
The torch CNNs run at 64x64 here (the same graphs as at 224x224, which bench/bench_onnx.py times), to keep CI short."""
from __future__ import annotations
import pathlib
import numpy as np
import pytest
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import numpy_helper  # noqa: E402
from tinycore.nn.onnx import OnnxRunner  # noqa: E402

LIGHT = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
# (model, rtol) as onnx.backend.test.case.model lists them; atol 1e-7 for all
LIGHT_MODELS = {"bvlc_alexnet": 1e-3, "densenet121": 2e-3, "inception_v1": 1e-3, "inception_v2": 1e-3, "resnet50": 1e-3, "shufflenet": 1e-3,
                "squeezenet": 1e-3, "vgg19": 1e-3, "zfnet512": 1e-3}

def rel_error(out: np.ndarray, ref: np.ndarray) -> float: return float(np.abs(out.astype(np.float64) - ref).max() / np.abs(ref).max())

def light_inputs(model: onnx.ModelProto) -> dict[str, np.ndarray]:
  """ONNX's backend test inputs for the light models: arange(n) / n in the input's shape (generate_dummy_data, random=False)."""
  inits, feeds = {i.name for i in model.graph.initializer}, {}
  for i in model.graph.input:
    if i.name in inits: continue
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in i.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    feeds[i.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
  return feeds

@pytest.mark.parametrize("name", sorted(LIGHT_MODELS))
def test_light_model(name):
  path = LIGHT / f"light_{name}.onnx"
  model = onnx.load(str(path))
  feeds = light_inputs(model)
  out = OnnxRunner(path)(feeds)[model.graph.output[0].name].numpy()
  stored = numpy_helper.to_array(onnx.load_tensor(str(LIGHT / f"light_{name}_output_0.pb")))
  np.testing.assert_allclose(out, stored, rtol=LIGHT_MODELS[name], atol=1e-7)
  ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
  assert rel_error(out, ref) < 1e-4

@pytest.mark.parametrize("name", ["ResNet18", "MobileNetV2", "Encoder"])
def test_torch_exported(name):
  torch = pytest.importorskip("torch")
  import onnx_models
  model, x = onnx_models.build(name)
  if name != "Encoder": x = x[:, :, :64, :64]
  data = onnx_models.export(model, x, dynamic_batch=True)
  ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"input": x.numpy()})[0]
  run = OnnxRunner(data)
  out = run({"input": x.numpy()})["output"].numpy()
  assert out.shape == ref.shape and rel_error(out, ref) < 1e-4
  with torch.no_grad(): assert rel_error(out, model(x).numpy()) < 1e-4
  for _ in range(2): replayed = run({"input": x.numpy()})["output"].numpy()  # the second call records its kernels, the third replays them
  assert rel_error(replayed, ref) < 1e-4
