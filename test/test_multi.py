"""Sharded tensors against the same computation on one device: every op (forward and gradients) on inputs sharded over
two devices must give the unsharded numbers (up to float32 rounding: a sum over the sharded axis adds its two halves
separately), on two CLANG devices, on CLANG + PYTHON and on CLANG + OPENCL. The result's sharding follows
tinygrad 0.14's rules (tinycore/multi.py); test/compat/test_multi_compat.py compares those with tinygrad side by side."""
from __future__ import annotations
import os, re, subprocess, sys, threading
from pathlib import Path
import numpy as np
import pytest
from tinycore import Tensor, Device, TinyJit, nn
from tinycore.engine import queues
from tinycore.nn import optim
from tinycore.multi import MultiLazyBuffer

PAIRS = [("CLANG:0", "CLANG:1"), ("CLANG", "PYTHON"), ("CLANG", "OPENCL")]

def _pair(devs: tuple[str, str]) -> tuple[str, str]:
  for d in devs:
    if not Device.can_open(d): pytest.skip(f"{d} cannot open here")
  return devs

@pytest.fixture(params=PAIRS, ids=["CLANGx2", "CLANG+PYTHON", "CLANG+OPENCL"])
def devs(request: pytest.FixtureRequest) -> tuple[str, str]: return _pair(request.param)

rng = np.random.default_rng(0)
def _r(*shape: int) -> np.ndarray: return rng.standard_normal(shape).astype(np.float32)

def compare(fn, arrays: list[np.ndarray], axes: list[int | None | str], devs: tuple[str, ...], grad: bool = True, out_axis: object = "any",
            rtol: float = 1e-5, atol: float = 1e-5) -> Tensor:
  """fn on one device and on the inputs sharded as `axes` (an int or None: shard(devs, axis); "to": replicated by .to)
  must agree, outputs and gradients of every input; returns the sharded output."""
  one = [Tensor(a, device="CLANG", requires_grad=grad) for a in arrays]
  many = [Tensor(a, device="CLANG").to(devs) if ax == "to" else Tensor(a, device="CLANG").shard_(devs, ax) for a, ax in zip(arrays, axes)]
  for t in many: t.requires_grad = grad
  r1, r2 = fn(*one), fn(*many)
  assert r2.device == tuple(Device.canonicalize(d) for d in devs), r2.device
  assert r2.shape == r1.shape
  if out_axis != "any": assert r2.lazydata.axis == out_axis, (r2.lazydata.axis, out_axis)
  np.testing.assert_allclose(r2.numpy(), r1.numpy(), rtol=rtol, atol=atol)
  if grad:
    w = _r(*r1.shape)
    (r1 * Tensor(w, device="CLANG")).sum().backward()
    (r2 * Tensor(w, device=r2.device)).sum().backward()
    for t1, t2 in zip(one, many):
      assert (t1.grad is None) == (t2.grad is None)
      if t1.grad is None: continue
      assert t2.grad.device == t2.device and t2.grad.shape == t2.shape
      np.testing.assert_allclose(t2.grad.numpy(), t1.grad.numpy(), rtol=rtol, atol=atol)
  return r2

# *** elementwise ***
@pytest.mark.parametrize("fn", [lambda a, b: a + b, lambda a, b: a * b - b, lambda a, b: (a > b).where(a, b.exp()),
                                lambda a, b: a.relu() / (b.abs() + 1),
                                lambda a, b: a.maximum(b) + 2.5])
def test_elementwise_same_axis(devs, fn): compare(fn, [_r(4, 6), _r(4, 6)], [0, 0], devs, out_axis=0)

@pytest.mark.parametrize("axes,out_axis", [((0, None), 0), ((None, 1), 1), ((None, None), None), ((0, 1), 1), ((1, 0), 0), ((0, "to"), 0)])
def test_elementwise_mixed(devs, axes, out_axis): compare(lambda a, b: a * b, [_r(4, 6), _r(4, 6)], list(axes), devs, out_axis=out_axis)

