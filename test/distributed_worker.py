"""What each rank runs in test/test_distributed.py, started by mpirun: `python test/distributed_worker.py SCENARIO`.

collectives: allreduce_ and broadcast_, and DataParallel's averaged gradients, on each device named, against numpy
             (float64) of every rank's data, which each rank makes again from the ranks' seeds; prints "collectives ok".
hang:        the last rank sleeps instead of reaching the allreduce: the others must abort the job at MPI_TIMEOUT.
kill:        the last rank kills itself (SIGKILL) before the allreduce: the job must end, not hang."""
from __future__ import annotations
import os, signal, sys, time
import numpy as np
from tinycore import Device, Tensor
from tinycore.nn.distributed import Communicator, DataParallel, host_array

def data(rank: int, shape: tuple[int, ...]) -> np.ndarray: return np.random.default_rng(rank).standard_normal(shape).astype(np.float32)

def collectives(comm: Communicator, device: str) -> None:
  shape, ranks = (5, 7), range(comm.size)
  want = sum(data(r, shape).astype(np.float64) for r in ranks)
  t = Tensor(data(comm.rank, shape), device=device).realize()
  np.testing.assert_allclose(comm.allreduce_(t).numpy(), want, rtol=1e-6, atol=1e-6)
  # a view and an unrealized tensor are made buffers of their own first; a lazy reader made before keeps the old value
  v = Tensor(np.pad(data(comm.rank, shape), 1), device=device)[1:-1, 1:-1]
  u = Tensor(data(comm.rank, shape), device=device) * 2
  reader = (u + 1)
  np.testing.assert_allclose(comm.allreduce_(v).numpy(), want, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(comm.allreduce_(u).numpy(), 2 * want, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(reader.numpy(), 2 * data(comm.rank, shape) + 1, rtol=1e-6)
  root = comm.size - 1
  b = Tensor(data(comm.rank, shape), device=device).realize()
  np.testing.assert_array_equal(comm.broadcast_(b, root).numpy(), data(root, shape))

def averaged_gradients(comm: Communicator, device: str) -> None:
  # loss = sum(w * x_rank) + sum(b) * rank: w's gradient is x_rank, b's is rank; `unused` gets none (zeros are averaged)
  w, b, unused = (Tensor(np.ones(n, np.float32), device=device, requires_grad=True) for n in ((4, 3), 2, 5))
  dp = DataParallel([w, b, unused], comm)
  ((w * Tensor(data(comm.rank, (4, 3)), device=device)).sum() + b.sum() * comm.rank).backward()
  dp.average_gradients()
  ranks = range(comm.size)
  np.testing.assert_allclose(w.grad.numpy(), sum(data(r, (4, 3)).astype(np.float64) for r in ranks) / comm.size, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(b.grad.numpy(), np.full(2, sum(ranks) / comm.size), rtol=1e-6)
  np.testing.assert_array_equal(unused.grad.numpy(), np.zeros(5))
  assert dp.nbytes == 4 * (12 + 2 + 5), dp.nbytes

def main() -> int:
  comm, scenario = Communicator(), sys.argv[1]
  if scenario == "collectives":
    for device in sys.argv[2:]:
      collectives(comm, device)
      averaged_gradients(comm, device)
      t = Tensor([1.0, 2.0, 3.0], device=device).realize()
      if (a := host_array(t.lazydata.buffer_view())) is not None: a[1] = 42  # the array is the tensor's own memory
      print(f"{device}: {'zero-copy' if a is not None and t.numpy()[1] == 42 else 'copied'}")
    comm.barrier()
    print(f"rank {comm.rank}: collectives ok", flush=True)
  elif scenario in ("hang", "kill"):
    t = Tensor.ones(1000, device=Device.DEFAULT).realize()
    comm.barrier()  # every rank is up before one fails
    if comm.rank == comm.size - 1:
      if scenario == "kill": os.kill(os.getpid(), signal.SIGKILL)
      time.sleep(600)
    comm.allreduce_(t)
    print(f"rank {comm.rank}: allreduce returned although a rank never reached it", flush=True)
    return 1
  return 0

if __name__ == "__main__": sys.exit(main())
