"""tinygrad 0.14's autograd semantics, checked side by side with tinygrad 0.14 itself and with torch: every float tensor
is differentiable, backward() fills .grad of the whole graph and accumulates, gradient() returns zeros for unrelated
targets and gradients that can be differentiated again; plus pow on edge values, and bounded memory in training."""
import gc, math
import numpy as np
import pytest
import torch
import tinygrad, tinycore
from tinycore import Tensor, dtypes, nn

TT = tinygrad.Tensor

def _rng(seed=0): return np.random.default_rng(seed)
def _tg(x: np.ndarray) -> "tinygrad.Tensor": return TT(x, device="CPU")
def close(a, b, **kw): np.testing.assert_allclose(a, b, rtol=kw.get("rtol", 1e-5), atol=kw.get("atol", 1e-6), equal_nan=True)

# *** every float tensor is differentiable, without a flag ***

_LINKED = {"detach": lambda lib, x, y: x.detach() * y, "detach_then_op": lambda lib, x, y: (x.detach() * 2) * y,
           "comparison": lambda lib, x, y: (x < 0.5).float() * y,
           "assign_target": lambda lib, x, y: x.contiguous().realize().assign(y * 2), "unrelated": lambda lib, x, y: y * 2}

@pytest.mark.parametrize("name", list(_LINKED))
def test_grad_through_links_without_gradient_like_tinygrad(name, dev):
  """backward() gives a float tensor that the graph reaches only through detach, a comparison or an
  assign's target a zero .grad (it is in the graph, nothing flows), None when the graph does not reach it: as 0.14."""
  v, w = _rng(5).uniform(0, 1, (2, 3)).astype(np.float32), _rng(6).uniform(0, 1, (2, 3)).astype(np.float32)
  got = []
  for lib, mk in ((tinycore, lambda a: Tensor(a, device=dev)), (tinygrad, _tg)):
    x, y = mk(v), mk(w)
    out = _LINKED[name](lib, x, y)
    (out * mk(v + 1)).sum().backward()
    got.append([None if t.grad is None else t.grad.numpy() for t in (x, y)])
  for a, b in zip(*got):
    assert (a is None) == (b is None), f"tinycore {a}, tinygrad {b}"
    if a is not None: close(a, b)

def test_links_keep_no_chain_of_steps_alive(dev):
  """A value carried from step to step through links without a gradient (a counter, a detached state, an assign)
  holds no earlier step: the live tensors stay flat."""
  def live() -> int:
    gc.collect()
    return sum(type(o) is Tensor for o in gc.get_objects())
  w = Tensor(_rng(7).standard_normal(4).astype(np.float32), device=dev)
  t, h, p = Tensor(0, device=dev), Tensor.zeros(4, device=dev).contiguous().realize(), Tensor.ones(4, device=dev).contiguous().realize()
  counts = []
  for i in range(60):
    t = (t + 1).realize()
    h = (h * 0.5 + w).detach().realize()
    p.assign(p * 0.9 + h).realize()
    if i in (10, 59): counts.append(live())
  assert counts[1] <= counts[0], f"live tensors grew from {counts[0]} to {counts[1]} over 49 steps"
  assert t.item() == 60

def test_backward_fills_leaves_intermediates_and_self_like_tinygrad(dev):
  v = _rng().standard_normal(3).astype(np.float32)
  x, h, = Tensor(v, device=dev), None
  h = x * x
  loss = (h * 3).sum()
  loss.backward()
  tx = _tg(v)
  th = tx * tx
  tl = (th * 3).sum()
  tl.backward()
  close(x.grad.numpy(), tx.grad.numpy())
  close(h.grad.numpy(), th.grad.numpy())
  close(loss.grad.numpy(), tl.grad.numpy())
  # a second backward adds again (the graph is kept), into the same .grad object
  g = x.grad
  loss.backward()
  tl.backward()
  assert x.grad is g
  close(x.grad.numpy(), tx.grad.numpy())
  close(h.grad.numpy(), th.grad.numpy())
  close(x.grad.numpy(), 2 * 6 * v)

