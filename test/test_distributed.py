"""tinycore.nn.distributed with real processes: mpirun starts 2 ranks of test/distributed_worker.py or of
examples/train_digits_distributed.py; those tests are skipped where Open MPI's mpirun or mpi4py is missing
(scripts/setup.sh installs both).

The training test's tolerance: the ranks sum two half-batch gradients where one process sums the whole batch at once,
float32 additions in another order, so the weights may differ in their last bits. Measured: at most 1.2e-7 after 8
steps and 6e-8 after 50 (weights of magnitude <= 0.41, a float32 ulp there is 3e-8); the test allows an absolute 1e-6.
A real mismatch (a wrong average, a missed parameter, another batch) is of the size of an update: the 8 steps move
every weight tensor by more than 1e-2 (the test asks for 5e-3)."""
from __future__ import annotations
import importlib.util, os, pathlib, shutil, subprocess, sys, time
import numpy as np
import pytest
from tinycore import Device, Tensor, nn
from tinycore.nn import optim

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from train_digits import Model, load_digits, sampled_step  # noqa: E402
sys.path.remove(str(ROOT / "examples"))
from tinycore.nn.distributed import DataParallel  # noqa: E402
from tinycore import GlobalCounters  # noqa: E402

class OneRank:
  """A stand-in communicator of one rank, for what DataParallel does without MPI (pack, unpack)."""
  rank, size = 0, 1

class TinyCNN:
  """The digits CNN's shape (conv, relu, max-pool twice, then linear) with few channels: few kernels to compile."""
  def __init__(self):
    self.l1, self.l2, self.l3 = nn.Conv2d(1, 4, 3, padding=1), nn.Conv2d(4, 8, 3), nn.Linear(8, 10)
  def __call__(self, x: Tensor) -> Tensor:
    return self.l3(self.l2(self.l1(x).relu().max_pool2d((2, 2))).relu().max_pool2d((2, 2)).flatten(1))

def test_pack_computes_the_gradients_as_backward_alone():
  # regression: with the gradients read by the concatenation alone, the backward's relu/max-pool gradient was fused into
  # the gradient reductions instead of computed once (3x the work of a digits CNN step)
  def grads_ops(pack: bool) -> int:
    Tensor.manual_seed(0)
    model = TinyCNN()
    params = nn.state.get_parameters(model)
    for p in params: p.requires_grad = True
    dp = DataParallel(params, OneRank())  # type: ignore[arg-type]
    x, y = Tensor.randn(8, 1, 8, 8).realize(), Tensor.randint(8, high=10).realize()
    model(x).sparse_categorical_crossentropy(y).backward()
    GlobalCounters.reset()
    Tensor.realize(*(dp.pack() if pack else [p.grad for p in params]))
    return GlobalCounters.global_ops
  alone, packed = grads_ops(False), grads_ops(True)
  assert packed <= 1.05 * alone, f"backward with pack: {packed} ops, alone: {alone}"

needs_mpi = pytest.mark.skipif(shutil.which("mpirun") is None or importlib.util.find_spec("mpi4py") is None,
                               reason="no mpirun (Debian's openmpi-bin) or no mpi4py: scripts/setup.sh installs both")
# CI's NOOPT=1 pass: the MPI plumbing does not depend on kernel optimizations, and its mpirun jobs would compile the CNN again
needs_mpi_opt = pytest.mark.skipif(os.getenv("NOOPT", "0") not in ("", "0"), reason="NOOPT is set: tested in the optimized run")