def test_integer_ops(devs):
  a, b = rng.integers(-50, 50, (4, 6)).astype(np.int32), rng.integers(1, 9, (4, 6)).astype(np.int32)
  compare(lambda x, y: (x // y) * 3 + x % y - (x < y).cast("int32"), [a, b], [0, None], devs, grad=False, out_axis=0)
  compare(lambda x, y: x.float().mul(0.5).floor() + x.float() % y.float(), [a, b], [1, 1], devs, grad=False, out_axis=1)

def test_broadcast_and_cast(devs):
  compare(lambda a, b: a + b, [_r(4, 6), _r(6)], [0, None], devs, out_axis=0)
  r = compare(lambda a: (a * 3).cast("int32"), [_r(4, 6)], [1], devs, grad=False, out_axis=1)
  assert r.dtype.name == "int"

# *** reduce ***
@pytest.mark.parametrize("axis,keepdim", [(0, False), (1, False), (None, False), (0, True), ((0, 1), False)])
@pytest.mark.parametrize("op", ["sum", "max", "mean"])
def test_reduce(devs, op, axis, keepdim):
  # sharded on dim 0: reducing dim 0 is an all-reduce (replicated result), reducing dim 1 keeps the axis
  keeps = axis == 1
  compare(lambda a: getattr(a, op)(axis, keepdim=keepdim), [_r(4, 6)], [0], devs, out_axis=0 if keeps else None)

def test_allreduce_replicas_equal(devs):
  r = Tensor(_r(64, 33)).shard(devs, 0).sum(0).realize()
  a, b = (lb.realized.numpy() for lb in r.lazydata.lbs)
  assert a.tobytes() == b.tobytes()  # combined in one order on every device: bitwise the same

def test_softmax_logsoftmax(devs):
  compare(lambda a: a.softmax(-1), [_r(4, 10)], [0], devs, out_axis=0)
  compare(lambda a: a.log_softmax(0), [_r(4, 10)], [0], devs)

# *** matmul and conv ***
@pytest.mark.parametrize("axes,out_axis", [((0, None), 0), ((1, 0), None), ((None, 1), 1), ((0, "to"), 0)])
def test_matmul(devs, axes, out_axis): compare(lambda a, b: a @ b, [_r(4, 6), _r(6, 8)], list(axes), devs, out_axis=out_axis)

def test_linear_layer(devs): compare(lambda x, w, b: x.linear(w.T, b).relu(), [_r(4, 6), _r(5, 6), _r(5)], [0, None, None], devs, out_axis=0)

@pytest.mark.parametrize("padding,stride", [(1, 1), (0, 2)])
def test_conv2d(devs, padding, stride):
  compare(lambda x, w, b: x.conv2d(w, b, padding=padding, stride=stride), [_r(4, 2, 7, 7), _r(3, 2, 3, 3), _r(3)], [0, None, None], devs,
          out_axis=0, rtol=1e-4, atol=1e-4)

def test_pooling_and_batchnorm_stats(devs):
  compare(lambda x: x.max_pool2d((2, 2)), [_r(4, 2, 6, 6)], [0], devs, out_axis=0)
  compare(lambda x: x.avg_pool2d((2, 2)), [_r(4, 2, 6, 6)], [0], devs, out_axis=0)
  compare(lambda x: (x - x.mean((0, 2, 3), keepdim=True)) / (x.var((0, 2, 3), keepdim=True) + 1e-5).sqrt(), [_r(4, 2, 3, 3)], [0], devs,
          rtol=1e-4, atol=1e-4)

# *** movement ***
@pytest.mark.parametrize("fn,axis,out_axis", [
  (lambda a: a.reshape(2, 2, 6), 0, 0), (lambda a: a.reshape(24), 0, 0), (lambda a: a.reshape(4, 2, 3), 1, 1),
  (lambda a: a.reshape(6, 4), 1, None),  # would move elements between shards: gathered, replicated
  (lambda a: a.permute(1, 0), 0, 1), (lambda a: a.T.contiguous(), 1, 0),
  (lambda a: a.reshape(4, 1, 6).expand(4, 3, 6), 0, 0), (lambda a: a.pad(((0, 0), (1, 2))), 0, 0), (lambda a: a.pad(((1, 1), (0, 0))), 0, 0),
  (lambda a: a.shrink(((0, 4), (1, 4))), 0, 0), (lambda a: a[1:3], 0, 0), (lambda a: a[1:4], 0, None), (lambda a: a.flip(1), 0, 0),
  (lambda a: a.flip(0), 0, 0), (lambda a: a[:, ::2], 0, 0), (lambda a: a[::-1, 1], 0, 0), (lambda a: a.cat(a, dim=1), 0, 0),
  (lambda a: a.cat(a * 2, dim=0), 0, 0)])
def test_movement(devs, fn, axis, out_axis): compare(fn, [_r(4, 6)], [axis], devs, out_axis=out_axis)

# *** indexed ***
def test_gather_and_cross_entropy(devs):
  y = rng.integers(0, 10, (8,)).astype(np.int32)
  one = Tensor(y, device="CLANG")
  def like(x: Tensor, y: Tensor) -> Tensor: return y.shard(x.device, 0) if isinstance(x.device, tuple) else y  # the labels split as x
  compare(lambda x: x.sparse_categorical_crossentropy(like(x, one)), [_r(8, 10)], [0], devs, out_axis=None)
  compare(lambda x: x.gather(1, like(x, one.reshape(8, 1))), [_r(8, 10)], [0], devs, out_axis=0)

def test_index_error_on_a_shard(devs):
  x, bad = Tensor(_r(4, 10)).shard(devs, 0), Tensor(np.array([[1], [2], [3], [40]], np.int32)).shard(devs, 0)
  with pytest.raises(IndexError): x.gather(1, bad).numpy()

# *** devices, copies, errors ***
def test_shard_semantics(devs):
  a = _r(4, 6)
  s = Tensor(a).shard(devs, 1)
  canon = tuple(Device.canonicalize(d) for d in devs)
  assert s.device == canon and isinstance(s.lazydata, MultiLazyBuffer) and s.lazydata.axis == 1 and s.shape == (4, 6)
  assert [lb.shape for lb in s.lazydata.lbs] == [(4, 3), (4, 3)] and [lb.device for lb in s.lazydata.lbs] == list(canon)
  np.testing.assert_array_equal(s.to(devs[1]).numpy(), a)
  assert s.to(devs[1]).device == canon[1]
  r = Tensor(a).to(devs)
  assert r.device == canon and r.lazydata.axis is None
  t = Tensor(a)
  t.shard_(devs, 0)
  assert t.device == canon and t.lazydata.axis == 0
  assert Tensor(a).shard((devs[0],)).device == canon[0]
  for x in (Tensor.zeros(4, 6, device=devs), Tensor.ones(4, 6, device=devs), Tensor(a, device=devs), Tensor.full((4, 6), 2.0, device=devs),
            Tensor.empty(4, 6, device=devs), Tensor.rand(4, 6, device=devs), Tensor.arange(4, device=devs)):
    assert x.device == canon and x.lazydata.axis is None
  np.testing.assert_array_equal(Tensor(a, device=devs).numpy(), a)
  with pytest.raises(RuntimeError, match="divide evenly"): Tensor(_r(5, 2)).shard(devs, 0)
  with pytest.raises(RuntimeError, match="already on several"): s.shard(devs, 0)
  with pytest.raises(ValueError, match="different devices"): s + Tensor(a)

def test_gradient_flows_through_shard(devs):
  a, w = _r(4, 6), _r(4, 6)
  x = Tensor(a, device="CLANG", requires_grad=True)
  y = x.shard(devs, 0) * Tensor(w, device="CLANG").shard(devs, 1)
  (y.exp().sum(1) * 3).sum().backward()
  assert x.grad.device == "CLANG"
  np.testing.assert_allclose(x.grad.numpy(), 3 * w * np.exp(a * w), rtol=1e-5)

def test_join_is_exact(devs):
  a = np.array([[-0.0, np.inf], [np.nan, -np.inf], [1e-45, -3.5], [0.0, 7.0]], np.float32)
  for dt in ("float32", "float16", "int32", "bool"):
    x = (np.nan_to_num(a, posinf=9, neginf=-9).astype(dt) if dt == "int32" else a.astype(dt)) if dt != "bool" else a > 0
    got = Tensor(x).shard(devs, 0).numpy()
    assert got.tobytes() == x.tobytes(), (dt, got, x)  # the bits: -0.0 stays -0.0 (a join by addition made it 0.0)

def test_rand_on_devices_matches_one_device(devs):
  Tensor.manual_seed(3)
  a = Tensor.rand(4, 6).numpy()
  Tensor.manual_seed(3)
  b = Tensor.rand(4, 6, device=devs).numpy()
  np.testing.assert_array_equal(a, b)

def test_realize_runs_each_device_on_its_queue(devs):
  seen: dict[str, set[str]] = {}
  real = queues._after
  def spy(deps, job):
    seen.setdefault(job.args[0].device, set()).add(threading.current_thread().name)
    return real(deps, job)
  queues._after = spy
  try: (Tensor(_r(8, 8)).shard(devs, 0) * 2).sum().realize()
  finally: queues._after = real
  canon = [Device.canonicalize(d) for d in devs]
  assert set(seen) == set(canon)
  assert all(names == {f"queue-{d}_0"} for d, names in seen.items()), seen

# *** training: nn layers, optimizers and TinyJit on sharded parameters and data ***
class _Net:
  def __init__(self):
    # no conv bias before BatchNorm: its gradient is zero up to rounding noise, which Adam would scale up to lr-sized steps
    self.c1, self.l1 = nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.Linear(4 * 4 * 4, 10)
    self.bn = nn.BatchNorm(4)
  def __call__(self, x: Tensor) -> Tensor: return self.l1(self.bn(self.c1(x)).relu().max_pool2d((2, 2)).flatten(1))

def _train(devs: tuple[str, ...] | None, steps: int = 3, jit: bool = False) -> list[np.ndarray]:
  Tensor.manual_seed(0)
  net = _Net()
  params = nn.state.get_parameters(net)
  if devs is not None:
    for p in params: p.shard_(devs)
  opt = optim.Adam(nn.state.get_parameters(net), lr=0.01)
  data = np.random.default_rng(1).standard_normal((steps, 8, 1, 8, 8)).astype(np.float32)
  labels = np.random.default_rng(2).integers(0, 10, (steps, 8))
  def step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = net(x).sparse_categorical_crossentropy(y).backward()
      opt.step()
    return loss.realize()
  fn = TinyJit(step) if jit else step
  for i in range(steps):
    x, y = Tensor(data[i]), Tensor(labels[i].astype(np.int32))
    if devs is not None: x, y = x.shard(devs, 0), y.shard(devs, 0)
    fn(x, y)
  return [p.numpy() for p in nn.state.get_parameters(net)]

@pytest.mark.parametrize("jit", [False, True])
def test_training_matches_one_device(devs, jit):
  if "PYTHON" in devs and jit: pytest.skip("the jitted run adds nothing on the interpreter that CLANG+OPENCL does not cover")
  for a, b in zip(_train(None, jit=jit), _train(devs, jit=jit)): np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)

def test_sharded_params_stay_replicated(devs):
  Tensor.manual_seed(0)
  lin = nn.Linear(6, 3)
  for p in nn.state.get_parameters(lin): p.shard_(devs)
  opt = optim.SGD(nn.state.get_parameters(lin), lr=0.1, momentum=0.9)
  with Tensor.train():
    for _ in range(2):
      opt.zero_grad()
      lin(Tensor(_r(4, 6)).shard(devs, 0)).square().mean().backward()
      opt.step()
  for p in nn.state.get_parameters(lin):
    assert p.device == tuple(Device.canonicalize(d) for d in devs) and p.lazydata.axis is None
    a, b = (lb.realized.numpy() for lb in p.lazydata.lbs)
    # one backend computes the update alike on each device; two backends may round differently (fused multiply-adds)
    if devs[0].split(":")[0] == devs[1].split(":")[0]: assert a.tobytes() == b.tobytes()
    else: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)

