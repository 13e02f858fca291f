"""Indexing as a load (Ops.GATHER) and its gradient, a scatter-add (Ops.SCATTER): against numpy and torch on random
shapes and indices (negative, repeated, out of range), dtypes, forward and backward; the device-side range check."""
import numpy as np
import pytest
import torch
from tinycore import Tensor, TinyJit, GlobalCounters, dtypes, nn
from tinycore.engine.schedule import create_schedule
from tinycore.ops import Ops
from test.torch_compare import check

def _rng(seed: int) -> np.random.Generator: return np.random.default_rng(seed)

@pytest.mark.parametrize("seed", range(6))
def test_gather_random(seed, dev):
  """torch.gather semantics on random shapes, any dim, negative indices, index smaller than self in other dims."""
  r = _rng(seed)
  shape = tuple(int(s) for s in r.integers(1, 5, r.integers(1, 4)))
  x = r.standard_normal(shape).astype(np.float32)
  d = int(r.integers(0, len(shape)))
  ishape = tuple(int(r.integers(1, s + 1)) if i != d else int(r.integers(1, 7)) for i, s in enumerate(shape))
  idx = r.integers(-shape[d], shape[d], ishape)
  check(lambda t: t.gather(d, Tensor(idx, device=dev)), lambda t: t.gather(d, torch.tensor(idx % shape[d])), [x], dev)

@pytest.mark.parametrize("seed", range(6))
def test_getitem_random(seed, dev):
  """Tensor indices (negative, repeated, broadcast, several, beside slices and None) against numpy, with gradients vs torch."""
  r = _rng(10 + seed)
  x = r.standard_normal((5, 4, 6)).astype(np.float32)
  i0 = r.integers(-5, 5, (3, 1))
  i2 = r.integers(-6, 6, (1, 2))
  i1 = r.integers(-4, 4, 7)
  cases = [lambda m, t: t[m(i0)], lambda m, t: t[:, m(i1)], lambda m, t: t[m(i0), :, m(i2)],
           lambda m, t: t[None, 1:4, m(np.array([2, 2, -1]))], lambda m, t: t[m(i0), m(i0 % 4)], lambda m, t: t[..., m(i2)]]
  f = cases[seed]
  np.testing.assert_allclose(f(Tensor, Tensor(x, device=dev)).numpy(), f(np.asarray, x), rtol=0, atol=0)
  check(lambda t: f(lambda a: Tensor(a, device=dev), t), lambda t: f(torch.tensor, t), [x], dev)

@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.int32, dtypes.int8, dtypes.bool, dtypes.float16, dtypes.uint16])
def test_gather_dtypes(dtype, dev):
  r = _rng(3)
  x = (r.standard_normal((7, 3)) * 50).astype(np.float32)
  idx = r.integers(-7, 7, (9,))
  t = Tensor(x, device=dev).cast(dtype)
  want = t.numpy()[idx]
  np.testing.assert_array_equal(t[Tensor(idx, device=dev)].numpy(), want)
  np.testing.assert_array_equal(t[Tensor(idx.astype(np.int64), device=dev)].numpy(), want)

def test_embedding_vs_torch(dev):
  r = _rng(4)
  emb = nn.Embedding(11, 6)
  w = emb.weight.numpy()
  idx = r.integers(0, 11, (3, 5))
  idx[0, :3] = 2  # repeated rows: their gradients add up
  emb.weight = Tensor(w, device=dev, requires_grad=True)
  out = emb(Tensor(idx.astype(np.int32), device=dev))
  tw = torch.tensor(w, requires_grad=True)
  ref = torch.nn.functional.embedding(torch.tensor(idx), tw)
  np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
  g = r.standard_normal(ref.shape).astype(np.float32)
  (out * Tensor(g, device=dev)).sum().backward()
  (ref * torch.tensor(g)).sum().backward()
  np.testing.assert_allclose(emb.weight.grad.numpy(), tw.grad.numpy(), rtol=1e-6, atol=1e-6)

def test_scatter_add_deterministic(dev):
  """The gradient of a gather with many repeats of one index adds in index order: equal to a sequential float32 sum."""
  r = _rng(5)
  g = r.standard_normal((200, 3)).astype(np.float32) * np.float32(1e3) ** r.integers(-2, 3, (200, 1)).astype(np.float32)
  w = Tensor.zeros(4, 3, device=dev, requires_grad=True)
  idx = np.full(200, 1)
  (w[Tensor(idx, device=dev)] * Tensor(g, device=dev)).sum().backward()
  want = np.zeros(3, np.float32)
  for row in g: want = want + row  # float32, in order
  np.testing.assert_array_equal(w.grad.numpy()[1], want)
  assert not w.grad.numpy()[[0, 2, 3]].any()

