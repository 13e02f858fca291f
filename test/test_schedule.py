"""Scheduler fusion rules, asserted as kernel counts and checked against numpy."""
import numpy as np
import pytest
from tinycore import Tensor, TinyJit
from tinycore.nn.optim import SGD
from tinycore.ops import Ops

def kernels(*ts: Tensor) -> int: return sum(si.ast.op is Ops.SINK for si in ts[0].schedule(*ts[1:]))
def rnd(*shape) -> Tensor: return Tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))

def test_elementwise_chain_is_one_kernel(device):
  a, b, c = rnd(8, 8), rnd(8, 8), rnd(8, 8)
  out = ((a * b + c).exp() - a).relu()
  assert kernels(out) == 1
  an, bn, cn = a.numpy(), b.numpy(), c.numpy()
  np.testing.assert_allclose(out.numpy(), np.maximum(np.exp(an * bn + cn) - an, 0), rtol=1e-5)

def test_mul_add_sum_is_one_kernel(device):
  a, b, c = rnd(16, 4), rnd(16, 4), rnd(16, 4)
  out = (a * b + c).sum()
  assert kernels(out) == 1
  np.testing.assert_allclose(out.numpy(), (a.numpy() * b.numpy() + c.numpy()).sum(), rtol=1e-5)

def test_elementwise_after_reduce_fuses_into_store(device):
  a = rnd(6, 5)
  out = (a.sum(1).abs() * 2 + 1).sqrt()
  assert kernels(out) == 1
  np.testing.assert_allclose(out.numpy(), np.sqrt(np.abs(a.numpy().sum(1)) * 2 + 1), rtol=1e-5)

def test_seed_conv2d_is_one_kernel(device):
  x, w = Tensor.rand(2, 3, 10, 10).realize(), Tensor.rand(4, 3, 3, 3).realize()
  out = x.conv2d(w)
  assert kernels(out) == 1
  xn, wn = x.numpy().astype(np.float64), w.numpy().astype(np.float64)
  ref = sum(np.einsum("bchw,oc->bohw", xn[:, :, i:i + 8, j:j + 8], wn[:, :, i, j]) for i in range(3) for j in range(3))
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5)

def test_buffer_needed_by_two_kernels_is_computed_once(device):
  a = rnd(8, 8)
  shared = (a * 3).exp()
  x, y = shared.sum(0), shared.max(1)
  sched = x.schedule(y)
  assert sum(si.ast.op is Ops.SINK for si in sched) == 3  # shared, and one kernel per reduce
  x.realize(y)
  e = np.exp(a.numpy() * 3)
  np.testing.assert_allclose(x.numpy(), e.sum(0), rtol=1e-5)
  np.testing.assert_allclose(y.numpy(), e.max(1), rtol=1e-5)

def test_shared_value_inside_one_kernel_is_not_split(device):
  a = rnd(8)
  s = a * 2
  out = s.exp() + s.sin()
  assert kernels(out) == 1

def test_movement_ops_never_copy(device):
  a = rnd(4, 6).realize()
  out = a.permute(1, 0).reshape(3, 2, 4).flip(0).shrink(((0, 2), None, None)).pad(((1, 1), None, None)) + 1
  assert kernels(out) == 1, "views compose into the one kernel's index math"
  ref = np.pad(np.flip(a.numpy().T.reshape(3, 2, 4), 0)[0:2], ((1, 1), (0, 0), (0, 0))) + 1
  np.testing.assert_allclose(out.numpy(), ref)

def test_pad_is_not_pushed_through_exp(device):
  a = rnd(3, 3)
  out = a.exp().pad(((1, 1), (1, 1)))
  np.testing.assert_allclose(out.numpy(), np.pad(np.exp(a.numpy()), 1), rtol=1e-6)

def test_matmul_is_one_kernel(device):
  a, b = rnd(5, 7), rnd(7, 3)
  out = a @ b
  assert kernels(out) == 1
  np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy(), rtol=1e-5, atol=1e-6)

def test_two_reduces_make_two_kernels(device):
  a = rnd(4, 8)
  out = a - a.max(1, keepdim=True)
  m = out.exp().sum(1)
  assert kernels(m) == 2
  an = a.numpy()
  np.testing.assert_allclose(m.numpy(), np.exp(an - an.max(1, keepdims=True)).sum(1), rtol=1e-5)

def test_padding_only_view_passes_no_buffer(device):
  # a view that selects only padding reads nothing: its buffer is no kernel argument, and the others keep their places
  a, c = Tensor([1., 2, 3, 4]).realize(), Tensor([10., 20.]).realize()
  out = a.pad(((0, 3),))[4:6] + c
  sched = out.schedule()
  assert len(sched) == 1 and a.lazydata.buffer not in sched[0].bufs and c.lazydata.buffer in sched[0].bufs
  np.testing.assert_array_equal(out.numpy(), np.pad(np.array([1., 2, 3, 4]), (0, 3))[4:6] + np.array([10., 20.]))

