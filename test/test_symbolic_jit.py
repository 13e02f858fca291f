"""Symbolic shapes: a batch size Variable bound per call (`x[:v.bind(n)]`) runs the same compiled kernels for every n,
plainly realized and under TinyJit, with results equal to numpy for each n."""
import numpy as np
import pytest
from tinycore import Tensor, TinyJit, Variable, GlobalCounters, nn
from tinycore.engine.realize import method_cache

rng = np.random.default_rng(0)
SIZES = (3, 8, 1, 16, 5)

def close(a: np.ndarray, b: np.ndarray, tol: float = 1e-5) -> None:
  assert a.shape == b.shape, (a.shape, b.shape)
  np.testing.assert_allclose(a, b, rtol=tol, atol=tol)

def test_elementwise(device):
  X = rng.standard_normal((16, 5)).astype(np.float32)
  xt, v = Tensor(X).realize(), Variable("bs", 1, 16)
  for n in SIZES:
    x = xt[:v.bind(n)]
    assert x.shape == (v, 5)
    close(((x * 2 + 1).exp() - x.relu()).numpy(), np.exp(X[:n] * 2 + 1) - np.maximum(X[:n], 0))

def test_var_std_divide_by_the_bound_size(device):
  X = rng.standard_normal((16, 3)).astype(np.float32)
  xt, v = Tensor(X).realize(), Variable("bs", 1, 16)
  for n in SIZES:
    x = xt[:v.bind(n)]
    ref = X[:n].var(0, ddof=1) if n > 1 else np.full(3, np.nan, np.float32)  # n = 1: 0/0, NaN as in torch
    close(x.var(0).numpy(), ref.astype(np.float32))
    close(x.std(0, correction=0).numpy(), X[:n].std(0))

def test_rand_and_dropout_of_a_symbolic_shape(device):
  v = Variable("bs", 1, 16)
  for n in (4, 9):
    Tensor.manual_seed(3)
    r = Tensor.rand(v.bind(n), 5).numpy()
    Tensor.manual_seed(3)
    # a symbolic size draws for its largest value: the first n rows of the full draw
    np.testing.assert_equal(r, Tensor.rand(16, 5).numpy()[:n])
    x = Tensor(np.ones((16, 5), np.float32)).realize()[:v.bind(n)]
    with Tensor.train():
      d = x.dropout(0.5).numpy()
    assert d.shape == (n, 5) and set(np.unique(d)) <= {0.0, 2.0} and 0 < (d == 2).sum() < d.size

def test_reduce_over_symbolic_and_fixed_axis(device):
  X = rng.standard_normal((16, 6)).astype(np.float32)
  xt, v = Tensor(X).realize(), Variable("bs", 1, 16)
  for n in SIZES:
    x = xt[:v.bind(n)]
    close(x.sum(0).numpy(), X[:n].sum(0))
    close(x.max(0).numpy(), X[:n].max(0))
    close(x.sum(1).numpy(), X[:n].sum(1))
    close(x.softmax(-1).numpy(), np.exp(X[:n]) / np.exp(X[:n]).sum(1, keepdims=True))

def test_mean_divides_by_the_bound_size(device):
  X = rng.standard_normal((16, 3)).astype(np.float32)
  xt, v = Tensor(X).realize(), Variable("bs", 1, 16)
  for n in SIZES:
    x = xt[:v.bind(n)]
    close(x.mean(0).numpy(), X[:n].mean(0))
    close(x.mean().numpy(), np.float32(X[:n].mean()))

def test_jit_mean_loss_gradient(device):
  """A mean over the batch under TinyJit: the divisor is the replayed call's n, in the loss and in its gradient."""
  X = rng.standard_normal((16, 3)).astype(np.float32)
  xt, v = Tensor(X).realize(), Variable("bs", 1, 16)
  w = Tensor(np.ones(3, np.float32), requires_grad=True)
  @TinyJit
  def f(x: Tensor) -> tuple[Tensor, Tensor]:
    w.grad = None
    loss = ((x * w).sum(1) - 1).square().mean().backward()
    return loss.realize(), w.grad.realize()
  for n in (2, 5, 7, 16, 1):
    loss, grad = f(xt[:v.bind(n)])
    r = X[:n].sum(1) - 1
    assert abs(loss.item() - (r ** 2).mean()) < 1e-5
    close(grad.numpy(), (2 * r[:, None] * X[:n]).mean(0))

