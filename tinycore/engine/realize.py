"""Running a schedule: allocate buffers, find or build a compiled runner for each kernel, run it.

Runners are cached in memory by (device, AST); compiled binaries are cached on disk by the compiler (see
Compiler.compile_cached). DEBUG=2 prints one line per kernel with its time, GFLOPS and GB/s. A schedule over several
devices (a sharded tensor's) runs each device's items on that device's queue (engine/queues.py states the order kept)."""
from __future__ import annotations
import dataclasses, functools, hashlib, inspect, pathlib, pickle, time
from typing import Any, Callable
from tinycore.backend import CompileError
from tinycore.device import Buffer, Device
from tinycore.dtype import dtypes, PtrDType
from tinycore.helpers import DEBUG, BEAM, NOOPT, GRAPHUOPS, PROFILE, VIZ, GlobalCounters, colored, diskcache_get, diskcache_put
from tinycore import profile
from tinycore.viz import record as vizrecord
from tinycore.ops import Ops
from tinycore.codegen import ProgramSpec, get_kernel, get_program
from tinycore.engine.schedule import CachedSchedule, Schedule, ScheduleItem, mark_outputs, mark_realized
from tinycore.engine.queues import run_on_queues
from tinycore.engine import compiles, programpool
from tinycore.engine.memory import MEMPLAN, ScheduleFrees, free_plan
from tinycore.uop.uop import UOp, pretty, sym_infer

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
    self.lib = lib if lib is not None else compile_program(p)
    self.prg = dev.program(p.device, p.name, self.lib)
    # launch sizes over a symbolic dim are worked out from the Variables' values on every call
    launch = [x for x in [*p.global_size, *(p.local_size or ())] if isinstance(x, UOp)]
    self.symbolic_launch = bool(launch)
    self.plain = not p.vars and not launch  # a launch that takes no Variables' values
    self.needs = sorted(set(p.vars).union(*(x.vars() for x in launch)), key=lambda v: v.arg)  # every Variable a call takes
    # a plain kernel's launch from the buffer handles alone (Program.caller): what the eager path calls
    self.launch: Callable[..., Any] | None = self.prg.caller(p.global_size, p.local_size) if self.plain else None
  def __call__(self, bufs: list[Buffer], var_vals: dict[UOp, int], wait: bool = False) -> float | None:
    p = self.p
    if self.plain: return self.prg(*[b._buf for b in bufs], global_size=p.global_size, local_size=p.local_size, wait=wait)
    gs, ls, vals = self.launch_args(var_vals)
    return self.prg(*[b._buf for b in bufs], global_size=gs, local_size=ls, vals=vals, wait=wait)
  def launch_args(self, var_vals: dict[UOp, int]) -> tuple[Any, Any, list[int]]:
    """The launch sizes and the Variables' values (in the kernel's parameter order) of a call with these values."""
    p = self.p
    if (missing := [v.expr for v in self.needs if v not in var_vals]):
      raise ValueError(f"kernel {p.name} needs a value for the Variable {missing[0]}: bind it where the symbolic size is made "
                       f"(Variable({missing[0]!r}, ...).bind(n))")
    vals, gs, ls = [var_vals[v] for v in p.vars], p.global_size, p.local_size
    if self.symbolic_launch: gs, ls = [sym_infer(x, var_vals) for x in gs], [sym_infer(x, var_vals) for x in ls] if ls is not None else None
    return gs, ls, vals

  def launcher(self, bufs: list[Buffer], var_vals: dict[UOp, int] | None = None) -> Callable[[], Any]:
    """The kernel bound to these buffers (see Program.launcher) and, where its launch takes Variables' values, to
    these values (a kernel that takes none ignores them)."""
    if self.plain: return self.prg.launcher([b._buf for b in bufs], self.p.global_size, self.p.local_size)
    gs, ls, vals = self.launch_args(var_vals or {})
    return self.prg.launcher([b._buf for b in bufs], gs, ls, vals)

def compile_program(p: ProgramSpec) -> bytes:
  """The binary of a program, through its compiler's disk cache (a `compile` span on the timeline while profiling)."""
  with profile.span(p.device, "compile", p.name) if PROFILE.value else profile.OFF: return Device[p.device].compiler.compile_cached(p.src)

class CopyRunner(Runner):
  def __init__(self, dest: str, src: str): super().__init__(f"copy {dest} <- {src}", dest)
  def __call__(self, bufs: list[Buffer], var_vals: dict[UOp, int], wait: bool = False) -> float | None:
    st = time.perf_counter()
    bufs[0].copy_from(bufs[1])
    return time.perf_counter() - st if wait else None

