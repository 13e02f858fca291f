"""Tensor creation, random numbers, dtype/device conversion and properties, on CLANG and PYTHON."""
import math
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.ops import Ops


# *** creation ***
def test_zeros_ones_full(dev):
  z = Tensor.zeros(2, 3, device=dev)
  assert z.shape == (2, 3) and z.dtype == dtypes.float32 and z.device == dev
  np.testing.assert_equal(z.numpy(), np.zeros((2, 3)))
  np.testing.assert_equal(Tensor.ones((3,), device=dev, dtype=dtypes.int8).numpy(), np.ones(3, np.int8))
  f = Tensor.full((2, 2), 7, device=dev)
  assert f.dtype == dtypes.int32
  np.testing.assert_equal(f.numpy(), np.full((2, 2), 7))
  assert Tensor.full((2,), 2.5).dtype == dtypes.float32 and Tensor.full((2,), True).dtype == dtypes.bool
  np.testing.assert_equal(Tensor.full([2, 1], math.inf, device=dev).numpy(), np.full((2, 1), np.inf))
  assert Tensor.zeros([4, 0]).shape == (4, 0) and Tensor.ones(()).shape == ()
  t = Tensor.ones(2, 2, requires_grad=True)
  assert t.requires_grad is True

def test_like(dev):
  x = Tensor([[1, 2], [3, 4]], device=dev, dtype=dtypes.int16)
  for t, v in ((x.zeros_like(), 0), (x.ones_like(), 1), (x.full_like(5), 5)):
    assert t.shape == (2, 2) and t.dtype == dtypes.int16 and t.device == dev
    np.testing.assert_equal(t.numpy(), np.full((2, 2), v))
  assert x.zeros_like(dtype=dtypes.float32).dtype == dtypes.float32
  assert x.empty_like().shape == (2, 2)
  r = x.rand_like()
  assert r.dtype == dtypes.float32 and r.shape == (2, 2)
  assert Tensor.ones(3, dtype=dtypes.float16).randn_like().dtype == dtypes.float16

@pytest.mark.parametrize("args", [(5,), (2, 7), (0, 10, 3), (10, 0, -2), (1.5, 4.0, 0.5), (-3, 3), (3, 3), (0, 1, 0.1)])
def test_arange(args, dev):
  out = Tensor.arange(*args, device=dev)
  ref = np.arange(*args)
  assert out.shape == ref.shape
  assert out.dtype == (dtypes.float32 if ref.dtype.kind == "f" else dtypes.int32)
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-6)
  assert Tensor.arange(4, dtype=dtypes.float16).dtype == dtypes.float16
  with pytest.raises(ValueError, match="step"): Tensor.arange(0, 5, 0)

@pytest.mark.parametrize("args", [(0, 1, 5), (-2.5, 7.0, 11), (3, 3, 1), (1, 2, 0), (5, -5, 4)])
def test_linspace(args, dev):
  np.testing.assert_allclose(Tensor.linspace(*args, device=dev).numpy(), np.linspace(*args), rtol=1e-6, atol=1e-6)
  with pytest.raises(ValueError, match="steps"): Tensor.linspace(0, 1, -1)

@pytest.mark.parametrize("nm", [(3, None), (2, 4), (4, 2), (1, None), (0, 3)])
def test_eye(nm, dev):
  n, m = nm
  np.testing.assert_equal(Tensor.eye(n, m, device=dev).numpy(), np.eye(n, m))
  assert Tensor.eye(3, dtype=dtypes.int32).dtype == dtypes.int32

def test_meshgrid(dev):
  torch = pytest.importorskip("torch")
  a, b, c = np.arange(3), np.arange(4) * 2, np.arange(2)
  for indexing in ("ij", "xy"):
    outs = Tensor(a, device=dev).meshgrid(Tensor(b, device=dev), Tensor(c, device=dev), indexing=indexing)
    refs = torch.meshgrid(torch.tensor(a), torch.tensor(b), torch.tensor(c), indexing=indexing)
    for o, r in zip(outs, refs): np.testing.assert_equal(o.numpy(), r.numpy())
  with pytest.raises(ValueError, match="indexing"): Tensor(a).meshgrid(Tensor(b), indexing="ab")
  with pytest.raises(ValueError, match="1-D"): Tensor.ones(2, 2).meshgrid(Tensor(b))

