"""Level 5, program: launches. Global and local ids over 1-3 dimensions with odd sizes, the largest declared group, the
declared local memory, symbolic values (DEFINE_VAR, including an empty loop), many buffer arguments, buffer views as
arguments, running a program many times and several programs side by side, and timing with wait=True.
In --compile-only mode every kernel here is rendered and compiled; running it is reported as not run."""
from __future__ import annotations
import numpy as np
import pytest
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.uop.uop import UOp
from tinycore_conformance.target import Prog, execute, reference
from tinycore_conformance.repro import program_repro, readable
from tinycore_conformance.values import compare

LAYER = 5
I32 = dtypes.int32

def add(*xs: UOp) -> UOp:
  out = xs[0]
  for x in xs[1:]: out = UOp(Ops.ADD, I32, (out, x))
  return out
def mul(a: UOp, b: int | UOp) -> UOp: return UOp(Ops.MUL, I32, (a, b if isinstance(b, UOp) else Prog.i32(b)))

class Launch:
  """Build, render, compile (always) and run (unless compile-only) one program on the target and on the reference."""
  def __init__(self, target, repro, prog: Prog, bufs: list[np.ndarray], gs=(1, 1, 1), ls=(1, 1, 1), vals=()):
    self.target, self.prog, self.bufs, self.gs, self.ls, self.vals = target, prog, bufs, gs, ls, vals
    self.uops = prog.uops()
    self.src, self.lib = target.compile(prog.name, self.uops)
    repro.add(lambda: program_repro(prog.name, self.uops, bufs, target.device, target.compile_only, readable(target.renderer, self.src), gs,
                                    ls if target.renderer.has_local else None, vals))
  def run(self) -> tuple[list[np.ndarray], float | None]:
    self.target.require_runtime()
    return self.target.execute(self.prog.name, self.lib, self.bufs, self.gs, self.ls if self.target.renderer.has_local else None, self.vals)
  def reference(self) -> list[np.ndarray]:
    ref = reference()
    src = ref.renderer.render(self.prog.name, self.uops)
    return execute(ref, self.prog.name, ref.compiler.compile(src), self.bufs, self.gs, self.ls, self.vals)[0]

def ids_program(gdims: tuple[int, ...], ldims: tuple[int, ...], name: str) -> tuple[Prog, int]:
  """Each thread writes 1 + its flat global index at that index: every element written exactly once."""
  p = Prog(name)
  out = p.glob(I32)
  gid = [p.special(f"gidx{i}", s) for i, s in enumerate(gdims)]
  lid = [p.special(f"lidx{i}", s) for i, s in enumerate(ldims)]
  # per axis: global index = gid * lsize + lid; flat = x + X*(y + Y*z)
  axes = []
  for i in range(max(len(gdims), len(ldims))):
    ls = ldims[i] if i < len(ldims) else 1
    if i < len(gid) and i < len(lid): idx = add(mul(gid[i], ls), lid[i])
    else: idx = gid[i] if i < len(gid) else lid[i]
    axes.append((idx, (gdims[i] if i < len(gdims) else 1) * ls))
  flat, stride = None, 1
  for idx, sz in axes:
    term = mul(idx, stride) if stride != 1 else idx
    flat = term if flat is None else add(flat, term)
    stride *= sz
  p.store(out, flat, add(flat, Prog.i32(1)))
  return p, stride

LAUNCHES = [((7,), ()), ((3, 5, 2), ()), ((5,), (4,)), ((3, 2), (4, 3)), ((2, 3, 2), (2, 2, 2)), ((1,), (1,))]

@pytest.mark.cap("global/local ids")
@pytest.mark.parametrize("gdims,ldims", LAUNCHES, ids=[f"g{'x'.join(map(str, g))}-l{'x'.join(map(str, l)) or '1'}" for g, l in LAUNCHES])
def test_ids(target, repro, gdims, ldims):
  r = target.renderer
  target.require(r.has_local, "global and local ids (has_local)")
  if r.local_max is not None: target.require(all(s <= m for s, m in zip(ldims, r.local_max)), f"a group of {ldims}")
  p, n = ids_program(gdims, ldims, "ids")
  gs, ls = tuple(gdims) + (1,) * (3 - len(gdims)), tuple(ldims) + (1,) * (3 - len(ldims))
  la = Launch(target, repro, p, [np.full(n, -7, np.int32)], gs, ls)
  got = la.run()[0][0]
  compare(la.reference()[0], np.arange(1, n + 1, dtype=np.int32), I32, what="ids: the PYTHON reference")
  compare(got, np.arange(1, n + 1, dtype=np.int32), I32, what=f"global {gs} x local {ls}: element i must hold i+1")