def test_matmul_symbolic_batch(device):
  X, W = rng.standard_normal((16, 7)).astype(np.float32), rng.standard_normal((7, 9)).astype(np.float32)
  xt, wt, v = Tensor(X).realize(), Tensor(W).realize(), Variable("bs", 1, 16)
  for n in SIZES: close((xt[:v.bind(n)] @ wt).numpy(), X[:n] @ W)

def test_creation_with_bound_variable(device):
  v = Variable("bs", 1, 8)
  for n in (2, 7):
    assert Tensor.ones(v.bind(n), 3).numpy().tolist() == [[1.0] * 3] * n
    assert (Tensor.full((v.bind(n), 2), 4.0) + 1).tolist() == [[5.0] * 2] * n
    assert Tensor.empty(v.bind(n), 4).numpy().shape == (n, 4)
    x = Tensor.arange(8).reshape(8, 1).shrink(((0, v.bind(n)), None))
    assert x.reshape(v.bind(n)).tolist() == list(range(n))

def test_kernels_are_reused_across_sizes(device):
  xt, v = Tensor(rng.standard_normal((16, 4)).astype(np.float32)).realize(), Variable("bs", 1, 16)
  (xt[:v.bind(2)] * 3).sum(1).numpy()
  before = len(method_cache)
  for n in SIZES: close((xt[:v.bind(n)] * 3).sum(1).numpy(), xt.numpy()[:n].sum(1) * 3)
  assert len(method_cache) == before

def test_kernel_name_shows_the_variable():
  v = Variable("bs", 1, 16)
  xt = Tensor(np.ones((16, 4), np.float32)).realize()
  (xt[:v.bind(3)] * 5).sum(0).realize()
  assert any("bs" in r.p.name and "UOp" not in r.p.name for r in method_cache.values())

def test_shrink_keeps_the_variable():
  v = Variable("bs", 1, 16)
  assert Tensor.empty(16, 4)[:v.bind(3)].shape == (v, 4)
  assert Tensor.empty(16, 4).shrink(((0, v), None)).shape == (v, 4)

def test_unbound_variable_is_an_error(device):
  v = Variable("bs", 1, 8)
  with pytest.raises(ValueError, match="bs"): Tensor.ones(v, 3).numpy()
  with pytest.raises(ValueError, match="needs a value for the Variable bs"): (Tensor.ones(v, 3) * 2).realize()

def test_value_out_of_range_is_an_error():
  v = Variable("bs", 1, 8)
  with pytest.raises(ValueError, match=r"out of range \[1, 8\]"): v.bind(9)
  with pytest.raises(ValueError, match=r"out of range \[1, 8\]"): v.bind(0)

def test_one_variable_bound_to_two_values_is_an_error():
  v, xt = Variable("bs", 1, 8), Tensor.ones(8, 2).contiguous().realize()
  with pytest.raises(ValueError, match="bs is bound to both 3 and 4"): (xt[:v.bind(3)] + xt[:v.bind(4)]).realize()

# *** TinyJit ***

def test_jit_forward_with_symbolic_inputs(device):
  W = rng.standard_normal((4, 3)).astype(np.float32)
  wt, v = Tensor(W).realize(), Variable("bs", 1, 32)
  @TinyJit
  def f(x: Tensor) -> Tensor: return (x @ wt).relu() + 1
  for n in (2, 5, 7):  # warm-up and capture
    f(Tensor.full((v.bind(n), 4), float(n)))
  kernels = len(f.jit_cache)
  for n in (1, 32, 9, 20):
    x = Tensor.full((v.bind(n), 4), float(n)).realize()
    GlobalCounters.reset()
    compiled = len(method_cache)
    out = f(x)
    assert GlobalCounters.kernel_count == kernels and len(method_cache) == compiled
    close(out.numpy(), np.maximum(np.full((n, 4), n, np.float32) @ W, 0) + 1)