def test_second_order(dev):
  """The gradient of a scatter-add is a gather: gradients of gradients flow."""
  x = Tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
  idx = Tensor([0, 0, 2], device=dev)
  s = Tensor.zeros(3, device=dev, requires_grad=True)._scatter(idx, x * x, 0)
  (s * Tensor([1.0, 10.0, 100.0], device=dev)).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 600.0])

def test_out_of_range_raises_at_sync(dev):
  x = Tensor.arange(12, device=dev).reshape(3, 4).float()
  y = x[Tensor([0, 3], device=dev)]  # nothing is read back here: the check runs on the device
  with pytest.raises(IndexError, match="index 3 is out of bounds for size 3"): y.numpy()
  assert x[Tensor([-3, 2], device=dev)].numpy()[0].tolist() == [0, 1, 2, 3]  # the error was cleared
  with pytest.raises(IndexError, match="index -5"): x.gather(1, Tensor([[0], [-5], [1]], device=dev)).sum().item()
  w = Tensor.ones(3, 2, device=dev, requires_grad=True)
  (w[Tensor([1, 7], device=dev)]).sum().backward()
  with pytest.raises(IndexError, match="index 7"): w.grad.numpy()
  with pytest.raises(IndexError, match="size 0"): Tensor.ones(0, 2, device=dev)[Tensor([0], device=dev)]

def test_no_host_read_of_indices(dev):
  """Indexing with an unrealized index builds a lazy graph: nothing runs until the result is used."""
  idx = (Tensor([3, 1, 0], device=dev) + 1) % 4
  before = GlobalCounters.kernel_count
  y = Tensor.arange(8, device=dev).float().reshape(4, 2)[idx]
  assert GlobalCounters.kernel_count == before and not idx.lazydata.is_realized()
  assert y.numpy().tolist() == [[0, 1], [4, 5], [2, 3]]

def test_jit_out_of_range_raises(dev):
  w = Tensor.arange(10, device=dev).float().reshape(5, 2).realize()
  @TinyJit
  def f(i: Tensor) -> Tensor: return (w[i] * 2).realize()
  for _ in range(3): np.testing.assert_array_equal(f(Tensor([4, 0], device=dev)).numpy(), [[16, 18], [0, 2]])
  out = f(Tensor([9, 0], device=dev))  # a replay: the captured check kernel runs too
  with pytest.raises(IndexError, match="index 9 is out of bounds for size 5"): out.numpy()
  np.testing.assert_array_equal(f(Tensor([-1, 1], device=dev)).numpy(), [[16, 18], [4, 6]])

def test_embedding_fuses_with_add(dev):
  """An embedding plus a positional add is one kernel (with the index check beside it), and its work is the output's."""
  wte, wpe = Tensor.randn(1000, 16, device=dev).realize(), Tensor.randn(8, 16, device=dev).realize()
  idx = Tensor(_rng(1).integers(0, 1000, (2, 8)), device=dev).realize()
  out = wte[idx] + wpe
  sched = create_schedule([out.lazydata])
  assert len(sched) == 2, [si.ast.op for si in sched]
  np.testing.assert_allclose(out.numpy(), wte.numpy()[idx.numpy()] + wpe.numpy(), rtol=1e-6)

def test_gather_padded_view_not_fused(dev):
  """A pad of a gather's output is zero, not the table's entry 0."""
  w = Tensor([[1.0, 2.0], [3.0, 4.0]], device=dev)
  y = w[Tensor([1, 1], device=dev)].pad(((1, 1), (0, 0))) + 1
  np.testing.assert_array_equal(y.numpy(), [[1, 1], [4, 5], [4, 5], [1, 1]])

def test_several_index_tensors_report_their_own_dim(dev):
  """x[i, j] checks each index tensor against its own dim: the error names the bad index and that dim's size (numpy's
  and torch's numbers), for reads and writes; in-range entries still match numpy."""
  xn = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
  x = Tensor(xn, device=dev)
  with pytest.raises(IndexError, match="index 9 is out of bounds for size 4"): x[Tensor([0, 2], device=dev), Tensor([1, 9], device=dev)].numpy()
  with pytest.raises(IndexError, match="index -7 is out of bounds for size 5"): x[:, Tensor([0], device=dev), Tensor([[-7]], device=dev)].numpy()
  i, j = _rng(2).integers(-3, 3, (2, 6)), _rng(3).integers(-5, 5, (6,))
  np.testing.assert_array_equal(x[Tensor(i, device=dev), :, Tensor(j, device=dev)].numpy(), xn[i, :, j])
  y = Tensor.zeros(3, 4, device=dev).contiguous()
  y[Tensor([1, 5], device=dev), Tensor([0, 1], device=dev)] = 1.0
  with pytest.raises(IndexError, match="index 5 is out of bounds for size 3"): y.numpy()

