"""Kernel optimizations: every OptOp changes only speed, never results (exact, on integer-valued data)."""
import numpy as np
import pytest
from tinycore import Tensor, Device, Context
from tinycore.codegen import Kernel, Opt, OptOps, KernelOptError, get_program
from tinycore.engine.realize import CompiledRunner
from tinycore.ops import Ops

def ints(*shape, seed=0) -> np.ndarray: return np.random.default_rng(seed).integers(-4, 5, shape).astype(np.float32)

CASES = {
  "matmul": lambda a, b: a @ b,
  "conv": lambda a, b: a.reshape(2, 2, 8, 8).conv2d(b.reshape(-1)[:72].reshape(4, 2, 3, 3)),
  "sum_rows": lambda a, b: (a * 2 + b).sum(1),
  "full_sum": lambda a, b: (a * b).sum(),
  "elementwise": lambda a, b: (a * b + 1).relu(),
}

def run_with(ast, opts, bufs, device) -> np.ndarray:
  k = Kernel(ast, Device[device].renderer)
  for o in opts: k.apply_opt(o)
  runner = CompiledRunner(get_program(k, device))
  out = bufs[0]
  runner(list(bufs), {})
  return out.numpy().copy()

@pytest.mark.parametrize("case", CASES)
def test_noopt_and_heuristics_agree(device, case):
  a, b = Tensor(ints(16, 16)), Tensor(ints(16, 16, seed=1))
  with Context(NOOPT=1): plain = CASES[case](a, b).numpy()
  with Context(NOOPT=0): opt = CASES[case](Tensor(a.numpy()), Tensor(b.numpy())).numpy()
  np.testing.assert_array_equal(plain, opt)

OPTS = [[Opt(OptOps.UPCAST, 0, 4)], [Opt(OptOps.UNROLL, 0, 4)], [Opt(OptOps.LOCAL, 0, 4)], [Opt(OptOps.GROUP, 0, 4)],
        [Opt(OptOps.UPCAST, 0, 2), Opt(OptOps.UNROLL, 0, 2), Opt(OptOps.LOCAL, 0, 2)], [Opt(OptOps.GROUP, 0, 8), Opt(OptOps.LOCAL, 0, 2)]]

@pytest.mark.parametrize("opts", OPTS, ids=str)
def test_each_optop_keeps_results(device, opts):
  a, b = Tensor(ints(16, 32)).realize(), Tensor(ints(32, 8, seed=1)).realize()
  out = a @ b
  si = [x for x in out.schedule() if x.ast.op is Ops.SINK][-1]
  for buf in si.bufs: buf.ensure_allocated()
  ref = run_with(si.ast, [], si.bufs, device)
  renderer = Device[device].renderer
  if any(o.op in (OptOps.LOCAL, OptOps.GROUP) for o in opts) and not renderer.has_local:
    with pytest.raises(KernelOptError, match="local"): run_with(si.ast, opts, si.bufs, device)
    return
  np.testing.assert_array_equal(run_with(si.ast, opts, si.bufs, device), ref)
  np.testing.assert_array_equal(ref.reshape(16, 8), a.numpy() @ b.numpy())

def test_bad_opt_is_refused():
  a = Tensor(ints(6, 6))
  si = [x for x in (a * 2).schedule() if x.ast.op is Ops.SINK][-1]
  k = Kernel(si.ast, Device["CLANG"].renderer)
  with pytest.raises(KernelOptError, match="cannot split"): k.apply_opt(Opt(OptOps.UPCAST, 0, 5))
  with pytest.raises(KernelOptError, match="no such axis"): k.apply_opt(Opt(OptOps.UNROLL, 0, 2))

@pytest.mark.parametrize("reduce", [False, True])
def test_broadcast_window_views_collapse(reduce):
  # a pooled gradient broadcast over 2x2 windows, reshaped to the input's 6x6 (two views): the kernel splits its dims
  # to the windows' so every view is one, and computes the same
  g, x = ints(2, 3, 3, 1, 3, 1), ints(2, 3, 6, 6, seed=1)
  up = Tensor(g).expand(2, 3, 3, 2, 3, 2).reshape(2, 3, 6, 6)
  out = (up * Tensor(x)).sum(1) if reduce else up * Tensor(x)
  si = [s for s in out.schedule() if s.ast.op is Ops.SINK][-1]
  k = Kernel(si.ast, Device["CLANG"].renderer)
  assert all(len(st.views) == 1 for st in k.sts), k.sts
  ref = np.broadcast_to(g, (2, 3, 3, 2, 3, 2)).reshape(2, 3, 6, 6) * x
  np.testing.assert_array_equal(out.numpy(), ref.sum(1) if reduce else ref)

