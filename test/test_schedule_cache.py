"""The schedule cache: a lazy graph with the structure of one scheduled before reuses its kernels, with its own buffers."""
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.engine import realize, schedule as sched_mod

def test_same_structure_reuses_the_schedule_with_new_buffers():
  a, b = Tensor([1.0, 2.0, 3.0]).realize(), Tensor([4.0, 5.0, 6.0]).realize()
  c, d = Tensor([7.0, 8.0, 9.0]).realize(), Tensor([1.0, 1.0, 1.0]).realize()
  np.testing.assert_equal((a * b + 1).numpy(), [5.0, 11.0, 19.0])
  n = len(sched_mod._sched_cache)
  np.testing.assert_equal((c * d + 1).numpy(), [8.0, 9.0, 10.0])
  assert len(sched_mod._sched_cache) == n, "the second graph has the same structure: no new entry"

def test_a_new_constant_is_a_new_value_of_the_same_kernel(device):
  # float32 constants are kernel inputs: new values reuse the compiled kernel and the cached schedule
  x = np.random.default_rng(0).standard_normal(5).astype(np.float32)
  a = Tensor(x).realize()
  np.testing.assert_allclose((a * 2.5 + 3.25).numpy(), x * np.float32(2.5) + np.float32(3.25), rtol=1e-6)
  kernels, scheds = len(realize.method_cache), len(sched_mod._sched_cache)
  for k in np.random.default_rng(1).uniform(-10, 10, (5, 2)).astype(np.float32):
    np.testing.assert_allclose((a * float(k[0]) + float(k[1])).numpy(), x * k[0] + k[1], rtol=1e-6)
  assert (len(realize.method_cache), len(sched_mod._sched_cache)) == (kernels, scheds), "a new constant compiled or scheduled anew"
  # integer constants, 0 and +-1 stay literals (the simplifier folds them; integers can be index math)
  i = Tensor(np.arange(4, dtype=np.int32)).realize()
  np.testing.assert_equal((i + 3).numpy(), np.arange(4) + 3)
  np.testing.assert_equal((i + 4).numpy(), np.arange(4) + 4)
  np.testing.assert_equal((a * 1.0 + 0.0).numpy(), x)

def test_lifted_constants_in_padded_views_and_as_outputs(device):
  x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
  a = Tensor(x)
  np.testing.assert_allclose(a.pad(((1, 0), (0, 2)), value=1.75).numpy(), np.pad(x, ((1, 0), (0, 2)), constant_values=1.75))
  np.testing.assert_allclose((a + Tensor.full((3, 4), 0.3)).numpy(), x + np.float32(0.3), rtol=1e-6)
  np.testing.assert_allclose(Tensor.full((2, 3), 0.3).numpy(), np.full((2, 3), 0.3, np.float32))
  np.testing.assert_allclose(Tensor.full((2, 3), 0.7).contiguous().numpy(), np.full((2, 3), 0.7, np.float32))

def test_reading_one_buffer_twice_is_not_reading_two():
  # after an assign, the tensor's new base and its old one share a buffer: a graph reading both reads one buffer
  for order in (0, 1):
    sched_mod._sched_cache.clear()
    p, q = Tensor([1.0, 2.0, 3.0]).realize(), Tensor([10.0, 20.0, 30.0]).realize()
    x = Tensor([1.0, 2.0, 3.0]).realize()
    old = x.lazydata
    x.assign(x * 2).realize()
    shared = lambda old=old, x=x: (Tensor(old) + x).numpy()  # noqa: E731
    distinct = lambda p=p, q=q: (p + q).numpy()  # noqa: E731
    if order == 0:
      np.testing.assert_equal(distinct(), [11.0, 22.0, 33.0])
      np.testing.assert_equal(shared(), [4.0, 8.0, 12.0])
    else:
      np.testing.assert_equal(shared(), [4.0, 8.0, 12.0])
      np.testing.assert_equal(distinct(), [11.0, 22.0, 33.0])

def test_training_like_loop_is_stable():
  w = Tensor(np.ones((4, 4), np.float32)).realize()
  x = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4)).realize()
  ref = np.ones((4, 4), np.float32)
  for _ in range(5):
    w.assign(w - 0.01 * (x @ w)).realize()
    ref = ref - 0.01 * (np.arange(16, dtype=np.float32).reshape(4, 4) @ ref)
  np.testing.assert_allclose(w.numpy(), ref, rtol=1e-5)