def mpirun(n: int, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> tuple[subprocess.CompletedProcess, float]:
  """Runs `python args...` as n ranks on this host; the result and the seconds it took."""
  cmd = ["mpirun", "--oversubscribe", "-n", str(n)] + (["--allow-run-as-root"] if os.geteuid() == 0 else []) + [sys.executable, *args]
  st = time.monotonic()
  p = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
  return p, time.monotonic() - st

@needs_mpi
@needs_mpi_opt
def test_collectives_two_ranks():
  devices = [d for d in ("CLANG", "PYTHON", "OPENCL") if Device.can_open(d)]
  p, _ = mpirun(2, "test/distributed_worker.py", "collectives", *devices)
  assert p.returncode == 0, p.stdout + p.stderr
  assert "rank 0: collectives ok" in p.stdout and "rank 1: collectives ok" in p.stdout, p.stdout
  # host memory goes to MPI as it is, device memory through a copy
  for d in devices: assert f"{d}: {'copied' if d == 'OPENCL' else 'zero-copy'}" in p.stdout, p.stdout

@needs_mpi
@needs_mpi_opt
def test_hung_rank_aborts_the_job():
  p, took = mpirun(2, "test/distributed_worker.py", "hang", env={"MPI_TIMEOUT": "3"})
  assert p.returncode != 0, p.stdout + p.stderr
  assert "rank 0 of 2" in p.stderr and "allreduce of 4000 bytes did not complete within 3 s" in p.stderr, p.stderr
  assert took < 120, f"the job took {took:.0f} s to end"

@needs_mpi
@needs_mpi_opt
def test_killed_rank_ends_the_job():
  p, took = mpirun(2, "test/distributed_worker.py", "kill", env={"MPI_TIMEOUT": "20"})
  assert p.returncode != 0, p.stdout + p.stderr
  assert "returned although" not in p.stdout
  # Open MPI's mpirun names the rank that died and ends the others; else rank 0's deadline does
  assert "signal 9" in p.stderr or "did not complete within 20 s" in p.stderr, p.stderr
  assert took < 120, f"the job took {took:.0f} s to end"

def _one_process_weights(steps: int, bs: int, lr: float, seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
  """The reference: train_digits.py's own train step (no MPI) on the whole batch, as examples/train_digits_distributed.py
  sets it up (seed, model without dropout, Adam, cosine schedule). The weights before and after."""
  Tensor.manual_seed(seed)
  X, Y, _, _ = load_digits()
  model = Model(dropout=0.0)
  opt = optim.Adam(nn.state.get_parameters(model), lr=lr)
  schedule = optim.cosine_lr(lr, steps, warmup_steps=steps // 20, min_lr=lr / 20)
  train = sampled_step(model, opt, X, Y, bs)
  before = {k: v.numpy() for k, v in nn.state.get_state_dict(model).items()}
  for i in range(steps):
    optim.set_lr(opt, schedule(i))
    train()
  return before, {k: v.numpy() for k, v in nn.state.get_state_dict(model).items()}

@needs_mpi
@needs_mpi_opt
def test_two_ranks_train_as_one_process_on_the_whole_batch(tmp_path):
  steps, bs, lr, seed = 8, 64, 0.003, 7
  saved = tmp_path / "ranks.safetensors"
  env = {"STEPS": str(steps), "BS": str(bs), "LR": str(lr), "SEED": str(seed), "DROPOUT": "0", "TARGET": "0", "SAVE": str(saved)}
  p, _ = mpirun(2, "examples/train_digits_distributed.py", env=env)
  assert p.returncode == 0, p.stdout + p.stderr
  got = {k: v.numpy() for k, v in nn.state.safe_load(str(saved)).items()}
  before, want = _one_process_weights(steps, bs, lr, seed)
  assert got.keys() == want.keys()
  for k in want: np.testing.assert_allclose(got[k], want[k], atol=1e-6, rtol=0, err_msg=k)
  # the steps moved every weight tensor by more than the tolerance (else this test would pass on untrained weights)
  for k in want: assert np.abs(want[k] - before[k]).max() > 5e-3, k
  # one flat float32 buffer of every gradient per step
  assert f"allreduce of {4 * sum(v.size for v in want.values())} bytes per step per rank" in p.stdout, p.stdout