def _np_mlp_step(w: list[np.ndarray], x: np.ndarray, y: np.ndarray, lr: float) -> tuple[float, list[np.ndarray]]:
  """Linear-relu-linear, softmax cross entropy (mean) and plain SGD, by hand."""
  w1, b1, w2, b2 = w
  h = x @ w1.T + b1
  a = np.maximum(h, 0)
  z = a @ w2.T + b2
  p = np.exp(z - z.max(1, keepdims=True))
  p /= p.sum(1, keepdims=True)
  rows = np.arange(len(y))
  loss = -np.log(p[rows, y]).mean()
  dz = p
  dz[rows, y] -= 1
  dz /= len(y)
  dh = (dz @ w2) * (h > 0)
  grads = [dh.T @ x, dh.sum(0), dz.T @ a, dz.sum(0)]
  return float(loss), [p_ - lr * g for p_, g in zip(w, grads)]

def test_jit_train_step_for_several_batch_sizes(device):
  N, D, H, C, lr = 32, 12, 16, 5, 0.1
  X, Y = rng.standard_normal((N, D)).astype(np.float32), rng.integers(0, C, N).astype(np.int32)
  l1, l2 = nn.Linear(D, H), nn.Linear(H, C)
  params = [l1.weight, l1.bias, l2.weight, l2.bias]
  w = [p.numpy() for p in params]
  opt = nn.optim.SGD(params, lr=lr)
  xt, yt, v = Tensor(X).realize(), Tensor(Y).realize(), Variable("bs", 1, N)
  @TinyJit
  @Tensor.train()
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    # the loss is realized before the step overwrites the weights it reads
    loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward().realize()
    opt.step()
    return loss
  compiled = None
  for i, n in enumerate((4, 7, 16, 3, 32, 1, 9)):
    if i == 2: compiled = len(method_cache)  # after the capture
    loss = step(xt[:v.bind(n)], yt[:v.bind(n)])
    ref, w = _np_mlp_step(w, X[:n], Y[:n], lr)
    assert abs(loss.item() - ref) < 1e-5, (n, loss.item(), ref)
    for p, q in zip(params, w): close(p.numpy(), q)
  assert step.cnt == 2 and len(method_cache) == compiled

def test_reshape_with_minus_one(device):
  X = rng.standard_normal((10, 4, 3)).astype(np.float32)
  xt, v = Tensor(X).realize(), Variable("bs", 1, 10)
  for n in (3, 7):
    x = xt[:v.bind(n)]
    close(x.reshape(-1, 2).numpy(), X[:n].reshape(-1, 2))
    close(x.reshape(x.shape[0], -1).numpy(), X[:n].reshape(n, -1))
    assert x.reshape(-1, 12).shape == (v, 12)
    close(x.reshape(-1).sum().numpy(), np.float32(X[:n].sum()), tol=1e-4)
    with pytest.raises(ValueError, match=r"cannot infer the -1 of reshape \(-1, 5\) from \(bs, 4, 3\)"): x.reshape(-1, 5)
    with pytest.raises(ValueError, match="one -1 at most"): x.reshape(-1, -1)

# *** bound Variables in expressions: a KV cache written and read at a position (tinygrad 0.14's `cache[:, pos:pos+1]`) ***