def test_gradient_of_any_float_tensor_and_zeros_for_unrelated(dev):
  v, u = _rng(1).standard_normal((2, 3)).astype(np.float32), _rng(2).standard_normal(3).astype(np.float32)
  x, w, z = Tensor(v, device=dev), Tensor(u, device=dev), Tensor([4.0, 5.0], device=dev)
  y = (x * w).exp().sum()
  gx, gw, gz = y.gradient(x, w, z)
  tx, tw, tz = _tg(v), _tg(u), _tg(np.array([4.0, 5.0], np.float32))
  rx, rw, rz = (tx * tw).exp().sum().gradient(tx, tw, tz)
  close(gx.numpy(), rx.numpy(), rtol=1e-5)
  close(gw.numpy(), rw.numpy(), rtol=1e-5)
  assert gz.tolist() == rz.tolist() == [0.0, 0.0]
  assert x.grad is None and w.grad is None  # gradient() leaves .grad alone
  # an intermediate as a target, and a vector-Jacobian product
  h = x * w
  gh, = (h.sin()).gradient(h, gradient=Tensor.ones(2, 3, device=dev))
  close(gh.numpy(), np.cos(v * u), rtol=1e-5)

def test_int_tensors_have_no_gradient(dev):
  x = Tensor([1.0, 2.0], device=dev)
  i = Tensor([1, 2], device=dev)
  with pytest.raises(RuntimeError, match="only float Tensors have gradient"): (x * 2).sum().gradient(i)
  with pytest.raises(RuntimeError, match="only float Tensors have gradient"): (i * 2).sum().gradient(x)
  with pytest.raises(RuntimeError, match="only float"): TT([1.0, 2.0]).sum().gradient(TT([1, 2]))
  # an int tensor cannot be marked (torch raises too): the error names the dtype
  for make in (lambda: Tensor([1, 2], device=dev, requires_grad=True), lambda: Tensor([1, 2], device=dev).requires_grad_(),
               lambda: Tensor.zeros(2, dtype=dtypes.int32, device=dev, requires_grad=True)):
    with pytest.raises(RuntimeError, match="dtypes.int"): make()
  with pytest.raises(RuntimeError): torch.tensor([1, 2], requires_grad=True)
  # an int tensor in a float graph gets no .grad, and no gradient flows through a cast to int (as torch)
  f = Tensor([1.5, 2.5], device=dev)
  (f.cast(dtypes.int32).cast(dtypes.float32) * f + i).sum().backward()
  assert i.grad is None and f.grad.tolist() == [1.0, 2.0]

def test_requires_grad_false_detach_and_no_grad_stop_it(dev):
  a, c = Tensor([1.0, 2.0], device=dev), Tensor([3.0, 4.0], device=dev, requires_grad=False)
  out = (a * c + a.detach() * a).sum()
  out.backward()
  assert c.grad is None
  close(a.grad.numpy(), [3.0 + 1.0, 4.0 + 2.0])
  assert (c * 2).requires_grad is False and a.detach().requires_grad is False
  with Tensor.test():
    y = a * 2
  assert y._ctx is None
  gy, = (y * 3).sum().gradient(a)
  assert gy.tolist() == [0.0, 0.0]