@pytest.mark.parametrize("npdt,dt", [(np.float32, dtypes.float32), (np.float64, dtypes.float64), (np.float16, dtypes.float16), (np.int8, dtypes.int8),
                                     (np.uint8, dtypes.uint8), (np.int16, dtypes.int16), (np.uint16, dtypes.uint16), (np.int32, dtypes.int32),
                                     (np.uint32, dtypes.uint32), (np.int64, dtypes.int64), (np.uint64, dtypes.uint64), (np.bool_, dtypes.bool)])
def test_from_numpy_roundtrip(npdt, dt, dev):
  x = (np.arange(12).reshape(3, 4) % 5).astype(npdt)
  t = Tensor(x, device=dev)
  assert t.dtype == dt and t.shape == (3, 4)
  np.testing.assert_equal(t.numpy(), x)
  assert t.numpy().dtype == x.dtype
  np.testing.assert_equal(Tensor(x.T, device=dev).numpy(), x.T)  # non-contiguous numpy input

def test_from_python(dev):
  assert Tensor([1, 2, 3]).dtype == dtypes.int32
  assert Tensor([1, 2.5]).dtype == dtypes.float32
  assert Tensor([True, False]).dtype == dtypes.bool
  assert Tensor([[1, 2], [3, 4]], device=dev).tolist() == [[1, 2], [3, 4]]
  assert Tensor([]).shape == (0,) and Tensor([]).dtype == dtypes.float32
  s = Tensor(3.5, device=dev)
  assert s.shape == () and s.item() == 3.5
  assert Tensor(7).dtype == dtypes.int32 and Tensor(True).dtype == dtypes.bool
  assert Tensor([1, 2], dtype=dtypes.float16).dtype == dtypes.float16
  assert Tensor([1, 2], dtype="float").dtype == dtypes.float32
  b = Tensor(b"\x01\x02\xff", device=dev)
  assert b.dtype == dtypes.uint8 and b.tolist() == [1, 2, 255]
  assert Tensor(np.float32(2.0)).dtype == dtypes.float32
  c = Tensor(Tensor([1.0, 2.0], device="PYTHON"), device=dev)
  assert c.device == dev and c.tolist() == [1.0, 2.0]

def test_creation_errors():
  with pytest.raises(TypeError, match="ragged"): Tensor([[1, 2], [3]])
  with pytest.raises(TypeError, match="cannot make a Tensor"): Tensor({"a": 1})
  with pytest.raises(TypeError, match="unknown dtype"): Tensor([1], dtype="float33")
  with pytest.raises(ValueError, match="non-negative"): Tensor.zeros(2, -1)
  with pytest.raises(ValueError, match="non-negative"): Tensor.empty(2.5)
  with pytest.raises(ValueError, match="one element"): Tensor([1, 2]).item()
  with pytest.raises(TypeError, match="len"): len(Tensor(1.0))

# *** properties and conversion ***
def test_properties(dev):
  t = Tensor.ones(2, 3, 4, device=dev, dtype=dtypes.float16)
  assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24 and t.element_size() == 2 and t.nbytes() == 48
  assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4) and t.size(-1) == 4 and t.device == dev and t.dtype == dtypes.float16
  assert len(t) == 2 and [x.shape for x in t] == [(3, 4), (3, 4)]
  assert t.is_floating_point() and not Tensor([1]).is_floating_point()
  d = Tensor([1.5, 2.5], device=dev).data()
  assert isinstance(d, memoryview) and bytes(d) == np.array([1.5, 2.5], np.float32).tobytes()
  assert Tensor([[1, 2]], device=dev).tolist() == [[1, 2]] and Tensor([4], device=dev).item() == 4

@pytest.mark.parametrize("fn,dt", [("half", dtypes.float16), ("float", dtypes.float32), ("double", dtypes.float64), ("int", dtypes.int32),
                                   ("long", dtypes.int64), ("bool", dtypes.bool), ("short", dtypes.int16), ("char", dtypes.int8)])
