"""Buffer lifetimes (tinycore/engine/memory.py): a realize frees its intermediate buffers after their last reader, a
TinyJit capture packs its private buffers into an arena. The planned buffers compute what unplanned ones do (a train
step's losses bit for bit, with and without the JIT), no two buffers whose lifetimes overlap share a byte, buffers held
outside the step keep their memory, and the bytes allocated drop by what the lifetimes predict. MEMPLAN=0 turns it off."""
import os, sys
import numpy as np
import pytest
from tinycore import Tensor, Device, TinyJit, Context, GlobalCounters, nn
from tinycore.engine import realize
from tinycore.engine.memory import OFFSET_ALIGN

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.models import gpt  # noqa: E402

@pytest.fixture(autouse=True)
def _clang():
  old = Device.DEFAULT
  Device.DEFAULT = "CLANG"
  yield
  Device.DEFAULT = old

RNG = np.random.default_rng(0)
N = 64  # a (N, N) float32 buffer is 16 KiB: a multiple of the arena's alignment
NB = N * N * 4

def _chain(x: Tensor, w: Tensor, n: int) -> Tensor:
  for _ in range(n): x = (x @ w).relu()  # each matmul its own kernel, its input an intermediate buffer
  return x

def _chain_ref(x: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
  x, w = x.astype(np.float64), w.astype(np.float64)
  for _ in range(n): x = np.maximum(x @ w, 0)
  return x

class _PeakBytes:
  """The most bytes of live buffers (GlobalCounters.mem_used) seen when a kernel starts, its buffers allocated."""
  def __init__(self, monkeypatch: pytest.MonkeyPatch):
    self.peak, inner = 0, realize.exec_runner
    def spy(*a, **k):
      self.peak = max(self.peak, GlobalCounters.mem_used)
      return inner(*a, **k)
    monkeypatch.setattr(realize, "exec_runner", spy)

@pytest.mark.parametrize("plan", [1, 0])
def test_eager_frees_after_last_reader(monkeypatch, plan):
  """8 matmuls in one realize: freed after its reader, at most two intermediates are alive at once (8 without). (The
  inputs take no gradient: a graph kept for autograd holds its intermediate tensors, and so their buffers.)"""
  x, w = RNG.standard_normal((N, N)).astype(np.float32), (RNG.standard_normal((N, N)) / N).astype(np.float32)
  tx, tw = Tensor(x, requires_grad=False).realize(), Tensor(w, requires_grad=False).realize()
  spy = _PeakBytes(monkeypatch)
  with Context(MEMPLAN=plan):
    base = GlobalCounters.mem_used
    out = _chain(tx, tw, 8).realize()
    assert spy.peak - base == (2 if plan else 8) * NB
  np.testing.assert_allclose(out.numpy(), _chain_ref(x, w, 8), rtol=1e-4, atol=1e-5)

def test_eager_keeps_what_is_still_read():
  """An intermediate that a Tensor holds, or that an unrealized op still reads, keeps its memory."""
  a = (RNG.standard_normal((N, N)) / N).astype(np.float32)
  ta = Tensor(a, requires_grad=False).realize()  # (no autograd graph: only what the test keeps holds the intermediates)
  h = (ta @ ta).relu()  # realized as the second matmul's input
  later = h + 1  # an unrealized op that reads it
  held = (ta @ ta).exp()
  out = ((h @ ta).sum() + (held @ ta).sum()).realize()
  del h
  ref_h = np.maximum(a.astype(np.float64) @ a, 0)
  ref_held = np.exp(a.astype(np.float64) @ a)
  np.testing.assert_allclose(out.numpy(), (ref_h @ a).sum() + (ref_held @ a).sum(), rtol=1e-4)
  _ = Tensor.ones(N, N).contiguous().realize()  # a new buffer of the same size: reuses freed memory, if any was wrongly freed
  np.testing.assert_allclose(later.numpy(), ref_h + 1, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(held.numpy(), ref_held, rtol=1e-5)

def _jit_chain(n: int) -> TinyJit:
  @TinyJit
  def f(x: Tensor, w: Tensor) -> Tensor: return _chain(x, w, n).realize()
  return f

@pytest.mark.parametrize("views", [True, False], ids=["arena", "whole-buffers"])
def test_jit_arena_is_the_live_set(monkeypatch, views):
  """A chain of 8 matmuls under TinyJit: its 7 intermediates (the 8th is returned) need two buffers at any time, so
  the arena (or, on a device without buffer views, the shared whole buffers) is 2 buffers' bytes; the bytes allocated
  after the capture drop by the other 5; replays stay right."""
  if not views: monkeypatch.delattr(type(Device["CLANG"].allocator), "_offset")
  w = (RNG.standard_normal((N, N)) / N).astype(np.float32)
  tw = Tensor(w).realize()
  used = {}
  for plan in (0, 1):
    with Context(MEMPLAN=plan):
      f = _jit_chain(8)
      for _ in range(4):
        x = RNG.standard_normal((N, N)).astype(np.float32)
        np.testing.assert_allclose(f(Tensor(x), tw).numpy(), _chain_ref(x, w, 8), rtol=1e-4, atol=1e-5)
      used[plan] = GlobalCounters.mem_used
      if plan: assert (f.captured.plan.bytes_before, f.captured.plan.bytes_after) == (7 * NB, 2 * NB)
      else: assert f.captured.plan is None
      del f
  assert used[0] - used[1] == 5 * NB

@pytest.mark.parametrize("views", [True, False], ids=["arena", "whole-buffers"])
def test_plan_lifetimes_never_overlap(monkeypatch, views):
  """In the plan of a GPT train step, two buffers that are alive at one kernel never share a byte; offsets aligned;
  the arena is no smaller than the bytes alive at the busiest kernel (a lower bound no plan beats)."""
  if not views: monkeypatch.delattr(type(Device["CLANG"].allocator), "_offset")
  cfg = {**gpt.CFG, "layers": 1, "d": 32, "heads": 2, "T": 16, "vocab": 64, "bs": 2}
  step = gpt.tiny_step(gpt.tiny_model(cfg), cfg)
  for _ in range(2): step()
  jitted = next(c.cell_contents for c in step.__closure__ if isinstance(c.cell_contents, TinyJit))  # (the bench's jitted step)
  plan = jitted.captured.plan
  assert len(plan.placed) > 20 and plan.bytes_after < plan.bytes_before
  for i, (m1, o1, n1, f1, l1) in enumerate(plan.placed):
    assert o1 % OFFSET_ALIGN == 0 and o1 + n1 <= m1.nbytes
    for m2, o2, n2, f2, l2 in plan.placed[i + 1:]:
      if m1 is m2 and f1 <= l2 and f2 <= l1: assert o1 + n1 <= o2 or o2 + n2 <= o1
  busiest = max(sum(n for _, _, n, f, l in plan.placed if f <= j <= l) for j in range(len(jitted.jit_cache)))
  assert busiest <= plan.bytes_after
  # and the kernels run on the planned memory: a view into the arena at its offset, or the shared buffer
  used = {(b._base, b.offset) if b._base is not None else (b, 0) for _, bufs in jitted.jit_cache for b in bufs if b is not None}
  assert {(m, o) for m, o, *_ in plan.placed} <= used

def test_buffer_held_outside_the_step_is_not_shared():
  """A realized intermediate the function keeps (in a list) is visible outside the step: it keeps its memory, so after
  a replay it holds this call's value, not a later kernel's."""
  keep: list[Tensor] = []
  @TinyJit
  def f(x: Tensor) -> Tensor:
    y = (x * 2).realize()
    keep.append(y)
    v = ((y + 1).realize() * 3).realize()
    return (v + 1).realize()
  for _ in range(4):
    x = RNG.standard_normal((N, N)).astype(np.float32)
    np.testing.assert_allclose(f(Tensor(x)).numpy(), (x * 2 + 1) * 3 + 1, rtol=1e-6)
    np.testing.assert_allclose(keep[-1].numpy(), x * 2, rtol=1e-6)  # the captured call's tensor, rewritten by each replay
  assert f.captured.plan is not None  # (the other intermediate was planned)

def _train_losses(make_step, steps: int) -> list[float]:
  Tensor.manual_seed(1)
  step = make_step()
  return [step() for _ in range(steps)]

def _gpt_step():
  cfg = {**gpt.CFG, "layers": 2, "d": 32, "heads": 2, "T": 16, "vocab": 64, "bs": 2}
  return gpt.tiny_step(gpt.tiny_model(cfg), cfg)

def _cnn_step():
  """A small CNN with BatchNorm and dropout (random numbers drawn in every replay), Adam."""
  class Net:
    def __init__(self):
      self.c1, self.bn, self.c2, self.fc = nn.Conv2d(1, 8, 3), nn.BatchNorm2d(8), nn.Conv2d(8, 8, 3), nn.Linear(8 * 3 * 3, 10)
    def __call__(self, x: Tensor) -> Tensor:
      x = self.bn(self.c1(x)).relu().max_pool2d()
      return self.fc(self.c2(x).relu().dropout(0.25).flatten(1))
  net = Net()
  opt = nn.optim.Adam(nn.state.get_parameters(net), lr=1e-3)
  rng = np.random.default_rng(2)
  x, y = Tensor(rng.standard_normal((4, 1, 12, 12)).astype(np.float32)), Tensor(rng.integers(0, 10, 4))
  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = net(x).sparse_categorical_crossentropy(y).backward()
      opt.step()
      return loss.realize()
  return lambda: step(x, y).item()

@pytest.mark.parametrize("jit", [1, 0])
@pytest.mark.parametrize("make_step", [_gpt_step, _cnn_step], ids=["gpt", "cnn"])
def test_train_steps_bit_identical(make_step, jit):
  """Five train steps give the same losses, bit for bit, with the planner and the eager frees on and off."""
  with Context(JIT=jit):
    with Context(MEMPLAN=0): off = _train_losses(make_step, 5)
    with Context(MEMPLAN=1): on = _train_losses(make_step, 5)
  assert on == off and len(set(on)) > 1

def _mlp_ref(x: np.ndarray, ws: list[np.ndarray]) -> list[np.ndarray]:
  """d(sum(relu(...relu(x @ w0)... @ wL)))/d(w_i) in float64."""
  hs, zs = [x.astype(np.float64)], []
  for w in ws:
    zs.append(hs[-1] @ w)
    hs.append(np.maximum(zs[-1], 0))
  dh, dws = np.ones_like(hs[-1]), []
  for i in reversed(range(len(ws))):
    dz = dh * (zs[i] > 0)
    dws.append(hs[i].T @ dz)
    dh = dz @ ws[i].T
  return dws[::-1]

def _chain_of(x: Tensor, ws: list[Tensor]) -> Tensor:
  for w in ws: x = (x @ w).relu()
  return x

def test_eager_step_frees_the_forward(monkeypatch):
  """An un-jitted SGD step through 8 layers, the loss still held: backward() let go of the graph (PyTorch's rule, the
  parameters are marked) and the gradients are realized with the update, so after the step the buffers alive are the
  gradients and the last activation the test holds (L + 1; before: 2L, the graph's activations and, through the lazy
  gradients, the backward values); during it at most L activations and a few working buffers (the last layer's weight
  gradient computed first: 2L + 1 before). Gradients equal float64 numpy's."""
  L = 8
  ws = [(RNG.standard_normal((N, N)) / np.sqrt(N)).astype(np.float32) for _ in range(L)]
  x = RNG.standard_normal((N, N)).astype(np.float32)
  tws = [Tensor(w) for w in ws]
  opt = nn.optim.SGD(tws, lr=0.0, momentum=0.9)  # (lr 0: the weights stay those of the reference)
  tx = Tensor(x).realize()
  spy = _PeakBytes(monkeypatch)
  with Tensor.train():
    for i in range(2):
      opt.zero_grad()
      base = GlobalCounters.mem_used
      loss = _chain_of(tx, tws).sum().backward()
      spy.peak = 0
      opt.step()
      assert (spy.peak - base) // NB <= L + 3
      if i: assert (GlobalCounters.mem_used - base) // NB == L  # (the first step leaves one more buffer in a cache)
      assert all(t.grad.lazydata.is_realized() for t in tws)
      for t, ref in zip(tws, _mlp_ref(x, ws)): np.testing.assert_allclose(t.grad.numpy(), ref, rtol=1e-4, atol=1e-4)
  assert loss.item() > 0
