"""TinyJit: replay equals running the function, inputs swap in, changed inputs are refused, kernels are counted,
random numbers move on between replays, JIT=0 turns it off."""
import numpy as np
import pytest
from tinycore import Tensor, Device, TinyJit, Context, GlobalCounters, Variable, nn
from tinycore.engine.jit import JitError
from tinycore.nn import optim

@pytest.fixture(autouse=True)
def _clang():
  old = Device.DEFAULT
  Device.DEFAULT = "CLANG"
  yield
  Device.DEFAULT = old

RNG = np.random.default_rng(0)
W = RNG.standard_normal((3, 4)).astype(np.float32)

def _f(x: Tensor, y: Tensor) -> Tensor: return (x @ Tensor(W) + y).relu().sum(1)
def _ref(x: np.ndarray, y: np.ndarray) -> np.ndarray: return np.maximum(x @ W + y, 0).sum(1)

def test_replay_matches_and_swaps_inputs():
  calls = []
  @TinyJit
  def f(x: Tensor, y: Tensor) -> Tensor:
    calls.append(1)
    return _f(x, y)
  for _ in range(5):
    x, y = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(f(Tensor(x), Tensor(y)).numpy(), _ref(x, y), rtol=1e-5, atol=1e-5)
  assert len(calls) == 2  # warm-up and capture; the other three were replays
  assert f.cnt == 2 and len(f.jit_cache) > 0

def test_kernel_count():
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x * 2).sum() + x.max()
  counts = []
  for _ in range(4):
    GlobalCounters.reset()
    f(Tensor(RNG.standard_normal((4, 4)).astype(np.float32)))
    counts.append(GlobalCounters.kernel_count)
  assert counts[1] == counts[2] == counts[3] == len(f.jit_cache)

def test_input_change_is_an_error():
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x + 1).sum()
  for _ in range(3): f(Tensor(np.ones((4, 3), np.float32)))
  with pytest.raises(JitError, match=r"argument 0 was shape \(4, 3\).*now shape \(5, 3\)"): f(Tensor(np.ones((5, 3), np.float32)))
  with pytest.raises(JitError, match=r"dtype dtypes.float.*now .*dtype dtypes.int"): f(Tensor(np.ones((4, 3), np.int32)))
  with pytest.raises(JitError, match="tensor inputs"): f(x=Tensor(np.ones((4, 3), np.float32)))
  # reset() forgets the capture: the next calls warm up and capture the new shape
  f.reset()
  for _ in range(3): assert f(Tensor(np.ones((5, 3), np.float32))).item() == 30

def test_same_buffer_twice_is_an_error():
  @TinyJit
  def f(x: Tensor, y: Tensor) -> Tensor: return (x + y).sum()
  t = Tensor([1.0, 2.0])
  with pytest.raises(JitError, match="share one buffer"): f(t, t)

def test_views_as_inputs():
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x * Tensor([1.0, 10.0, 100.0])).sum(1)
  for _ in range(4):
    a = RNG.standard_normal((3, 2)).astype(np.float32)
    np.testing.assert_allclose(f(Tensor(a).T).numpy(), (a.T * [1, 10, 100]).sum(1), rtol=1e-5)

def test_random_differs_between_replays_and_matches_eager():
  Tensor.manual_seed(7)
  eager = [Tensor.rand(5).numpy() for _ in range(4)]
  Tensor.manual_seed(7)
  @TinyJit
  def draw() -> Tensor: return Tensor.rand(5) * 1
  jitted = [draw().numpy() for _ in range(4)]
  for a, b in zip(eager, jitted): np.testing.assert_array_equal(a, b)
  assert len({tuple(v) for v in jitted}) == 4

def test_dropout_and_randint_differ_between_replays():
  @TinyJit
  @Tensor.train()
  def f(x: Tensor) -> tuple[Tensor, Tensor]: return x.dropout(0.5) * 1, Tensor.randint(6, high=1000)
  x = Tensor.ones(64).contiguous().realize()
  outs = [tuple(o.numpy().copy() for o in f(x)) for _ in range(4)]
  masks, ints = [tuple(o[0]) for o in outs], [tuple(o[1]) for o in outs]
  assert len(set(masks)) == 4 and len(set(ints)) == 4
  assert set(np.unique(np.array(masks))) <= {0.0, 2.0}

def test_jit_off():
  calls = []
  @TinyJit
  def f(x: Tensor) -> Tensor:
    calls.append(1)
    return (x + 1).sum()
  with Context(JIT=0):
    for i in range(4): assert f(Tensor([float(i)])).item() == i + 1
  assert len(calls) == 4 and f.captured is None