method_cache: dict[tuple[str, UOp, int, int], CompiledRunner] = {}
SINK = Ops.SINK  # a module global: `Ops.X` is a lookup through the enum's metaclass (see tinycore.lazy)

# *** programs cached on disk: a warm start renders nothing. The key is the AST, the renderer (its settings and the
# version of the code generator's source) and the optimization mode; the compiler caches the binary by source. ***

@functools.cache
def _codegen_version(renderer_file: str) -> str:
  root = pathlib.Path(__file__).resolve().parent.parent
  files = sorted(p for d in ("codegen", "renderer", "uop", "shape") for p in (root / d).glob("*.py")) + [root / "ops.py", root / "dtype.py"]
  h = hashlib.sha256()
  for f in files + [pathlib.Path(renderer_file)]:
    try: h.update(f.read_bytes())
    except OSError: pass
  return h.hexdigest()[:16]

def _ast_key(ast: UOp) -> str:
  nodes = ast.toposort()
  idx = {u: i for i, u in enumerate(nodes)}
  return "\n".join(f"{u.op.name} {u.dtype!r} {u.arg!r} {[idx[x] for x in u.src]}" for u in nodes)

def _program_table(device: str, renderer: Any) -> str:
  return (f"programs:{device}:{type(renderer).__qualname__}:{_codegen_version(inspect.getfile(type(renderer)))}:"
          f"{hashlib.sha256((repr(renderer) + str(getattr(renderer, 'cachekey', ''))).encode()).hexdigest()[:16]}:"
          f"beam{BEAM.value}:noopt{NOOPT.value}")

def program_table(device: str) -> str:
  """The disk-cache table of a device's programs (its renderer's settings, the code generator's version, the opt mode)."""
  return _program_table(device, Device[device].renderer)

def cached_program(device: str, ast: UOp) -> ProgramSpec | None:
  """The program for an AST from the disk cache, or None."""
  # (VIZ notes how every program is built)
  if DEBUG >= 3 or GRAPHUOPS or VIZ or (hit := diskcache_get(program_table(device), _ast_key(ast))) is None: return None
  try:
    d = pickle.loads(hit)
    return ProgramSpec(d["name"], d["src"], device, [], d["global_size"], d["local_size"], d["vars"], d["applied_opts"],
                       d["estimates_ops"], d["display_name"], ast)
  except Exception: return None  # an entry from another version: build it again

def get_program_for(device: str, ast: UOp) -> ProgramSpec:
  """The program for an AST: from the disk cache, else by optimizing, lowering and rendering the kernel."""
  dev = Device[device]
  used = {(u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype).scalar() for u in ast.toposort()}
  if (bad := used - set(dev.renderer.supported_dtypes()) - {dtypes.void}):
    raise TypeError(f"{device} does not support {', '.join(map(str, sorted(bad)))}: its renderer declares "
                       f"{', '.join(map(str, dev.renderer.supported_dtypes()))}")
  if (p := cached_program(device, ast)) is not None: return p
  if VIZ: vizrecord.kernel(ast, device)
  k = get_kernel(ast, dev.renderer)
  if VIZ: vizrecord.optimized(k)
  if DEBUG >= 3:
    print(pretty(ast))
    print(f"applied opts: {k.applied_opts}")
  p = get_program(k, device)
  if VIZ: vizrecord.programmed(p)
  if DEBUG < 3 and not GRAPHUOPS and not VIZ:
    diskcache_put(program_table(device), _ast_key(ast), pickle.dumps({
      "name": p.name, "src": p.src, "global_size": p.global_size, "local_size": p.local_size, "vars": p.vars,
      "applied_opts": p.applied_opts, "estimates_ops": p.estimates_ops, "display_name": p.display_name}))
  return p

def build_program(device: str, ast: UOp) -> tuple[str, ProgramSpec, bytes | None]:
  """What a program worker (engine/programpool.py) builds: the program table, the program without its uops, and no
  binary (this process compiles the schedule's programs together, engine/compiles.py)."""
  return program_table(device), dataclasses.replace(get_program_for(device, ast), uops=[], ast=None), None

def get_runner(device: str, ast: UOp, lib: bytes | None = None, p: ProgramSpec | None = None) -> CompiledRunner:
  key = (device, ast, BEAM.value, NOOPT.value)
  if (r := method_cache.get(key)) is not None: return r
  if p is None: p = get_program_for(device, ast)
  try: method_cache[key] = r = CompiledRunner(p, lib)
  except CompileError as e: raise CompileError(f"kernel {p.name} failed to compile on {device}:\n{e}\n--- source ---\n{p.src}") from None
  return r