def test_requires_grad_true_is_pytorch_mode(dev):
  """A graph with a tensor marked requires_grad=True fills .grad of the marked leaves only (PyTorch's rule)."""
  w = Tensor([1.0, 2.0], device=dev, requires_grad=True)
  x = Tensor([3.0, 4.0], device=dev)
  h = x * w
  loss = h.sum()
  assert h.requires_grad is True and loss.requires_grad is True
  loss.backward()
  tw, tx = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0, 4.0])
  tl = (tx * tw).sum()
  tl.backward()
  close(w.grad.numpy(), tw.grad.numpy())
  assert x.grad is None and h.grad is None and loss.grad is None
  # the graph was let go, as PyTorch's (its forward values freed once the gradients were computed): walking it again
  # raises, as torch does; with retain_graph=True it is kept and gradient() still answers for any tensor
  with pytest.raises(RuntimeError, match="retain_graph"): loss.gradient(x)
  with pytest.raises(RuntimeError, match="retain_graph"): loss.backward()
  with pytest.raises(RuntimeError): tl.backward()
  h = x * w
  loss = h.sum().backward(retain_graph=True)
  gx, = loss.gradient(x)
  assert gx.tolist() == [1.0, 2.0]
  loss.backward()
  close(w.grad.numpy(), 3 * tw.grad.numpy())

def test_realize_makes_a_leaf_like_tinygrad(dev):
  x = Tensor([1.0, 2.0, 3.0], device=dev)
  y = (x * 2).realize()
  tx = _tg(np.array([1.0, 2.0, 3.0], np.float32))
  ty = (tx * 2).realize()
  assert y.sum().gradient(x)[0].tolist() == ty.sum().gradient(tx)[0].tolist() == [0.0, 0.0, 0.0]
  # numpy() and item() compute a copy: the graph of the tensor itself is kept
  z = x * x
  z.numpy()
  assert z.sum().gradient(x)[0].tolist() == [2.0, 4.0, 6.0]

def test_clone_keeps_grad_and_is_param(dev):
  x = Tensor([1.0, 2.0], device=dev)
  (x * 3).sum().backward()
  c = x.clone()
  tx = _tg(np.array([1.0, 2.0], np.float32))
  (tx * 3).sum().backward()
  tc = tx.clone()
  assert c.grad.tolist() == tc.grad.tolist() == [3.0, 3.0] and c.grad is not x.grad
  assert c.is_param and x.is_param_(False) is x and not x.is_param and not x.clone().is_param and not tx.is_param_(False).clone().is_param
  assert (x * 2).is_param and x.detach().is_param and TT([1.0]).detach().is_param
  # gradients flow through clone
  close(x.clone().square().sum().gradient(x)[0].numpy(), [2.0, 4.0])

def test_optimizer_params_and_buffers(dev):
  w, b = Tensor([1.0, 2.0], device=dev), Tensor([0.5], device=dev)
  stat, frozen, ints = Tensor([0.0], device=dev).is_param_(False), Tensor([3.0], device=dev, requires_grad=False), Tensor([1], device=dev)
  opt = nn.optim.SGD([w, b, stat, frozen, ints], lr=0.1)
  assert opt.params == [w, b] and opt.buffers == [stat, frozen, ints]
  assert w.requires_grad is True  # marked: backward fills the parameters only
  with pytest.raises(ValueError, match="no parameters"): nn.optim.SGD([stat, frozen])
  x = Tensor([2.0, 3.0], device=dev)
  ((x * w).sum() + b.sum()).backward()
  assert x.grad is None
  with Tensor.train(): opt.step()
  close(w.numpy(), [1.0 - 0.2, 2.0 - 0.3])
  assert w._ctx is None and b._ctx is None  # the update recorded no graph

# *** second order: gradients are recorded too ***

SECOND_ORDER = {
  "cube": (lambda x: x ** 3, lambda x: x ** 3),
  "sin": (lambda x: x.sin(), torch.sin),
  "exp": (lambda x: x.exp(), torch.exp),
  "matmul": (lambda x: (x @ x.T).square(), lambda x: (x @ x.T).square()),
  "softmax": (lambda x: x.softmax(-1) * Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=x.device),
              lambda x: x.softmax(-1) * torch.arange(12, dtype=torch.float32).reshape(3, 4)),
  "relu_mlp": (lambda x: (x.relu() * x).sigmoid().sqrt() + x.tanh() * x.log_softmax(0),
               lambda x: (x.relu() * x).sigmoid().sqrt() + x.tanh() * x.log_softmax(0)),
  "reciprocal_pow": (lambda x: (x * x + 1).reciprocal() + (x * x + 0.5) ** 0.7, lambda x: (x * x + 1).reciprocal() + (x * x + 0.5) ** 0.7),
  "max_mean": (lambda x: x.max(1) * x.mean(), lambda x: x.max(1).values * x.mean()),
}

