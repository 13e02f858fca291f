"""Real architectures written in torch (torchvision's wheel needs another torch than the CPU 2.13 here), with seeded
random weights, exported to ONNX by torch.onnx.export: ResNet-18, MobileNetV2 and a Transformer encoder. Shared by
test/test_onnx_models.py (outputs against onnxruntime) and bench/bench_onnx.py (speed)."""
from __future__ import annotations
import io
import torch
from torch import nn

class BasicBlock(nn.Module):
  def __init__(self, cin: int, cout: int, stride: int):
    super().__init__()
    self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
    self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
    self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)) if stride != 1 or cin != cout else nn.Identity()
  def forward(self, x: torch.Tensor) -> torch.Tensor:
    return torch.relu(self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))) + self.down(x))

class ResNet18(nn.Module):
  """He et al. 2015, the 18-layer network (torchvision's resnet18 layout)."""
  def __init__(self, classes: int = 1000):
    super().__init__()
    self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
    chans, layers, cin = [64, 128, 256, 512], [], 64
    for i, c in enumerate(chans):
      layers += [BasicBlock(cin, c, 1 if i == 0 else 2), BasicBlock(c, c, 1)]
      cin = c
    self.layers, self.fc = nn.Sequential(*layers), nn.Linear(512, classes)
  def forward(self, x: torch.Tensor) -> torch.Tensor:
    return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.layers(self.stem(x)), 1), 1))

class InvertedResidual(nn.Module):
  def __init__(self, cin: int, cout: int, stride: int, expand: int):
    super().__init__()
    hid = cin * expand
    layers = [] if expand == 1 else [nn.Conv2d(cin, hid, 1, bias=False), nn.BatchNorm2d(hid), nn.ReLU6()]
    layers += [nn.Conv2d(hid, hid, 3, stride, 1, groups=hid, bias=False), nn.BatchNorm2d(hid), nn.ReLU6(), nn.Conv2d(hid, cout, 1, bias=False),
               nn.BatchNorm2d(cout)]
    self.block, self.residual = nn.Sequential(*layers), stride == 1 and cin == cout
  def forward(self, x: torch.Tensor) -> torch.Tensor: return x + self.block(x) if self.residual else self.block(x)

class MobileNetV2(nn.Module):
  """Sandler et al. 2018 (torchvision's mobilenet_v2 layout, width 1.0)."""
  def __init__(self, classes: int = 1000):
    super().__init__()
    layers, cin = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()], 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
      for i in range(n):
        layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
        cin = c
    layers += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
    self.features, self.classifier = nn.Sequential(*layers), nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))
  def forward(self, x: torch.Tensor) -> torch.Tensor: return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))

class Encoder(nn.Module):
  """A Transformer encoder (Vaswani et al. 2017) as torch.nn.TransformerEncoder builds it: embedding, 2 layers, a head."""
  def __init__(self, vocab: int = 1000, d: int = 128, heads: int = 4, layers: int = 2):
    super().__init__()
    self.embed, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(1, 64, d) * 0.02)
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
    self.encoder, self.head = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False), nn.Linear(d, vocab)
  def forward(self, tokens: torch.Tensor) -> torch.Tensor:
    return self.head(self.encoder(self.embed(tokens) + self.pos[:, :tokens.shape[1]]))

def randomize_batchnorm(m: nn.Module) -> nn.Module:
  """Seeded running statistics and affine parameters, so that BatchNormalization does more than the identity."""
  for b in m.modules():
    if isinstance(b, nn.BatchNorm2d):
      with torch.no_grad():
        b.running_mean.uniform_(-0.1, 0.1); b.running_var.uniform_(0.5, 1.5); b.weight.uniform_(0.5, 1.5); b.bias.uniform_(-0.1, 0.1)  # noqa: E702
  return m

def build(name: str, seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
  """(model in eval mode with seeded random weights, an example input) for ResNet18, MobileNetV2 or Encoder."""
  torch.manual_seed(seed)
  if name == "Encoder": return Encoder().eval(), torch.randint(0, 1000, (2, 32))
  return randomize_batchnorm({"ResNet18": ResNet18, "MobileNetV2": MobileNetV2}[name]()).eval(), torch.randn(1, 3, 224, 224)

def export(model: nn.Module, example: torch.Tensor, dynamic_batch: bool = False) -> bytes:
  """The model as ONNX bytes (opset 17, torch's TorchScript exporter: the dynamo one needs onnxscript)."""
  f = io.BytesIO()
  import warnings
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.onnx.export(model, (example,), f, input_names=["input"], output_names=["output"], opset_version=17, dynamo=False,
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}} if dynamic_batch else None)
  return f.getvalue()
