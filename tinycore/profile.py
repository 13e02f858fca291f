"""PROFILE=1: a timeline of the run, written at exit in Chrome's trace-event format (a JSON file that Perfetto,
https://ui.perfetto.dev, and chrome://tracing open); the VIZ page (tinycore/viz) draws the same events.

Tracks: a process per device, on it the lanes
- `kernels`: each kernel launch, with its name, global and local sizes, FLOPs and bytes. Its duration is the time the
  program reports for the launch (kernels run with wait=True while profiling, as at DEBUG=2), so the durations add up
  to GlobalCounters.time_sum_s; it starts at the host's clock when the launch was made;
- `copies`: a copy into a buffer from the host, out of one to the host, and between devices;
- `jit`: each replay of a TinyJit capture, around the launches of its kernels (a replay runs them one by one while
  profiling, not through the bound launchers);
- `compile N`: each kernel's compile, a lane per thread (the compile pool builds several side by side).
Timestamps are the host's perf_counter in microseconds since this module was imported.

The core calls `record` (or `span`) behind an `if PROFILE` at those few places, so the profiler costs nothing when it
is off. At exit the trace goes to PROFILE_PATH (else a file in the temporary folder) and its path is printed.
This module imports only helpers: everything from the tensor down to the runtime may call it."""
from __future__ import annotations
import atexit, contextlib, json, os, tempfile, threading, time
from dataclasses import dataclass, field
from typing import Any, Iterator
from tinycore.helpers import PROFILE

@dataclass
class Event:
  """One span on a device's lane; `ref` is the object it timed (a kernel's runner), for the VIZ page, not written out."""
  device: str
  lane: str
  name: str
  start_ns: int
  dur_ns: int
  args: dict[str, Any] = field(default_factory=dict)
  ref: Any = None

events: list[Event] = []
OFF = contextlib.nullcontext()  # what a hook enters instead of a span when the profiler is off
_T0 = time.perf_counter_ns()
_threads: dict[int, int] = {}

def now() -> int: return time.perf_counter_ns()

def record(device: str, lane: str, name: str, start_ns: int, dur_ns: int, ref: Any = None, **args: Any) -> None:
  """Add a span that began at start_ns (perf_counter_ns) and lasted dur_ns."""
  events.append(Event(device, lane, name, start_ns, max(dur_ns, 0), args, ref))

@contextlib.contextmanager
def span(device: str, lane: str, name: str, **args: Any) -> Iterator[None]:
  """Record the block as a span; lane "compile" becomes a lane per thread."""
  if lane == "compile": lane = f"compile {_threads.setdefault(threading.get_ident(), len(_threads))}"
  st = now()
  try: yield
  finally: record(device, lane, name, st, now() - st, **args)

def launch(runner: Any, start_ns: int, seconds: float | None, nbytes: int, jit: bool) -> None:
  """A kernel launch (or a copy between devices) that exec_runner made at start_ns and that took `seconds`."""
  dur = int(seconds * 1e9) if seconds is not None else now() - start_ns
  p = getattr(runner, "p", None)
  if p is None: record(runner.device, "copies", runner.display_name, start_ns, dur, runner, bytes=nbytes)
  else: record(runner.device, "kernels", p.name, start_ns, dur, runner, global_size=[str(x) for x in p.global_size],
               local_size=[str(x) for x in p.local_size] if p.local_size is not None else None, flops=runner.op_estimate, bytes=nbytes, jit=jit)

def trace(evs: list[Event] | None = None) -> dict[str, Any]:
  """The events as a Chrome trace: a complete ("X") event per span, in order of start on each lane, and metadata
  ("M") events naming the processes (devices) and threads (lanes)."""
  evs = events if evs is None else evs
  pids: dict[str, int] = {}
  tids: dict[tuple[str, str], int] = {}
  out: list[dict[str, Any]] = []
  for e in sorted(evs, key=lambda e: e.start_ns):
    if e.device not in pids:
      pids[e.device] = len(pids) + 1
      out.append({"ph": "M", "name": "process_name", "pid": pids[e.device], "tid": 0, "args": {"name": e.device}})
    if (e.device, e.lane) not in tids:
      tids[(e.device, e.lane)] = len(tids) + 1
      out.append({"ph": "M", "name": "thread_name", "pid": pids[e.device], "tid": tids[(e.device, e.lane)], "args": {"name": e.lane}})
    out.append({"ph": "X", "name": e.name, "cat": e.lane.split()[0], "pid": pids[e.device], "tid": tids[(e.device, e.lane)],
                "ts": (e.start_ns - _T0) / 1e3, "dur": e.dur_ns / 1e3, "args": e.args})
  return {"traceEvents": out, "displayTimeUnit": "ms"}

def save(path: str | None = None) -> str:
  """Write the trace of every event so far; returns its path (PROFILE_PATH, else a new file in the temporary folder)."""
  path = path or os.getenv("PROFILE_PATH") or os.path.join(tempfile.gettempdir(), f"tinycore_profile_{os.getpid()}.json")
  with open(path, "w") as f: json.dump(trace(), f)
  return path

@atexit.register
def _save_at_exit() -> None:
  if PROFILE and events: print(f"PROFILE: {len(events)} events written to {save()} (open it in https://ui.perfetto.dev or chrome://tracing)")