def test_bound_variable_arithmetic_like_tinygrad():
  """`pos + 1`, `2 * pos`, `pos - 1`, `pos // 2`, `pos < n` compose as in tinygrad 0.14 (where they are bound UOps): the
  expression keeps the Variable's value (checked against python ints)."""
  import tinygrad
  v, tv = Variable("pos", 0, 10), tinygrad.Variable("pos", 0, 10)
  p, tp = v.bind(3), tv.bind(3)
  for f in (lambda p: p + 1, lambda p: 1 + p, lambda p: p * 2, lambda p: 2 * p, lambda p: p - 1, lambda p: 5 - p, lambda p: p // 2,
            lambda p: p % 2, lambda p: (p + 1) * (p + 2)):
    f(tp)  # tinygrad accepts it too
    assert f(p).val == f(3)
  assert int((p < 5).val) == 1 and int((p >= 4).val) == 0 and int((p > 2).val) == 1 and int((p <= 3).val) == 1
  assert (p + 1).vals == {v: 3} and p.unbind() == (v, 3)
  with pytest.raises(ValueError, match="not a Variable"): (p + 1).unbind()

def _cache_steps(T, kw: dict, var) -> tuple[list, np.ndarray]:
  """A KV cache of 6 positions: at each step write the new row at [pos:pos+1] (setitem) and read [0:pos+1]."""
  cache = T.zeros(1, 6, 2, **kw).contiguous().realize()
  sums = []
  for i in range(4):
    pos = var.bind(i)
    cache[:, pos:pos + 1, :] = T([[[i + 1.0, 10.0 * (i + 1)]]], **kw)
    sums.append(cache[:, 0:pos + 1, :].sum(1).numpy().tolist())
  return sums, cache.numpy()

def test_kv_cache_with_a_symbolic_slice_like_tinygrad(device):
  import tinygrad
  got = _cache_steps(Tensor, {}, Variable("pos", 0, 5))
  want = _cache_steps(tinygrad.Tensor, {"device": "CPU"}, tinygrad.Variable("pos", 0, 5))
  ref = np.zeros((1, 6, 2), np.float32)
  ref[0, :4] = [[i + 1.0, 10.0 * (i + 1)] for i in range(4)]
  assert got[0] == want[0] == [ref[:, :i + 1].sum(1).tolist() for i in range(4)]
  np.testing.assert_array_equal(got[1], ref)
  np.testing.assert_array_equal(want[1], ref)

def test_kv_cache_kernels_are_reused_across_positions(device):
  v = Variable("pos", 0, 7)
  cache = Tensor.zeros(8, 4).contiguous().realize()
  def step(i: int) -> None:
    pos = v.bind(i)
    cache[pos:pos + 1] = Tensor.full((1, 4), i + 0.5)  # (never 0 or 1: those fold into the code)
    cache[0:pos + 1].sum(0).realize()
  step(0)
  before = len(method_cache)
  for i in range(1, 8): step(i)
  assert len(method_cache) == before
  np.testing.assert_array_equal(cache.numpy(), np.repeat(np.arange(8, dtype=np.float32)[:, None] + 0.5, 4, 1))

def test_jit_replay_binds_symbolic_kernels_once_per_values(device, monkeypatch):
  """A replay whose kernels take a Variable's value (a KV cache read to its length) runs them through bound launchers,
  bound again when the value or an input's memory changes (each alone and both): results equal numpy for each call,
  and no kernel goes through exec_runner."""
  import tinycore.engine.jit as jit
  C = rng.standard_normal((8, 4)).astype(np.float32)
  cache, v = Tensor(C).realize(), Variable("n", 1, 8)
  @TinyJit
  def f(x: Tensor, n) -> Tensor: return (cache[:n].sum(0) * x + 1).realize()
  xs = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
  for k, n in enumerate((2, 3)): f(Tensor(xs[k]), v.bind(n))  # warm-up and capture
  def no_exec(*a, **kw): raise AssertionError("a replayed kernel went through exec_runner")
  monkeypatch.setattr(jit, "exec_runner", no_exec)
  x = Tensor(xs[2]).realize()
  for X, n in ((xs[2], 5), (xs[2], 1), (xs[0], 1), (xs[1], 8), (xs[1], 8), (xs[0], 3)):  # value, input, both, neither
    if X is not xs[2]: x = Tensor(X).realize()
    close(f(x, v.bind(n)).numpy(), C[:n].sum(0) * X + 1)