def prepare_runners(schedule: list[ScheduleItem]) -> None:
  """Build the runners a schedule still lacks: the programs missing from the disk cache in worker processes besides
  this one (engine/programpool.py), then their compiles, small kernels batched, side by side (engine/compiles.py), so
  a cold start pays for the slowest kernels side by side. (PROFILE: each compile alone, a span each.)"""
  if len(schedule) < 2: return
  todo: dict[tuple, tuple[str, UOp]] = {}
  for si in schedule:
    if si.ast.op is Ops.SINK:
      key = (si.bufs[0].device, si.ast, BEAM.value, NOOPT.value)
      if key not in method_cache and key not in todo: todo[key] = (si.bufs[0].device, si.ast)
  if len(todo) < 2: return
  built: dict[int, tuple[ProgramSpec, bytes | None]] = {}
  cached = [cached_program(dev, ast) for dev, ast in todo.values()]
  if (missing := [i for i, p in enumerate(cached) if p is None]):
    jobs = [list(todo.values())[i] for i in missing]
    # (VIZ and PROFILE note each build in this process: no workers then)
    built = dict(zip(missing, programpool.build_all(jobs, program_table, get_program_for, "tinycore.engine.realize:build_program",
                                                    workers=0 if VIZ or PROFILE.value else None)))
  progs = [(dev, ast, p if p is not None else built[i][0]) for i, ((dev, ast), p) in enumerate(zip(todo.values(), cached))]
  # (a binary that is None here: get_runner compiles it again and reports the error with the kernel's source)
  libs: list[bytes | None] = [None] * len(progs)
  for dev in {d for d, _, _ in progs} if not PROFILE.value else ():
    idx = [i for i, (d, _, _) in enumerate(progs) if d == dev]
    for i, lib in zip(idx, compiles.compile_all(Device[dev].compiler, [(progs[i][2].name, progs[i][2].src) for i in idx])): libs[i] = lib
  for (dev, ast, p), lib in zip(progs, libs): get_runner(dev, ast, lib, p)

def lower_item(si: ScheduleItem) -> Runner | None:
  if si.ast.op is Ops.SINK: return get_runner(si.bufs[0].device, si.ast)
  if si.ast.op is Ops.COPY: return CopyRunner(si.bufs[0].device, si.bufs[1].device)
  return None  # EMPTY: allocation is all

class Capture(list):
  """What TinyJit records while it captures: (runner, buffers) of every kernel run, in order, and for each kernel the
  buffer slots it writes (`writes`, for the memory planner: a buffer whose first use is a write holds no state)."""
  def __init__(self) -> None:
    super().__init__()
    self.writes: list[tuple[int, ...]] = []
  def record(self, runner: Runner, bufs: list[Buffer], writes: tuple[int, ...]) -> None:
    self.append((runner, bufs))
    self.writes.append(writes)

# TinyJit pushes a Capture here while it captures: every kernel run meanwhile is recorded into the innermost one
capturing: list[Capture] = []

