"""Building a cold schedule's programs in worker processes: the code generator is Python, one core per process, so a
model's first step (tens of kernels to optimize, lower, render and compile) takes the sum of their times on one core.

The rules:
- workers are `python -c "...; serve(builder)"` processes, not multiprocessing's: its spawn and forkserver re-run the
  user's `__main__` script in every worker, and a fork of this process (compile threads, a device's thread pool)
  may hold a lock no thread of the child releases. They start on first need, serve this process until it exits (their
  stdin closes) and each build one program at a time.
- a job is (device, AST, every ContextVar's value); the reply is (the program table the worker built for, the program
  without its uops, its compiled binary or None, the error or None). A reply for another table than this process's
  (a renderer changed in this process, an environment the worker does not see) is dropped: the program is built here.
- this process builds programs too while the workers run; jobs go out one at a time from one queue, so a slow kernel
  delays nothing else. A worker that fails or dies leaves its jobs to this process.
- PROGRAM_WORKERS sets how many workers (default: the cores less one; 0: none). Fewer than MIN_JOBS programs to build
  are built here: a worker's start costs about a second."""
from __future__ import annotations
import collections, importlib, os, pickle, subprocess, sys, threading
from typing import Any, Callable
from tinycore.helpers import ContextVar, getenv

MIN_JOBS = 4

class _Worker:
  def __init__(self, builder: str) -> None:
    cmd = f"from tinycore.engine.programpool import serve; serve({builder!r})"
    self.proc: subprocess.Popen | None = subprocess.Popen([sys.executable, "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
  def build(self, job: tuple) -> tuple | None:
    """The worker's reply to one job, or None (and the worker is given up) when it fails."""
    if self.proc is None: return None
    try:
      pickle.dump(job, self.proc.stdin)  # type: ignore[arg-type]
      self.proc.stdin.flush()  # type: ignore[union-attr]
      return pickle.load(self.proc.stdout)  # type: ignore[arg-type]
    except (OSError, EOFError, pickle.UnpicklingError):
      self.proc.kill()
      self.proc = None
      return None

_workers: list[_Worker] = []

def workers_wanted() -> int:
  return max(0, getenv("PROGRAM_WORKERS", (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) - 1))

def build_all(jobs: list[tuple[str, Any]], table: Callable[[str], str], local: Callable[[str, Any], Any],
              builder: str, workers: int | None = None) -> list[tuple[Any, bytes | None]]:
  """(program, binary or None) for every (device, ast) job, in order: `local` builds one here, `builder` names the
  function a worker builds one with ("module:function", see serve), `table` names a device's program table (what a
  worker's reply must have been built for), `workers` at most that many workers (default: workers_wanted())."""
  n = min(workers_wanted() if workers is None else workers, len(jobs) - 1) if len(jobs) >= MIN_JOBS else 0
  while len(_workers) < n: _workers.append(_Worker(builder))
  out: list[tuple[Any, bytes | None] | None] = [None] * len(jobs)
  queue = collections.deque(range(len(jobs)))
  ctx = {k: v.value for k, v in ContextVar._cache.items()}
  def take() -> int | None:
    try: return queue.popleft()
    except IndexError: return None
  def feed(w: _Worker) -> None:
    while (i := take()) is not None:
      reply = w.build((jobs[i][0], jobs[i][1], ctx))
      if reply is None: queue.append(i); return
      tab, p, lib, err = reply
      if err is None and tab == table(jobs[i][0]): out[i] = (p, lib)
  threads = [threading.Thread(target=feed, args=(w,), daemon=True) for w in _workers[:n]]
  for t in threads: t.start()
  try:
    while (i := take()) is not None: out[i] = (local(*jobs[i]), None)
  finally:
    queue.clear()  # (an error here: the workers finish the job they have, and are free for the next call)
    for t in threads: t.join()
  return [x if x is not None else (local(*jobs[i]), None) for i, x in enumerate(out)]

def serve(builder: str) -> None:
  """A worker's loop: read a job from stdin, build it with `builder` ("module:function" of (device, ast) -> (table,
  program, binary or None)), write the reply to stdout."""
  from tinycore.helpers import Context
  mod, _, fn = builder.partition(":")
  build = getattr(importlib.import_module(mod), fn)
  inp, out = sys.stdin.buffer, sys.stdout.buffer
  sys.stdout = sys.stderr  # stdout carries the replies: what the code generator prints goes to stderr
  while True:
    try: device, ast, ctx = pickle.load(inp)
    except EOFError: return
    try:
      with Context(**{k: v for k, v in ctx.items() if k in ContextVar._cache}): reply: tuple = (*build(device, ast), None)
    except Exception as e: reply = (None, None, None, f"{type(e).__name__}: {e}")
    pickle.dump(reply, out)
    out.flush()