def test_cast_methods(fn, dt, dev):
  x = np.array([-2.7, -0.5, 0.0, 1.5, 3.9], np.float32)
  out = getattr(Tensor(x, device=dev), fn)()
  assert out.dtype == dt
  ref = {dtypes.float16: x.astype(np.float16), dtypes.float32: x, dtypes.float64: x.astype(np.float64), dtypes.int32: np.trunc(x).astype(np.int32),
         dtypes.int64: np.trunc(x).astype(np.int64), dtypes.bool: x != 0, dtypes.int16: np.trunc(x).astype(np.int16),
         dtypes.int8: np.trunc(x).astype(np.int8), dtypes.bfloat16: x}[dt]
  np.testing.assert_allclose(out.numpy().astype(np.float64), ref.astype(np.float64), rtol=1e-2 if dt == dtypes.bfloat16 else 0)

def test_bfloat16(dev):
  # PYTHON interprets bfloat16; CLANG emulates it in float (see test_dtype.py)
  x = np.array([-2.7, 0.0, 1.5, 3.9], np.float32)
  out = Tensor(x, device=dev).bfloat16()
  assert out.dtype == dtypes.bfloat16
  np.testing.assert_allclose(out.numpy(), x, rtol=1e-2)
  np.testing.assert_allclose((out * 2).float().numpy(), x * 2, rtol=1e-2)

def test_cast_gradient(dev):
  x = Tensor([1.5, -2.0], device=dev, requires_grad=True)
  (x.half().float() * 3).sum().backward()
  np.testing.assert_equal(x.grad.numpy(), [3, 3])
  assert x.grad.dtype == dtypes.float32

@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.int32, np.float32), (np.float32, np.uint32), (np.float16, np.int16),
                                     (np.float32, np.uint8), (np.uint8, np.float32), (np.int64, np.int32), (np.int16, np.int64)])
def test_bitcast(src, dst, dev):
  x = np.array([[1.5, -2.25, 3.0, 100.0], [0.0, -0.0, 7.0, 1e-3]]).astype(src) if np.dtype(src).kind == "f" else \
    np.array([[1, -2, 3, 100], [0, 255, 7, 12345]]).astype(src)
  ref = x.view(dst)
  out = Tensor(x, device=dev).bitcast({np.int32: dtypes.int32, np.float32: dtypes.float32, np.uint32: dtypes.uint32, np.int16: dtypes.int16,
                                       np.uint8: dtypes.uint8, np.int64: dtypes.int64}[dst])
  assert out.shape == ref.shape
  np.testing.assert_equal(out.numpy(), ref)

def test_bitcast_errors():
  with pytest.raises(RuntimeError, match="not differentiable"): Tensor([1.0], requires_grad=True).bitcast(dtypes.int32)
  with pytest.raises(ValueError, match="divisible"): Tensor(np.zeros(3, np.uint8)).bitcast(dtypes.float32)
  with pytest.raises(TypeError, match="bool"): Tensor([True]).bitcast(dtypes.int16)

def test_to_device_clone_detach(dev):
  other = "PYTHON" if dev == "CLANG" else "CLANG"
  x = Tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
  y = x.to(other)
  assert y.device == other and y.tolist() == [1.0, 2.0, 3.0] and y.requires_grad
  assert x.to(dev) is x
  z = Tensor([1.0, 2.0], device=dev)
  z.to_(other)
  assert z.device == other and z.tolist() == [1.0, 2.0]
  a = Tensor([1.0, 2.0], device=dev).contiguous().realize()
  c = a.clone().realize()
  assert c.lazydata.base.buffer is not a.lazydata.base.buffer
  a.assign(Tensor([5.0, 6.0], device=dev)).realize()
  assert c.tolist() == [1.0, 2.0] and a.tolist() == [5.0, 6.0]
  d = x.detach()
  assert d.requires_grad is False and d.tolist() == [1.0, 2.0, 3.0] and d.sum().gradient(x)[0].tolist() == [0.0, 0.0, 0.0]
  (x.clone() * 2).sum().backward()
  assert x.grad.tolist() == [2.0, 2.0, 2.0]
  p = Tensor.ones(3, 4, device=dev).permute(1, 0).contiguous()
  assert p.lazydata.st.contiguous and p.shape == (4, 3)

