"""Running a schedule: allocate buffers, find or build a compiled runner for each kernel, run it.

Runners are cached in memory by (device, AST); compiled binaries are cached on disk by the compiler (see
Compiler.compile_cached). DEBUG=2 prints one line per kernel with its time, GFLOPS and GB/s."""
from __future__ import annotations
import time
from typing import Any
from tinycore.device import Buffer, Device, CompileError
from tinycore.dtype import dtypes, PtrDType
from tinycore.helpers import DEBUG, BEAM, NOOPT, GlobalCounters, colored
from tinycore.ops import Ops
from tinycore.codegen import ProgramSpec, get_kernel, get_program
from tinycore.engine.schedule import ScheduleItem, mark_realized
from tinycore.uop.uop import UOp, pretty

class Runner:
  def __init__(self, display_name: str, device: str, op_estimate: int = 0):
    self.display_name, self.device, self.op_estimate = display_name, device, op_estimate
  def __call__(self, bufs: list[Buffer], var_vals: dict[UOp, int], wait: bool = False) -> float | None: raise NotImplementedError

class CompiledRunner(Runner):
  """A kernel compiled for one device, callable with buffers and the values of its symbolic variables."""
  def __init__(self, p: ProgramSpec, lib: bytes | None = None):
    super().__init__(p.display_name, p.device, p.estimates_ops)
    self.p = p
    dev = Device[p.device]
    if DEBUG >= 4: print(dev.renderer.describe(p.src) if hasattr(dev.renderer, "describe") else p.src)
    self.lib = lib if lib is not None else dev.compiler.compile_cached(p.src)
    self.prg = dev.program(p.device, p.name, self.lib)
  def __call__(self, bufs: list[Buffer], var_vals: dict[UOp, int], wait: bool = False) -> float | None:
    p = self.p
    return self.prg(*[b._buf for b in bufs], global_size=p.global_size, local_size=p.local_size,
                    vals=[var_vals[v] for v in p.vars] if p.vars else (), wait=wait)

class CopyRunner(Runner):
  def __init__(self, dest: str, src: str): super().__init__(f"copy {dest} <- {src}", dest)
  def __call__(self, bufs: list[Buffer], var_vals: dict[UOp, int], wait: bool = False) -> float | None:
    st = time.perf_counter()
    bufs[0].copy_from(bufs[1])
    return time.perf_counter() - st if wait else None

method_cache: dict[tuple[str, UOp, int, int], CompiledRunner] = {}

def get_runner(device: str, ast: UOp) -> CompiledRunner:
  key = (device, ast, BEAM.value, NOOPT.value)
  if (r := method_cache.get(key)) is not None: return r
  dev = Device[device]
  used = {(u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype).scalar() for u in ast.toposort()}
  if (bad := used - set(dev.renderer.supported_dtypes()) - {dtypes.void}):
    raise TypeError(f"{device} does not support {', '.join(map(str, sorted(bad)))}: its renderer declares "
                       f"{', '.join(map(str, dev.renderer.supported_dtypes()))}")
  k = get_kernel(ast, dev.renderer)
  if DEBUG >= 3:
    print(pretty(ast))
    print(f"applied opts: {k.applied_opts}")
  p = get_program(k, device)
  try: method_cache[key] = r = CompiledRunner(p)
  except CompileError as e: raise CompileError(f"kernel {p.name} failed to compile on {device}:\n{e}\n--- source ---\n{p.src}") from None
  return r

def lower_item(si: ScheduleItem) -> Runner | None:
  if si.ast.op is Ops.SINK: return get_runner(si.bufs[0].device, si.ast)
  if si.ast.op is Ops.COPY: return CopyRunner(si.bufs[0].device, si.bufs[1].device)
  return None  # EMPTY: allocation is all

# TinyJit pushes a list here while it captures: every kernel run meanwhile is recorded into the innermost one
capturing: list[list[tuple[Runner, list[Buffer]]]] = []

def run_schedule(schedule: list[ScheduleItem], var_vals: dict[UOp, int] | None = None, capture: list | None = None) -> None:
  """Run every item in order; `capture` (or the innermost list of `capturing`) collects (runner, buffers) as they run."""
  var_vals = var_vals or {}
  if capture is None and capturing: capture = capturing[-1]
  for si in schedule:
    for b in si.bufs: b.ensure_allocated()
    runner = lower_item(si)
    if runner is not None: exec_runner(runner, list(si.bufs), var_vals)
    if capture is not None and runner is not None: capture.append((runner, list(si.bufs)))
  mark_realized(schedule)

def exec_runner(runner: Runner, bufs: list[Buffer], var_vals: dict[UOp, int], jit: bool = False) -> None:
  # this runs for every kernel of every step (a JIT replay is a loop over it): kept to the few operations it needs
  dbg = DEBUG.value
  et = runner(bufs, var_vals, wait=dbg >= 2)
  gc = GlobalCounters
  gc.kernel_count += 1
  gc.global_ops += runner.op_estimate
  mem = 0
  for b in bufs: mem += b.size * b.dtype.itemsize
  gc.global_mem += mem
  if et is not None: gc.time_sum_s += et
  if dbg >= 2:
    tm = f"tm {et*1e6:9.2f}us/{GlobalCounters.time_sum_s*1e3:9.2f}ms" if et is not None else ""
    rate = f"({runner.op_estimate/((et or 1e-9)*1e9):9.2f} GFLOPS, {mem/((et or 1e-9)*1e9):7.2f} GB/s)" if et else ""
    print(f"{colored('***', 'magenta' if jit else 'green')} {runner.device[:7]:7s} {GlobalCounters.kernel_count:4d} "
          f"{runner.display_name:40s} arg {len(bufs):3d} mem {GlobalCounters.mem_used/1e9:5.2f} GB {tm} {rate}")

__all__: list[Any] = ["run_schedule", "get_runner", "CompiledRunner", "Runner", "method_cache", "exec_runner", "capturing"]