def test_assigns_reading_each_others_old_values(device):
  # each value is built from the OLD a and b (as numpy computes it): the kernels would wait on each other, so one value
  # is computed into a buffer of its own first
  an, bn = np.random.default_rng(1).standard_normal((2, 4, 3)).astype(np.float32)
  a, b = Tensor(an).realize(), Tensor(bn).realize()
  na, nb = a - 0.1 * b * a.sin(), b - 0.1 * a.exp()
  a.assign(na)
  b.assign(nb)
  Tensor.realize(a, b)
  np.testing.assert_allclose(a.numpy(), an - 0.1 * bn * np.sin(an), rtol=1e-6)
  np.testing.assert_allclose(b.numpy(), bn - 0.1 * np.exp(an), rtol=1e-6)
  # a swap through old views, and a third assign reading both old values
  c = Tensor(np.zeros((4, 3), np.float32)).realize()
  a0, b0 = a * 1, b * 1
  a.assign(b0)
  b.assign(a0)
  c.assign(a0 - b0)
  Tensor.realize(a, b, c)
  want_a, want_b = bn - 0.1 * np.exp(an), an - 0.1 * bn * np.sin(an)
  np.testing.assert_allclose(a.numpy(), want_a, rtol=1e-6)
  np.testing.assert_allclose(b.numpy(), want_b, rtol=1e-6)
  np.testing.assert_allclose(c.numpy(), want_b - want_a, rtol=1e-5, atol=1e-6)

def test_an_assign_realizes_only_the_old_values_read_later(device):
  # a = w*3 fuses into the assign and is read by b outside it: a is computed into a buffer first; b and c, which read
  # only a, stay lazy (they read that buffer later), and a second look finds nothing more to realize early
  from tinycore.engine.schedule import _graph, _overwritten_readers
  wn = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
  w = Tensor(wn).realize()
  a = w * 3
  b = (a + 1).exp()
  c = b.sum(1)
  w.assign(a * 2)
  outs = [w.lazydata]
  early = _overwritten_readers(_graph(outs), outs)
  assert early == [a.lazydata.base], "only the fused value with a reader outside is realized early"
  assert _overwritten_readers(_graph(outs + early), outs + early) == []
  w.realize()
  assert not b.lazydata.is_realized() and not c.lazydata.is_realized()
  np.testing.assert_allclose(c.numpy(), np.exp(wn * 3 + 1).sum(1), rtol=1e-5)
  np.testing.assert_allclose(w.numpy(), wn * 6, rtol=1e-6)

def test_sgd_over_parameters_with_mutual_gradients(device):
  # d/da depends on b and d/db on a, elementwise: both updates fuse with reads of the other parameter's old value
  torch = pytest.importorskip("torch")
  an, bn = np.random.default_rng(2).standard_normal((2, 5)).astype(np.float32)
  ta, tb = torch.tensor(an, requires_grad=True), torch.tensor(bn, requires_grad=True)
  topt = torch.optim.SGD([ta, tb], lr=0.1)
  a, b = Tensor(an, requires_grad=True), Tensor(bn, requires_grad=True)
  opt = SGD([a, b], lr=0.1)
  def loss(a, b): return (a * b).sum() + (a * a * b).sum() * 0.5
  @TinyJit
  def step():
    opt.zero_grad()
    loss(a, b).backward()
    opt.step()
  old, Tensor.training = Tensor.training, True
  try:
    for _ in range(4):  # the first two run, the third captures, the fourth replays
      step()
      topt.zero_grad()
      loss(ta, tb).backward()
      topt.step()
      np.testing.assert_allclose(a.numpy(), ta.detach().numpy(), rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-5, atol=1e-6)
  finally: Tensor.training = old

def test_kernel_size_is_bounded(device):
  # a value read through two views at every step: the paths double each step (1024 reads of the input after 10 steps).
  # Past KERNEL_OPS_MAX nodes the scheduler realizes a part first, instead of one kernel that takes minutes to compile
  from tinycore.engine.schedule import KERNEL_OPS_MAX
  n = 1024
  xn = np.random.default_rng(3).uniform(-1, 1, n).astype(np.float32)
  x, ref = Tensor(xn).realize(), xn.astype(np.float64)
  for k in range(10):
    s = 1 << k
    x = x + x.shrink(((0, n - s),)).pad(((s, 0),)) * 0.5
    ref = ref + np.pad(ref[:n - s], (s, 0)) * 0.5
  sizes = [len(si.ast.toposort()) for si in x.schedule()]
  assert len(sizes) > 1 and max(sizes) <= KERNEL_OPS_MAX.value, f"kernel sizes {sizes}"
  np.testing.assert_allclose(x.numpy(), ref, rtol=1e-5, atol=1e-5)

