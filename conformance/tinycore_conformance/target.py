"""The device under test and the reference, as the suite sees them, and the hand-built linear programs run on both.

`Target` is the backend under test: its renderer and compiler (from the plugin's hooks in compile-only mode, where the
hardware may be absent), and in run mode its allocator and program class (through `Device[name]`). `reference()` is
the core's PYTHON device built straight from its classes: the UOp interpreter whose results the suite trusts.

`Prog` assembles a linear UOp program in the order a renderer walks it; `Case` is one checked piece of a program with
its own buffers, and `Batch` runs many cases as one kernel (compiles are the slow part on every real backend) and, when
that kernel fails to render, compile or run, bisects the cases so that each failure is pinned on its own case."""
from __future__ import annotations
import functools, traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence
import numpy as np
import pytest
from tinycore.dtype import DType, dtypes
from tinycore.backend import Allocator, Compiler, DeviceError, Program
from tinycore.ops import Ops, GroupOp
from tinycore.backend import Renderer
from tinycore.uop.uop import UOp
from tinycore_conformance.values import dtname

NOT_DECLARED = "not declared"
NOT_RUN = "not run"

@dataclass
class Parts:
  device: str
  renderer: Renderer
  compiler: Compiler
  allocator: Allocator | None = None
  program: type[Program] | None = None

def reference() -> Parts:
  """The PYTHON device's parts, made directly from the core (never through a plugin)."""
  from tinycore.runtime.python import PythonAllocator, PythonCompiler, PythonProgram, PythonRenderer
  return Parts("PYTHON", PythonRenderer(), PythonCompiler(), PythonAllocator(), PythonProgram)

def one_line(e: BaseException, limit: int = 600) -> str:
  msg = f"{type(e).__name__}: {e}".strip()
  return msg if len(msg) <= limit else msg[:limit] + " ..."

class Target:
  """The backend under test."""
  def __init__(self, device: str, compile_only: bool = False):
    from tinycore.device import Device
    self.device = Device.canonicalize(device)
    self.base = self.device.split(":")[0]
    self.compile_only = compile_only
    self._parts: Parts | None = None
    self._error: str | None = None

  @functools.cached_property
  def entry(self):
    from tinycore.plugin import registry
    registry.load()
    return registry.entries.get(self.base) or next((e for e in registry.failed if e.name == self.base), None)

  @property
  def parts(self) -> Parts:
    if self._parts is None and self._error is None:
      try: self._parts = self._open()
      except Exception as e: self._error = one_line(e, 2000)
    if self._error is not None: raise DeviceError(f"cannot use device {self.device}: {self._error}")
    assert self._parts is not None
    return self._parts

  def _open(self) -> Parts:
    from tinycore.plugin import registry
    registry.load()
    if self.entry is None: raise DeviceError(f"no plugin provides device {self.base}; installed: {', '.join(registry.device_names())}")
    if self.entry.error is not None: raise DeviceError(self.entry.error)
    if not self.compile_only:
      from tinycore.device import Device
      d = Device[self.device]
      return Parts(self.device, d.renderer, d.compiler, d.allocator, d.program)
    # compile-only: the renderer and compiler straight from the hooks; they must work without the hardware
    assert registry.pm is not None
    r = registry.pm.hook.tinycore_renderer(device=self.device)
    c = registry.pm.hook.tinycore_compiler(device=self.device)
    if r is None or c is None: raise DeviceError(f"plugin {self.entry.plugin} gives no {'renderer' if r is None else 'compiler'} for {self.device}")
    return Parts(self.device, r, c)

  @property
  def renderer(self) -> Renderer: return self.parts.renderer
  @property
  def compiler(self) -> Compiler: return self.parts.compiler
  @property
  def allocator(self) -> Allocator:
    self.require_runtime()
    assert self.parts.allocator is not None
    return self.parts.allocator
  @property
  def program(self) -> type[Program]:
    self.require_runtime()
    assert self.parts.program is not None
    return self.parts.program

  @functools.cached_property
  def declared(self) -> tuple[DType, ...]: return tuple(d.scalar() for d in self.renderer.supported_dtypes())

  # *** skips: only ever because of a declaration, or because --compile-only does not run anything ***
  def require_dtype(self, *dts: DType) -> None:
    missing = [d for d in dts if d.scalar() not in self.declared]
    if missing: pytest.skip(f"{NOT_DECLARED}: the renderer of {self.device} does not declare {', '.join(dtname(d) for d in missing)}")
  def require(self, ok: Any, what: str) -> None:
    if not ok: pytest.skip(f"{NOT_DECLARED}: {self.device} does not declare {what}")
  def require_runtime(self) -> None:
    if self.compile_only: pytest.skip(f"{NOT_RUN}: --compile-only renders and compiles, it does not run")

  @property
  def local_size(self) -> tuple[int, int, int] | None: return (1, 1, 1) if self.renderer.has_local else None

  # *** render, compile, run ***
  def compile(self, name: str, uops: list[UOp]) -> tuple[str, bytes]:
    src = self.renderer.render(name, uops)
    return src, self.compiler.compile_cached(src)

  def execute(self, name: str, lib: bytes, bufs: Sequence[np.ndarray], global_size=(1, 1, 1), local_size: Any = "default",
              vals: Sequence[int] = ()) -> tuple[list[np.ndarray], float | None]:
    return execute(self.parts, name, lib, bufs, global_size, self.local_size if local_size == "default" else local_size, vals)

