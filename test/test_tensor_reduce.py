"""Reductions, cumulative ops, softmax family, sorting: forward and backward against PyTorch."""
import math, os, subprocess, sys, textwrap
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.engine.schedule import create_schedule
from tinycore.ops import Ops

torch = pytest.importorskip("torch")
from torch_compare import check  # noqa: E402 (after the importorskip above)


def _rng(seed=0): return np.random.default_rng(seed)


X = _rng().standard_normal((3, 4, 5)).astype(np.float32)

AXES = [None, 0, 1, -1, (0, 2), (1, 2)]

def _tdim(axis): return tuple(range(3)) if axis is None else axis

@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_max_min(axis, keepdim, dev):
  check(lambda x: x.sum(axis, keepdim), lambda x: x.sum(_tdim(axis), keepdim=keepdim), [X], dev)
  check(lambda x: x.mean(axis, keepdim), lambda x: x.mean(_tdim(axis), keepdim=keepdim), [X], dev)
  check(lambda x: x.max(axis, keepdim), lambda x: x.amax(_tdim(axis), keepdim=keepdim), [X], dev)
  check(lambda x: x.min(axis, keepdim), lambda x: x.amin(_tdim(axis), keepdim=keepdim), [X], dev)

@pytest.mark.parametrize("axis,correction", [(None, 1), (0, 0), (-1, 1), ((0, 2), 2), ((1, 2), 0)], ids=str)
def test_var_std(axis, correction, dev):
  check(lambda x: x.var(axis, correction=correction), lambda x: x.var(_tdim(axis), correction=correction), [X], dev)
  check(lambda x: x.std(axis, keepdim=True, correction=correction), lambda x: x.std(_tdim(axis), keepdim=True, correction=correction), [X], dev)

def test_var_mean_std_mean(dev):
  v, m = Tensor(X, device=dev).var_mean(1)
  tv, tm = torch.var_mean(torch.tensor(X), 1)
  np.testing.assert_allclose(v.numpy(), tv.numpy(), rtol=1e-5)
  np.testing.assert_allclose(m.numpy(), tm.numpy(), rtol=1e-5, atol=1e-6)
  s, m = Tensor(X, device=dev).std_mean((0, 2), keepdim=True, correction=0)
  ts, tm = torch.std_mean(torch.tensor(X), (0, 2), keepdim=True, correction=0)
  np.testing.assert_allclose(s.numpy(), ts.numpy(), rtol=1e-5)
  np.testing.assert_allclose(m.numpy(), tm.numpy(), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
def test_prod(axis, dev):
  x = _rng(2).uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
  x[1, 2, 3] = 0.0  # a zero: the gradient of the others in its group is still right
  check(lambda t: t.prod(axis), lambda t: t.prod(axis) if axis is not None else t.prod(), [x], dev)
  check(lambda t: t.prod(axis, keepdim=True), lambda t: t.prod(axis, keepdim=True) if axis is not None else t.prod().reshape(1, 1, 1), [x], dev)

def test_prod_ints_and_long_axis(dev):
  x = np.array([[1, -2, 3, 4, 5, -1, 2], [2, 2, 2, 2, 2, 2, 2]], np.int32)
  out = Tensor(x, device=dev).prod(1)
  assert out.dtype == dtypes.int32 and out.tolist() == [240, 128]
  assert Tensor(x, device=dev).prod(dtype=dtypes.int64).item() == 240 * 128
  y = _rng(3).uniform(0.9, 1.1, (40,)).astype(np.float32)
  check(lambda t: t.prod(), lambda t: t.prod(), [y], dev)

@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin(axis, keepdim, dev):
  t, p = Tensor(X, device=dev), torch.tensor(X)
  for a, b in ((t.argmax(axis, keepdim), p.argmax(axis, keepdim=keepdim)), (t.argmin(axis, keepdim), p.argmin(axis, keepdim=keepdim))):
    assert a.dtype == dtypes.int32 and a.shape == tuple(b.shape)
    np.testing.assert_equal(a.numpy(), b.numpy())

def test_argmax_ties_nan_ints(dev):
  # first occurrence of ties, NaN counts as the max (as torch)
  x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, math.nan, 5.0, math.nan], [-1.0, -1.0, -1.0, -1.0]], np.float32)
  np.testing.assert_equal(Tensor(x, device=dev).argmax(1).numpy(), torch.tensor(x).argmax(1).numpy())
  np.testing.assert_equal(Tensor(x, device=dev).argmin(1).numpy(), torch.tensor(x).argmin(1).numpy())
  i = np.array([[3, 7, 7, -2], [-5, -5, 0, 1]], np.int8)
  np.testing.assert_equal(Tensor(i, device=dev).argmax(1).numpy(), [1, 3])
  np.testing.assert_equal(Tensor(i, device=dev).argmin(1).numpy(), [3, 0])
  np.testing.assert_equal(Tensor([False, True, True], device=dev).argmax().item(), 1)