@pytest.mark.cap("largest declared group")
def test_local_max(target, repro):
  r = target.renderer
  target.require(r.has_local and r.local_max is not None, "local ids with a local_max")
  L = min(r.local_max[0], 1024)
  p, n = ids_program((2,), (L,), "local_max")
  la = Launch(target, repro, p, [np.full(n, -7, np.int32)], (2, 1, 1), (L, 1, 1))
  compare(la.run()[0][0], np.arange(1, n + 1, dtype=np.int32), I32, what=f"2 groups of local_max[0]={L} threads")

@pytest.mark.cap("declared local memory")
def test_shared_max(target, repro):
  """A group fills the whole declared local memory (shared_max bytes of int32), synchronizes, and reads it back reversed."""
  r = target.renderer
  target.require(r.has_local and r.has_shared, "local memory (has_shared)")
  L = min(64, r.local_max[0] if r.local_max else 64)
  n = min(r.shared_max, 1 << 16) // 4 // L * L
  per = n // L
  p = Prog("shared_max")
  out, inp = p.glob(I32), p.glob(I32)
  lid = p.special("lidx0", L)
  tmp = p.local("big", I32, n)
  stores = []
  for k in range(per):
    idx = add(mul(lid, per), Prog.i32(k)) if k else mul(lid, per)
    stores.append(p.store(tmp, idx, Prog.load(inp, idx)))
  b = p.barrier(*stores)
  for k in range(per):
    idx = add(mul(lid, per), Prog.i32(k)) if k else mul(lid, per)
    rev = add(Prog.i32(n - 1), mul(idx, -1))
    p.store(out, idx, Prog.load(tmp, rev, barrier=b))
  x = np.arange(n, dtype=np.int32) * 3 + 1
  la = Launch(target, repro, p, [np.zeros(n, np.int32), x], (1, 1, 1), (L, 1, 1))
  compare(la.run()[0][0], x[::-1], I32, what=f"{n * 4} bytes of local memory (shared_max={r.shared_max})")

def var_program(name: str, listed: str = "mn") -> Prog:
  """out[i] = in[i] * 2 + m for i < n, with n and m symbolic (DEFINE_VAR), n possibly 0. A launch passes `vals` in the
  order of the variables sorted by their arg (name first: m, n), as the core's ProgramSpec.vars lists them; `listed` is the
  order the program lists the DEFINE_VARs in."""
  p = Prog(name)
  out, inp = p.glob(I32), p.glob(I32)
  vs = {k: p.var(k, *{"n": (0, 64), "m": (-100, 100)}[k]) for k in listed}
  n, m = vs["n"], vs["m"]
  r = p.loop(n)
  p.store(out, r, add(mul(Prog.load(inp, r), 2), m))
  p.end(r)
  return p

@pytest.mark.cap("symbolic values")
@pytest.mark.parametrize("n,m", [(64, 0), (17, -5), (1, 100), (0, 3)])
def test_symbolic(target, repro, n, m):
  x = np.arange(64, dtype=np.int32) - 20
  init = np.full(64, -1, np.int32)
  la = Launch(target, repro, var_program("symbolic"), [init, x], vals=(m, n))
  got = la.run()[0][0]
  want = init.copy()
  want[:n] = x[:n] * 2 + m
  compare(got, want, I32, what=f"vals n={n} m={m}: out[i] = in[i]*2+m for i < n, untouched after")

@pytest.mark.cap("DEFINE_VAR order")
def test_var_order(target, repro, request):
  """The program lists n before m; vals still come sorted by name (m, n)."""
  x = np.arange(64, dtype=np.int32) - 20
  init = np.full(64, -1, np.int32)
  la = Launch(target, repro, var_program("var_order", listed="nm"), [init, x], vals=(7, 20))
  want = init.copy()
  want[:20] = x[:20] * 2 + 7
  compare(la.run()[0][0], want, I32, what="DEFINE_VARs listed n, m; vals=(m=7, n=20)")

@pytest.mark.cap("many buffers")
@pytest.mark.parametrize("nbufs", [8, 30])
def test_many_buffers(target, repro, nbufs):
  """nbufs-1 inputs of alternating int32 and float32 summed into one float32 output (30 is the most Metal allows)."""
  p = Prog("many_buffers")
  out = p.glob(dtypes.float32)
  ins = [p.glob(dtypes.int32 if i % 2 else dtypes.float32) for i in range(nbufs - 1)]
  r = p.loop(16)
  acc = None
  for g in ins:
    v = Prog.load(g, r)
    v = UOp(Ops.CAST, dtypes.float32, (v,)) if g.dtype.base == dtypes.int32 else v
    v = UOp(Ops.MUL, dtypes.float32, (v, Prog.const(dtypes.float32, float(g.arg + 1))))
    acc = v if acc is None else UOp(Ops.ADD, dtypes.float32, (acc, v))
  p.store(out, r, acc)
  p.end(r)
  arrs = [(np.arange(16) + i).astype(np.int32 if i % 2 else np.float32) for i in range(nbufs - 1)]
  la = Launch(target, repro, p, [np.zeros(16, np.float32)] + arrs)
  want = sum(a.astype(np.float64) * (i + 2) for i, a in enumerate(arrs))
  compare(la.run()[0][0], want.astype(np.float32), dtypes.float32, "ulp", 2, what=f"{nbufs} buffer arguments")