def execute(parts: Parts, name: str, lib: bytes, bufs: Sequence[np.ndarray], global_size=(1, 1, 1), local_size=(1, 1, 1),
            vals: Sequence[int] = ()) -> tuple[list[np.ndarray], float | None]:
  """Copy the host arrays in, run the program once (wait=True), copy every buffer out; returns (contents, run time)."""
  assert parts.allocator is not None and parts.program is not None
  alloc, handles = parts.allocator, []
  try:
    for a in bufs:
      h = alloc.alloc(max(a.nbytes, 1))
      handles.append((h, max(a.nbytes, 1)))
      if a.nbytes: alloc.copyin(h, memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8)))
    prg = parts.program(parts.device, name, lib)
    tm = prg(*[h for h, _ in handles], global_size=tuple(global_size), local_size=local_size, vals=tuple(vals), wait=True)
    outs = []
    for a, (h, _) in zip(bufs, handles):
      o = np.empty_like(a).reshape(-1)
      if a.nbytes: alloc.copyout(memoryview(o.view(np.uint8)), h)
      outs.append(o)
    return outs, tm
  finally:
    for h, n in handles:
      try: alloc.free(h, n)
      except Exception: pass

# *** hand-built linear programs ***

_PURE = GroupOp.ALU | {Ops.CAST, Ops.BITCAST}

