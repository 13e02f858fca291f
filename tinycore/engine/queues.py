"""Device queues: each device (`CLANG`, `CLANG:1`, `OPENCL`) gets a worker thread of its own, so the kernels of
a schedule that spans several devices run on those devices side by side. A CPU device has no hardware queue: its
worker thread is its queue (a C kernel releases the GIL while it runs, so two CLANG devices compute at once).

The rules run_on_queues follows:
- the main thread lowers every item (compiles it, allocates its buffers) in schedule order, then hands it to the queue of
  the device it runs on (a copy runs on its destination's queue);
- a queue runs its items in schedule order; an item first waits for the earlier items of other queues that touch one
  of its buffers (a copy waits for the kernel that wrote its source; a kernel waits for a copy still reading the buffer
  it is about to overwrite): the order of every two items that share a buffer is the schedule's;
- run_on_queues returns when every item has run; the first error raised on a queue is raised in the caller.
A schedule on one device never comes here (run_schedule runs it inline): the queues cost nothing to single-device work.
A TinyJit replay runs its kernels in order on the calling thread."""
from __future__ import annotations
import concurrent.futures
from typing import Any, Callable
from tinycore.device import Buffer

_queues: dict[str, concurrent.futures.ThreadPoolExecutor] = {}

def queue(device: str) -> concurrent.futures.ThreadPoolExecutor:
  """The worker thread of `device` (started on first use)."""
  if (q := _queues.get(device)) is None: q = _queues[device] = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"queue-{device}")
  return q

def _after(deps: list[concurrent.futures.Future], job: Callable[[], Any]) -> Any:
  for d in deps: d.result()  # an error upstream stops this item too
  return job()

def run_on_queues(items: list[tuple[str, list[Buffer], Callable[[], Any]]]) -> None:
  """Run each (device, buffers, job) on the queue of its device, ordered as the module docstring says."""
  last: dict[int, list[tuple[str, concurrent.futures.Future]]] = {}  # base buffer -> the items that touched it so far
  futures = []
  for device, bufs, job in items:
    keys = {id(b.base) for b in bufs}
    deps = [f for k in keys for d, f in last.get(k, ()) if d != device]
    fut = queue(device).submit(_after, deps, job)
    for k in keys: last[k] = [*[(d, f) for d, f in last.get(k, ()) if d != device], (device, fut)]
    futures.append(fut)
  concurrent.futures.wait(futures)
  for f in futures: f.result()
