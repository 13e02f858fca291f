"""ResNet-18 (torchvision's layout: BasicBlocks 2-2-2-2, 64..512 channels, 1000 classes) training step, batch 16 at
112x112, SGD with momentum, written in tinycore's nn and the same in torch (same attribute names, so the state dicts
match): tinycore under TinyJit vs torch eager and torch.compile, in one process."""
from __future__ import annotations
import os, sys
from typing import Any, Callable
if __package__ in (None, ""): sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.models.common import (copy_into_torch, loss_check, median_cpu, memory_main, one_thread, spawn_memory, timed,
                                 torch_compile_timing, torch_train_step)

CFG = {"bs": 16, "hw": 112, "classes": 1000, "lr": 0.01, "momentum": 0.9}

def data(cfg: dict) -> tuple[Any, Any]:
  import numpy as np
  rng = np.random.default_rng(0)
  return rng.standard_normal((cfg["bs"], 3, cfg["hw"], cfg["hw"]), dtype=np.float32), rng.integers(0, cfg["classes"], cfg["bs"]).astype(np.int32)

# *** tinycore ***

def tiny_model(cfg: dict, widths: tuple[int, ...] = (64, 128, 256, 512)) -> Any:
  from tinycore import nn, Tensor
  Tensor.manual_seed(0)
  class Block:
    def __init__(self, cin: int, cout: int, stride: int):
      self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
      self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
      self.downsample = [nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)] if stride != 1 or cin != cout else []
    def __call__(self, x: Tensor) -> Tensor:
      out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
      return (out + (x.sequential(self.downsample) if self.downsample else x)).relu()
  class ResNet18:
    def __init__(self) -> None:
      self.conv1, self.bn1 = nn.Conv2d(3, widths[0], 7, 2, 3, bias=False), nn.BatchNorm2d(widths[0])
      ins = (widths[0],) + widths[:-1]
      for i, (cin, cout) in enumerate(zip(ins, widths)):
        setattr(self, f"layer{i + 1}", [Block(cin, cout, 1 if i == 0 else 2), Block(cout, cout, 1)])
      self.fc = nn.Linear(widths[-1], cfg["classes"])
    def __call__(self, x: Tensor) -> Tensor:
      x = self.bn1(self.conv1(x)).relu().max_pool2d(3, 2, padding=1)
      for i in range(len(widths)): x = x.sequential(getattr(self, f"layer{i + 1}"))
      return self.fc(x.mean((2, 3)))
  return ResNet18()

def tiny_step(model: Any, cfg: dict) -> Callable[[], float]:
  """The jitted SGD step on the fixed batch; each call returns the step's loss (before its update) as a float."""
  from tinycore import nn, Tensor, TinyJit
  X, Y = data(cfg)
  x, y = Tensor(X).realize(), Tensor(Y).realize()
  opt = nn.optim.SGD(nn.state.get_parameters(model), lr=cfg["lr"], momentum=cfg["momentum"])
  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = model(x).sparse_categorical_crossentropy(y).backward()
      opt.step()
      return loss.realize()
  return lambda: step(x, y).item()

# *** torch ***

def torch_model(cfg: dict, widths: tuple[int, ...] = (64, 128, 256, 512)) -> Any:
  import torch.nn as tnn
  class Block(tnn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
      super().__init__()
      self.conv1, self.bn1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False), tnn.BatchNorm2d(cout)
      self.conv2, self.bn2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False), tnn.BatchNorm2d(cout)
      self.downsample = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False), tnn.BatchNorm2d(cout)) if stride != 1 or cin != cout else None
    def forward(self, x: Any) -> Any:
      out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
      return (out + (self.downsample(x) if self.downsample is not None else x)).relu()
  class ResNet18(tnn.Module):
    def __init__(self) -> None:
      super().__init__()
      self.conv1, self.bn1 = tnn.Conv2d(3, widths[0], 7, 2, 3, bias=False), tnn.BatchNorm2d(widths[0])
      ins = (widths[0],) + widths[:-1]
      for i, (cin, cout) in enumerate(zip(ins, widths)):
        setattr(self, f"layer{i + 1}", tnn.Sequential(Block(cin, cout, 1 if i == 0 else 2), Block(cout, cout, 1)))
      self.fc = tnn.Linear(widths[-1], cfg["classes"])
      self.pool = tnn.MaxPool2d(3, 2, 1)
    def forward(self, x: Any) -> Any:
      x = self.pool(self.bn1(self.conv1(x)).relu())
      for i in range(len(widths)): x = getattr(self, f"layer{i + 1}")(x)
      return self.fc(x.mean((2, 3)))
  return ResNet18().train()

def torch_step(model: Any, cfg: dict, compiled: bool = False) -> Callable[[], float]:
  import torch
  X, Y = data(cfg)
  x, y = torch.from_numpy(X), torch.from_numpy(Y).long()
  return torch_train_step(model, torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"]), x, y, compiled)

def make_step(lib: str, cfg: dict = CFG) -> Callable[[], float]:
  if lib == "tinycore": return tiny_step(tiny_model(cfg), cfg)
  import torch
  torch.manual_seed(0)
  return torch_step(torch_model(cfg), cfg)

def paired_steps(cfg: dict, compiled: bool = True) -> dict[str, Callable[[], float]]:
  """tinycore's step and torch's (eager, and compiled) from the same weights."""
  tm = tiny_model(cfg)
  steps = {"tinycore": tiny_step(tm, cfg)}
  for name, comp in (("torch", False), ("torch.compile", True))[:2 if compiled else 1]:
    m = torch_model(cfg)
    copy_into_torch(tm, m)
    steps[name] = torch_step(m, cfg, comp)
  return steps

CASE = f"ResNet-18 train step bs{CFG['bs']} {CFG['hw']}x{CFG['hw']} SGD"

def bench(quick: bool, first_only: bool = False) -> dict[str, dict]:
  """The case's result: tinycore's first step (this process's compile cache as the driver left it), steady CPU-time
  medians of the three, the loss check, and (not first_only) each library's training-loop memory in its own process."""
  one_thread()
  steps = paired_steps(CFG, compiled=not first_only)
  c, w, loss = timed(steps["tinycore"])
  first = {"first_step_cpu_s": c, "first_step_s": w}
  if first_only: return {CASE: {"t": None, **first, "loss_tinycore": loss}}
  reps = 3 if quick else 10
  out: dict[str, Any] = {**first, "unit": "ms", **loss_check(loss, steps["torch"]())}
  out.update(median_cpu(steps["tinycore"], reps))
  out["torch"] = median_cpu(steps["torch"], reps)
  out["torch.compile"] = torch_compile_timing(steps["torch.compile"], reps)
  n = 40 if quick else 200
  out["memory"] = {lib: spawn_memory("resnet", lib, n) for lib in ("tinycore", "torch")}
  return {CASE: out}

if __name__ == "__main__": memory_main(make_step)
