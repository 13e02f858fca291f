#!/usr/bin/env python3
"""Train a small CNN on the 8x8 handwritten digits that scikit-learn ships, in the style of tinygrad's MNIST example:
Conv2d, relu, max_pool2d, dropout, Linear; Adam; a TinyJit train step that samples its batch on the device with
Tensor.randint. Prints a progress bar (tqdm: loss, test accuracy, time per step, ETA) and the final test accuracy; exits 1 when
the accuracy is below TARGET (default 97%).

  DEV=CLANG python examples/train_digits.py            # STEPS=, BS=, LR=, TARGET=, SEED= to change the defaults
  python examples/train_digits.py --shard 2            # each batch split over DEV:0 and DEV:1, the weights replicated
"""
from __future__ import annotations
import os, sys, time
from typing import Callable
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tinycore import Tensor, TinyJit, nn, Device, GlobalCounters, getenv  # noqa: E402
from tinycore.helpers import tqdm  # noqa: E402
from tinycore.nn import optim  # noqa: E402

class Model:
  """The seed's CNN: conv3x3 32 -pool-> conv3x3 64 -pool-> dropout -> Linear to 10 classes. For 8x8 digits the first conv
  pads by 1 (8 -> 8 -> 4 -> 2 -> 1, 64 features); MNIST's 28x28 needs no padding (28 -> 26 -> 13 -> 11 -> 5, 1600)."""
  def __init__(self, padding: int = 1, features: int = 64, dropout: float = 0.5):
    self.dropout = dropout
    self.l1 = nn.Conv2d(1, 32, kernel_size=(3, 3), padding=padding)
    self.l2 = nn.Conv2d(32, 64, kernel_size=(3, 3))
    self.l3 = nn.Linear(features, 10)
  def __call__(self, x: Tensor) -> Tensor:
    x = self.l1(x).relu().max_pool2d((2, 2))
    x = self.l2(x).relu().max_pool2d((2, 2))
    return self.l3(x.flatten(1).dropout(self.dropout))

def train_step(model: Model, opt: optim.Optimizer, X: Tensor, Y: Tensor) -> Tensor:
  """One Adam step on the batch (X, Y); the loss. Call it inside a TinyJit function in training mode."""
  opt.zero_grad()
  loss = model(X).sparse_categorical_crossentropy(Y).backward()
  opt.step()
  return loss

def sampled_step(model: Model, opt: optim.Optimizer, X: Tensor, Y: Tensor, bs: int, devices: tuple[str, ...] | None = None) -> TinyJit:
  """A jitted train step that draws its batch of `bs` on the device with Tensor.randint, as the seed does; with
  `devices`, the batch is then split over them (the model's weights must be replicated there)."""
  @TinyJit
  @Tensor.train()
  def step() -> Tensor:
    samples = Tensor.randint(bs, high=X.shape[0])
    x, y = X[samples], Y[samples]
    if devices: x, y = x.shard(devices, axis=0), y.shard(devices, axis=0)
    return train_step(model, opt, x, y)
  return step

def shard_devices(argv: list[str]) -> tuple[str, ...] | None:
  """`--shard N`: the devices DEV:0 .. DEV:N-1 that each batch is split over; None without the flag."""
  if "--shard" not in argv: return None
  return tuple(f"{Device.DEFAULT}:{i}" for i in range(int(argv[argv.index("--shard") + 1])))

def fit(step: Callable[[int], Tensor], test_acc: Callable[[], Tensor], steps: int, target: float, eval_every: int) -> int:
  """Runs step(i) for i < steps under a progress bar on stdout (loss, test accuracy every `eval_every` steps and at the
  end, time and kernels per step, ETA; redrawn on a terminal, a line every 50 steps otherwise) and prints the final test
  accuracy; the exit status: 1 when it is below `target` percent."""
  bar, acc, st = tqdm(total=steps, desc="train", unit="step", every=50, file=sys.stdout), float("nan"), time.perf_counter()
  for i in range(steps):
    GlobalCounters.reset()
    t0 = time.perf_counter()
    loss = step(i).item()
    dt = time.perf_counter() - t0
    if i % eval_every == eval_every - 1 or i == steps - 1: acc = test_acc().item()
    bar.set_postfix_str(f"loss {loss:6.3f}  acc {acc:5.2f}%  step {dt * 1e3:7.2f} ms  kernels {GlobalCounters.kernel_count}", refresh=False)
    bar.update(1)
  bar.close()
  print(f"test accuracy {acc:.2f}% after {steps} steps in {time.perf_counter() - st:.1f} s (target {target:.0f}%)")
  if acc < target:
    print(f"FAILED: test accuracy {acc:.2f}% is below the target {target:.0f}%", file=sys.stderr)
    return 1
  return 0

def load_digits() -> tuple[Tensor, Tensor, Tensor, Tensor]:
  """X_train, Y_train, X_test, Y_test: the images normalized (float), the labels int32, realized on the device."""
  X_train, Y_train, X_test, Y_test = nn.datasets.digits()
  # pixels 0..16 -> about zero mean, unit variance, done once on the device
  mean, std = 4.9, 6.0
  X_train, X_test = ((X_train.float() - mean) / std).realize(), ((X_test.float() - mean) / std).realize()
  return X_train, Y_train.cast("int32").realize(), X_test, Y_test.cast("int32").realize()

def main() -> int:
  steps, bs, lr, target = getenv("STEPS", 400), getenv("BS", 128), float(getenv("LR", "0.003")), float(getenv("TARGET", "97"))
  Tensor.manual_seed(getenv("SEED", 42))
  X_train, Y_train, X_test, Y_test = load_digits()
  print(f"digits: {X_train.shape[0]} train, {X_test.shape[0]} test images of 8x8; {steps} steps of batch {bs}, Adam lr {lr}")

  model = Model()
  if (devices := shard_devices(sys.argv)):
    print(f"sharded: each batch split over {', '.join(devices)}; the weights replicated on each")
    for p in nn.state.get_parameters(model): p.shard_(devices)
    # the test set split too where it divides evenly, else a whole copy on each device
    split = X_test.shape[0] % len(devices) == 0
    X_test, Y_test = (X_test.shard(devices, 0), Y_test.shard(devices, 0)) if split else (X_test.to(devices), Y_test.to(devices))
  opt = optim.Adam(nn.state.get_parameters(model), lr=lr)
  schedule = optim.cosine_lr(lr, steps, warmup_steps=steps // 20, min_lr=lr / 20)
  train = sampled_step(model, opt, X_train, Y_train, bs, devices)
  def step(i: int) -> Tensor:
    optim.set_lr(opt, schedule(i))
    return train()

  @TinyJit
  def test_acc() -> Tensor: return ((model(X_test).argmax(axis=1) == Y_test).float().mean() * 100)
  return fit(step, test_acc, steps, target, eval_every=50)

if __name__ == "__main__": sys.exit(main())
