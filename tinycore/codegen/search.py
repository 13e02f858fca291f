"""BEAM search: try optimizations on a kernel, compile and time every candidate on the device, keep the fastest.

`BEAM=n` runs it for every kernel a program compiles: starting from the unoptimized kernel, each round applies every
action (one OptOp on one axis with one amount) to each of the n best kernels so far, compiles the candidates in
parallel, times them on buffers of the right sizes, and keeps the n fastest. It stops when a round finds nothing
faster (or after BEAM_MAX_ROUNDS rounds). The heuristic's choice starts in the beam too, so BEAM is never slower than
the hand-coded optimizations (up to the noise of timing). The chosen optimizations are cached on disk by (device,
renderer's cachekey, AST, n): a kernel is searched once per target (CLANG: per march and CPU model).

DEBUG=2 prints one line per round and the result against the heuristic:
    beam2  : UPCAST(1,16) UPCAST(0,8) UNROLL(0,4) TILE(0,16) :  10.51 ms  < hc : ... : 14.20 ms"""
from __future__ import annotations
import concurrent.futures, os, pickle, time
from typing import Any
import numpy as np
from tinycore.backend import CompileError
from tinycore.device import Buffer, Device
from tinycore.dtype import PtrDType, to_np_dtype
from tinycore.helpers import DEBUG, VIZ, diskcache_get, diskcache_put, getenv, prod, tqdm
from tinycore.viz import record as vizrecord
from tinycore.ops import Ops
from tinycore.uop.uop import UOp, pretty, sym_infer
from tinycore.codegen.kernel import Kernel, Opt, OptOps, KernelOptError
from tinycore.codegen.heuristic import hand_coded_optimizations
from tinycore.codegen.program import get_program

def _actions() -> list[Opt]:
  acts: list[Opt] = []
  for axis in range(6):
    acts += [Opt(OptOps.UPCAST, axis, amt) for amt in (0, 2, 3, 4, 8, 16)]
    acts += [Opt(OptOps.UNROLL, axis, amt) for amt in (0, 2, 3, 4, 8, 16)]
    acts += [Opt(OptOps.TILE, axis, amt) for amt in (4, 8, 16, 32)]
    acts += [Opt(OptOps.LOCAL, axis, amt) for amt in (2, 4, 8, 16, 32)]
    acts += [Opt(OptOps.GROUP, axis, amt) for amt in (4, 8, 16, 32)]
  return acts
ACTIONS = _actions()
MAX_ROUNDS = getenv("BEAM_MAX_ROUNDS", 8)
# candidates with more lanes than this (upcast times unrolled, as in tinygrad's BEAM_UPCAST_MAX) are not tried: the
# lowerer's cost grows with the lanes (a 1024-lane kernel takes ~0.3 s to lower) and they are rarely the fastest
UPCAST_MAX = getenv("BEAM_UPCAST_MAX", 256)

def _lanes(k: Kernel) -> int: return prod(k.full_shape[i] for i in k.dims("U") + k.dims("u"))
def _state(k: Kernel) -> tuple:
  """What the program of a kernel depends on: two kernels reached by the same opts in another order lower alike."""
  return (k.full_shape, tuple(k.kinds), tuple(k.sts))

def _buffer_sizes(ast: UOp) -> dict[int, tuple[Any, int]]:
  """For each buffer argument of the kernel: (dtype, number of elements it must hold), from the views that index it."""
  sizes: dict[int, tuple[Any, int]] = {}
  for u in ast.toposort():
    if u.op in (Ops.LOAD, Ops.STORE) and u.src[0].op is Ops.DEFINE_GLOBAL:
      g, st = u.src[0], u.src[1].arg
      idx, _ = st.to_indexed_uops()
      n = int(idx.vmax) + 1 if isinstance(idx.vmax, int) else 1
      dt = g.dtype.base if isinstance(g.dtype, PtrDType) else g.dtype
      sizes[g.arg] = (dt, max(n, sizes.get(g.arg, (dt, 1))[1]))
  return sizes

class _Bench:
  """Buffers for one AST on one device, and timing of compiled candidates on them."""
  def __init__(self, ast: UOp, device: str):
    self.device, self.dev = device, Device[device]
    sizes = _buffer_sizes(ast)
    self.bufs = []
    for i in range(max(sizes) + 1 if sizes else 0):
      dt, n = sizes.get(i, (None, 1))
      b = Buffer(device, n, dt).allocate()
      # ones: no integer division by zero, and values that stay finite
      b.copyin(memoryview(np.ones(n, dtype=np.float32 if dt is None else to_np_dtype(dt)).tobytes()))
      self.bufs.append(b)

  def time(self, p: Any, lib: bytes, runs: int) -> float:
    prg = self.dev.program(p.device, p.name, lib)
    # every Variable at its largest value (what _buffer_sizes sized the buffers for); the Variables live in the
    # ShapeTrackers of the views, not in the AST's own nodes, so they are taken from the program and its launch sizes
    launch = [x for x in [*p.global_size, *(p.local_size or ())] if isinstance(x, UOp)]
    var_vals = {v: v.arg[2] for v in [*p.vars, *(v for x in launch for v in x.vars())]}
    vals = [var_vals[v] for v in p.vars]
    gs = [sym_infer(x, var_vals) for x in p.global_size]
    ls = [sym_infer(x, var_vals) for x in p.local_size] if p.local_size is not None else None
    raw = [b._buf for b in self.bufs]
    best = float("inf")
    for _ in range(runs):
      t = prg(*raw, global_size=gs, local_size=ls, vals=vals, wait=True)
      best = min(best, t if t is not None else float("inf"))
    return best

