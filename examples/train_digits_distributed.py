#!/usr/bin/env python3
"""Train the digits CNN of train_digits.py data-parallel over MPI (tinycore.nn.distributed): every rank draws the same
batch of BS images, computes the gradients of its share (BS / ranks), the gradients are averaged with MPI allreduce,
and every rank takes the same Adam step, so after each step the weights are those of one process training on the
whole batch. Rank 0 prints (the loss shown is that of its share); the others are quiet.

  mpirun -n 2 python examples/train_digits_distributed.py      # STEPS=, BS=, LR=, TARGET=, SEED=, DROPOUT=, MPI_TIMEOUT=
  SAVE=weights.safetensors mpirun -n 2 ...                       # rank 0 writes the trained weights there, on its host
  # as root add --allow-run-as-root; more ranks than cores need --oversubscribe; -H host1,host2 runs on two machines

Without mpirun it runs as one rank. Every rank draws the same random numbers (one seed): the same batch, and the same
dropout masks for its share (DROPOUT=0 makes a step exactly one process's step on the whole batch, see
test/test_distributed.py)."""
from __future__ import annotations
import os, sys, time
from typing import Callable
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tinycore import Tensor, TinyJit, getenv, nn  # noqa: E402
from tinycore.nn import optim  # noqa: E402
from tinycore.nn.distributed import Communicator, DataParallel  # noqa: E402
from train_digits import Model, fit, load_digits  # noqa: E402

def distributed_step(model: Model, opt: optim.Optimizer, dp: DataParallel, X: Tensor, Y: Tensor, bs: int) -> Callable[[], Tensor]:
  """A train step on this rank's share of a batch of `bs` drawn on the device: two jitted halves (gradients packed into
  dp's flat buffer; the update from the averaged gradients) with the allreduce between them, outside the jits."""
  rank, size = dp.comm.rank, dp.comm.size
  if bs % size: raise ValueError(f"the batch of {bs} does not split evenly over {size} ranks")
  share = bs // size
  @TinyJit
  @Tensor.train()
  def gradients() -> Tensor:
    samples = Tensor.randint(bs, high=X.shape[0])[rank * share:(rank + 1) * share]
    opt.zero_grad()
    loss = model(X[samples]).sparse_categorical_crossentropy(Y[samples]).backward()
    return loss.realize(*dp.pack())
  @TinyJit
  @Tensor.train()
  def update() -> Tensor:
    dp.unpack()
    opt.step()
    return opt.lr
  def step() -> Tensor:
    loss = gradients()
    dp.allreduce()
    update()
    return loss
  return step

def main() -> int:
  comm = Communicator()
  steps, bs, lr, target = getenv("STEPS", 400), getenv("BS", 128), float(getenv("LR", "0.003")), float(getenv("TARGET", "97"))
  if comm.rank: sys.stdout = open(os.devnull, "w")
  Tensor.manual_seed(getenv("SEED", 42))
  X_train, Y_train, X_test, Y_test = load_digits()
  print(f"digits: {X_train.shape[0]} train, {X_test.shape[0]} test images; {steps} steps of batch {bs} over {comm.size} ranks "
        f"({bs // comm.size} each), Adam lr {lr}")

  model = Model(dropout=float(getenv("DROPOUT", "0.5")))
  opt = optim.Adam(nn.state.get_parameters(model), lr=lr)
  dp = DataParallel(opt.params, comm)
  dp.broadcast_parameters()
  schedule = optim.cosine_lr(lr, steps, warmup_steps=steps // 20, min_lr=lr / 20)
  train = distributed_step(model, opt, dp, X_train, Y_train, bs)
  warm, timed = min(3, steps - 1), [0.0, 0.0, 0]  # steps after the jits' warm-up: seconds in all, seconds in MPI, count
  def step(i: int) -> Tensor:
    optim.set_lr(opt, schedule(i))
    t0, mpi0 = time.perf_counter(), comm.seconds
    loss = train()
    if i >= warm: timed[0], timed[1], timed[2] = timed[0] + time.perf_counter() - t0, timed[1] + comm.seconds - mpi0, timed[2] + 1
    return loss

  @TinyJit
  def test_acc() -> Tensor: return ((model(X_test).argmax(axis=1) == Y_test).float().mean() * 100)
  ret = fit(step, test_acc, steps, target, eval_every=50)
  n = max(timed[2], 1)
  print(f"{comm.size} ranks: {timed[0] / n * 1e3:.2f} ms per step ({timed[1] / n * 1e3:.2f} ms of it in MPI allreduce), "
        f"allreduce of {dp.nbytes} bytes per step per rank")
  if (path := getenv("SAVE", "")) and comm.rank == 0: nn.state.safe_save(nn.state.get_state_dict(model), path)
  return ret

if __name__ == "__main__": sys.exit(main())