def test_any_all(dev):
  b = _rng(4).random((3, 4)) > 0.7
  for axis in (None, 0, 1):
    np.testing.assert_equal(Tensor(b, device=dev).any(axis).numpy(), torch.tensor(b).any(axis) if axis is not None else torch.tensor(b).any())
    np.testing.assert_equal(Tensor(b, device=dev).all(axis).numpy(), torch.tensor(b).all(axis) if axis is not None else torch.tensor(b).all())
  f = np.array([[0.0, 0.5], [0.0, 0.0]], np.float32)
  assert Tensor(f, device=dev).any(1, keepdim=True).tolist() == [[True], [False]]
  assert Tensor(f, device=dev).all().item() is False and Tensor([1, 2], device=dev).all().item() is True

@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)], ids=str)
def test_logsumexp(axis, dev):
  check(lambda x: x.logsumexp(axis), lambda x: x.logsumexp(_tdim(axis)), [X * 10], dev)
  check(lambda x: x.logsumexp(axis, keepdim=True), lambda x: x.logsumexp(_tdim(axis), keepdim=True), [X], dev)

def test_logsumexp_inf(dev):
  x = np.array([[-math.inf, -math.inf], [math.inf, 1.0], [1000.0, 1000.0]], np.float32)
  np.testing.assert_allclose(Tensor(x, device=dev).logsumexp(1).numpy(), torch.tensor(x).logsumexp(1).numpy())

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_log_softmax(axis, dev):
  check(lambda x: x.softmax(axis), lambda x: x.softmax(axis), [X * 3], dev)
  check(lambda x: x.log_softmax(axis), lambda x: x.log_softmax(axis), [X * 3], dev)

def test_softmax_stable_and_dtypes(dev):
  big = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -math.inf]], np.float32)
  np.testing.assert_allclose(Tensor(big, device=dev).softmax().numpy(), torch.tensor(big).softmax(-1).numpy(), rtol=1e-6)
  np.testing.assert_allclose(Tensor(big, device=dev).log_softmax().numpy(), torch.tensor(big).log_softmax(-1).numpy(), rtol=1e-6)
  h = Tensor(X, device=dev).half().softmax()
  assert h.dtype == dtypes.float16
  np.testing.assert_allclose(h.numpy(), torch.tensor(X).softmax(-1).numpy(), atol=2e-3)
  assert Tensor(X, device=dev).softmax(dtype=dtypes.float64).dtype == dtypes.float64
  assert Tensor([1, 2, 3], device=dev).softmax().dtype == dtypes.float32

