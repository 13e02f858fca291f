#!/usr/bin/env python3
"""The seed's MNIST model and train step on local MNIST files (nothing is downloaded).

  MNIST_PATH=/path/to/mnist DEV=CLANG python examples/mnist.py

The directory holds train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte,
each raw or gzipped. Without them it says so and exits with status 2.

By default the batch is drawn on the host and passed to the jitted step as an input (the captured kernels read the new
batch's buffer). DEVICE_SAMPLING=1 samples with Tensor.randint inside the step, exactly as the seed does (the gather
of 128 rows of 60000 is an indexed load: O(batch) work).
STEPS=, BS=, LR=, TARGET= (percent; exit 1 below it), EVAL_SIZE= (test images used, default all) change the defaults."""
from __future__ import annotations
import os, sys
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tinycore import Tensor, TinyJit, nn, getenv  # noqa: E402
from tinycore.nn import optim  # noqa: E402
from train_digits import Model, fit, sampled_step, train_step  # noqa: E402

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
  model = Model(padding=0, features=1600)
  opt = optim.Adam(nn.state.get_parameters(model), lr=lr)

  if getenv("DEVICE_SAMPLING", 0):
    device_step = sampled_step(model, opt, X_train.float().realize(), Y_train.cast("int32").realize(), bs)
    step = lambda i: device_step()  # noqa: E731
  else:
    X_np, Y_np = X_train.numpy(), Y_train.numpy().astype(np.int32)
    rng = np.random.default_rng(getenv("SEED", 0))
    @TinyJit
    @Tensor.train()
    def host_step(X: Tensor, Y: Tensor) -> Tensor: return train_step(model, opt, X.float(), Y)
    def step(i: int) -> Tensor:
      idx = rng.integers(0, len(X_np), bs)
      return host_step(Tensor(X_np[idx]), Tensor(Y_np[idx]))

  @TinyJit
  def test_acc() -> Tensor: return (model(X_test).argmax(axis=1) == Y_test).float().mean() * 100
  return fit(step, test_acc, steps, target, eval_every=100)

if __name__ == "__main__": sys.exit(main())