class Prog:
  """A linear UOp program, assembled in the order a renderer walks it: buffer and variable definitions, then
  loop-invariant values (constants, ids, arithmetic on them), then the body in the order it is emitted."""
  def __init__(self, name: str = "test"):
    self.name = name
    self.globals: list[UOp] = []
    self.vars: list[UOp] = []
    self.pre: list[UOp] = []
    self.body: list[UOp] = []
    self.done: set[UOp] = set()
    self.nranges = 0
    self.pure: set[UOp] = set()

  def glob(self, dt: DType) -> UOp:
    g = UOp(Ops.DEFINE_GLOBAL, dt.ptr(), arg=len(self.globals))
    self.globals.append(g)
    self.done.add(g)
    return g
  def var(self, name: str, lo: int, hi: int) -> UOp:
    v = UOp(Ops.DEFINE_VAR, dtypes.int32, arg=(name, lo, hi))
    self.vars.append(v)
    self.done.add(v)
    self.pure.add(v)
    return v
  @staticmethod
  def const(dt: DType, v: Any) -> UOp: return UOp(Ops.CONST, dt, arg=v)
  @staticmethod
  def i32(v: int) -> UOp: return UOp(Ops.CONST, dtypes.int32, arg=v)
  def special(self, name: str, size: int) -> UOp:
    u = UOp(Ops.SPECIAL, dtypes.int32, arg=(name, size))
    self.emit(u)
    return u
  def local(self, name: str, dt: DType, size: int) -> UOp:
    u = UOp(Ops.DEFINE_LOCAL, dt.ptr(local=True), arg=(name, size))
    self.emit(u)
    return u
  def range(self, end: int | UOp, start: int | UOp = 0) -> UOp:
    """A loop counter (not yet opened: accumulators are defined before their loop opens)."""
    s = start if isinstance(start, UOp) else self.i32(start)
    e = end if isinstance(end, UOp) else self.i32(end)
    r = UOp(Ops.RANGE, dtypes.int32, (s, e), arg=self.nranges)
    self.nranges += 1
    return r
  def begin(self, r: UOp) -> UOp:
    self.emit(*r.src)
    self.body.append(r)
    self.done.add(r)
    return r
  def loop(self, end: int | UOp, start: int | UOp = 0) -> UOp: return self.begin(self.range(end, start))
  def end(self, r: UOp) -> None: self.body.append(UOp(Ops.ENDRANGE, dtypes.void, (r,)))
  def acc(self, dt: DType, init: Any, *ranges: UOp) -> UOp:
    a = UOp(Ops.DEFINE_ACC, dt, (self.const(dt, init),) + ranges, arg=sum(1 for u in self.body if u.op is Ops.DEFINE_ACC))
    self.emit(a.src[0])
    self.body.append(a)
    self.done.add(a)
    return a
  def assign(self, acc: UOp, val: UOp) -> UOp:
    u = UOp(Ops.ASSIGN, acc.dtype, (acc, val))
    self.emit(u)
    return u
  @staticmethod
  def load(buf: UOp, idx: UOp, gate: UOp | None = None, alt: UOp | None = None, barrier: UOp | None = None) -> UOp:
    dt = buf.dtype.base
    src = (buf, idx) + ((gate, alt if alt is not None else UOp(Ops.CONST, dt, arg=dtypes.as_const(0, dt))) if gate is not None else ())
    return UOp(Ops.LOAD, dt, src + ((barrier,) if barrier is not None else ()))
  def store(self, buf: UOp, idx: UOp | int, val: UOp, gate: UOp | None = None) -> UOp:
    idx = idx if isinstance(idx, UOp) else self.i32(idx)
    u = UOp(Ops.STORE, dtypes.void, (buf, idx, val) + ((gate,) if gate is not None else ()))
    self.emit(u)
    return u
  def barrier(self, *stores: UOp) -> UOp:
    u = UOp(Ops.BARRIER, dtypes.void, tuple(stores))
    self.emit(u)
    return u

  def emit(self, *roots: UOp) -> None:
    for root in roots:
      for u in root.toposort():
        if u in self.done: continue
        if u.op is Ops.RANGE: raise RuntimeError("a loop is used before it was opened (Prog.begin)")
        self.done.add(u)
        if u.op in (Ops.CONST, Ops.SPECIAL, Ops.DEFINE_LOCAL) or (u.op in _PURE and all(s in self.pure for s in u.src)):
          self.pure.add(u)
          self.pre.append(u)
        else: self.body.append(u)

  def uops(self) -> list[UOp]: return self.globals + self.vars + self.pre + self.body

# *** cases and batches ***

@dataclass
class Case:
  """One checked program fragment: `build(prog, globals)` emits it into a program, using one DEFINE_GLOBAL per entry of
  `bufs` (their initial host contents); `check(got, want, inputs)` raises values.Mismatch when the target's final buffer
  contents `got` differ from the reference's `want`."""
  key: str
  bufs: list[tuple[DType, np.ndarray]]
  build: Callable[[Prog, list[UOp]], None]
  check: Callable[[list[np.ndarray], list[np.ndarray]], None]
  launch: tuple = ((1, 1, 1), "default")   # (global_size, local_size); only cases with equal launches share a kernel
  seed: int | None = None
  note: str = ""
  expected: Callable[[], list[np.ndarray]] | None = None  # for programs the PYTHON reference cannot run: the final buffers from numpy

  def program(self, name: str = "test") -> Prog:
    p = Prog(name)
    gl = [p.glob(dt) for dt, _ in self.bufs]
    self.build(p, gl)
    return p

@dataclass
class CaseResult:
  case: Case
  error: str | None = None      # 'render: ...', 'compile: ...', 'run: ...' on the target
  ref_error: str | None = None  # the reference failed: a bug of the suite or the core
  got: list[np.ndarray] | None = None
  want: list[np.ndarray] | None = None
  src: str | None = None        # the source of the kernel it ran in
  batch_size: int = 1

# A batch never gives a kernel more buffers than the most restrictive API we know (Metal: 31 buffer arguments).
MAX_BUFFERS = 30