@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_second_order_matches_torch(name, dev):
  ours, theirs = SECOND_ORDER[name]
  v = _rng(7).uniform(-1.5, 1.5, (3, 4)).astype(np.float32)
  x, tx = Tensor(v, device=dev), torch.tensor(v, requires_grad=True)
  g, = ours(x).sum().gradient(x)
  tg, = torch.autograd.grad(theirs(tx).sum(), tx, create_graph=True)
  close(g.numpy(), tg.detach().numpy(), rtol=1e-4, atol=1e-5)
  # d/dx sum(g * w), both ways: gradient() of a gradient, and backward() through it
  w = _rng(8).standard_normal((3, 4)).astype(np.float32)
  g2, = (g * Tensor(w, device=dev)).sum().gradient(x)
  tg2, = torch.autograd.grad((tg * torch.tensor(w)).sum(), tx)
  close(g2.numpy(), tg2.numpy(), rtol=1e-3, atol=1e-4)
  (g * Tensor(w, device=dev)).sum().backward()
  close(x.grad.numpy(), tg2.numpy(), rtol=1e-3, atol=1e-4)

def test_second_order_like_tinygrad(dev):
  v = np.array([0.5, -1.0, 2.0], np.float32)
  x, tx = Tensor(v, device=dev), _tg(v)
  for f in (lambda t: t ** 3, lambda t: t.sin() * t, lambda t: (t * t).exp()):
    g, = f(x).sum().gradient(x)
    tg, = f(tx).sum().gradient(tx)
    close(g.sum().gradient(x)[0].numpy(), tg.sum().gradient(tx)[0].numpy(), rtol=1e-4)

def test_third_order(dev):
  x = Tensor([0.7], device=dev)
  g1, = x.sin().sum().gradient(x)
  g2, = g1.sum().gradient(x)
  g3, = g2.sum().gradient(x)
  close([g1.item(), g2.item(), g3.item()], [math.cos(0.7), -math.sin(0.7), -math.cos(0.7)], rtol=1e-5)

# *** pow: torch's values and gradients on edge values ***

EDGE = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 0.3, -0.3, math.inf, -math.inf, math.nan, 1e-3]

def test_pow_edge_grid_matches_torch(dev):
  b, e = (np.array(v, np.float32) for v in zip(*[(p, q) for p in EDGE for q in EDGE]))
  x, y = Tensor(b, device=dev), Tensor(e, device=dev)
  out = x ** y
  gx, gy = out.sum().gradient(x, y)
  tx, ty = torch.tensor(b, requires_grad=True), torch.tensor(e, requires_grad=True)
  (tout := tx ** ty).sum().backward()
  for what, ours, ref in (("value", out, tout.detach()), ("d/dbase", gx, tx.grad), ("d/dexponent", gy, ty.grad)):
    o, r = ours.numpy(), ref.numpy()
    bad = [(float(b[i]), float(e[i]), float(o[i]), float(r[i])) for i in np.nonzero(~np.isclose(o, r, rtol=1e-5, atol=1e-6, equal_nan=True))[0]]
    assert not bad, f"{what} differs from torch at (base, exponent, ours, torch): {bad}"
    assert (np.signbit(o) == np.signbit(r))[~np.isnan(r)].all(), f"{what}: signs of zeros and infinities differ from torch"

