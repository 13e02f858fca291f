"""Data-parallel training across processes and machines, over MPI (mpi4py on Open MPI or any MPI it was built with).

    mpirun -n 4 -H a,b,c,d python train.py          # or srun, or any launcher of the MPI installed

    comm = Communicator()                            # rank and size from MPI
    dp = DataParallel(opt.params, comm)
    dp.broadcast_parameters()                        # rank 0's initial weights everywhere
    loss = model(x[comm.rank::comm.size]).sparse_categorical_crossentropy(y[comm.rank::comm.size]).backward()
    dp.average_gradients()                           # the mean of every rank's gradients, on every rank
    opt.step()                                       # the same update on every rank: the weights stay equal

Each process (a rank) holds the whole model and computes the gradients of its share of the batch; the gradients are
summed across ranks with MPI's allreduce and divided by the number of ranks. With a loss that is a mean over equal
shares, that is the gradient of the whole batch, so N ranks take the step one process would take on the combined batch.

The rules this module keeps:
- Rank and size come from MPI (COMM_WORLD, or a communicator given). Nothing assumes one host: no files, no addresses,
  no environment variables of a launcher; whatever MPI runs on (shared memory, TCP, InfiniBand) carries the bytes.
- A tensor goes to MPI as its realized device buffer. Where the device's memory is host memory (an allocator with
  `_as_buffer`: CLANG, LLVM, PYTHON), MPI reads and writes that memory through a memoryview, with no copy. Otherwise
  (OPENCL, CUDA, ...) the buffer is copied out to host memory, reduced there, and copied back in: two copies of its
  bytes per collective. (A CUDA-aware MPI could take device pointers; that is not used.)
- The gradients of all parameters travel in one flat buffer per (device, dtype), so a step is one collective, not one
  per parameter. `DataParallel.nbytes` is what each rank hands to allreduce per step.
- Every collective has a deadline (`timeout`, MPI_TIMEOUT seconds, 300 by default: the first step includes compiling
  kernels, which other ranks wait for). It is started nonblocking (Iallreduce, Ibcast, Ibarrier) and polled with Test,
  back to back at first, then sleeping between polls, so a rank that waits long leaves the CPU to others. One not
  complete by the deadline prints, on that rank's stderr, which rank and host waited for what, and calls Abort on the
  communicator: MPI ends every rank of the job. A rank that died is usually noticed by the launcher first (mpirun
  ends the job and names it); the deadline is for what a launcher cannot see: a rank that hangs, or one behind a
  network that stopped delivering.

The collectives are Python calls between kernels: a TinyJit captures kernels only, so a jitted train step is split in
two jitted halves with `allreduce` between them (see DataParallel and examples/train_digits_distributed.py)."""
from __future__ import annotations
import sys, time
from typing import Any
import numpy as np
from tinycore.tensor import Tensor
from tinycore.device import Buffer, Device
from tinycore.dtype import DType, to_np_dtype
from tinycore.helpers import getenv
from tinycore.lazy import pending_readers

def _mpi() -> Any:
  """mpi4py's MPI module (importing it initializes MPI), or an ImportError saying what to install."""
  try: from mpi4py import MPI
  except ImportError as e:
    raise ImportError("tinycore.nn.distributed needs mpi4py and an MPI library: `apt-get install openmpi-bin libopenmpi-dev` "
                      "(or your cluster's MPI module), then `pip install mpi4py` (scripts/setup.sh does both)") from e
  return MPI

class CollectiveTimeout(RuntimeError):
  """A collective that did not complete by its deadline (raised only where Abort returns, which MPI does not promise)."""

