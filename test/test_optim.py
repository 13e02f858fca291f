"""Optimizers against torch.optim (SGD, Adam, AdamW) and against numpy references (LAMB, LARS) for a few steps."""
import numpy as np
import pytest
from tinycore import Tensor, TinyJit, nn
from tinycore.nn import optim

@pytest.fixture(autouse=True)
def _training(device):  # every test on CLANG and on PYTHON (conftest's device fixture)
  old_training = Tensor.training
  Tensor.training = True
  yield
  Tensor.training = old_training

RNG = np.random.default_rng(0)
W0, B0 = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((3,)).astype(np.float32)
X, Y = RNG.standard_normal((5, 4)).astype(np.float32), RNG.standard_normal((5, 3)).astype(np.float32)

def _ours(make, steps=3):
  w, b = Tensor(W0.copy(), requires_grad=True), Tensor(B0.copy(), requires_grad=True)
  opt = make([w, b])
  for _ in range(steps):
    opt.zero_grad()
    ((Tensor(X).linear(w.T, b) - Tensor(Y)).square().mean() + w.square().sum() * 0.01).backward()
    opt.step()
  return w.numpy(), b.numpy()

def _torch(make, steps=3):
  torch = pytest.importorskip("torch")
  w, b = torch.tensor(W0.copy(), requires_grad=True), torch.tensor(B0.copy(), requires_grad=True)
  opt = make([w, b])
  for _ in range(steps):
    opt.zero_grad()
    (((torch.tensor(X) @ w.T + b) - torch.tensor(Y)).square().mean() + w.square().sum() * 0.01).backward()
    opt.step()
  return w.detach().numpy(), b.detach().numpy()

def _check(ours, theirs, atol=1e-5):
  for a, b in zip(ours, theirs): np.testing.assert_allclose(a, b, atol=atol, rtol=1e-5)

@pytest.mark.parametrize("kw", [{}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True}, {"momentum": 0.5, "weight_decay": 0.1}])
def test_sgd(kw):
  torch = pytest.importorskip("torch")
  _check(_ours(lambda p: optim.SGD(p, lr=0.1, **kw)), _torch(lambda p: torch.optim.SGD(p, lr=0.1, **kw)))

def test_adam():
  torch = pytest.importorskip("torch")
  _check(_ours(lambda p: optim.Adam(p, lr=0.05)), _torch(lambda p: torch.optim.Adam(p, lr=0.05)))

def test_adamw():
  torch = pytest.importorskip("torch")
  _check(_ours(lambda p: optim.AdamW(p, lr=0.05, weight_decay=0.1)), _torch(lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1)))

def _np_grads(w, b):
  # d/dw, d/db of mean((X w^T + b - Y)^2) + 0.01 * sum(w^2)
  err = X @ w.T + b - Y
  gy = 2 * err / err.size
  return gy.T @ X + 0.02 * w, gy.sum(0)

@pytest.mark.parametrize("offload", [False, True])
def test_lamb_vs_numpy(offload, device):
  lr, b1, b2, eps, wd = 0.05, 0.9, 0.999, 1e-6, 0.01
  ps = [W0.astype(np.float64), B0.astype(np.float64)]
  m, v = [np.zeros_like(p) for p in ps], [np.zeros_like(p) for p in ps]
  for t in range(1, 4):
    gs = _np_grads(*ps)
    for i, (p, g) in enumerate(zip(ps, gs)):
      m[i] = b1 * m[i] + (1 - b1) * g
      v[i] = b2 * v[i] + (1 - b2) * g * g
      up = (m[i] / (1 - b1 ** t)) / (np.sqrt(v[i] / (1 - b2 ** t)) + eps) + wd * p
      r1, r2 = np.linalg.norm(p), np.linalg.norm(up)
      ps[i] = p - lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1.0) * up
  def make(p):
    opt = optim.LAMB(p, lr=lr, b1=b1, b2=b2, eps=eps, weight_decay=wd)
    # state kept on another device than the parameters (tinygrad's cpu offload): the step computes it there
    if offload: [s.to_("PYTHON" if device == "CLANG" else "CLANG") for s in opt.m + opt.v + [opt.b1_t, opt.b2_t]]
    return opt
  _check(_ours(make), ps, atol=1e-4)