def test_state_dict_into_sharded_model(devs, tmp_path):
  Tensor.manual_seed(0)
  src, dst = nn.Linear(6, 4), nn.Linear(6, 4)
  dst.weight.shard_(devs, 0)
  dst.bias.shard_(devs)
  nn.state.safe_save(nn.state.get_state_dict(src), str(tmp_path / "m.safetensors"))
  nn.state.load_state_dict(dst, nn.state.safe_load(str(tmp_path / "m.safetensors")))
  assert dst.weight.lazydata.axis == 0 and dst.bias.lazydata.axis is None
  np.testing.assert_array_equal(dst.weight.numpy(), src.weight.numpy())
  np.testing.assert_array_equal(dst.bias.numpy(), src.bias.numpy())
  back = nn.state.get_state_dict(dst)
  nn.state.safe_save(back, str(tmp_path / "back.safetensors"))
  np.testing.assert_array_equal(nn.state.safe_load(str(tmp_path / "back.safetensors"))["weight"].numpy(), src.weight.numpy())
  x = Tensor(_r(2, 6))
  assert x.shard_like(dst.weight).lazydata.axis == 0 and x.shard_like(x).device == x.device

@pytest.mark.skipif(os.getenv("NOOPT", "0") != "0", reason="the example's kernels again without optimizations test nothing of sharding (CI time)")
def test_train_digits_sharded_example():
  """examples/train_digits.py --shard 2 (two CLANG devices) trains as one device does: the same loss and test accuracy."""
  script = Path(__file__).resolve().parents[1] / "examples" / "train_digits.py"
  env = {**os.environ, "STEPS": "60", "TARGET": "0", "DEV": "CLANG"}
  def final(*args: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=300, check=True).stdout
    loss = float(re.findall(r"loss\s+([-\d.]+)", out)[-1])
    return loss, float(re.search(r"test accuracy ([\d.]+)%", out).group(1))
  (l1, a1), (l2, a2) = final(), final("--shard", "2")
  assert abs(l1 - l2) < 0.01 and abs(a1 - a2) < 1.0, f"one device: loss {l1} accuracy {a1}%; sharded: loss {l2} accuracy {a2}%"