def run_schedule(schedule: list[ScheduleItem] | CachedSchedule, var_vals: dict[UOp, int] | None = None, capture: Capture | None = None) -> None:
  """Run every item in order; `capture` (or the innermost of `capturing`) records (runner, buffers) as they run. Each
  item's outputs are marked realized as soon as it ran, and a buffer this realize allocated is freed after the last
  item that uses it unless something outside the schedule holds it (engine/memory.py; MEMPLAN=0: at the end)."""
  var_vals = var_vals or {}
  if capture is None and capturing: capture = capturing[-1]
  beam, noopt = BEAM.value, NOOPT.value
  if type(schedule) is CachedSchedule:
    if capture is None and DEBUG.value < 2 and not (PROFILE.value or VIZ.value) and \
       (plan := schedule.entry.memo.get(("plan", beam, noopt))) is not None: return _run_plan(schedule, plan, var_vals)
    schedule = schedule.items()
  if VIZ.value: vizrecord.schedule(schedule)
  # a schedule the cache gave again keeps its runners and its plan of frees by position (see schedule.Schedule)
  memo = schedule.memo if type(schedule) is Schedule else None
  if (runners := memo.get((beam, noopt)) if memo is not None else None) is None:
    if len(schedule) > 1 and DEBUG.value < 3: prepare_runners(schedule)  # (with DEBUG>=3 each kernel prints as it runs)
    if memo is not None and DEBUG.value < 3: memo[(beam, noopt)] = runners = [(si.ast, lower_item(si)) for si in schedule]
  # a schedule over several devices runs each device's items on that device's queue, side by side (engine/queues.py)
  jobs: list | None = [] if len(schedule) > 1 and len({si.bufs[0].device for si in schedule}) > 1 else None
  frees = None
  if jobs is None and len(schedule) > 1 and MEMPLAN.value:
    if memo is None: frees = ScheduleFrees(schedule)
    else:
      if (plan := memo.get("frees")) is None: plan = memo["frees"] = free_plan(schedule)
      frees = ScheduleFrees(schedule, plan)
  for k, si in enumerate(schedule):
    bufs = si.bufs
    for b in bufs:
      if b._buf is None: b.allocate()
    if runners is not None and runners[k][0] is si.ast: runner = runners[k][1]
    else:
      # the in-memory runner cache first (what get_runner does, without a call per kernel)
      runner = method_cache.get((bufs[0].device, si.ast, beam, noopt)) if si.ast.op is SINK else None
      if runner is None: runner = lower_item(si)
    if runner is not None:
      if jobs is None: exec_runner(runner, bufs, var_vals)
      else: jobs.append((runner.device, bufs, functools.partial(exec_runner, runner, bufs, var_vals)))
      if capture is not None: capture.record(runner, list(bufs), tuple(range(max(1, len(si.outputs)))))
    if frees is not None:
      mark_realized((si,))  # (its graph goes: the buffers it read are held by what still reads them only)
      frees.free_after(k)
  if jobs: run_on_queues(jobs)
  if frees is None: mark_realized(schedule)
  if memo is not None and runners is not None and len(schedule) <= 1 and ("plan", beam, noopt) not in memo and \
     all(type(r) is CompiledRunner for _, r in runners):
    memo[("plan", beam, noopt)] = [(r, r.op_estimate, sum(b.size * b.dtype.itemsize for b in si.bufs)) for (_, r), si in zip(runners, schedule)]

def _run_plan(run: CachedSchedule, plan: list[tuple[CompiledRunner, int, int]], var_vals: dict[UOp, int]) -> None:
  """Run a schedule of one kernel (or none) from the cache as its structure ran before (its runner, its operations and
  bytes): what run_schedule does for it without debugging, profiling or a capture, with no items made and one call less
  per kernel; the repeated op of an eager loop."""
  gc = GlobalCounters
  for (_, pick_bufs, pick_outs, _), (runner, ops, mem) in zip(run.entry, plan):
    bufs = pick_bufs(run.bufs)
    for b in bufs:
      if b._buf is None: b.allocate()
    if (launch := runner.launch) is not None: launch(*[b._buf for b in bufs])
    else: runner(bufs, var_vals)
    gc.kernel_count, gc.global_ops, gc.global_mem = gc.kernel_count + 1, gc.global_ops + ops, gc.global_mem + mem
    mark_outputs(pick_outs(run.lbs))

def exec_runner(runner: Runner, bufs: list[Buffer], var_vals: dict[UOp, int], jit: bool = False) -> None:
  # this runs for every kernel of every step (a JIT replay is a loop over it): kept to the few operations it needs
  dbg, prof = DEBUG.value, PROFILE.value
  st = profile.now() if prof else 0
  et = runner(bufs, var_vals, wait=dbg >= 2 or prof)
  gc = GlobalCounters
  gc.kernel_count += 1
  gc.global_ops += runner.op_estimate
  mem = 0
  for b in bufs: mem += b.size * b.dtype.itemsize
  gc.global_mem += mem
  if et is not None: gc.time_sum_s += et
  if prof: profile.launch(runner, st, et, mem, jit)
  if dbg >= 2:
    tm = f"tm {et*1e6:9.2f}us/{GlobalCounters.time_sum_s*1e3:9.2f}ms" if et is not None else ""
    rate = f"({runner.op_estimate/((et or 1e-9)*1e9):9.2f} GFLOPS, {mem/((et or 1e-9)*1e9):7.2f} GB/s)" if et else ""
    print(f"{colored('***', 'magenta' if jit else 'green')} {runner.device[:7]:7s} {GlobalCounters.kernel_count:4d} "
          f"{runner.display_name:40s} arg {len(bufs):3d} mem {GlobalCounters.mem_used/1e9:5.2f} GB {tm} {rate}")

__all__: list[Any] = ["run_schedule", "get_runner", "CompiledRunner", "Runner", "method_cache", "exec_runner", "capturing", "Capture"]