# an assign whose value reads its own target at other elements than the one it writes must not overwrite values still
# to be read (with NOOPT=1 or at 64x64 nothing hides it; the 4x4 loop above passes by luck if this is broken)
HAZARDS = {  # (tinycore, numpy)
  "matmul": (lambda w, x: w - 0.5 * (x @ w), lambda w, x: w - 0.5 * (x @ w)),
  "flip": (lambda w, x: w.flip(0) * 2, lambda w, x: w[::-1] * 2),
  "transpose": (lambda w, x: w.T + 1, lambda w, x: w.T + 1),
  "row sum": (lambda w, x: w - w.sum(1, keepdim=True), lambda w, x: w - w.sum(1, keepdims=True)),
}

@pytest.mark.parametrize("name", HAZARDS)
def test_assign_reading_its_target_elsewhere(name, device):
  rng = np.random.default_rng(0)
  a, xs = (rng.standard_normal((64, 64)).astype(np.float32) / 8 for _ in range(2))
  ours, ref = HAZARDS[name]
  w, x = Tensor(a).realize(), Tensor(xs).realize()
  w.assign(ours(w, x)).realize()
  np.testing.assert_allclose(w.numpy(), ref(a, xs), rtol=1e-4, atol=1e-5)

# graphs that differ only in a view, a dtype, a constant or the pattern of buffers they read must not share a schedule:
# each pair runs one after the other (the first fills the cache), both against numpy
RNG = np.random.default_rng(5)
XN, YN = RNG.standard_normal((6, 6)).astype(np.float32), RNG.standard_normal((6, 6)).astype(np.float32)
IN = RNG.integers(-50, 50, (6, 6)).astype(np.int32)
PAIRS = {  # name: [(tinycore, numpy), ...] of the same graph structure but for the one difference
  "shrink offset": [(lambda x, y, i: x[0:4] + 1, lambda x, y, i: x[0:4] + 1), (lambda x, y, i: x[2:6] + 1, lambda x, y, i: x[2:6] + 1)],
  "permute": [(lambda x, y, i: x * y, lambda x, y, i: x * y), (lambda x, y, i: x.T * y, lambda x, y, i: x.T * y)],
  "flip": [(lambda x, y, i: (x + y).sum(0), lambda x, y, i: (x + y).sum(0)),
           (lambda x, y, i: (x.flip(1) + y).sum(0), lambda x, y, i: (x[:, ::-1] + y).sum(0))],
  "pad": [(lambda x, y, i: x.pad(((1, 0), (0, 0)))[:6] * 2, lambda x, y, i: np.pad(x, ((1, 0), (0, 0)))[:6] * 2),
          (lambda x, y, i: x.pad(((0, 1), (0, 0)))[:6] * 2, lambda x, y, i: np.pad(x, ((0, 1), (0, 0)))[:6] * 2)],
  "dtype": [(lambda x, y, i: (x * 3).cast("int32"), lambda x, y, i: (x * 3).astype(np.int32)),
            (lambda x, y, i: (x * 3).cast("int8"), lambda x, y, i: (x * 3).astype(np.int8))],
  "int constant": [(lambda x, y, i: i * 3, lambda x, y, i: i * 3), (lambda x, y, i: i * 5, lambda x, y, i: i * 5)],
  "literal float constant": [(lambda x, y, i: x * 0.0 + y, lambda x, y, i: x * 0 + y), (lambda x, y, i: x * 1.0 + y, lambda x, y, i: x + y),
                             (lambda x, y, i: (x * float("inf")).maximum(0), lambda x, y, i: np.maximum(x * np.inf, 0)),
                             (lambda x, y, i: (x * float("-inf")).maximum(0), lambda x, y, i: np.maximum(x * -np.inf, 0))],
  "one buffer or two": [(lambda x, y, i: x * y + y, lambda x, y, i: x * y + y), (lambda x, y, i: x * y + x, lambda x, y, i: x * y + x),
                        (lambda x, y, i: x * x + x, lambda x, y, i: x * x + x)],
  "an op's result or a view of it": [(lambda x, y, i: (x + 1) * y, lambda x, y, i: (x + 1) * y),
                                     (lambda x, y, i: (x + 1).T * y, lambda x, y, i: (x + 1).T * y),
                                     (lambda x, y, i: (x + 1).flip(0) * y, lambda x, y, i: (x + 1)[::-1] * y)],
  "reduce axis": [(lambda x, y, i: (x * y).sum(0), lambda x, y, i: (x * y).sum(0)), (lambda x, y, i: (x * y).sum(1), lambda x, y, i: (x * y).sum(1))],
}

@pytest.mark.parametrize("name", PAIRS)
def test_graphs_differing_in_one_thing_do_not_share(name, device):
  for ours, ref in PAIRS[name] * 2:  # twice: the second round runs from the cache
    x, y, i = Tensor(XN).realize(), Tensor(YN).realize(), Tensor(IN).realize()
    with np.errstate(invalid="ignore"):
      np.testing.assert_allclose(ours(x, y, i).numpy(), ref(XN, YN, IN), rtol=1e-6, atol=1e-6)