@pytest.mark.parametrize("fn", ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumulative(fn, axis, dev):
  x = X if fn != "cumprod" else _rng(5).uniform(0.5, 1.5, X.shape).astype(np.float32)
  tfn = {"cumsum": lambda t: t.cumsum(axis), "cumprod": lambda t: t.cumprod(axis), "cummax": lambda t: t.cummax(axis).values,
         "cummin": lambda t: t.cummin(axis).values, "logcumsumexp": lambda t: t.logcumsumexp(axis)}[fn]
  check(lambda t: getattr(t, fn)(axis)[0] if fn in ("cummax", "cummin") else getattr(t, fn)(axis), tfn, [x], dev)

def test_cumulative_long_axis():
  # past the triangular-mask size: the blocked scan (cumsum) and the multi-kernel log-depth scans
  x = _rng(6).standard_normal((2, 600)).astype(np.float32)
  check(lambda t: t.cumsum(1), lambda t: t.cumsum(1), [x], "CLANG", atol=1e-4)
  y = _rng(7).uniform(0.999, 1.001, (520,)).astype(np.float32)
  check(lambda t: t.cumprod(0), lambda t: t.cumprod(0), [y], "CLANG", grad=False)
  check(lambda t: t.cummax(0)[0], lambda t: t.cummax(0).values, [y], "CLANG", grad=False)
  check(lambda t: t.cummin(0)[0], lambda t: t.cummin(0).values, [y], "CLANG", grad=False)
  # no ties in random floats: the indices are torch's too, through the log-depth scan
  check(lambda t: t.cummax(0)[1], lambda t: t.cummax(0).indices.int(), [y], "CLANG", grad=False)
  check(lambda t: t.cummin(0)[1], lambda t: t.cummin(0).indices.int(), [y], "CLANG", grad=False)

def test_large_sums_are_accurate(dev):
  # one float32 accumulator stops growing at 2**24 ones (the sum of 2**27 ones was 67108864): long float sums are staged
  # into partial sums of at most REDUCE_SPLIT elements, so every accumulator stays short
  n = 2**27
  for got in (Tensor.ones(n, device=dev).sum().item(), Tensor.ones(n, device=dev).mean().item() * n):
    assert abs(got - n) / n < 1e-6, got
  # 2**24 uniform floats against float64: one float32 accumulator is off by percents here (its last additions round to
  # its ulp of 0.5-1); chunked, the error stays near float32 rounding of the result (bound 1e-6, measured ~5e-8)
  x = np.random.default_rng(0).random(2**24, dtype=np.float32)
  ref = x.astype(np.float64).sum()
  assert abs(Tensor(x, device=dev).sum().item() - ref) / ref < 1e-6
  assert abs(Tensor(x, device=dev).mean().item() - ref / x.size) / (ref / x.size) < 1e-6
  # staged along a column, over several axes, and over a length with no divisor near the chunk size (zero padding),
  # including an input where padding with zeros is not neutral (exp: the input is computed first)
  y = np.random.default_rng(1).standard_normal((3, 100003)).astype(np.float32)
  np.testing.assert_allclose(Tensor(y, device=dev).sum(1).numpy(), y.astype(np.float64).sum(1), rtol=0, atol=1e-6 * np.abs(y).sum())
  np.testing.assert_allclose(Tensor(y, device=dev).exp().sum(1).numpy(), np.exp(y.astype(np.float64)).sum(1), rtol=1e-6)
  z = np.random.default_rng(2).standard_normal((40, 3, 30, 30)).astype(np.float32)
  got = Tensor(z, device=dev).sum((0, 2, 3), keepdim=True)
  assert got.shape == (1, 3, 1, 1)
  np.testing.assert_allclose(got.numpy().ravel(), z.astype(np.float64).sum((0, 2, 3)), rtol=0, atol=1e-6 * np.abs(z).sum())
  w = np.random.default_rng(3).standard_normal((70000, 3)).astype(np.float32)
  np.testing.assert_allclose(Tensor(w, device=dev).sum(0).numpy(), w.astype(np.float64).sum(0), rtol=0, atol=1e-6 * np.abs(w).sum())

def test_staged_sum_of_a_vocab_matmul_is_unpadded(dev):
  """The gradient of GPT-2's tied embedding sums over its 50257-word vocabulary: staged into 4 chunks padded to 12565
  each, the pad made every load a second view that the code generator left a scalar loop (430 s of a 440 s step).
  50257 = 29 x 1733: the chunks are a divisor, every load one view, and the product still matches float64."""
  rng = np.random.default_rng(4)
  a, b = rng.standard_normal((3, 50257)).astype(np.float32), rng.standard_normal((50257, 5)).astype(np.float32)
  out = Tensor(a, device=dev) @ Tensor(b, device=dev)
  for si in create_schedule([out.lazydata]):
    for u in si.ast.toposort():
      if u.op is Ops.LOAD: assert len(u.src[1].arg.views) == 1, u.src[1].arg
  np.testing.assert_allclose(out.numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=0, atol=1e-5 * (np.abs(a) @ np.abs(b)).max())

def test_staged_matmul_partials_lie_in_output_order(dev):
  """A matmul over 32768 is summed in 2 chunks: their partials were laid out (rows, cols, 2), so the code generator put
  its vector lanes on the 2 chunks and the matmul ran ~10x slower than unstaged. The partials are (2, rows, cols) now:
  the first kernel stores along the columns."""
  rng = np.random.default_rng(5)
  a, b = rng.standard_normal((3, 32768)).astype(np.float32), rng.standard_normal((32768, 5)).astype(np.float32)
  out = Tensor(a, device=dev) @ Tensor(b, device=dev)
  first = next(si for si in create_schedule([out.lazydata]) if si.ast.op is Ops.SINK)
  assert first.ast.src[0].src[1].arg.shape[:3] == (2, 3, 5), first.ast.src[0].src[1].arg
  np.testing.assert_allclose(out.numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=0, atol=1e-5 * (np.abs(a) @ np.abs(b)).max())

def test_masked_0d_and_empty_prod(dev):
  # an element of the padding made 0-d is the pad value, not the buffer's element; an empty product is 1
  assert Tensor([0.5], device=dev).pad(((1, 0),))[0].item() == torch.nn.functional.pad(torch.tensor([0.5]), (1, 0))[0].item() == 0.0
  assert Tensor([0.5], device=dev).pad(((1, 0),), value=2.0)[0].item() == 2.0
  assert Tensor([], device=dev).prod().item() == torch.tensor([]).prod().item() == 1.0
  assert Tensor.zeros(0, 3, device=dev).prod(0).tolist() == torch.zeros(0, 3).prod(0).tolist()

def test_cumprod_backward_long_axis(tmp_path):
  # past 512 elements the scan's gradient became one kernel of ~10,000 nodes that never finished compiling: now every
  # kernel stays within the scheduler's limit. Run in a process of its own with a fresh compile cache; its timeout is
  # only a guard against a hang
  code = textwrap.dedent("""
    import numpy as np, torch
    from tinycore import Tensor
    from tinycore.engine.schedule import KERNEL_OPS_MAX
    for n in (513, 1000):
      xn = np.random.default_rng(n).uniform(0.99, 1.01, n).astype(np.float32)
      x = Tensor(xn, requires_grad=True)
      x.cumprod(0).sum().backward()
      sizes = [len(si.ast.toposort()) for si in x.grad.schedule()]
      assert max(sizes) <= KERNEL_OPS_MAX.value, f"n={n}: kernel sizes {sorted(sizes)[-5:]}"
      tx = torch.tensor(xn, requires_grad=True)
      tx.cumprod(0).sum().backward()
      np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4)
  """)
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                     env={**os.environ, "TINYCORE_CACHE_DIR": str(tmp_path), "DEV": "CLANG"})
  assert r.returncode == 0, r.stderr[-3000:]