def test_lars_vs_numpy():
  lr, mom, wd, tcoef = 0.1, 0.9, 1e-4, 0.001
  ps = [W0.astype(np.float64), B0.astype(np.float64)]
  buf = [np.zeros_like(p) for p in ps]
  for _ in range(3):
    gs = _np_grads(*ps)
    for i, (p, g) in enumerate(zip(ps, gs)):
      r1, r2 = np.linalg.norm(p), np.linalg.norm(g)
      r = tcoef * r1 / (r2 + wd * r1) if r1 > 0 and r2 > 0 else 1.0
      g = (g + wd * p) * r * lr
      buf[i] = mom * buf[i] + g
      ps[i] = p - buf[i]
  _check(_ours(lambda p: optim.LARS(p, lr=lr, momentum=mom, weight_decay=wd, tcoef=tcoef)), ps)

def test_optimizer_group_and_lr_change():
  torch = pytest.importorskip("torch")
  def ours(p):
    return optim.OptimizerGroup(optim.SGD([p[0]], lr=0.1, momentum=0.9), optim.Adam([p[1]], lr=0.01))
  def theirs(p): return _TorchGroup(torch.optim.SGD([p[0]], lr=0.1, momentum=0.9), torch.optim.Adam([p[1]], lr=0.01))
  _check(_ours(ours), _torch(theirs))
  # the learning rate is a device tensor: set_lr changes it in place
  w = Tensor(W0.copy(), requires_grad=True)
  o = optim.SGD([w], lr=0.1)
  lr_buf = o.lr.lazydata.base.buffer
  optim.set_lr(o, 0.5)
  assert o.lr.numpy().tolist() == [0.5] and o.lr.lazydata.base.buffer is lr_buf

class _TorchGroup:
  def __init__(self, *opts): self.opts = opts
  def zero_grad(self):
    for o in self.opts: o.zero_grad()
  def step(self):
    for o in self.opts: o.step()

def test_step_needs_training_and_grads():
  w = Tensor(W0.copy(), requires_grad=True)
  o = optim.SGD([w], lr=0.1)
  with pytest.raises(RuntimeError, match="backward"): o.step()
  Tensor.training = False
  w.square().sum().backward()
  with pytest.raises(RuntimeError, match="Tensor.training"): o.step()

def test_params_from_layers_requires_grad_none_becomes_true():
  lin = nn.Linear(2, 2)
  assert lin.weight.requires_grad is None
  o = optim.Adam(nn.state.get_parameters(lin))
  assert lin.weight.requires_grad is True and len(o.params) == 2
  with pytest.raises(ValueError, match="no parameters"): optim.SGD([Tensor([1.0], requires_grad=False)])
  with pytest.raises(ValueError, match="no parameters"): optim.SGD([Tensor([1.0]).is_param_(False), Tensor([1])])

def test_step_updates_in_place():
  w = Tensor(W0.copy(), requires_grad=True)
  o = optim.Adam([w], lr=0.1)
  buf = w.lazydata.base.buffer
  w.square().sum().backward()
  o.step()
  assert w.lazydata.base.buffer is buf and o.m[0].lazydata.base.buffer is not None

def test_schedules():
  f = optim.cosine_lr(1.0, 10, warmup_steps=2, min_lr=0.1)
  assert f(0) == pytest.approx(0.5) and f(1) == pytest.approx(1.0) and f(10) == pytest.approx(0.1)
  assert optim.step_lr(1.0, 5, 0.5)(11) == pytest.approx(0.25)

# *** values computed before a step are not changed by it (the loss of `loss.backward(); opt.step(); return loss`) ***