def test_early_realized_values_with_a_cached_schedule(device):
  # an assign whose old value is read after it: the values realized early join the outputs of the graph's own schedule
  # (the description is reused); the result on the second, cached round must be the same as on the first
  wn = RNG.standard_normal((4, 5)).astype(np.float32)
  for _ in range(3):
    w = Tensor(wn).realize()
    a = (w * 3).exp()
    later = (a + 1).sum()
    w.assign(a * 2 + w).realize()
    np.testing.assert_allclose(later.numpy(), (np.exp(wn * 3) + 1).sum(), rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), np.exp(wn * 3) * 2 + wn, rtol=1e-5)

# a schedule the cache gives again reuses its runners and its plan of frees (by position); whether a buffer may be freed
# is still decided on each run by who holds it then
def test_cached_schedule_frees_only_what_no_one_holds_now():
  a = (RNG.standard_normal((32, 32)) / 32).astype(np.float32)
  ta = Tensor(a, requires_grad=False).realize()
  ref_h = np.maximum(a.astype(np.float64) @ a, 0)
  def build(keep: bool):
    h = (ta @ ta).relu()  # realized as the next matmul's input, then free unless something outside reads it
    return (h @ ta).sum(), (h + 1 if keep else None)
  for keep in (False, True, False, True, True, False):
    out, later = build(keep)
    out.realize()
    _ = Tensor.ones(32, 32).contiguous().realize()  # a buffer of h's size: reuses h's memory if it was freed
    np.testing.assert_allclose(out.numpy(), (ref_h @ a).sum(), rtol=1e-4)
    if later is not None: np.testing.assert_allclose(later.numpy(), ref_h + 1, rtol=1e-5, atol=1e-6)

def test_cached_schedule_runners_follow_the_opt_mode(monkeypatch):
  from tinycore import Context
  used, inner = [], realize.exec_runner
  def spy(runner, *a, **k):
    used.append(runner)
    return inner(runner, *a, **k)
  monkeypatch.setattr(realize, "exec_runner", spy)
  x = Tensor(XN).realize()
  for noopt in (0, 1, 0, 1):
    with Context(NOOPT=noopt):
      used.clear()
      np.testing.assert_allclose(((x @ x).relu() @ x).numpy(), np.maximum(XN.astype(np.float64) @ XN, 0) @ XN, rtol=1e-4, atol=1e-5)
      mine = {id(r) for k, r in realize.method_cache.items() if k[3] == noopt}
      assert len(used) > 1 and all(id(r) in mine for r in used), "a kernel ran with a runner of the other opt mode"

def test_one_op_description_is_the_walks(monkeypatch):
  # an op on realized buffers is described without the graph walk (schedule._one_op_structure): the same key, graph,
  # leaves and Variables as the walk gives, so both find one cache entry; and one-op graphs that differ in one place
  # (the op, dtype, shape, a view's strides or offset, which buffer is read twice, a constant, an assign) differ
  x, y, i = Tensor(XN).realize(), Tensor(YN).realize(), Tensor(IN).realize()
  w = Tensor(XN).realize()
  w_old = w.lazydata
  w.assign(w * 2).realize()  # w's new base and w_old: two lazy buffers, one buffer
  graphs = [x + y, x + x, x * y, x.T + y, x[1:3] + y[0:2], x[2:4] + y[0:2], x.flip(0) + y, x.cast("int32"), x.cast("float16"), i + i,
            x.T.contiguous(), x.sum(0), x.sum(1), x.max(1), x.pad(((1, 0), (0, 0))) * 1.0, Tensor(w_old) + w, x + 2.5, Tensor.full((2, 3), 0.3),
            Tensor(XN[:3]).realize() + y[:3], (x + y).realize().assign(x * y)]
  keys = []
  for t in graphs:
    outs = [t.lazydata]
    fast = sched_mod._structure(outs)
    with monkeypatch.context() as m:
      m.setattr(sched_mod, "_one_op_structure", lambda o: None)
      walk = sched_mod._structure(outs)
    assert fast[0] == walk[0] and fast[1:] == walk[1:], f"{t.lazydata}: {fast[0]} vs {walk[0]}"
    keys.append(fast[0])
  assert len(set(keys)) == len(keys), f"one-op graphs share a description: {[(j, keys.index(k)) for j, k in enumerate(keys) if keys.index(k) != j]}"
  np.testing.assert_allclose(graphs[15].numpy(), XN * 2 + XN * 2, rtol=1e-6)
  np.testing.assert_allclose(graphs[4].numpy(), XN[1:3] + YN[0:2], rtol=1e-6)