def test_cumulative_dtypes_edges(dev):
  i = np.array([[1, 2, 3], [4, -5, 6]], np.int8)
  c = Tensor(i, device=dev).cumsum(1)
  assert c.dtype == dtypes.int32 and c.tolist() == np.cumsum(i, 1).tolist()
  assert Tensor(i, device=dev).cumprod(1).tolist() == np.cumprod(i, 1).tolist()
  assert Tensor(i, device=dev).cummax(1)[0].tolist() == np.maximum.accumulate(i, 1).tolist()
  assert Tensor(i, device=dev).cummin(0)[0].tolist() == np.minimum.accumulate(i, 0).tolist()
  assert Tensor([True, False, True], device=dev).cumsum().tolist() == [1, 1, 2]
  assert Tensor.zeros(0, device=dev).cumsum().shape == (0,)
  assert Tensor(3.0, device=dev).cumsum().item() == 3.0
  h = Tensor(X, device=dev).half().cumsum(-1)
  assert h.dtype == dtypes.float16
  np.testing.assert_allclose(h.numpy(), np.cumsum(X.astype(np.float16), -1), atol=1e-2)

@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_argsort(dim, descending, dev):
  check(lambda x: x.sort(dim, descending)[0], lambda x: x.sort(dim, descending)[0], [X], dev)
  i = Tensor(X, device=dev).sort(dim, descending)[1]
  assert i.dtype == dtypes.int32
  np.testing.assert_equal(i.numpy(), torch.tensor(X).sort(dim, descending)[1].numpy())
  np.testing.assert_equal(Tensor(X, device=dev).argsort(dim, descending).numpy(), torch.tensor(X).argsort(dim, descending).numpy())