def _mlp_loss_numpy(X, Y, W1, b1, W2, b2, kind):
  z = np.maximum(X @ W1.T + b1, 0) @ W2.T + b2
  if kind == "mse": return ((z - 1) ** 2).mean()
  z = z - z.max(1, keepdims=True)
  return -(z - np.log(np.exp(z).sum(1, keepdims=True)))[np.arange(len(Y)), Y].mean()

@pytest.mark.parametrize("kind", ["sce", "mse"])
def test_loss_read_after_step_is_the_loss_before_it(kind):
  X, Y = RNG.standard_normal((8, 12)).astype(np.float32), RNG.integers(0, 5, 8)
  l1, l2 = nn.Linear(12, 16), nn.Linear(16, 5)
  params = [l1.weight, l1.bias, l2.weight, l2.bias]
  opt = optim.SGD(params, lr=0.5)
  for _ in range(3):
    before = [p.numpy() for p in params]
    opt.zero_grad()
    out = l2(l1(Tensor(X)).relu())
    loss = out.sparse_categorical_crossentropy(Tensor(Y.astype(np.int32))) if kind == "sce" else ((out - 1) ** 2).mean()
    loss.backward()
    opt.step()
    np.testing.assert_allclose(loss.item(), _mlp_loss_numpy(X, Y, *before, kind), rtol=1e-5)
    assert not np.allclose(params[3].numpy(), before[3]), "the step changed nothing: the test would prove nothing"

def test_jitted_step_returning_an_unrealized_loss():
  X, Y = RNG.standard_normal((8, 12)).astype(np.float32), RNG.integers(0, 5, 8).astype(np.int32)
  l1, l2 = nn.Linear(12, 16), nn.Linear(16, 5)
  params = [l1.weight, l1.bias, l2.weight, l2.bias]
  opt = optim.Adam(params, lr=0.05)
  @TinyJit
  def step(x, y):
    opt.zero_grad()
    loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward()
    opt.step()
    return loss
  for _ in range(5):
    before = [p.numpy() for p in params]
    loss = step(Tensor(X), Tensor(Y)).item()
    np.testing.assert_allclose(loss, _mlp_loss_numpy(X, Y, *before, "sce"), rtol=1e-5)

def test_views_see_an_assign_computations_made_before_it_do_not():
  w = Tensor(RNG.standard_normal((4, 3)).astype(np.float32)).realize()
  w0 = w.numpy()
  view, product = w[1:3], w * 3  # a view aliases the buffer (as in torch); a computation is of the value it was given
  w.assign(w * 2).realize()
  np.testing.assert_allclose(view.numpy(), w0[1:3] * 2)
  np.testing.assert_allclose(product.numpy(), w0 * 3)
  np.testing.assert_allclose(w.numpy(), w0 * 2)

def _newton_schulz_np(g, steps, coeffs, eps=1e-7):
  x = g.reshape(g.shape[0], -1)
  tall = x.shape[0] > x.shape[1]
  x = (x.T if tall else x) / (np.linalg.norm(x) + eps)
  for _ in range(steps):
    gram = x @ x.T
    x = coeffs[0] * x + coeffs[1] * gram @ x + coeffs[2] * gram @ gram @ x
  return (x.T if tall else x).reshape(g.shape)

@pytest.mark.parametrize("nesterov", [True, False])
def test_muon_vs_numpy(nesterov):
  lr, mom, wd, steps, coeffs = 0.02, 0.95, 0.1, 5, (3.4445, -4.775, 2.0315)
  ps = [W0.astype(np.float64), B0.astype(np.float64)]
  buf = [np.zeros_like(p) for p in ps]
  for _ in range(3):
    gs = _np_grads(*ps)
    for i, (p, g) in enumerate(zip(ps, gs)):
      buf[i] = mom * buf[i] + g
      u = _newton_schulz_np(g + mom * buf[i] if nesterov else buf[i], steps, coeffs)
      ps[i] = p - lr * (u + wd * p)
  _check(_ours(lambda p: optim.Muon(p, lr=lr, momentum=mom, weight_decay=wd, nesterov=nesterov)), ps, atol=1e-4)