@pytest.mark.parametrize("c", [0.0, 1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 0.3, -0.3, 64.0, 65.0, -1.0])
def test_pow_constant_exponent_matches_torch(c, dev):
  # torch computes x ** -0.5 as rsqrt: (-0.0) ** -0.5 is -inf and (-inf) ** -0.5 NaN there; C's pow (ours) gives inf and 0
  v = np.array([e for e in EDGE if not (c == -0.5 and (e == -math.inf or (e == 0 and math.copysign(1, e) < 0)))], np.float32)
  x, tx = Tensor(v, device=dev), torch.tensor(v, requires_grad=True)
  out = x ** c
  g, = out.sum().gradient(x)
  (tx ** c).sum().backward()
  close(out.numpy(), (tx ** c).detach().numpy(), rtol=2e-5)
  close(g.numpy(), tx.grad.numpy(), rtol=2e-5)

@pytest.mark.parametrize("c", [2.0, 0.5, math.e, 0.0, -2.0, 3.0])
def test_pow_constant_base_matches_torch(c, dev):
  v = np.array(EDGE, np.float32)
  y, ty = Tensor(v, device=dev), torch.tensor(v, requires_grad=True)
  out = c ** y
  g, = out.sum().gradient(y)
  (c ** ty).sum().backward()
  close(out.numpy(), (c ** ty).detach().numpy(), rtol=2e-5)
  close(g.numpy(), ty.grad.numpy(), rtol=2e-5)

def test_pow_gradient_regressions(dev):
  """Issue 10: x ** 0.3 at 1 had gradient 0, 2 ** y at 0 had 0, 0 ** 0 was NaN, (-inf) ** 0.3 was NaN."""
  x, y = Tensor([1.0], device=dev), Tensor([0.0], device=dev)
  assert (x ** 0.3).sum().gradient(x)[0].item() == pytest.approx(0.3)
  assert (2 ** y).sum().gradient(y)[0].item() == pytest.approx(math.log(2))
  assert (Tensor([0.0], device=dev) ** 0).item() == 1.0 and (Tensor([0.0], device=dev) ** Tensor([0.0], device=dev)).item() == 1.0
  assert (Tensor([-math.inf], device=dev) ** 0.3).item() == math.inf

# *** memory: a training loop keeps nothing of the steps before ***

def test_training_loop_memory_is_bounded():
  rng = _rng(3)
  X = Tensor(rng.standard_normal((64, 8)).astype(np.float32)).realize()
  Y = Tensor(rng.integers(0, 3, 64).astype(np.int32)).realize()
  l1, l2 = nn.Linear(8, 16), nn.Linear(16, 3)
  opt = nn.optim.Adam(nn.state.get_parameters([l1, l2]), lr=1e-2)
  def live() -> int:
    gc.collect()
    return sum(type(o) is Tensor for o in gc.get_objects())
  counts, losses = [], []
  with Tensor.train():
    for i in range(200):
      idx = Tensor(rng.integers(0, 64, 16).astype(np.int32))
      opt.zero_grad()
      loss = l2(l1(X[idx]).relu()).sparse_categorical_crossentropy(Y[idx])
      loss.backward()
      opt.step()
      losses.append(loss.item())
      if i in (20, 199): counts.append(live())
  assert counts[1] <= counts[0], f"live tensors grew from {counts[0]} to {counts[1]} over 180 steps"
  assert X.grad is None and np.mean(losses[-20:]) < np.mean(losses[:20])

# *** in-place operators ***

@pytest.mark.parametrize("op,tname", [("imatmul", "matmul"), ("ipow", "pow"), ("itruediv", "div")])
def test_inplace_gradient_is_the_mathematical_one(op, tname, dev):
  """`x op= y`: y's gradient is torch's whether the result or the gradient is realized first. tinygrad 0.14 is no
  reference here: its gradient kernel reads x's buffer after the assignment when the result is realized first, so its
  answer depends on the order (shown below): a read-after-write hazard, not a semantics (test/compat/known_gaps.txt)."""
  import operator
  a, b, w = (_rng(i).uniform(0.5, 2, (3, 3)).astype(np.float32) for i in (8, 9, 10))
  ty, tx = torch.tensor(b, requires_grad=True), torch.tensor(a)
  (getattr(torch, tname)(tx, ty) * torch.tensor(w)).sum().backward()
  def y_grad(mk, result_first: bool) -> np.ndarray:
    x, y = mk(a), mk(b)
    out = getattr(operator, op)(x, y)
    gy, = (out * mk(w)).sum().gradient(y)
    if result_first: out.realize()
    return gy.numpy()
  for result_first in (True, False): close(y_grad(lambda v: Tensor(v, device=dev), result_first), ty.grad.numpy(), rtol=1e-4)
  assert not np.allclose(y_grad(_tg, True), y_grad(_tg, False), rtol=1e-3)