def test_zero_dim_index_leaves_no_dims(dev):
  """A 0-d index tensor takes its dim away, as numpy's: indexing a 1-d tensor with it (or a 2-d one with two) gives a
  0-d result, reading and writing (the result's shape was () and reshape(*()) failed)."""
  x = np.arange(5, dtype=np.float32) * 1.5
  for i in (2, -1):
    out = Tensor(x, device=dev)[Tensor(i, device=dev)]
    assert out.shape == np.asarray(x[np.array(i)]).shape == () and out.item() == x[np.array(i)]
  y = np.arange(6, dtype=np.int32).reshape(2, 3)
  out = Tensor(y, device=dev)[Tensor(1, device=dev), Tensor(-1, device=dev)]
  assert out.shape == () and out.item() == y[np.array(1), np.array(-1)]
  z, zn = Tensor.zeros(5, device=dev).contiguous(), np.zeros(5, np.float32)
  z[Tensor(3, device=dev)], zn[np.array(3)] = 7.0, 7.0
  np.testing.assert_array_equal(z.numpy(), zn)

@pytest.mark.parametrize("op", ["scatter", "scatter_reduce"])
def test_scatter_src_of_another_dtype_is_an_error(op):
  # torch (and tinygrad 0.14) refuse a src whose dtype is not self's instead of casting it silently
  idx = np.array([[0, 1], [1, 0]])
  args = {"scatter": (), "scatter_reduce": ("sum",)}[op]
  with pytest.raises(RuntimeError): getattr(torch.zeros(2, 2, dtype=torch.float16), op)(1, torch.tensor(idx), torch.ones(2, 2), *args)
  with pytest.raises(RuntimeError): getattr(Tensor.zeros(2, 2, dtype=dtypes.half), op)(1, Tensor(idx), Tensor.ones(2, 2), *args)