def test_adam_step_is_one_kernel_per_parameter(device):
  # the parameter's update reads its new moments element for element: one kernel stores all three (plus the two
  # kernels of b1^t and b2^t, and the two of the bias corrections), and the result is torch's
  torch = pytest.importorskip("torch")
  from tinycore.nn.optim import Adam
  rng = np.random.default_rng(4)
  wn, vn, xn = (rng.standard_normal(s).astype(np.float32) for s in ((6, 5), (5,), (3, 6)))
  tw, tv = torch.tensor(wn, requires_grad=True), torch.tensor(vn, requires_grad=True)
  topt = torch.optim.Adam([tw, tv], lr=0.01)
  w, v, x = Tensor(wn), Tensor(vn), Tensor(xn)
  opt = Adam([w, v], lr=0.01)
  old, Tensor.training = Tensor.training, True
  try:
    for i in range(3):
      opt.zero_grad()
      ((x @ w + v).relu() ** 2).sum().backward()
      ts = opt.schedule_step()
      sched = [si for si in ts[0].schedule(*ts[1:]) if si.ast.op is Ops.SINK]
      if i == 0:
        three = [si for si in sched if len(si.outputs) == 3]
        assert len(three) == 2 and all(len(si.outputs) == 1 for si in sched if si not in three)
        written = {frozenset(id(b) for b in si.bufs[:3]) for si in three}
        assert written == {frozenset(id(t.lazydata.buffer) for t in (p, opt.m[i], opt.v[i])) for i, p in enumerate((w, v))}
      Tensor.realize(*ts)
      topt.zero_grad()
      ((torch.tensor(xn) @ tw + tv).relu() ** 2).sum().backward()
      topt.step()
      for a, b in ((w, tw), (v, tv), (opt.m[0], topt.state[tw]["exp_avg"]), (opt.v[1], topt.state[tv]["exp_avg_sq"])):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
  finally: Tensor.training = old

def test_assigns_read_at_other_elements_stay_apart(device):
  # b's value reads a's new value flipped: one kernel writing both would read elements of a it has not written yet
  an, bn = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32)
  a, b = Tensor(an).realize(), Tensor(bn).realize()
  a.assign(a * 2 + 1)
  b.assign(b - a.flip(0))
  c = Tensor(np.zeros(8, np.float32)).realize()
  c.assign(c + a * b)  # reads both new values at its own element: may join them
  Tensor.realize(a, b, c)
  na = an * 2 + 1
  nb = bn - na[::-1]
  np.testing.assert_allclose(a.numpy(), na, rtol=1e-6)
  np.testing.assert_allclose(b.numpy(), nb, rtol=1e-6)
  np.testing.assert_allclose(c.numpy(), na * nb, rtol=1e-5, atol=1e-6)

def test_a_refused_fusion_rebuilds_only_its_kernel(monkeypatch):
  """A fusion refused while building one kernel (a padded view of an unrealized value) makes that value a kernel of
  its own; the kernels built before it are kept, not built again (once per refusal: quadratic in a train step)."""
  import tinycore.engine.schedule as S
  from tinycore.engine.schedule import create_schedule_with_vars
  built, refused, ast, refuse_init = [], [], S._kernel_ast, S._Refuse.__init__
  monkeypatch.setattr(S, "_kernel_ast", lambda b, r: (built.append(b), ast(b, r))[1])
  monkeypatch.setattr(S._Refuse, "__init__", lambda self, base: (refused.append(base), refuse_init(self, base))[1])
  a = Tensor(np.arange(64 * 64, dtype=np.float32).reshape(64, 64) / 4096).realize()
  outs = [((a + i).exp() * 2).sum(1) for i in range(6)]
  x = (a + 1).exp()
  outs.append(x.pad(((1, 1), (1, 1))).sum(0) + x.sum(0).pad(((1, 1),)))
  create_schedule_with_vars([o.lazydata for o in outs])
  assert refused and len(built) == len({id(b) for b in built}) + len(refused)
  xe = np.exp(np.arange(64 * 64, dtype=np.float64).reshape(64, 64) / 4096 + 1)
  np.testing.assert_allclose(outs[-1].numpy(), np.pad(xe, 1).sum(0) + np.pad(xe.sum(0), 1), rtol=1e-5)