# *** an update assigned outside no_grad, step after step ***

@pytest.mark.parametrize("marked", [False, True], ids=["tinygrad_mode", "requires_grad"])
@pytest.mark.parametrize("symbolic", [False, True], ids=["slices", "variable_batch"])
def test_sgd_by_assign_outside_no_grad(marked, symbolic, dev):
  """`w.assign(w - lr * w.grad)` without no_grad, for many steps, w realized by the next loss: the live tensors stay
  flat (each step's graph was chained to the next through the written parameter), w.grad is filled each step (a
  requires_grad=True parameter stays a leaf), and batches sliced with a Variable bound to a new size each step run (the data's .grad, summed over
  steps, had two values of the Variable in one computation; tinygrad 0.14 raises there). Values vs numpy float64."""
  from tinycore import Variable
  rng = _rng(11)
  Xn, wn = rng.standard_normal((64, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
  X = Tensor(Xn, device=dev).realize()
  w = Tensor(wn, device=dev, requires_grad=True if marked else None).realize()
  v, ref = Variable("bs", 1, 16), wn.astype(np.float64)
  def live() -> int:
    gc.collect()
    return sum(type(o) is Tensor for o in gc.get_objects())
  counts = []
  for step in range(40):
    n = 3 + step % 4
    x = X[:v.bind(n)] if symbolic else X[step:step + n]
    loss = (x @ w).square().mean()
    loss.backward()
    assert w.grad is not None
    w.assign(w - 0.05 * w.grad)
    # (with a Variable, a write still pending would meet the next size in one computation: both libraries raise)
    if symbolic: w.realize()
    w.grad = None
    loss.item()
    xn = Xn[:n] if symbolic else Xn[step:step + n]
    ref = ref - 0.05 * (2 / (n * 3)) * xn.T.astype(np.float64) @ (xn @ ref)
    if step in (10, 39): counts.append(live())
  close(w.numpy(), ref, rtol=1e-4, atol=1e-5)
  assert counts[1] <= counts[0], f"live tensors grew from {counts[0]} to {counts[1]} over 29 steps"

@pytest.mark.parametrize("name", ["x*sigmoid", "erf", "tanh(x)*x"])
def test_second_order_through_a_saved_output_matches_torch(name):
  """With x marked requires_grad=True (the PyTorch rule), a gradient built from an op's saved output (sigmoid's s(1-s))
  is differentiated again through that output, as torch does (it was cut there: d/dx of x * sigmoid(x)'s gradient off by 0.35)."""
  fs = {"x*sigmoid": lambda x, s: x * s(x), "erf": lambda x, s: x.erf(), "tanh(x)*x": lambda x, s: x.tanh() * x}
  xn = _rng(2).standard_normal((6, 7)).astype(np.float32) * 2
  x = Tensor(xn, requires_grad=True)
  (gx,) = fs[name](x, Tensor.sigmoid).sum().gradient(x)
  (gx * gx).sum().backward()
  xt = torch.tensor(xn, dtype=torch.float64, requires_grad=True)
  (gt,) = torch.autograd.grad(fs[name](xt, torch.sigmoid).sum(), xt, create_graph=True)
  (gt * gt).sum().backward()
  close(gx.numpy(), gt.detach().numpy(), rtol=1e-5, atol=1e-5)
  close(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