def test_assign_and_inplace(dev):
  a = Tensor.zeros(2, 2, device=dev).contiguous().realize()
  a += 1
  a *= 3
  a -= Tensor([[1.0, 0.0], [0.0, 1.0]], device=dev)
  a /= 2
  np.testing.assert_equal(a.numpy(), [[1.0, 1.5], [1.5, 1.0]])
  with pytest.raises(ValueError, match="shape"): a.assign(Tensor.ones(3, device=dev))
  with pytest.raises(TypeError, match="dtype"): a.assign(Tensor.ones(2, 2, dtype=dtypes.int32, device=dev))
  b = Tensor.zeros(2, device=dev).contiguous().realize()
  buf = b.lazydata.base.buffer
  b.assign(Tensor([3.0, 4.0], device=dev)).realize()
  assert b.lazydata.base.buffer is buf and b.tolist() == [3.0, 4.0]

# *** random ***
def test_rand_deterministic_across_devices():
  Tensor.manual_seed(1234)
  a = Tensor.rand(3, 5, device="CLANG").numpy()
  a2 = Tensor.rand(7, device="CLANG").numpy()
  Tensor.manual_seed(1234)
  b = Tensor.rand(3, 5, device="PYTHON").numpy()
  b2 = Tensor.rand(7, device="PYTHON").numpy()
  np.testing.assert_equal(a, b)
  np.testing.assert_equal(a2, b2)
  assert not np.array_equal(a.reshape(-1)[:7], a2)
  Tensor.manual_seed(1234)
  np.testing.assert_equal(Tensor.rand(3, 5, device="CLANG").numpy(), a)
  Tensor.manual_seed(1235)
  assert not np.array_equal(Tensor.rand(3, 5, device="CLANG").numpy(), a)

@pytest.mark.parametrize("fn", [lambda d: Tensor.randn(4, 3, device=d), lambda d: Tensor.randint(10, low=-5, high=50, device=d),
                                lambda d: Tensor.normal(6, mean=2, std=3, device=d), lambda d: Tensor.uniform(5, low=-2, high=2, device=d),
                                lambda d: Tensor.kaiming_uniform(3, 4, device=d), lambda d: Tensor.kaiming_normal(3, 4, device=d),
                                lambda d: Tensor.glorot_uniform(3, 4, device=d), lambda d: Tensor.scaled_uniform(3, 4, device=d),
                                lambda d: Tensor.randperm(9, device=d), lambda d: Tensor.rand(5, device=d, dtype=dtypes.float16)],
                         ids=["randn", "randint", "normal", "uniform", "kaiming_uniform", "kaiming_normal", "glorot", "scaled", "randperm",
                              "rand_half"])
def test_random_same_on_every_device(fn):
  Tensor.manual_seed(7)
  a = fn("CLANG").numpy()
  Tensor.manual_seed(7)
  b = fn("PYTHON").numpy()
  np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-5, atol=1e-6)

# the sizes below fall into few draw buckets (16 and 4096 random words): each bucket compiles one threefry kernel
def test_rand_distribution():
  Tensor.manual_seed(0)
  x = Tensor.rand(4096, device="CLANG").numpy()
  assert x.dtype == np.float32 and x.min() >= 0 and x.max() < 1
  assert abs(x.mean() - 0.5) < 0.02 and abs(x.std() - math.sqrt(1 / 12)) < 0.02
  h = Tensor.rand(4096, device="CLANG", dtype=dtypes.float16).numpy()
  assert h.dtype == np.float16 and h.max() < 1 and h.min() >= 0
  n = Tensor.randn(2048, device="CLANG").numpy()
  assert abs(n.mean()) < 0.08 and abs(n.std() - 1) < 0.06 and np.isfinite(n).all()
  g = Tensor.normal(2048, mean=3.0, std=0.5, device="CLANG").numpy()
  assert abs(g.mean() - 3) < 0.05 and abs(g.std() - 0.5) < 0.04