def test_muon_matches_tinygrad_and_needs_training():
  import tinygrad
  from tinygrad.nn.optim import Muon as TMuon
  tinygrad.helpers.DEV.value = "CPU"
  from tinycore import Context
  w, tw = Tensor(W0.copy(), requires_grad=True), tinygrad.Tensor(W0.copy(), device="CPU")
  opt, topt = optim.Muon([w], lr=0.05), TMuon([tw], lr=0.05)
  with tinygrad.Context(TRAINING=1):
    for _ in range(3):
      opt.zero_grad(), topt.zero_grad()
      (Tensor(X) @ w.T).tanh().sum().backward()
      (tinygrad.Tensor(X, device="CPU") @ tw.T).tanh().sum().backward()
      opt.step(), topt.step()
  np.testing.assert_allclose(w.numpy(), tw.numpy(), atol=1e-5)
  with Context(TRAINING=0):
    with pytest.raises(RuntimeError, match="TRAINING"): opt.step()

# *** the update is built from same-shape operands, its hyperparameters kept from step to step ***

@pytest.mark.parametrize("how", ["set_lr", "lazy assign"])
def test_learning_rate_changed_between_steps(how):
  # the broadcast learning rate is kept from step to step: a new one (set_lr realizes it, an assign leaves it lazy)
  # must reach the next step, against torch stepping with the same rates
  torch = pytest.importorskip("torch")
  w, tw = Tensor(W0.copy(), requires_grad=True), torch.tensor(W0.copy(), requires_grad=True)
  o, to = optim.Adam([w], lr=0.05), torch.optim.Adam([tw], lr=0.05)
  for lr in (0.05, 0.2, 0.01):
    if how == "set_lr": optim.set_lr(o, lr)
    else: o.lr.assign(Tensor([lr], dtype=o.lr.dtype))
    for group in to.param_groups: group["lr"] = lr
    o.zero_grad(); to.zero_grad()  # noqa: E702
    (w * Tensor(X[:3, :4])).square().sum().backward(); (tw * torch.tensor(X[:3, :4])).square().sum().backward()  # noqa: E702
    o.step(); to.step()  # noqa: E702
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-5)

def test_adam_step_op_count():
  # an Adam update over 4 parameters is built on the lazy graph: no Function.apply at all (~22 per parameter with the
  # Tensor-level arithmetic and assigns, ~45 with Tensor-level broadcasts of every hyperparameter); a bound, so that
  # per-op Python does not creep back into every eager step
  from tinycore import function
  l1, l2 = nn.Linear(6, 8), nn.Linear(8, 3)
  o = optim.Adam(nn.state.get_parameters([l1, l2]), lr=0.01)
  calls, orig = [0], function.Function.apply.__func__
  def counting(cls, *x, **kw):
    calls[0] += 1
    return orig(cls, *x, **kw)
  for _ in range(2):
    o.zero_grad()
    l2(l1(Tensor(RNG.standard_normal((5, 6)).astype(np.float32))).relu()).sum().backward()
    calls[0] = 0
    function.Function.apply = classmethod(counting)
    try: o.step()
    finally: function.Function.apply = classmethod(orig)
  assert calls[0] == 0, f"{calls[0]} Function.apply calls for an Adam step over 4 parameters"

def test_adam_constants_kept_between_steps():
  # the update's hyperparameter constants (b1, 1 - b1, eps, lr broadcast) are the same lazy nodes from step to step: a
  # constant made again costs its Python every step and, once lifted into a buffer, a kernel writing it (1 - b1, a new
  # float object each step, was made again on every step)
  w = Tensor(W0.copy(), requires_grad=True)
  o = optim.Adam([w], lr=0.01)
  kept = []
  for _ in range(3):
    o.zero_grad()
    (w * Tensor(X[:3, :4])).square().sum().backward()
    o.step()
    kept.append({k: v[1] for k, v in o._kept.items()})
  assert len(kept[1]) >= 6 and kept[1].keys() == kept[2].keys()
  assert [k for k in kept[1] if kept[1][k] is not kept[2][k]] == []
