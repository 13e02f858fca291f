"""The digits CNN of examples/train_digits.py (its Model and train_step: conv3x3 32, pool, conv3x3 64, pool, dropout
0.5, Linear; Adam), one training step on a fixed batch of 128 8x8 images: tinycore under TinyJit vs the same network
in torch, eager and torch.compile. Dropout draws different masks in the two libraries, so the loss check compares the
first batch's loss in eval mode (no dropout) before any step."""
from __future__ import annotations
import importlib.util, os, sys
from typing import Any, Callable
if __package__ in (None, ""): sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.models.common import (copy_into_torch, loss_check, median_cpu, memory_main, one_thread, timed, torch_compile_timing,
                                 torch_train_step)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CFG = {"bs": 128, "lr": 3e-3, "dropout": 0.5}

def example() -> Any:
  """examples/train_digits.py as a module (its Model and train_step)."""
  spec = importlib.util.spec_from_file_location("train_digits", os.path.join(ROOT, "examples", "train_digits.py"))
  mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
  spec.loader.exec_module(mod)  # type: ignore[union-attr]
  return mod

def data(cfg: dict) -> tuple[Any, Any]:
  import numpy as np
  rng = np.random.default_rng(0)
  return rng.standard_normal((cfg["bs"], 1, 8, 8), dtype=np.float32), rng.integers(0, 10, cfg["bs"]).astype(np.int32)

def tiny_model(cfg: dict) -> Any:
  from tinycore import Tensor
  Tensor.manual_seed(0)
  return example().Model(dropout=cfg["dropout"])

def tiny_step(model: Any, cfg: dict) -> Callable[[], float]:
  from tinycore import nn, Tensor, TinyJit
  x, y = (Tensor(a).realize() for a in data(cfg))
  opt, train_step = nn.optim.Adam(nn.state.get_parameters(model), lr=cfg["lr"]), example().train_step
  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train(): return train_step(model, opt, x, y).realize()
  return lambda: step(x, y).item()

def torch_model(cfg: dict) -> Any:
  import torch.nn as tnn
  class Model(tnn.Module):
    def __init__(self) -> None:
      super().__init__()
      self.l1, self.l2, self.l3 = tnn.Conv2d(1, 32, 3, padding=1), tnn.Conv2d(32, 64, 3), tnn.Linear(64, 10)
      self.drop = tnn.Dropout(cfg["dropout"])
    def forward(self, x: Any) -> Any:
      x = tnn.functional.max_pool2d(self.l1(x).relu(), 2)
      x = tnn.functional.max_pool2d(self.l2(x).relu(), 2)
      return self.l3(self.drop(x.flatten(1)))
  return Model().train()

def torch_step(model: Any, cfg: dict, compiled: bool = False) -> Callable[[], float]:
  import torch
  x, y = (torch.from_numpy(a) for a in data(cfg))
  return torch_train_step(model, torch.optim.Adam(model.parameters(), lr=cfg["lr"]), x, y.long(), compiled)

def eval_losses(tm: Any, m: Any, cfg: dict) -> tuple[float, float]:
  """The loss of the batch in eval mode (no dropout) in tinycore and in torch."""
  import torch
  from tinycore import Tensor
  X, Y = data(cfg)
  with torch.no_grad(): ref = torch.nn.functional.cross_entropy(m.eval()(torch.from_numpy(X)), torch.from_numpy(Y).long()).item()
  m.train()
  return tm(Tensor(X)).sparse_categorical_crossentropy(Tensor(Y)).item(), ref

def make_step(lib: str, cfg: dict = CFG) -> Callable[[], float]:
  if lib == "tinycore": return tiny_step(tiny_model(cfg), cfg)
  import torch
  torch.manual_seed(0)
  return torch_step(torch_model(cfg), cfg)

def paired(cfg: dict) -> tuple[Any, Any]:
  tm, m = tiny_model(cfg), torch_model(cfg)
  copy_into_torch(tm, m)
  return tm, m

CASE = f"digits CNN train step bs{CFG['bs']} 8x8 Adam"

def bench(quick: bool, first_only: bool = False) -> dict[str, dict]:
  one_thread()
  tm, m = paired(CFG)
  step = tiny_step(tm, CFG)
  c, w, _ = timed(step)
  first = {"first_step_cpu_s": c, "first_step_s": w}
  if first_only: return {CASE: {"t": None, **first}}
  reps = 20 if quick else 100
  tm, m = paired(CFG)
  out: dict[str, Any] = {**first, "unit": "ms", **loss_check(*eval_losses(tm, m, CFG))}
  out.update(median_cpu(step, reps, warmup=3))
  out["torch"] = median_cpu(torch_step(m, CFG), reps, warmup=3)
  out["torch.compile"] = torch_compile_timing(torch_step(paired(CFG)[1], CFG, compiled=True), reps)
  return {CASE: out}

if __name__ == "__main__": memory_main(make_step)