def test_train_step_matches_eager():
  def run(jit: bool) -> list:
    Tensor.manual_seed(0)
    lin = nn.Linear(4, 3)
    w0 = Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    nn.state.load_state_dict(lin, {"weight": w0, "bias": Tensor.zeros(3)})
    opt = optim.Adam(nn.state.get_parameters(lin), lr=0.1)
    def step(x: Tensor, y: Tensor) -> Tensor:
      with Tensor.train():
        opt.zero_grad()
        loss = (lin(x) - y).square().mean().backward()
        opt.step()
      return loss
    f = TinyJit(step) if jit else step
    data = np.random.default_rng(3)
    losses = [f(Tensor(data.standard_normal((5, 4)).astype(np.float32)), Tensor(data.standard_normal((5, 3)).astype(np.float32))).item()
              for _ in range(5)]
    return losses + lin.weight.numpy().ravel().tolist()
  np.testing.assert_allclose(run(True), run(False), rtol=1e-5, atol=1e-6)

def test_lr_change_reaches_replays():
  w = Tensor([1.0], requires_grad=True)
  opt = optim.SGD([w], lr=0.1)
  @TinyJit
  @Tensor.train()
  def step() -> Tensor:
    opt.zero_grad()
    loss = (w * 1).sum().backward()  # gradient 1: each step subtracts lr
    opt.step()
    return loss
  for _ in range(3): step()
  optim.set_lr(opt, 1.0)
  step()
  assert w.numpy().tolist() == pytest.approx([1.0 - 0.3 - 1.0])

def test_method_and_multiple_outputs():
  class M:
    def __init__(self): self.k = Tensor([2.0]).contiguous().realize()
    @TinyJit
    def __call__(self, x: Tensor) -> list:
      return [x * self.k, (x + self.k).sum()]
  m = M()
  for i in range(4):
    a, b = m(Tensor([float(i), 1.0]))
    assert a.numpy().tolist() == [2.0 * i, 2.0] and b.item() == i + 5

def test_python_device_replay():
  Device.DEFAULT = "PYTHON"
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x * x).sum()
  for i in range(4): assert f(Tensor([float(i), 1.0])).item() == i * i + 1

def test_bound_variable_is_passed_to_kernels():
  """A bound Variable among the arguments reaches the captured kernels' var_vals; a different binding of the same
  Variable is accepted on replay. (Kernels over a symbolic shape: test/test_symbolic_jit.py.)"""
  v = Variable("n", 1, 10)
  @TinyJit
  def f(x: Tensor, n) -> Tensor: return (x + 1).sum()
  for i in range(1, 4): assert f(Tensor([1.0, 2.0]), v.bind(i)).item() == 5
  with pytest.raises(JitError, match="Variables"): f(Tensor([1.0, 2.0]), Variable("m", 1, 10).bind(2))

def test_bound_variable_argument_sizes_a_view(device):
  """A bound Variable passed as an argument (not inside an input's shape) sizes a view made inside the function;
  each replay takes its new value."""
  v = Variable("n", 1, 8)
  @TinyJit
  def f(x: Tensor, n) -> Tensor: return (x[:n] * 2).sum()
  x = Tensor(np.arange(8, dtype=np.float32)).realize()
  for i in (3, 5, 8, 1, 6): assert f(x, v.bind(i)).item() == 2 * sum(range(i))

def test_nested_jit_replay_is_recorded_by_outer_capture():
  @TinyJit
  def inner(x: Tensor) -> Tensor: return x * 2
  @TinyJit
  def outer(x: Tensor) -> Tensor: return inner(x) + 1
  for i in range(2): inner(Tensor([float(i)]))  # inner is captured and replays from now on
  for i in range(4): assert outer(Tensor([float(i)])).item() == 2 * i + 1

def test_batchnorm_running_stats_advance_in_replays():
  def run(jit: bool) -> np.ndarray:
    bn = nn.BatchNorm(3)
    opt = optim.SGD(nn.state.get_parameters(bn), lr=0.1)
    def step(x: Tensor) -> Tensor:
      with Tensor.train():
        opt.zero_grad()
        loss = bn(x).square().mean().backward()
        opt.step()
      return loss
    f = TinyJit(step) if jit else step
    data = np.random.default_rng(5)
    for _ in range(4): f(Tensor(data.standard_normal((4, 3)).astype(np.float32) * 2 + 1))
    return np.concatenate([bn.running_mean.numpy(), bn.running_var.numpy(), bn.num_batches_tracked.numpy().reshape(1)])  # (a 0-d int64)
  ours = run(True)
  np.testing.assert_allclose(ours, run(False), rtol=1e-5)
  assert ours[-1] == 4