@pytest.mark.cap("view as argument")
def test_view_argument(target, repro):
  """A buffer view (Allocator._offset) passed to a kernel reads and writes its part of the base."""
  target.require_runtime()
  alloc = target.allocator
  target.require(hasattr(alloc, "_offset"), "buffer views (Allocator._offset)")
  p = Prog("view_arg")
  out, inp = p.glob(I32), p.glob(I32)
  r = p.loop(256)
  p.store(out, r, add(Prog.load(inp, r), Prog.i32(1)))
  p.end(r)
  src, lib = target.compile(p.name, p.uops())
  base = alloc.alloc(4096 * 3)
  try:
    x = np.arange(3 * 1024, dtype=np.int32)
    alloc.copyin(base, memoryview(x.view(np.uint8)))
    vin, vout = alloc._offset(base, 1024, 4096), alloc._offset(base, 1024, 8192)
    target.program(target.device, p.name, lib)(vout, vin, global_size=(1, 1, 1), local_size=target.local_size, vals=(), wait=True)
    got = np.zeros_like(x)
    alloc.copyout(memoryview(got.view(np.uint8)), base)
  finally: alloc.free(base, 4096 * 3)
  want = x.copy()
  want[2048:2048 + 256] = x[1024:1024 + 256] + 1
  compare(got, want, I32, what="a kernel reading the view at byte 4096 and writing the view at byte 8192 of one buffer")

def _simple(name: str, k: int) -> Prog:
  p = Prog(name)
  out, inp = p.glob(dtypes.float32), p.glob(dtypes.float32)
  r = p.loop(32)
  p.store(out, r, UOp(Ops.MUL, dtypes.float32, (Prog.load(inp, r), Prog.const(dtypes.float32, float(k)))))
  p.end(r)
  return p

@pytest.mark.cap("programs run many times, side by side")
def test_reuse(target, repro):
  """Two programs loaded at once, each run several times on fresh buffers, interleaved."""
  p2, p3 = _simple("times2", 2), _simple("times3", 3)
  l2, l3 = Launch(target, repro, p2, []), Launch(target, repro, p3, [])
  target.require_runtime()
  a = target.allocator
  prgs = [(2, target.program(target.device, p2.name, l2.lib)), (3, target.program(target.device, p3.name, l3.lib))]
  for it in range(4):
    for k, prg in prgs:
      x = np.arange(32, dtype=np.float32) + it
      hi, ho = a.alloc(128), a.alloc(128)
      a.copyin(hi, memoryview(x.view(np.uint8)))
      prg(ho, hi, global_size=(1, 1, 1), local_size=target.local_size, vals=(), wait=True)
      got = np.zeros(32, np.float32)
      a.copyout(memoryview(got.view(np.uint8)), ho)
      a.free(hi, 128)
      a.free(ho, 128)
      compare(got, x * k, dtypes.float32, what=f"run {it} of the times{k} program")

@pytest.mark.cap("timing (wait=True)")
def test_timing(target, repro):
  """wait=True blocks until the kernel is done and returns its run time in seconds (a float >= 0)."""
  p = _simple("timed", 5)
  la = Launch(target, repro, p, [np.zeros(32, np.float32), np.arange(32, dtype=np.float32)])
  (out, _), tm = la.run()
  assert isinstance(tm, float) and tm >= 0 and tm < 60, f"wait=True must return the run time in seconds as a float, got {tm!r}"
  compare(out, np.arange(32, dtype=np.float32) * 5, dtypes.float32, what="the result right after a wait=True run")

@pytest.mark.cap("no wait, then synchronize")
def test_async(target, repro):
  """wait=False may return before the kernel is done; allocator.synchronize() (or a copyout) then sees the result."""
  p = _simple("nowait", 7)
  la = Launch(target, repro, p, [])
  target.require_runtime()
  a = target.allocator
  x = np.arange(32, dtype=np.float32)
  hi, ho = a.alloc(128), a.alloc(128)
  a.copyin(hi, memoryview(x.view(np.uint8)))
  target.program(target.device, p.name, la.lib)(ho, hi, global_size=(1, 1, 1), local_size=target.local_size, vals=(), wait=False)
  a.synchronize()
  got = np.zeros(32, np.float32)
  a.copyout(memoryview(got.view(np.uint8)), ho)
  a.free(hi, 128)
  a.free(ho, 128)
  compare(got, x * 7, dtypes.float32, what="after wait=False and synchronize()")
