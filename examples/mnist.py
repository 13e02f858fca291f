#!/usr/bin/env python3
"""The seed's MNIST model and train step on local MNIST files (nothing is downloaded).

  MNIST_PATH=/path/to/mnist DEV=CLANG python examples/mnist.py

The directory holds train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte,
each raw or gzipped. Without them it says so and exits with status 2.

By default the batch is drawn on the host and passed to the jitted step as an input (the captured kernels read the new
batch's buffer): gathering 128 rows of 60000 on the device is a one-hot reduce over all of them, fine on a GPU, slow on
a CPU. DEVICE_SAMPLING=1 samples with Tensor.randint inside the step, exactly as the seed does.
STEPS=, BS=, LR=, TARGET= (percent; exit 1 below it), EVAL_SIZE= (test images used, default all) change the defaults."""
from __future__ import annotations
import os, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tinycore import Tensor, TinyJit, nn, getenv  # noqa: E402
from tinycore.nn import optim  # noqa: E402
from train_digits import Progress  # noqa: E402

class Model:
  def __init__(self):
    self.l1 = nn.Conv2d(1, 32, kernel_size=(3, 3))
    self.l2 = nn.Conv2d(32, 64, kernel_size=(3, 3))
    self.l3 = nn.Linear(1600, 10)
  def __call__(self, x: Tensor) -> Tensor:
    x = self.l1(x).relu().max_pool2d((2, 2))
    x = self.l2(x).relu().max_pool2d((2, 2))
    return self.l3(x.flatten(1).dropout(0.5))

def main() -> int:
  try: X_train, Y_train, X_test, Y_test = nn.datasets.mnist()
  except FileNotFoundError as e:
    print(f"examples/mnist.py: the MNIST files are not here, so there is nothing to train on.\n  {e}\n"
          "Set MNIST_PATH to a directory with the four IDX files (raw or .gz); examples/train_digits.py needs no files.", file=sys.stderr)
    return 2
  steps, bs, lr, target = getenv("STEPS", 1000), getenv("BS", 128), float(getenv("LR", "0.001")), float(getenv("TARGET", "98"))
  n_eval = min(getenv("EVAL_SIZE", X_test.shape[0]), X_test.shape[0])
  X_test, Y_test = X_test[:n_eval].float().realize(), Y_test[:n_eval].cast("int32").realize()
  print(f"mnist: {X_train.shape[0]} train, {n_eval} test images; {steps} steps of batch {bs}, Adam lr {lr}")
  model = Model()
  opt = optim.Adam(nn.state.get_parameters(model), lr=lr)

  if getenv("DEVICE_SAMPLING", 0):
    X_dev, Y_dev = X_train.float().realize(), Y_train.cast("int32").realize()
    @TinyJit
    @Tensor.train()
    def device_step() -> Tensor:
      opt.zero_grad()
      samples = Tensor.randint(bs, high=X_dev.shape[0])
      loss = model(X_dev[samples]).sparse_categorical_crossentropy(Y_dev[samples]).backward()
      opt.step()
      return loss
    next_loss = lambda: device_step()  # noqa: E731
  else:
    X_np, Y_np = X_train.numpy(), Y_train.numpy().astype(np.int32)
    rng = np.random.default_rng(getenv("SEED", 0))
    @TinyJit
    @Tensor.train()
    def host_step(X: Tensor, Y: Tensor) -> Tensor:
      opt.zero_grad()
      loss = model(X.float()).sparse_categorical_crossentropy(Y).backward()
      opt.step()
      return loss
    def next_loss() -> Tensor:
      idx = rng.integers(0, len(X_np), bs)
      return host_step(Tensor(X_np[idx]), Tensor(Y_np[idx]))

  @TinyJit
  def test_acc() -> Tensor: return (model(X_test).argmax(axis=1) == Y_test).float().mean() * 100

  bar, acc, st = Progress(steps), float("nan"), time.perf_counter()
  for i in range(steps):
    t0 = time.perf_counter()
    loss = next_loss().item()
    dt = time.perf_counter() - t0
    if i % 100 == 99 or i == steps - 1: acc = test_acc().item()
    bar.update(i, loss=f"{loss:6.3f}", acc=f"{acc:5.2f}%", step=f"{dt * 1e3:7.2f} ms")
  print(f"test accuracy {acc:.2f}% after {steps} steps in {time.perf_counter() - st:.1f} s (target {target:.0f}%)")
  if acc < target:
    print(f"FAILED: test accuracy {acc:.2f}% is below the target {target:.0f}%", file=sys.stderr)
    return 1
  return 0

if __name__ == "__main__": sys.exit(main())