class Communicator:
  """The processes of one MPI job: `rank` (this one, 0..size-1) and `size`, and the collectives on Tensors, each with a
  deadline of `timeout` seconds. `bytes` and `seconds` count what the collectives moved and how long they took."""
  def __init__(self, comm: Any = None, timeout: float | None = None):
    """comm: an mpi4py communicator (default MPI.COMM_WORLD); timeout: seconds (default MPI_TIMEOUT, else 300)."""
    self.MPI = _mpi()
    self.comm = comm if comm is not None else self.MPI.COMM_WORLD
    self.rank: int = self.comm.Get_rank()
    self.size: int = self.comm.Get_size()
    self.timeout = float(timeout if timeout is not None else getenv("MPI_TIMEOUT", 300.0))
    self.bytes, self.seconds = 0, 0.0
  def __repr__(self) -> str: return f"<Communicator rank {self.rank} of {self.size} on {self.MPI.Get_processor_name()}>"

  def allreduce_(self, t: Tensor) -> Tensor:
    """t summed over all ranks, in place (every rank passes a tensor of the same shape and dtype). Lazy results made
    from t before and not yet realized are realized first: they keep t's old value, as after an assign."""
    return self._allreduce(t, _overwritable_buffer(t))
  def broadcast_(self, t: Tensor, root: int = 0) -> Tensor:
    """Rank `root`'s value of t, written into t on every rank (the same shape and dtype everywhere)."""
    return self._inplace(t, _overwritable_buffer(t), lambda a: self.comm.Ibcast(a, root=root), f"broadcast from rank {root}")
  def barrier(self) -> None:
    """Returns when every rank has called it (or aborts the job at the deadline)."""
    self.wait(self.comm.Ibarrier(), "barrier", 0)

  def _allreduce(self, t: Tensor, buf: Buffer) -> Tensor:
    return self._inplace(t, buf, lambda a: self.comm.Iallreduce(self.MPI.IN_PLACE, a, op=self.MPI.SUM), "allreduce")
  def _inplace(self, t: Tensor, buf: Buffer, start: Any, what: str) -> Tensor:
    """Runs the collective `start(array)` on buf's bytes: on its own memory where that is host memory, else on a copy."""
    Device[buf.device].synchronize()  # kernels that write buf have finished
    st = time.perf_counter()
    if (host := host_array(buf)) is not None: self.wait(start(host), what, buf.nbytes)
    else:
      staged = np.empty(buf.size, dtype=_np_dtype(buf.dtype))
      buf.copyout(memoryview(staged))
      self.wait(start(staged), what, buf.nbytes)
      buf.copyin(memoryview(staged))
    self.bytes, self.seconds = self.bytes + buf.nbytes, self.seconds + time.perf_counter() - st
    return t

  def wait(self, request: Any, what: str, nbytes: int) -> None:
    """Polls an MPI request until it completes; at the deadline, says so on stderr and aborts the whole job."""
    deadline, polls = time.monotonic() + self.timeout, 0
    while not request.Test():
      if time.monotonic() > deadline: self.abort(f"{what} of {nbytes} bytes did not complete within {self.timeout:g} s: another rank "
                                                 "failed, hangs, or never reached this collective")
      # the first polls back to back (a collective of a step's gradients over shared memory takes tens of microseconds),
      # then sleeps of up to 1 ms: a rank waiting for a slower one leaves the CPU to it
      polls += 1
      if polls > 200: time.sleep(min(1e-5 * 2 ** ((polls - 200) // 4), 1e-3))
  def abort(self, why: str) -> None:
    """Prints why on stderr, naming this rank and host, and ends every rank of the job (MPI Abort, exit code 1)."""
    print(f"tinycore.nn.distributed: rank {self.rank} of {self.size} on {self.MPI.Get_processor_name()}: {why}. Aborting the "
          "MPI job (set MPI_TIMEOUT=seconds for a longer deadline).", file=sys.stderr, flush=True)
    self.comm.Abort(1)
    raise CollectiveTimeout(why)

def _np_dtype(dtype: DType) -> np.dtype:
  npdt = to_np_dtype(dtype)
  if npdt is None: raise TypeError(f"{dtype} has no numpy type and cannot be handed to MPI")
  return np.dtype(npdt)

def host_array(buf: Buffer) -> np.ndarray | None:
  """buf's own memory as a numpy array (no copy) where the device's memory is host memory, else None."""
  if not hasattr(buf.allocator, "_as_buffer"): return None
  return np.frombuffer(buf.as_buffer(), dtype=_np_dtype(buf.dtype), count=buf.size)

def _overwritable_buffer(t: Tensor) -> Buffer:
  """The realized, contiguous buffer of t's own (t is made one first when it is a view or unrealized), after the lazy
  ops that read it were realized: they keep its old value."""
  lb = t.lazydata
  if not (lb.is_realized() and lb._base is None and lb.st.contiguous): t.lazydata = lb.contiguous()
  t.realize()
  buf = t.lazydata.buffer_view().ensure_allocated()
  for r in pending_readers(buf): Tensor(r, requires_grad=False).realize()
  return buf

class DataParallel:
  """Averages the gradients of `params` over the ranks of `comm` through one flat buffer per (device, dtype).

  `average_gradients()` after backward() does it all: pack, allreduce, unpack. A TinyJit-captured step calls the three
  parts apart, the collective outside the jits (a jit replays kernels, not Python):

      @TinyJit
      def grads(): opt.zero_grad(); loss = f().backward(); Tensor.realize(loss, *dp.pack()); return loss
      @TinyJit
      def update(): dp.unpack(); opt.step()
      loss = grads(); dp.allreduce(); update()

  A parameter without a gradient contributes zeros (and gets the average of the others' gradients)."""
  def __init__(self, params: list[Tensor], comm: Communicator | None = None):
    if not params: raise ValueError("DataParallel got no parameters")
    self.params, self.comm = list(params), comm if comm is not None else Communicator()
    groups: dict[tuple[str, DType], list[Tensor]] = {}
    for p in self.params: groups.setdefault((p.device, p.dtype), []).append(p)
    self.groups = [(Tensor.zeros(sum(p.numel() for p in ps), device=dev, dtype=dt, requires_grad=False).contiguous().realize(), ps)
                   for (dev, dt), ps in groups.items()]

  @property
  def nbytes(self) -> int:
    """Gradient bytes each rank hands to allreduce per step."""
    return sum(flat.nbytes() for flat, _ in self.groups)

  def broadcast_parameters(self, root: int = 0) -> None:
    """Rank `root`'s values of every parameter, on every rank: call it once before training."""
    for p in self.params: self.comm.broadcast_(p, root)

  def pack(self) -> list[Tensor]:
    """Assigns every parameter's gradient into the flat buffers: the tensors to realize (lazy, so a jit captures them)."""
    # each gradient a buffer of its own first (contiguous): read by the concatenation alone, the gradients' reductions got
    # the backward's elementwise ops (relu, max-pool) fused into each of them instead, 3x the CPU time of a digits CNN step
    return [flat.assign(Tensor.cat(*[(p.grad if p.grad is not None else p.zeros_like()).detach().contiguous().flatten() for p in ps]))
            for flat, ps in self.groups]

  def allreduce(self) -> None:
    """Sums the packed gradients over the ranks, in the flat buffers (realized: pack's results have run)."""
    # unpack's views of the buffers read the sum on purpose: they are not realized first, as allreduce_ would
    for flat, _ in self.groups: self.comm._allreduce(flat, flat.lazydata.buffer_view())

  def unpack(self) -> None:
    """Sets each parameter's .grad to its slice of the summed buffer divided by the number of ranks (lazy views)."""
    for flat, ps in self.groups:
      offset = 0
      for p in ps:
        p.grad = (flat[offset:offset + p.numel()].reshape(p.shape) / self.comm.size).detach()
        offset += p.numel()

  def average_gradients(self) -> None:
    """After backward(): every parameter's .grad becomes the mean of its gradients on all ranks."""
    Tensor.realize(*self.pack())
    self.allreduce()
    self.unpack()
