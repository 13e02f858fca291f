"""tinygrad 0.14 call shapes tinycore accepts (the names and parameters test/compat's inventory lists): helpers compared
with tinygrad's own on random inputs, the positional dtype/device/reverse parameters, TinyJit(prune=...), optimizer
device/param_dtype, load_state_dict(consume), tar/zip_extract, Device.default/get_class, mem_used_per_device."""
import io, random, tarfile, zipfile
import numpy as np
import pytest
import tinygrad.helpers as tgh
from tinycore import Tensor, TinyJit, Device, GlobalCounters, Variable, dtypes, helpers
from tinycore.nn import optim, state

def test_int_helpers_match_tinygrad():
  rng = random.Random(0)
  for _ in range(300):
    x, y = rng.randint(-50, 50), rng.choice([v for v in range(-9, 10)])
    for n in ("cdiv", "cmod", "floordiv", "floormod") if y else ("cdiv",):
      assert getattr(helpers, n)(x, y) == getattr(tgh, n)(x, y), (n, x, y)
    a, b = abs(x), rng.randint(1, 9)
    assert helpers.round_down(a, b) == tgh.round_down(a, b) and helpers.next_power2(a) == tgh.next_power2(a)

def test_sequence_helpers_match_tinygrad():
  rng = random.Random(1)
  for _ in range(50):
    shape = tuple(rng.randint(0, 4) for _ in range(rng.randint(0, 4)))
    arr = np.arange(int(np.prod(shape))).reshape(shape)
    assert helpers.strides_for_shape(shape) == tgh.strides_for_shape(shape)
    assert helpers.get_shape(arr.tolist()) == tgh.get_shape(arr.tolist())
    assert helpers.fully_flatten(arr.tolist()) == tgh.fully_flatten(arr.tolist())
  assert helpers.fully_flatten(np.float32(3.0)) == tgh.fully_flatten(np.float32(3.0)) and helpers.fully_flatten(np.array(2)) == [2]
  with pytest.raises(ValueError): helpers.get_shape([[1, 2], [3]])
  d = {"layers": [{"w": 1}, type("M", (), {"b": 2})()]}
  assert helpers.get_child(d, "layers.0.w") == 1 and helpers.get_child(d, "layers.1.b") == 2
  assert helpers.merge_dicts([{1: 2}, {3: 4, 1: 2}]) == {1: 2, 3: 4}
  with pytest.raises(RuntimeError): helpers.merge_dicts([{1: 2}, {1: 3}])
  assert helpers.to_tuple(3) == (3,) and helpers.to_tuple((1, 2)) == (1, 2) and helpers.unwrap(0) == 0 and helpers.get_single_element([7]) == 7
  with pytest.raises(ValueError): helpers.get_single_element([1, 2])
  assert helpers.partition(range(6), fxn=lambda v: v % 2 == 0) == ([0, 2, 4], [1, 3, 5]) and helpers.prod(x=[2, 3]) == 6
  assert helpers.temp("x") == tgh.temp("x")

def test_tqdm_needs_the_package():
  try: import tqdm  # noqa: F401
  except ImportError:
    with pytest.raises(ImportError, match="pip install tqdm"): list(helpers.trange(3))
  else: assert list(helpers.trange(3, disable=True)) == [0, 1, 2]

def test_timing_on_exit(capsys):
  with helpers.Timing("t ", on_exit=lambda ns: f" ({ns >= 0})"): pass
  assert capsys.readouterr().out.strip().endswith("ms (True)")