def _prod_case(r: np.random.Generator, zeros: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """self (5, 4) and src (9, 4) of small values, with zeros (one and several per target, in self too) when asked, and
  an index with negatives and repeats."""
  x = r.choice([-1.5, -1.0, 0.5, 2.0, 3.0] + ([0.0] * 2 if zeros else []), (5, 4)).astype(np.float32)
  src = r.choice([-2.0, -0.5, 1.5, 2.5] + ([0.0] * 2 if zeros else []), (9, 4)).astype(np.float32)
  return x, src, r.integers(-5, 5, (9, 4))

@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_scatter_reduce_prod_vs_torch(include_self, seed, dev):
  """scatter_reduce 'prod' (a lazy scatter that multiplies): the value exactly torch's (one product, in index order),
  the gradient torch's, zeros in self and src (one or several per target) included."""
  r = _rng(40 + seed)
  x, src, idx = _prod_case(r, zeros=seed > 0)
  out = check(lambda a, s: a.scatter_reduce(0, Tensor(idx, device=dev), s, "prod", include_self=include_self),
              lambda a, s: a.scatter_reduce(0, torch.tensor(idx % 5), s, "prod", include_self=include_self), [x, src], dev,
              atol=0, rtol=0, grad_atol=1e-6, grad_rtol=1e-6)
  np.testing.assert_array_equal(out.numpy(), torch.tensor(x).scatter_reduce(0, torch.tensor(idx % 5), torch.tensor(src), "prod",
                                                                            include_self=include_self).numpy())
  xi, si = x.astype(np.int32), src.astype(np.int32)
  got = Tensor(xi, device=dev).scatter_reduce(1, Tensor(idx[:5] % 4, device=dev), Tensor(si[:5], device=dev), "prod", include_self=include_self)
  want = torch.tensor(xi).scatter_reduce(1, torch.tensor(idx[:5] % 4), torch.tensor(si[:5]), "prod", include_self=include_self)
  np.testing.assert_array_equal(got.numpy(), want.numpy())

@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
def test_scatter_multiply_vs_torch(dev):
  """scatter reduce='multiply' of a number, repeated and negative indices: torch's value exactly."""
  r = _rng(50)
  x, _, idx = _prod_case(r, zeros=True)
  got = Tensor(x, device=dev).scatter(0, Tensor(idx, device=dev), -1.5, reduce="multiply")
  np.testing.assert_array_equal(got.numpy(), torch.tensor(x).scatter(0, torch.tensor(idx % 5), -1.5, reduce="multiply").numpy())

def test_scatter_reduce_prod_is_a_scatter(dev):
  """prod's work is the index's (a SCATTER kernel, no reduce over a one-hot of the table), nothing is read back to the
  host while the graph is built, and an index out of range raises IndexError at the next sync."""
  x = Tensor.ones(100000, 2, device=dev).contiguous().realize()
  idx = (Tensor([[3, 1], [3, 0]], device=dev) + 1) % 100000
  before = GlobalCounters.kernel_count
  y = x.scatter_reduce(0, idx, Tensor([[2.0, 3.0], [5.0, 7.0]], device=dev), "prod")
  assert GlobalCounters.kernel_count == before and not idx.lazydata.is_realized()
  ops = {u.op for si in create_schedule([y.lazydata]) for u in si.ast.toposort()}
  assert Ops.SCATTER in ops and Ops.REDUCE_AXIS not in ops, ops
  np.testing.assert_array_equal(y.numpy()[:5], [[1, 1], [1, 7], [1, 3], [1, 1], [10, 1]])
  bad = x.scatter_reduce(0, Tensor([[0, 100000]], device=dev), Tensor([[2.0, 3.0]], device=dev), "prod")
  with pytest.raises(IndexError, match="index 100000 is out of bounds for size 100000"): bad.numpy()

@pytest.mark.parametrize("jit", [False, True])
def test_one_hot_checks_on_the_device(jit, dev):
  """one_hot with num_classes given reads nothing back to the host: a class out of range (negative too) raises
  IndexError at the next sync, with TinyJit (a replay runs the captured check) and without."""
  def f(y: Tensor) -> Tensor: return (y.one_hot(4) * 2).realize()
  fn = TinyJit(f) if jit else f
  for _ in range(3):
    y = (Tensor([2, 0, 3], device=dev) + 1) % 4  # unrealized: the check must not read it
    before = GlobalCounters.kernel_count
    out = y.one_hot(4)
    assert GlobalCounters.kernel_count == before and not y.lazydata.is_realized()
    np.testing.assert_array_equal(fn(y).numpy(), 2 * np.eye(4, dtype=np.int32)[[3, 1, 0]])
    np.testing.assert_array_equal(out.numpy(), np.eye(4, dtype=np.int32)[[3, 1, 0]])
  for bad, shown in (([1, 4, 0], 4), ([1, -1, 0], 4)):
    out = fn(Tensor(bad, device=dev))
    with pytest.raises(IndexError, match=f"index {shown} is out of bounds for size 4"): out.numpy()
  np.testing.assert_array_equal(fn(Tensor([0, 1, 2], device=dev)).numpy(), 2 * np.eye(4, dtype=np.int32)[:3])

@pytest.mark.parametrize("size", [0, 3, 40])
def test_masked_select_size_is_a_scatter(size, dev):
  """masked_select(size=N) (and nonzero(size=N)) place the selected rows with a scatter, O(M) work, not a one-hot of
  (N, M): against numpy, with fill_value padding, the gradient reaching the selected elements only."""
  r = _rng(60 + size)
  x = r.standard_normal((30, 2)).astype(np.float32)
  m = r.random((30, 2)) < 0.4
  t = Tensor(x, device=dev, requires_grad=True)
  out = t.masked_select(Tensor(m, device=dev), size=size, fill_value=-7.0)
  want = np.concatenate([x[m], np.full(max(0, size - m.sum()), -7.0, np.float32)])[:size]
  assert not size or Ops.SCATTER in {u.op for si in create_schedule([out.contiguous().lazydata]) for u in si.ast.toposort()}
  np.testing.assert_array_equal(out.numpy(), want)
  if size:
    w = r.standard_normal(size).astype(np.float32)
    (out * Tensor(w, device=dev)).sum().backward()
    g = np.zeros(x.size, np.float32)
    g[np.flatnonzero(m)[:size]] = w[:min(size, m.sum())]
    np.testing.assert_array_equal(t.grad.numpy(), g.reshape(x.shape))
  nz = Tensor(m, device=dev).nonzero(size=size, fill_value=-1).numpy()
  np.testing.assert_array_equal(nz, np.concatenate([np.argwhere(m), np.full((max(0, size - m.sum()), 2), -1)])[:size])