def _combine(cases: Sequence[Case], name: str) -> tuple[Prog, list[np.ndarray], list[tuple[int, int]]]:
  p = Prog(name)
  init, spans = [], []
  for c in cases:
    gl = [p.glob(dt) for dt, _ in c.bufs]
    c.build(p, gl)
    spans.append((len(init), len(init) + len(c.bufs)))
    init.extend(a for _, a in c.bufs)
  return p, init, spans

class Batch:
  """Runs cases as few kernels on the target and on the reference, remembering each case's result."""
  def __init__(self, target: Target, ref: Parts | None = None):
    self.target, self.ref = target, ref or reference()
    self.results: dict[str, CaseResult] = {}
    self.count = 0

  def result(self, group: str, factory: Callable[[], list[Case]], key: str) -> CaseResult:
    """The result of case `key` of a group of cases made by `factory` (made and run once, on first request)."""
    if key not in self.results:
      cases = factory()
      if key not in {c.key for c in cases}: raise KeyError(f"case {key} is not made by the factory of group {group}")
      self.run(group, [c for c in cases if c.key not in self.results])
    return self.results[key]

  def run(self, group: str, cases: list[Case]) -> None:
    by_launch: dict[tuple, list[Case]] = {}
    for c in cases: by_launch.setdefault(repr(c.launch), []).append(c)
    for grp in by_launch.values():
      chunk: list[Case] = []
      for c in grp:
        if chunk and sum(len(x.bufs) for x in chunk) + len(c.bufs) > MAX_BUFFERS:
          self._run_chunk(group, chunk)
          chunk = []
        chunk.append(c)
      if chunk: self._run_chunk(group, chunk)

  def _name(self) -> str:
    self.count += 1
    return f"conformance_{self.count}"

  def _reference(self, name, uops, init, spans, gs, ls) -> tuple[list, str | None]:
    try:
      rsrc = self.ref.renderer.render(name, uops)
      rlib = self.ref.compiler.compile(rsrc)
      routs, _ = execute(self.ref, name, rlib, init, gs, (1, 1, 1) if ls == "default" else ls)
      return [routs[a:b] for a, b in spans], None
    except Exception as e:
      return [None] * len(spans), f"the PYTHON reference failed on this program: {one_line(e)}\n{traceback.format_exc(limit=4)}"

  def _run_chunk(self, group: str, cases: list[Case]) -> None:
    name = self._name()
    prog, init, spans = _combine(cases, name)
    uops = prog.uops()
    gs, ls = cases[0].launch
    # the reference first: its results are what the target must match
    if all(c.expected is not None for c in cases):
      wants, ref_err = [c.expected() for c in cases], None  # type: ignore[misc]
    else:
      assert not any(c.expected is not None for c in cases), "a batch mixes cases with and without the PYTHON reference"
      wants, ref_err = self._reference(name, uops, init, spans, gs, ls)
    stage, src = "render", None
    try:
      src = self.target.renderer.render(name, uops)
      stage = "compile"
      lib = self.target.compiler.compile_cached(src)
      outs = None
      if not self.target.compile_only:
        stage = "run"
        outs, _ = self.target.execute(name, lib, init, gs, ls)
    except Exception as e:
      if len(cases) > 1:  # bisect: pin the failure on the cases that cause it
        mid = len(cases) // 2
        self._run_chunk(group, cases[:mid])
        self._run_chunk(group, cases[mid:])
        return
      err = f"{stage} failed: {one_line(e, 3000)}"
      self.results[cases[0].key] = CaseResult(cases[0], error=err, ref_error=ref_err, want=wants[0], src=src)
      return
    for c, (a, b), w in zip(cases, spans, wants):
      self.results[c.key] = CaseResult(c, got=outs[a:b] if outs is not None else None, want=w, ref_error=ref_err, src=src, batch_size=len(cases))

def check_result(res: CaseResult, target: Target) -> None:
  """The assertion every batched test ends with: the case rendered, compiled and (unless compile-only) matched."""
  if res.error is not None: raise AssertionError(f"{res.case.key}: {res.error}")
  if res.ref_error is not None: raise AssertionError(f"{res.case.key}: {res.ref_error}")
  if target.compile_only: return
  assert res.got is not None and res.want is not None
  res.case.check(res.got, res.want)

def np_zeros(dt: DType, n: int) -> np.ndarray:
  from tinycore_conformance.values import storage_np
  return np.zeros(n, dtype=storage_np(dt))