def test_sort_nan_ties_ints(dev):
  x = np.array([3.0, math.nan, -1.0, 3.0, math.inf, -math.inf, 0.0], np.float32)
  for desc in (False, True):
    v, i = Tensor(x, device=dev).sort(descending=desc)
    tv, ti = torch.sort(torch.tensor(x), descending=desc, stable=True)
    np.testing.assert_equal(v.numpy(), tv.numpy())
    np.testing.assert_equal(i.numpy(), ti.numpy())
  n = np.array([[5, -3, 5, 0], [1, 1, 1, 1]], np.int16)
  v, i = Tensor(n, device=dev).sort(1)
  assert v.dtype == dtypes.int16
  np.testing.assert_equal(v.numpy(), np.sort(n, 1, kind="stable"))
  np.testing.assert_equal(i.numpy(), np.argsort(n, 1, kind="stable"))
  b = Tensor([True, False, True], device=dev).sort()[0]
  assert b.tolist() == [False, True, True]

@pytest.mark.parametrize("k,dim,largest", [(1, -1, True), (3, -1, True), (2, 0, False), (4, 1, False), (5, 2, True)])
def test_topk(k, dim, largest, dev):
  check(lambda x: x.topk(k, dim, largest)[0], lambda x: x.topk(k, dim, largest)[0], [X], dev)
  np.testing.assert_equal(Tensor(X, device=dev).topk(k, dim, largest)[1].numpy(), torch.tensor(X).topk(k, dim, largest)[1].numpy())

def test_reduce_dtypes(dev):
  i8 = Tensor(np.array([100, 100, 100], np.int8), device=dev)
  assert i8.sum().dtype == dtypes.int32 and i8.sum().item() == 300
  u8 = Tensor(np.array([200, 200], np.uint8), device=dev)
  assert u8.sum().dtype == dtypes.uint32 and u8.sum().item() == 400
  assert Tensor([True, True, False], device=dev).sum().item() == 2
  h = Tensor(np.full(3000, 0.1, np.float16), device=dev)
  assert h.sum().dtype == dtypes.float16 and abs(h.sum().item() - 300) < 0.5
  assert Tensor([1, 2], device=dev).mean().dtype == dtypes.float32 and Tensor([1, 2], device=dev).mean().item() == 1.5
  assert Tensor([1, 2], device=dev).sum(dtype=dtypes.float32).dtype == dtypes.float32
  assert Tensor([1, 2], device=dev).sum(acc_dtype=dtypes.int64).dtype == dtypes.int64
  m = Tensor(np.array([3, -7, 5], np.int64), device=dev)
  assert m.max().item() == 5 and m.min().item() == -7 and m.max().dtype == dtypes.int64
  u = Tensor(np.array([3, 0, 250], np.uint8), device=dev)
  assert u.min().item() == 0 and u.max().item() == 250
  assert Tensor([True, False], device=dev).min().item() is False and Tensor([True, False], device=dev).max().item() is True

def test_reduce_nan_inf(dev):
  x = np.array([[1.0, math.nan, 2.0], [math.inf, 1.0, -math.inf], [-math.inf, -1.0, -2.0]], np.float32)
  t, p = Tensor(x, device=dev), torch.tensor(x)
  for a, b in ((t.sum(1), p.sum(1)), (t.max(1), p.amax(1)), (t.min(1), p.amin(1)), (t.mean(1), p.mean(1)), (t.prod(1), p.prod(1))):
    np.testing.assert_equal(a.numpy(), b.numpy())

def test_reduce_edge_shapes(dev):
  e = Tensor.zeros(0, 3, device=dev)
  assert e.sum().item() == 0 and e.sum(0).tolist() == [0, 0, 0] and e.sum(1).shape == (0,)
  assert math.isnan(e.mean().item()) and e.prod(0).tolist() == [1, 1, 1]
  assert e.any().item() is False and e.all().item() is True and e.max(1).shape == (0,)
  one = Tensor([[2.5]], device=dev, requires_grad=True)
  out = one.sum() + one.max() + one.mean() + one.prod()
  out.backward()
  assert out.item() == 10.0 and one.grad.tolist() == [[4.0]]
  s = Tensor(4.0, device=dev)
  assert s.sum().item() == 4.0 and s.max(0).item() == 4.0 and s.sum(axis=-1).shape == ()
  nc = Tensor(X, device=dev).permute(2, 0, 1)[::2, 1:]
  np.testing.assert_allclose(nc.sum((0, 2)).numpy(), X.transpose(2, 0, 1)[::2, 1:].sum((0, 2)), rtol=1e-5)