def test_randint():
  Tensor.manual_seed(3)
  r = Tensor.randint(4096, low=-3, high=4, device="CLANG")
  assert r.dtype == dtypes.int32
  v = r.numpy()
  assert v.min() == -3 and v.max() == 3 and set(np.unique(v)) == set(range(-3, 4))
  counts = np.bincount(v + 3)
  assert counts.min() > 450
  big = Tensor.randint(4096, low=0, high=2**31 - 1, dtype=dtypes.int64, device="CLANG").numpy()
  assert big.dtype == np.int64 and big.max() > 2**30 and big.min() >= 0
  assert Tensor.randint(2, 3, high=5).shape == (2, 3)
  with pytest.raises(ValueError, match="low < high"): Tensor.randint(3, low=5, high=5)
  with pytest.raises(TypeError, match="integer dtype"): Tensor.randint(3, dtype=dtypes.float32)
  with pytest.raises(TypeError, match="float dtype"): Tensor.rand(3, dtype=dtypes.int32)

@pytest.mark.parametrize("low,high,dt", [(0, 10, dtypes.int32), (-5, 2**31, dtypes.int32), (-2**31, 2**31, dtypes.int32),
                                         (7, 2**31 + 3, dtypes.int64), (0, 2**32, dtypes.int64), (0, 2**32 - 1, dtypes.uint32)])
def test_randint_is_the_high_word_of_bits_times_range(dev, low, high, dt):
  # floor(bits * range / 2^32) + low, against numpy's uint64 product; int32 ranges need no 64-bit int on the device
  Tensor.manual_seed(3)
  bits = Tensor._random_bits(1000, dev).numpy()[:1000].astype(np.uint64)
  Tensor.manual_seed(3)
  r = Tensor.randint(1000, low=low, high=high, dtype=dt, device=dev)
  if dt == dtypes.int32:
    assert not {dtypes.int64, dtypes.uint64} & {u.dtype for s in r.schedule() if s.ast.op is Ops.SINK for u in s.ast.toposort()}
  np.testing.assert_equal(r.numpy(), (((bits * np.uint64(high - low)) >> np.uint64(32)).astype(np.int64) + low).astype(dt.fmt))

def test_init_bounds():
  Tensor.manual_seed(5)
  shape = (64, 64)
  for fn, bound in ((Tensor.kaiming_uniform, math.sqrt(3) * math.sqrt(2 / (1 + 0.01 ** 2)) / math.sqrt(64)),
                    (Tensor.glorot_uniform, math.sqrt(6 / (64 + 64))), (Tensor.scaled_uniform, 1 / math.sqrt(64 * 64)),
                    (lambda *s, **k: Tensor.uniform(*s, low=-0.3, high=0.3, **k), 0.3)):
    x = fn(*shape, device="CLANG").numpy()
    assert x.shape == shape and np.abs(x).max() <= bound and np.abs(x).max() > 0.9 * bound
    assert abs(x.std() - bound / math.sqrt(3)) < 0.1 * bound
  k = Tensor.kaiming_normal(64, 32, a=0.0, device="CLANG").numpy()
  assert abs(k.std() - math.sqrt(2 / 32)) < 0.02
  assert Tensor.kaiming_uniform(3, 4, requires_grad=True).requires_grad is True
  assert Tensor.glorot_uniform(3, 4, requires_grad=True).requires_grad is True
  with pytest.raises(ValueError, match="at least one dim"): Tensor.kaiming_uniform()

def test_randperm_multinomial():
  Tensor.manual_seed(9)
  p = Tensor.randperm(16, device="CLANG").numpy()
  assert sorted(p.tolist()) == list(range(16)) and p.dtype == np.int32
  w = Tensor([0.1, 0.0, 0.6, 0.3], device="CLANG")
  s = w.multinomial(3000, replacement=True).numpy()
  assert s.shape == (3000,) and 1 not in s
  freq = np.bincount(s, minlength=4) / 3000
  np.testing.assert_allclose(freq, [0.1, 0.0, 0.6, 0.3], atol=0.04)
  nr = Tensor([[1.0, 1.0, 1.0, 0.0, 1.0]] * 3, device="CLANG").multinomial(4)
  assert nr.shape == (3, 4)
  for row in nr.numpy(): assert sorted(row.tolist()) == [0, 1, 2, 4]
  one = Tensor([0.0, 0.0, 5.0], device="PYTHON").multinomial()
  assert one.tolist() == [2]
  with pytest.raises(ValueError, match="without replacement"): w.multinomial(5)
  with pytest.raises(ValueError, match="1-D or 2-D"): Tensor.ones(2, 2, 2).multinomial()

