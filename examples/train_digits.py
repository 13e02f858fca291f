#!/usr/bin/env python3
"""Train a small CNN on the 8x8 handwritten digits that scikit-learn ships, in the style of tinygrad's MNIST example:
Conv2d, relu, max_pool2d, dropout, Linear; Adam; a TinyJit train step that samples its batch on the device with
Tensor.randint. Prints a progress bar (loss, test accuracy, time per step) and the final test accuracy; exits 1 when
the accuracy is below TARGET (default 97%).

  DEV=CLANG python examples/train_digits.py            # STEPS=, BS=, LR=, TARGET=, SEED= to change the defaults
"""
from __future__ import annotations
import os, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tinycore import Tensor, TinyJit, nn, GlobalCounters, getenv  # noqa: E402
from tinycore.nn import optim  # noqa: E402

class Model:
  """For 8x8 inputs: 8x8 -conv(pad 1)-> 8x8 -pool-> 4x4 -conv-> 2x2 -pool-> 1x1 x 64 -> 10."""
  def __init__(self):
    self.l1 = nn.Conv2d(1, 32, kernel_size=(3, 3), padding=1)
    self.l2 = nn.Conv2d(32, 64, kernel_size=(3, 3))
    self.l3 = nn.Linear(64, 10)
  def __call__(self, x: Tensor) -> Tensor:
    x = self.l1(x).relu().max_pool2d((2, 2))
    x = self.l2(x).relu().max_pool2d((2, 2))
    return self.l3(x.flatten(1).dropout(0.5))

class Progress:
  """A progress bar in a few lines: redrawn in place on a terminal, a line every `every` steps otherwise."""
  def __init__(self, total: int, width: int = 30, every: int = 50):
    self.total, self.width, self.every, self.tty = total, width, every, sys.stdout.isatty()
  def update(self, i: int, **fields: str) -> None:
    done = (i + 1) * self.width // self.total
    line = f"{i + 1:5d}/{self.total} [{'=' * done}{'>' if done < self.width else ''}{' ' * (self.width - done - 1)}] " + \
           "  ".join(f"{k} {v}" for k, v in fields.items())
    if self.tty: print("\r" + line, end="\n" if i + 1 == self.total else "", flush=True)
    elif (i + 1) % self.every == 0 or i + 1 == self.total: print(line, flush=True)

def main() -> int:
  steps, bs, lr, target = getenv("STEPS", 400), getenv("BS", 128), float(getenv("LR", "0.003")), float(getenv("TARGET", "97"))
  Tensor.manual_seed(getenv("SEED", 42))
  X_train, Y_train, X_test, Y_test = nn.datasets.digits()
  # pixels 0..16 -> about zero mean, unit variance, done once on the device
  mean, std = 4.9, 6.0
  X_train, X_test = ((X_train.float() - mean) / std).realize(), ((X_test.float() - mean) / std).realize()
  Y_train, Y_test = Y_train.cast("int32").realize(), Y_test.cast("int32").realize()
  print(f"digits: {X_train.shape[0]} train, {X_test.shape[0]} test images of 8x8; {steps} steps of batch {bs}, Adam lr {lr}")

  model = Model()
  opt = optim.Adam(nn.state.get_parameters(model), lr=lr)
  schedule = optim.cosine_lr(lr, steps, warmup_steps=steps // 20, min_lr=lr / 20)

  @TinyJit
  @Tensor.train()
  def train_step() -> Tensor:
    opt.zero_grad()
    samples = Tensor.randint(bs, high=X_train.shape[0])
    loss = model(X_train[samples]).sparse_categorical_crossentropy(Y_train[samples]).backward()
    opt.step()
    return loss

  @TinyJit
  def test_acc() -> Tensor: return ((model(X_test).argmax(axis=1) == Y_test).float().mean() * 100)

  bar, acc, st = Progress(steps), float("nan"), time.perf_counter()
  for i in range(steps):
    optim.set_lr(opt, schedule(i))
    GlobalCounters.reset()
    t0 = time.perf_counter()
    loss = train_step().item()
    dt = time.perf_counter() - t0
    if i % 50 == 49 or i == steps - 1: acc = test_acc().item()
    bar.update(i, loss=f"{loss:6.3f}", acc=f"{acc:5.2f}%", step=f"{dt * 1e3:7.2f} ms", kernels=str(GlobalCounters.kernel_count))
  acc = test_acc().item()
  print(f"test accuracy {acc:.2f}% after {steps} steps in {time.perf_counter() - st:.1f} s (target {target:.0f}%)")
  if acc < target:
    print(f"FAILED: test accuracy {acc:.2f}% is below the target {target:.0f}%", file=sys.stderr)
    return 1
  return 0

if __name__ == "__main__": sys.exit(main())