def test_sum_over_broadcast_dim(dev):
  ex = Tensor(X[:, :1], device=dev).expand(3, 6, 5)
  np.testing.assert_allclose(ex.sum(1).numpy(), 6 * X[:, 0], rtol=1e-5)
  np.testing.assert_equal(Tensor.ones(7, 5, device=dev).sum(0).numpy(), np.full(5, 7.0))

def test_reduce_errors():
  x = Tensor.ones(2, 3)
  with pytest.raises(IndexError, match="out of range"): x.sum(2)
  with pytest.raises(ValueError, match="repeats"): x.sum((0, 0))
  with pytest.raises(RuntimeError, match="empty"): Tensor.zeros(0, 3).argmax(0)
  with pytest.raises(ValueError, match="topk"): x.topk(4)
  with pytest.raises(TypeError, match="dim must be an int"): x.cumsum(1.5)

def test_max_ties_gradient(dev):
  x = Tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], device=dev, requires_grad=True)
  x.max(1).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [[0, 0.5, 0.5], [0.5, 0, 0.5]])

# *** tinygrad 0.14 semantics (issue 10) ***
def _tinygrad():
  import tinygrad
  tinygrad.helpers.DEV.value = "CPU"
  return tinygrad

@pytest.mark.parametrize("fn", ["cummax", "cummin"])
def test_cummax_cummin_indices(fn, dev):
  tg = _tinygrad()
  # ties (ints) follow tinygrad 0.14: the index where the running value first appeared
  for x in (np.array([[1, 3, 3, 2, 5, 5], [4, 4, 1, 0, 0, 7]], np.int32), np.array([True, False, True, True]), np.array(2.5, np.float32)):
    v, i = getattr(Tensor(x, device=dev), fn)(0 if x.ndim < 2 else 1)
    rv, ri = getattr(tg.Tensor(x), fn)(0 if x.ndim < 2 else 1)
    assert v.dtype.name == rv.dtype.name and i.dtype == dtypes.int32 and i.shape == tuple(ri.shape)
    np.testing.assert_equal(v.numpy(), rv.numpy())
    np.testing.assert_equal(i.numpy(), ri.numpy())
  # distinct values: torch's values and indices, forward and backward of the values
  r = _rng(9).permutation(40).reshape(5, 8).astype(np.float32)
  for axis in (0, 1, -1):
    check(lambda t, a=axis: getattr(t, fn)(a)[0], lambda t, a=axis: getattr(torch, fn)(t, a).values, [r], dev)
    check(lambda t, a=axis: getattr(t, fn)(a)[1], lambda t, a=axis: getattr(torch, fn)(t, a).indices.int(), [r], dev, grad=False)
  # a NaN is the running max and min from where it appears, the index that of the last NaN (as torch)
  n = np.array([1.0, np.nan, 3.0, np.nan, 0.5], np.float32)
  v, i = getattr(Tensor(n, device=dev), fn)()
  rv, ri = getattr(torch, fn)(torch.tensor(n), 0)
  np.testing.assert_equal(v.numpy(), rv.numpy())
  np.testing.assert_equal(i.numpy(), ri.numpy())

def test_empty_max_min_are_the_identity(dev):
  tg = _tinygrad()
  cases = (((0,), "float32", None, False), ((0, 3), "float32", 0, False), ((2, 0), "float32", 1, True), ((0, 3), "int32", None, False),
           ((0,), "uint8", None, False), ((0,), "bool", None, False), ((3, 0), "int8", 1, False))
  for shape, dt, axis, keep in cases:
    for fn in ("max", "min"):
      t = getattr(Tensor.zeros(*shape, dtype=dt, device=dev), fn)(axis, keepdim=keep)
      r = getattr(tg.Tensor.zeros(*shape, dtype=dt), fn)(axis, keepdim=keep)
      assert t.shape == tuple(r.shape) and t.numpy().dtype == r.numpy().dtype
      np.testing.assert_equal(t.numpy(), r.numpy())