def test_dropout(dev):
  x = Tensor.ones(256, device=dev)
  assert not Tensor.training
  assert x.dropout(0.5) is x
  with Tensor.train():
    assert Tensor.training
    Tensor.manual_seed(1)
    y = x.dropout(0.25).numpy()
    assert set(np.unique(y).tolist()) <= {0.0, float(np.float32(1 / 0.75))}
    assert 0.15 < (y == 0).mean() < 0.35
    assert x.dropout(0) is x
    np.testing.assert_equal(x.dropout(1.0).numpy(), np.zeros(256))
    g = Tensor.ones(16, device=dev, requires_grad=True)
    out = g.dropout(0.5)
    out.sum().backward()
    np.testing.assert_equal(g.grad.numpy(), out.numpy())
    with Tensor.train(False): assert not Tensor.training
    assert Tensor.training
  assert not Tensor.training
  with pytest.raises(ValueError, match="probability"): x.dropout(1.5)

def test_train_decorator():
  @Tensor.train()
  def f(): return Tensor.training
  assert f() is True and Tensor.training is False

def _threefry_ref(counts, seed):
  """Threefry-2x32 (20 rounds) in numpy, the generator rand is built on."""
  k0, k1 = np.uint32(seed & 0xFFFFFFFF), np.uint32((seed >> 32) & 0xFFFFFFFF)
  ks = [k0, k1, np.uint32(k0 ^ k1 ^ 0x1BD11BDA)]
  x0, x1 = (counts + ks[0]).astype(np.uint32), np.full_like(counts, ks[1])
  def rotl(x, r): return ((x << np.uint32(r)) | (x >> np.uint32(32 - r))).astype(np.uint32)
  with np.errstate(over="ignore"):
    for i in range(5):
      for r in ((13, 15, 26, 6), (17, 29, 16, 24))[i % 2]:
        x0 = (x0 + x1).astype(np.uint32)
        x1 = rotl(x1, r) ^ x0
      x0 = (x0 + ks[(i + 1) % 3]).astype(np.uint32)
      x1 = (x1 + np.uint32((int(ks[(i + 2) % 3]) + i + 1) % 2**32)).astype(np.uint32)
  return x0

@pytest.mark.parametrize("seed", [0, 1234, 2**40 + 5])
def test_rand_is_threefry(seed, dev):
  # draws of 16 words: the first uses counts 0..15, the second 16..31; 24 high bits on a 2^-24 grid
  Tensor.manual_seed(seed)
  a, b = Tensor.rand(16, device=dev).numpy(), Tensor.rand(3, device=dev).numpy()
  ref = (_threefry_ref(np.arange(32, dtype=np.uint32), seed) >> 8).astype(np.float32) / 2**24
  np.testing.assert_equal(a, ref[:16])
  np.testing.assert_equal(b, ref[16:19])

# *** tinygrad 0.14 semantics (issue 10): the reference is tinygrad itself, on its CPU device, and torch ***
def _tinygrad():
  """tinygrad 0.14, the reference for its own API's semantics (test extra), on its CPU device."""
  import tinygrad
  tinygrad.helpers.DEV.value = "CPU"
  return tinygrad

def test_training_is_the_TRAINING_context_var():
  from tinycore import Context
  from tinycore.helpers import TRAINING
  assert Tensor.training is False and TRAINING.value == 0
  with Context(TRAINING=1):
    assert Tensor.training is True and Tensor([1]).training is True
    x = Tensor.ones(64).dropout(0.5).numpy()
    assert set(np.unique(x)) <= {0.0, 2.0} and (x == 0).any()  # dropout is on inside Context(TRAINING=1), as tinygrad
  assert Tensor.training is False and (Tensor.ones(8).dropout(0.5).numpy() == 1).all()
  Tensor.training = True
  try: assert TRAINING.value == 1 and bool(TRAINING)
  finally: Tensor.training = False
  with Tensor.train():
    assert TRAINING.value == 1
    with Tensor.train(False): assert not Tensor.training
  assert TRAINING.value == 0

