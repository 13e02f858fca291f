"""tinycore.nn.distributed with real processes: mpirun starts 2 ranks of test/distributed_worker.py or of
examples/train_digits_distributed.py. Skipped where Open MPI's mpirun or mpi4py is missing (scripts/setup.sh installs both).

The training test's tolerance: the ranks sum two half-batch gradients where one process sums the whole batch at once,
float32 additions in another order, so the weights may differ in their last bits. Measured: at most 1.2e-7 after 8
steps and 6e-8 after 50 (weights of magnitude <= 0.41, a float32 ulp there is 3e-8); the test allows an absolute 1e-6.
A real mismatch (a wrong average, a missed parameter, another batch) is of the size of an update: the 8 steps move
every weight tensor by more than 1e-2 (the test asks for 5e-3)."""
from __future__ import annotations
import os, pathlib, shutil, subprocess, sys, time
import numpy as np
import pytest
from tinycore import Device, Tensor, nn
from tinycore.nn import optim

ROOT = pathlib.Path(__file__).resolve().parent.parent
pytest.importorskip("mpi4py", reason="mpi4py is not installed (scripts/setup.sh installs it)")
if shutil.which("mpirun") is None: pytest.skip("no mpirun (Debian's openmpi-bin)", allow_module_level=True)
# CI's NOOPT=1 pass: the MPI plumbing does not depend on kernel optimizations, and its mpirun jobs would compile the CNN again
if os.getenv("NOOPT", "0") not in ("", "0"): pytest.skip("NOOPT is set: tested in the optimized run", allow_module_level=True)

def mpirun(n: int, *args: str, env: dict[str, str] | None = None, timeout: float = 600) -> tuple[subprocess.CompletedProcess, float]:
  """Runs `python args...` as n ranks on this host; the result and the seconds it took."""
  cmd = ["mpirun", "--oversubscribe", "-n", str(n)] + (["--allow-run-as-root"] if os.geteuid() == 0 else []) + [sys.executable, *args]
  st = time.monotonic()
  p = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
  return p, time.monotonic() - st

def test_collectives_two_ranks():
  devices = [d for d in ("CLANG", "PYTHON", "OPENCL") if Device.can_open(d)]
  p, _ = mpirun(2, "test/distributed_worker.py", "collectives", *devices)
  assert p.returncode == 0, p.stdout + p.stderr
  assert "rank 0: collectives ok" in p.stdout and "rank 1: collectives ok" in p.stdout, p.stdout
  # host memory goes to MPI as it is, device memory through a copy
  for d in devices: assert f"{d}: {'copied' if d == 'OPENCL' else 'zero-copy'}" in p.stdout, p.stdout

def test_hung_rank_aborts_the_job():
  p, took = mpirun(2, "test/distributed_worker.py", "hang", env={"MPI_TIMEOUT": "3"})
  assert p.returncode != 0, p.stdout + p.stderr
  assert "rank 0 of 2" in p.stderr and "allreduce of 4000 bytes did not complete within 3 s" in p.stderr, p.stderr
  assert took < 120, f"the job took {took:.0f} s to end"

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
  sys.path.insert(0, str(ROOT / "examples"))
  try: from train_digits import Model, load_digits, sampled_step
  finally: sys.path.remove(str(ROOT / "examples"))
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
