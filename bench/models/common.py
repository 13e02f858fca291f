"""What every real-model bench shares: one thread for both libraries, CPU-time medians, the weight copy from tinycore
into torch, the first-loss check, and the memory of a training loop measured in a process of its own.

Rules the benches follow:
- one thread: tinycore's CLANG device reads THREADS at import (set by `one_thread()` before tinycore is imported, as
  bench.py's driver does for these groups), torch gets `torch.set_num_threads(1)`;
- time is CPU time (`time.process_time`, all threads of the process) of one call that realizes / reads its result, the
  median of several; wall time is kept beside it;
- tinycore's weights are the seeded ones; torch's are copied from them by name (the torch modules use the same names),
  so the first step's loss of both must agree within `LOSS_RTOL` (relative), else the bench says so in its result;
- memory: RSS of a process that ran nothing else (`memory_worker`): after setup, after step `MEM_EARLY`, at the end
  and its peak (VmHWM); tinycore's own count of allocated buffer bytes (GlobalCounters.mem_used) beside it."""
from __future__ import annotations
import json, os, resource, statistics, subprocess, sys, time
from typing import Any, Callable

LOSS_RTOL = 1e-4
MEM_EARLY = 20  # RSS after this many steps is the reference a flat loop stays at

def one_thread(torch_too: bool = True) -> None:
  """Pin both libraries to one thread (THREADS is read when tinycore's CLANG plugin is imported: call this first);
  torch_too=False leaves torch unimported (a memory run of tinycore alone)."""
  os.environ.setdefault("THREADS", "1")
  os.environ.setdefault("DEV", "CLANG")
  if torch_too:
    import torch
    torch.set_num_threads(int(os.environ["THREADS"]))

def rss_mb() -> float:
  with open("/proc/self/statm") as f: return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
def peak_rss_mb() -> float:
  """This process's peak RSS: VmHWM, the high-water mark of its own address space (ru_maxrss is no use in a child of
  a big process: Linux carries the parent's peak through fork and exec into it)."""
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith("VmHWM:"): return int(line.split()[1]) / 1024
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
  """(CPU seconds, wall seconds, result) of one call."""
  c, w = time.process_time(), time.perf_counter()
  out = fn()
  return time.process_time() - c, time.perf_counter() - w, out

def median_cpu(fn: Callable[[], Any], reps: int, warmup: int = 1) -> dict:
  """Median CPU and wall seconds of `reps` calls after `warmup` calls."""
  for _ in range(warmup): fn()
  runs = [timed(fn)[:2] for _ in range(reps)]
  return {"t": statistics.median(c for c, _ in runs), "wall_s": statistics.median(w for _, w in runs), "reps": reps}

def copy_into_torch(tc_model: Any, torch_module: Any) -> None:
  """Copy every tensor of the tinycore model into the torch module's parameter or buffer of the same dotted name."""
  import torch
  from tinycore.nn.state import get_state_dict
  src = {k: v.numpy() for k, v in get_state_dict(tc_model).items()}
  dst = torch_module.state_dict()
  if missing := sorted(set(dst) - set(src)): raise KeyError(f"torch names without a tinycore tensor: {missing[:5]}")
  with torch.no_grad():
    for k, t in dst.items(): t.copy_(torch.from_numpy(src[k]).reshape(t.shape).to(t.dtype))

def loss_check(tc_loss: float, torch_loss: float) -> dict:
  """The first step's losses of both libraries and whether they agree within LOSS_RTOL."""
  rel = abs(tc_loss - torch_loss) / max(abs(torch_loss), 1e-12)
  return {"loss_tinycore": tc_loss, "loss_torch": torch_loss, "loss_rel_err": rel, "loss_ok": rel <= LOSS_RTOL}

def memory_worker(make_step: Callable[[str], Callable[[], Any]], lib: str, steps: int) -> dict:
  """Run `steps` training steps of lib ('tinycore' or 'torch') in this process; its RSS along the way. The base is
  taken with the library imported (and tinycore's CLANG device opened), so that the loop's part is the model's."""
  if lib == "tinycore":
    from tinycore import Device
    Device["CLANG"].allocator  # noqa: B018
  base = rss_mb()
  step = make_step(lib)
  step()
  setup = rss_mb()
  early = setup
  for i in range(1, steps):
    step()
    if i + 1 == MEM_EARLY: early = rss_mb()
  out = {"rss_base_mb": base, "rss_setup_mb": setup, "rss_early_mb": early, "rss_end_mb": rss_mb(), "peak_mb": peak_rss_mb(), "steps": steps}
  if lib == "tinycore":
    from tinycore import GlobalCounters
    out["tc_buffers_mb"] = GlobalCounters.mem_used / 2**20
  return out

def spawn_memory(module: str, lib: str, steps: int, timeout: int = 3600) -> dict:
  """memory_worker of bench.models.<module> for lib in a fresh process (so that each library's RSS is its own)."""
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  cmd = [sys.executable, "-m", f"bench.models.{module}", "--memory", lib, str(steps)]
  try: proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=timeout, env=os.environ.copy())
  except subprocess.TimeoutExpired: return {"error": f"memory run timed out after {timeout}s"}
  for line in proc.stdout.splitlines():
    if line.startswith("MEMJSON "): return json.loads(line[len("MEMJSON "):])
  return {"error": f"memory run exited {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:150]}"}

def memory_main(make_step: Callable[[str], Callable[[], Any]]) -> None:
  """`python -m bench.models.<module> --memory LIB STEPS`: print memory_worker's result as one MEMJSON line."""
  lib, steps = sys.argv[sys.argv.index("--memory") + 1], int(sys.argv[sys.argv.index("--memory") + 2])
  one_thread(torch_too=lib == "torch")
  print("MEMJSON " + json.dumps(memory_worker(make_step, lib, steps)))

def torch_compile_timing(step: Callable[[], Any], reps: int) -> dict:
  """A torch.compile'd step: the first call's CPU/wall time (compile, reported apart) and the steady median."""
  c, w, _ = timed(step)
  return {**median_cpu(step, reps), "compile_cpu_s": c, "compile_wall_s": w}

def torch_train_step(model: Any, opt: Any, x: Any, y: Any, compiled: bool = False) -> Callable[[], float]:
  """One torch classification step on a fixed batch (cross-entropy, backward, the optimizer's step), the model behind
  torch.compile when `compiled`; returns the loss."""
  import torch
  fwd = torch.compile(model) if compiled else model
  def step() -> float:
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(fwd(x), y)
    loss.backward()
    opt.step()
    return loss.item()
  return step