def _cache_key(k: Kernel, amount: int) -> tuple[str, str]:
  # the renderer's cachekey names the target (CLANG: the march and the CPU model): a choice timed on one CPU is not reused on another
  return f"beam_{k.renderer.device}", f"{amount}:{getattr(k.renderer, 'cachekey', '')}:{pretty(k.ast)}"

def _fmt(opts: list[Opt]) -> str: return " ".join(f"{o.op.name}({o.axis},{o.amount})" for o in opts) or "-"

def beam_search(k: Kernel, amount: int) -> Kernel:
  """The fastest kernel found (see the module docstring); k itself is not changed."""
  table, key = _cache_key(k, amount)
  if (hit := diskcache_get(table, key)) is not None:
    try: return k.copy().apply_opts([Opt(OptOps[o], a, n) for o, a, n in pickle.loads(hit)])
    except (KernelOptError, KeyError, pickle.UnpicklingError): pass  # optimizations from an older version: search again
  st = time.perf_counter()
  bench = _Bench(k.ast, k.renderer.device)
  dev = bench.dev
  seen: set[str] = set()
  seen_states: set[tuple] = set()
  # progress on stderr once a search takes over 2 s: candidates compiled of those found so far, the best time, the ETA
  bar = tqdm(total=0, desc=f"BEAM={amount} {k.name}", unit="cand", delay=2, every=50)

  def measure(kernels: list[Kernel], runs: int) -> list[tuple[float, Kernel, Any, bytes]]:
    """Compile (in parallel) and time the kernels not seen before: (seconds, kernel, program, binary), fastest first."""
    progs = []
    for kk in kernels:
      # the same kernel reached another way is not lowered again (lowering is most of a search's time)
      if (state := _state(kk)) in seen_states: continue
      seen_states.add(state)
      try: p = get_program(kk, bench.device)
      except (KernelOptError, NotImplementedError, ValueError, AssertionError) as e:
        if DEBUG >= 3: print(f"beam: {_fmt(kk.applied_opts)} does not lower: {type(e).__name__}: {e}")
        continue
      if p.src in seen: continue
      seen.add(p.src)
      progs.append((kk, p))
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
      bar.total += len(progs)
      libs = []
      for lib in ex.map(lambda kp: _compile(dev, kp[1].src), progs):  # (the progress counts compiles: they take the time)
        libs.append(lib)
        bar.update(1)
    out = [(bench.time(p, lib, runs), kk, p, lib) for (kk, p), lib in zip(progs, libs) if lib is not None]
    if VIZ: vizrecord.candidates([(t, kk) for t, kk, _, _ in out])
    return sorted(out, key=lambda x: x[0])
  def again(timed: list, n: int) -> list:
    """The fastest n timed again (best of 3), to keep one lucky run out of the choice."""
    top = [(min(t, bench.time(p, lib, 3)), kk, p, lib) for t, kk, p, lib in timed[:n]]
    return sorted(top + timed[n:], key=lambda x: x[0])

  hc = hand_coded_optimizations(k.copy())
  hc_res = measure([hc], 3)
  seen.clear()  # the heuristic's kernel may also be reached by the search
  seen_states.clear()
  hc_time = hc_res[0][0] if hc_res else float("inf")
  # the search starts from the unoptimized kernel and from the heuristic's choice (refining it is often quickest)
  start = sorted(measure([k.copy()], 3) + hc_res, key=lambda x: x[0])
  beam = [(t, kk) for t, kk, _, _ in start[:max(amount, 2)]]
  best = start[0] if start else (float("inf"), k.copy(), None, None)
  rounds = 0
  while beam and rounds < MAX_ROUNDS:
    rounds += 1
    cands = []
    for _, kb in beam:
      for a in ACTIONS:
        kk = kb.copy()
        try: kk.apply_opt(a)
        except KernelOptError: continue
        if _lanes(kk) <= UPCAST_MAX: cands.append(kk)
    timed = again(measure(cands, 1), amount * 2)
    if DEBUG >= 2: print(f"  {time.perf_counter() - st:6.2f}s: {timed[0][0]*1e6 if timed else float('nan'):10.2f} us from {len(cands):4d} "
                         f"candidates  {timed[0][1].name if timed else ''}")
    if timed: bar.set_postfix_str(f"round {rounds}, best {min(best[0], timed[0][0]) * 1e6:.1f} us", refresh=False)
    if not timed or timed[0][0] >= best[0]: break
    best, beam = timed[0], [(t, kk) for t, kk, _, _ in timed[:amount]]
  if DEBUG >= 2:
    print(f"beam{amount:<3d}: {_fmt(best[1].applied_opts):60s}: {best[0]*1e6:10.2f} us  {'<' if best[0] < hc_time else '>='} "
          f"hc: {_fmt(hc.applied_opts):40s}: {hc_time*1e6:10.2f} us")
  bar.close()
  diskcache_put(table, key, pickle.dumps([(o.op.name, o.axis, o.amount) for o in best[1].applied_opts]))
  return best[1]

def _compile(dev: Any, src: str) -> bytes | None:
  try: return dev.compiler.compile(src)
  except CompileError: return None
