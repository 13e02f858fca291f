"""A one-kernel schedule the cache gives again runs from its plan (engine/realize.py `_run_plan`): no schedule items,
the runner of its structure and opt mode. Graphs that differ in one place must never share a plan; capturing,
DEBUG output and the opt mode see every kernel as before. Values are checked against numpy."""
import numpy as np
import pytest
from tinycore import Context, GlobalCounters, Tensor, TinyJit, Variable
from tinycore.engine import realize
from tinycore.engine.schedule import CachedSchedule

RNG = np.random.default_rng(7)
A, B = RNG.standard_normal((4, 6)).astype(np.float32), RNG.standard_normal((4, 6)).astype(np.float32)
IA = RNG.integers(-20, 20, (4, 6)).astype(np.int32)

@pytest.fixture
def no_items(monkeypatch):
  """After this, a schedule from the cache that is made into items fails the test (what the plan avoids)."""
  def fail(self): raise AssertionError("a cached one-kernel schedule was made into items")
  return lambda: monkeypatch.setattr(CachedSchedule, "items", fail)

def test_repeated_op_runs_from_its_plan(device, no_items):
  a, b = Tensor(A).realize(), Tensor(B).realize()
  for _ in range(2): (a + b).realize()  # the first builds the schedule, the second runs from the cache and stores the plan
  no_items()
  for _ in range(3):
    GlobalCounters.reset()
    np.testing.assert_allclose((a + b).realize().numpy(), A + B, rtol=1e-6)
    assert GlobalCounters.kernel_count == 1 and GlobalCounters.global_mem == 3 * A.nbytes

# one-kernel graphs, each different from the one before in one place: the op, the dtype, a view of a source, the
# shape, which buffer is read twice, a lifted constant's value
CASES = [
  (lambda a, b, i: a + b, lambda a, b, i: A + B),
  (lambda a, b, i: a * b, lambda a, b, i: A * B),
  (lambda a, b, i: i + i, lambda a, b, i: IA + IA),
  (lambda a, b, i: a.flip(0) + b, lambda a, b, i: A[::-1] + B),
  (lambda a, b, i: a[1:] + b[1:], lambda a, b, i: A[1:] + B[1:]),
  (lambda a, b, i: a[:3] + b[1:], lambda a, b, i: A[:3] + B[1:]),
  (lambda a, b, i: a + a, lambda a, b, i: A + A),
  (lambda a, b, i: a * 0.37, lambda a, b, i: A * np.float32(0.37)),
  (lambda a, b, i: a * 0.42, lambda a, b, i: A * np.float32(0.42)),
  (lambda a, b, i: a.sum(1), lambda a, b, i: A.sum(1)),
  (lambda a, b, i: a.sum(0), lambda a, b, i: A.sum(0)),
]

def test_graphs_differing_in_one_place_do_not_share_a_plan(device):
  a, b, i = Tensor(A).realize(), Tensor(B).realize(), Tensor(IA).realize()
  for _ in range(3):  # rounds 2 and 3 run from the plans, interleaved
    for ours, ref in CASES: np.testing.assert_allclose(ours(a, b, i).realize().numpy(), ref(A, B, IA), rtol=1e-5, atol=1e-6)
  # new buffers of the same structure: the plan takes its buffers from the new graph
  a2, b2 = Tensor(B).realize(), Tensor(A).realize()
  np.testing.assert_allclose((a2 + b2).realize().numpy(), B + A, rtol=1e-6)

def test_symbolic_op_from_its_plan(device):
  x, v = Tensor(A.reshape(-1)).realize(), Variable("n", 1, 24)
  for n in (3, 7, 3, 24, 1):
    np.testing.assert_allclose((x[:v.bind(n)] * 2).realize().numpy(), A.reshape(-1)[:n] * 2, rtol=1e-6)

def test_capture_records_a_kernel_that_has_a_plan(device):
  a = Tensor(A).realize()
  for _ in range(3): (a * 3).realize()  # the plan exists
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x * 3).realize()
  for _ in range(3): f(a)
  assert len(f.jit_cache) == 1
  a2 = Tensor(B).realize()
  np.testing.assert_allclose(f(a2).numpy(), B * 3, rtol=1e-6)

def test_debug_prints_a_kernel_that_has_a_plan(capsys):
  a = Tensor(A).realize()
  for _ in range(3): (a - 5).realize()
  capsys.readouterr()
  with Context(DEBUG=2): (a - 5).realize()
  assert "***" in capsys.readouterr().out

def test_plan_follows_the_opt_mode(monkeypatch):
  a, b = Tensor(A).realize(), Tensor(B).realize()
  ran, inner = [], realize.CompiledRunner.__call__
  def spy(self, *args, **kw):
    ran.append(self)
    return inner(self, *args, **kw)
  monkeypatch.setattr(realize.CompiledRunner, "__call__", spy)
  # (a plain kernel launches from the plan through its runner's `launch`: spied on too, in the runners made before and after)
  def spy_launch(r):
    inner_launch = r.launch
    def launch(*bufs):
      ran.append(r)
      return inner_launch(*bufs)
    return launch
  init = realize.CompiledRunner.__init__
  def spy_init(self, *args, **kw):
    init(self, *args, **kw)
    if self.launch is not None: self.launch = spy_launch(self)
  monkeypatch.setattr(realize.CompiledRunner, "__init__", spy_init)
  for r in realize.method_cache.values():
    if r.launch is not None: monkeypatch.setattr(r, "launch", spy_launch(r))
  for noopt in (0, 1, 0, 1, 0, 1):
    with Context(NOOPT=noopt):
      ran.clear()
      np.testing.assert_allclose((a * b + 1).realize().numpy(), A * B + 1, rtol=1e-6)
      mine = {id(r) for k, r in realize.method_cache.items() if k[3] == noopt}
      assert ran and id(ran[0]) in mine, "a kernel ran with a runner of the other opt mode"