@pytest.mark.parametrize("name", ["HALF", "half", "float16", "bfloat16", "float64", "double", "float32"])
def test_default_float_context_var(name):
  from tinycore import Context
  tg = _tinygrad()
  with Context(DEFAULT_FLOAT=name), tg.Context(DEFAULT_FLOAT=name):
    ref = {"__bf16": "bfloat16"}.get(tg.dtypes.default_float.name, tg.dtypes.default_float.name)
    assert dtypes.default_float.name == ref
    for t in (Tensor([1.5]), Tensor.ones(2), Tensor.rand(2), Tensor(2.5), Tensor.arange(0.0, 2.0)): assert t.dtype.name == ref
  assert dtypes.default_float == dtypes.float32

def test_default_float_assignment_and_bad_name():
  from tinycore import Context
  dtypes.default_float = dtypes.float64
  try: assert Tensor([1.0]).dtype == dtypes.float64 and Tensor.zeros(1).dtype == dtypes.float64
  finally: dtypes.default_float = dtypes.float32
  with Context(DEFAULT_FLOAT="int32"), pytest.raises(ValueError, match="DEFAULT_FLOAT"): Tensor([1.0])
  with Context(DEFAULT_INT="int64"): assert Tensor([1, 2]).dtype == dtypes.int64 and Tensor.arange(3).dtype == dtypes.int64

@pytest.mark.parametrize("x", [np.array(2.5), np.array(-3, np.int64), np.float32(2), np.int16(7), np.bool_(True), np.array(1.5, np.float16)],
                         ids=repr)
def test_numpy_0d_is_0d(x, dev):
  import torch
  t, ref = Tensor(x, device=dev), torch.tensor(x)
  assert t.shape == tuple(ref.shape) == ()
  assert t.dtype.name == {"float64": "double", "int64": "long", "float32": "float", "int16": "short", "bool": "bool", "float16": "half"}[str(x.dtype)]
  assert t.item() == ref.item()

def test_arange_beyond_int32(dev):
  import torch
  for args in ((2**31, 2**31 + 3), (-2**31 - 2, -2**31 + 1), (0, 2**33, 2**31), (5,)):
    t, ref = Tensor.arange(*args, device=dev), torch.arange(*args)
    assert t.dtype == (dtypes.int64 if ref.dtype == torch.int64 and (ref.abs() >= 2**31).any() else dtypes.int32)
    np.testing.assert_equal(t.numpy(), ref.numpy())
  assert Tensor.arange(2**31, 2**31 + 3).dtype == dtypes.int64 and _tinygrad().Tensor.arange(2**31, 2**31 + 3).dtype.name == "long"

def test_randn_any_dtype_and_linspace_bool():
  tg = _tinygrad()
  for dt in ("bool", "int32", "float16"):
    assert Tensor.randn(4, dtype=dt).dtype.name == tg.Tensor.randn(4, dtype=dt).dtype.name
  b = Tensor.randn(256, dtype=dtypes.bool).numpy()
  assert b.dtype == np.bool_ and b.all()  # x != 0 for a normal draw
  with pytest.raises(ValueError, match="bool"): Tensor.linspace(0, 1, 5, dtype=dtypes.bool)
  with pytest.raises(ValueError): tg.Tensor.linspace(0, 1, 5, dtype=tg.dtypes.bool)

def test_from_blob(dev):
  x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
  t = Tensor.from_blob(x.ctypes.data, (3, 4), device=dev)
  assert t.shape == (3, 4) and t.dtype == dtypes.float32 and t.device == dev
  np.testing.assert_equal(t.numpy(), x)
  i = np.arange(6, dtype=np.int16)
  np.testing.assert_equal(Tensor.from_blob(i.ctypes.data, (2, 3), dtype=dtypes.int16).numpy(), i.reshape(2, 3))
  with pytest.raises(RuntimeError, match="address"): Tensor.from_blob(0, (2,))

def test_max_shape():
  from tinycore import Variable
  assert Tensor.ones(2, 3).max_shape == (2, 3) and Tensor.ones(2, 3).max_numel() == 6
  v = Variable("n", 1, 10).bind(4)
  t = Tensor.ones(v, 3)
  assert t.max_shape == (10, 3) and t.max_numel() == 30