def test_buffer_whose_loads_simplify_away_keeps_its_parameter(device):
  # no single view is empty, but lowering proves the load never valid (the shrink only reaches the lower view's padding):
  # the buffer's parameter stays in the kernel's signature, so the buffers after it arrive where the kernel reads them
  an, cn = np.array([1., 2, 3, 4], np.float32), np.array([[10., 20.]], np.float32)
  a, c = Tensor(an).realize(), Tensor(cn).realize()
  out = a.pad(((0, 2),)).reshape(2, 3)[1:2, 1:3] + c
  (si,) = out.schedule()
  assert len(si.bufs) == 3 and sum(u.op is Ops.DEFINE_GLOBAL for u in si.ast.toposort()) == 3
  p = get_program(Kernel(si.ast, Device[device].renderer), device)
  assert sorted(u.arg for u in p.uops if u.op is Ops.DEFINE_GLOBAL) == [0, 1, 2]
  np.testing.assert_array_equal(out.numpy(), np.pad(an, (0, 2)).reshape(2, 3)[1:2, 1:3] + cn)

def test_strided_lanes_give_the_lane_by_lane_program(monkeypatch):
  # a transposed read along the vector dim loads one value per lane, each index the lane 0 one moved by the stride
  # (built directly, not worked out again per lane; the kernel as the heuristics optimize it, on CLANG: vector lanes):
  # the same program as lane by lane, and numpy's values
  from tinycore.codegen.lowerer import Lowerer
  from tinycore.engine.realize import get_kernel
  device, a = "CLANG", np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
  out = (Tensor(a, device=device).T * 2 + 1).contiguous()
  progs, hits, strided = {}, [], Lowerer._strided_lanes
  monkeypatch.setattr(Lowerer, "_strided_lanes", lambda self, *a: (hits.append(1), strided(self, *a))[1])
  for how in ("strided", "lane by lane"):
    if how == "lane by lane": monkeypatch.setattr(Lowerer, "_strided_lanes", lambda self, u, consts, idx, stride: self._per_lane(u, consts))
    with Context(NOOPT=0):  # (CI's NOOPT=1 pass: without the heuristics there are no vector lanes to build)
      progs[how] = [get_program(get_kernel(si.ast, Device[device].renderer), device).src for si in out.schedule() if si.ast.op is Ops.SINK]
  assert progs["strided"] == progs["lane by lane"] and hits
  np.testing.assert_allclose(out.numpy(), a.T.astype(np.float64) * 2 + 1, rtol=1e-6)

def test_lane_by_lane_stores_in_one_loop(monkeypatch):
  # a conv into (bs, cout, h, w) with its output channels as the vector lanes stores lane by lane (16 values 196 apart),
  # and reads its epilogue (a residual, then a ReLU) lane by lane too: with the renderer's lane_loops, one loop over the
  # lanes holds every store (a vector accumulator read at the loop's lane), not 16 stores and loads per accumulator;
  # the values those of the unrolled program (within ulps) and torch's
  torch = pytest.importorskip("torch")
  from tinycore.engine.realize import get_kernel, run_schedule
  device, r = "CLANG", Device["CLANG"].renderer
  if not r.lane_loops or max(r.vector_widths) == 1: pytest.skip("a renderer with vectors and lane loops")
  rng = np.random.default_rng(0)
  c = 2 * max(r.vector_widths)
  xn, wn, rn = (rng.standard_normal(s).astype(np.float32) for s in ((2, 8, 14, 14), (c, 8, 3, 3), (2, c, 14, 14)))
  with Context(NOOPT=0):
    sched = (Tensor(xn).conv2d(Tensor(wn), padding=1) + Tensor(rn)).relu().schedule()
    run_schedule(sched[:-1])
    si = sched[-1]
    for b in si.bufs: b.ensure_allocated()
    out = {}
    for loops in (True, False):
      monkeypatch.setattr(r, "lane_loops", loops)
      p = get_program(get_kernel(si.ast, r), device)
      CompiledRunner(p)(list(si.bufs), {})
      out[loops] = (p, si.bufs[0].numpy().copy())
  (looped, a), (unrolled, b) = out[True], out[False]
  stores = [sum(u.op is Ops.STORE for u in p.uops) for p in (looped, unrolled)]
  assert stores[1] == max(r.vector_widths) * stores[0] and any(u.op is Ops.GEP and len(u.src) == 2 for u in looped.uops), stores
  # the lane loop comes after the reduce loops, not inside them (there it would store every partial sum, the last one right)
  lane = next(u.src[1] for u in looped.uops if u.op is Ops.GEP and len(u.src) == 2)
  reduce_loops, opened = {x for u in looped.uops if u.op is Ops.DEFINE_ACC for x in u.src[1:]}, []
  for u in looped.uops:
    if u.op is Ops.RANGE: assert u is not lane or not reduce_loops & set(opened), looped.src
    if u.op is Ops.RANGE: opened.append(u)
    if u.op is Ops.ENDRANGE: opened.pop()
  # the same sums, but GCC contracts the unchanged reduce loop's multiply-adds differently in the two programs: ulps apart
  np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
  ref = torch.nn.functional.conv2d(torch.tensor(xn, dtype=torch.float64), torch.tensor(wn, dtype=torch.float64), padding=1)
  np.testing.assert_allclose(a.reshape(ref.shape), (ref + torch.tensor(rn, dtype=torch.float64)).relu().numpy(), rtol=1e-4, atol=1e-4)