def test_positional_dtype_and_reverse():
  assert Tensor.arange(0, 5, 1, dtypes.int64).dtype == dtypes.int64 and Tensor.linspace(0, 1, 3, dtypes.float64).dtype == dtypes.float64
  assert Tensor.eye(2, 3, dtypes.int32).tolist() == [[1, 0, 0], [0, 1, 0]] and Tensor.full((2,), 3, dtypes.float32).tolist() == [3.0, 3.0]
  t = Tensor([1, 2, 3], dtype=dtypes.int32)
  assert t.full_like(7, dtypes.int8).dtype == dtypes.int8 and t.empty_like(dtypes.float16).dtype == dtypes.float16
  assert t.randn_like(dtypes.float16).dtype == dtypes.float16 and t.const_like(2, dtypes.int64).dtype == dtypes.int64
  assert t.view((3, 1)).shape == (3, 1) and t.view(1, 3).shape == (1, 3) and t.contiguous(arg=None).tolist() == [1, 2, 3]
  a, b = np.array([5, -6, 7], dtype=np.int32), np.array([3, 1, 2], dtype=np.int32)
  ta, tb = Tensor(a), Tensor(b)
  assert ta.bitwise_and(tb, True).tolist() == (b & a).tolist() and ta.bitwise_xor(3, True).tolist() == (3 ^ a).tolist()
  assert tb.lshift(2, True).tolist() == (2 << b).tolist() and tb.rshift(64, True).tolist() == (64 >> b).tolist()
  x = Tensor(a.copy()); x //= 2; x <<= 1
  assert x.tolist() == ((a // 2) << 1).tolist()
  x >>= 1
  assert x.tolist() == (((a // 2) << 1) >> 1).tolist()
  c = Tensor([1.0, 2.0]).clone(Device.DEFAULT)
  assert c.device == Device.DEFAULT and c.tolist() == [1.0, 2.0]

def test_jit_prune_decorator():
  @TinyJit(prune=True)
  def f(x: Tensor) -> Tensor: return (x * 2).realize()
  for i in range(4): assert f(Tensor([float(i), 1.0])).tolist() == [2.0 * i, 2.0]
  assert isinstance(f, TinyJit) and f.prune is True
  with pytest.raises(TypeError, match="unexpected"): TinyJit(lambda: None, bogus=1)

def test_optimizer_device_and_param_dtype():
  w = Tensor([[1.0, 2.0]], dtype=dtypes.float16)
  for opt in (optim.SGD([w], 0.1, 0.9, device=Device.DEFAULT), optim.Adam([w], device=Device.DEFAULT), optim.Muon([w]), optim.LARS([w])):
    assert opt.param_dtype == dtypes.float32 and opt.device == Device.DEFAULT
  assert optim.SGD([w], 0.1, 0.9).b[0].dtype == dtypes.float32
  m = optim.LARS([Tensor([[1.0]])], 0.1, 0.9, 0.0, 3, (1.0, 0.0, 0.0))
  assert m.ns_steps == 3 and m.ns_coefficients == (1.0, 0.0, 0.0)

def test_variable_parameters():
  assert Variable("i", 1, 10, dtypes.int64).dtype == dtypes.int64 and Variable("j", 1, 10).dtype == dtypes.int32
  with pytest.raises(NotImplementedError, match="multiple_of"): Variable("k", 1, 10, multiple_of=2)
  with pytest.raises(TypeError): Variable("k", 1, 10, dtypes.float32)

def test_load_state_dict_consume():
  class M:
    def __init__(self): self.w = Tensor([0.0, 0.0])
  m, sd = M(), {"w": Tensor([1.0, 2.0]), "extra": Tensor([3.0])}
  state.load_state_dict(m, sd, False, False, True)
  assert m.w.tolist() == [1.0, 2.0] and list(sd) == ["extra"]

def test_archive_extract():
  b = io.BytesIO()
  with zipfile.ZipFile(b, "w") as z: z.writestr("a/x.txt", b"hello"); z.writestr("empty", b"")
  got = state.zip_extract(Tensor(np.frombuffer(b.getvalue(), dtype=np.uint8)))
  assert {k: bytes(v.numpy()) for k, v in got.items()} == {"a/x.txt": b"hello", "empty": b""} and got["a/x.txt"].dtype == dtypes.uint8
  b = io.BytesIO()
  with tarfile.open(fileobj=b, mode="w") as tf:
    ti = tarfile.TarInfo("d/q.bin"); ti.size = 3; tf.addfile(ti, io.BytesIO(b"abc"))
  assert {k: bytes(v.numpy()) for k, v in state.tar_extract(b.getvalue()).items()} == {"d/q.bin": b"abc"}

def test_device_default_and_mem_per_device():
  assert Device.default is Device[Device.DEFAULT] and Device.get_class(Device.DEFAULT) is type(Device[Device.DEFAULT])
  before = GlobalCounters.mem_used_per_device[Device.DEFAULT]
  t = Tensor.empty(1000, dtype=dtypes.float32).realize()
  assert GlobalCounters.mem_used_per_device[Device.DEFAULT] - before == 4000
  del t
