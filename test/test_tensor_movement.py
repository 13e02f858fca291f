"""Movement ops, indexing (get and set), gather/scatter and friends: forward and backward against PyTorch."""
import math
import numpy as np
import pytest
from tinycore import Tensor, dtypes

torch = pytest.importorskip("torch")
import torch_compare  # noqa: E402 (after the importorskip above)


def _rng(seed=0): return np.random.default_rng(seed)

def check(*args, atol=1e-6, rtol=1e-5, **kw): return torch_compare.check(*args, atol=atol, rtol=rtol, **kw)

X = _rng().standard_normal((3, 4, 5)).astype(np.float32)

MOVES = [
  ("reshape", lambda x: x.reshape(4, 15), lambda x: x.reshape(4, 15)),
  ("reshape_neg1", lambda x: x.reshape(-1, 5), lambda x: x.reshape(-1, 5)),
  ("reshape_none", lambda x: x.reshape(None, 20), lambda x: x.reshape(3, 20)),
  ("view", lambda x: x.view(60), lambda x: x.view(60)),
  ("permute", lambda x: x.permute(2, 0, 1), lambda x: x.permute(2, 0, 1)),
  ("permute_neg", lambda x: x.permute(-1, 0, -2), lambda x: x.permute(-1, 0, -2)),
  ("transpose", lambda x: x.transpose(0, 2), lambda x: x.transpose(0, 2)),
  ("transpose_default", lambda x: x.transpose(), lambda x: x.transpose(1, 0)),
  ("T_2d", lambda x: x[0].T, lambda x: x[0].T),
  ("flatten", lambda x: x.flatten(), lambda x: x.flatten()),
  ("flatten_1", lambda x: x.flatten(1), lambda x: x.flatten(1)),
  ("flatten_0_1", lambda x: x.flatten(0, 1), lambda x: x.flatten(0, 1)),
  ("unflatten", lambda x: x.unflatten(1, (2, 2)), lambda x: x.unflatten(1, (2, 2))),
  ("unflatten_neg", lambda x: x.unflatten(-1, (-1, 1)), lambda x: x.unflatten(-1, (-1, 1))),
  ("squeeze", lambda x: x[:, :1].squeeze(), lambda x: x[:, :1].squeeze()),
  ("squeeze_dim", lambda x: x[:1, :1].squeeze(1), lambda x: x[:1, :1].squeeze(1)),
  ("squeeze_tuple", lambda x: x[:1, :1].squeeze((0, 1)), lambda x: x[:1, :1].squeeze((0, 1))),
  ("squeeze_noop", lambda x: x.squeeze(1), lambda x: x.squeeze(1)),
  ("unsqueeze", lambda x: x.unsqueeze(1), lambda x: x.unsqueeze(1)),
  ("unsqueeze_neg", lambda x: x.unsqueeze(-1), lambda x: x.unsqueeze(-1)),
  ("expand", lambda x: x[:, :1].expand(3, 6, 5), lambda x: x[:, :1].expand(3, 6, 5)),
  ("expand_new", lambda x: x.expand(2, -1, -1, -1), lambda x: x.expand(2, -1, -1, -1)),
  ("flip", lambda x: x.flip(0), lambda x: x.flip(0)),
  ("flip_multi", lambda x: x.flip((0, 2)), lambda x: x.flip((0, 2))),
  ("shrink", lambda x: x.shrink(((1, 3), None, (0, 2))), lambda x: x[1:3, :, 0:2]),
  ("repeat", lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3)),
  ("repeat_more", lambda x: x.repeat(2, 1, 1, 2), lambda x: x.repeat(2, 1, 1, 2)),
  ("repeat_interleave", lambda x: x.repeat_interleave(2, dim=1), lambda x: x.repeat_interleave(2, dim=1)),
  ("repeat_interleave_flat", lambda x: x.repeat_interleave(3), lambda x: x.repeat_interleave(3)),
  ("roll", lambda x: x.roll(2, 1), lambda x: x.roll(2, 1)),
  ("roll_neg_multi", lambda x: x.roll((-1, 7), (0, 2)), lambda x: x.roll((-1, 7), (0, 2))),
  ("roll_flat", lambda x: x.roll(5), lambda x: x.roll(5)),
  ("tril", lambda x: x.tril(), lambda x: x.tril()),
  ("tril_k", lambda x: x.tril(1), lambda x: x.tril(1)),
  ("triu", lambda x: x.triu(), lambda x: x.triu()),
  ("triu_neg", lambda x: x.triu(-1), lambda x: x.triu(-1)),
  ("diag_1d", lambda x: x[0, 0].diag(), lambda x: x[0, 0].diag()),
  ("diag_2d", lambda x: x[0].diag(), lambda x: x[0].diag()),
  ("diagonal", lambda x: x.diagonal(), lambda x: x.diagonal()),
  ("diagonal_off", lambda x: x.diagonal(1, 1, 2), lambda x: x.diagonal(1, 1, 2)),
  ("diagonal_negoff", lambda x: x.diagonal(-2, -1, -2), lambda x: x.diagonal(-2, -1, -2)),
  ("unfold", lambda x: x.unfold(2, 2, 1), lambda x: x.unfold(2, 2, 1)),
  ("unfold_step", lambda x: x.unfold(1, 2, 2), lambda x: x.unfold(1, 2, 2)),
  ("unfold_dim0", lambda x: x.unfold(0, 2, 1), lambda x: x.unfold(0, 2, 1)),
  ("split_piece", lambda x: x.split(2, dim=1)[1], lambda x: x.split(2, dim=1)[1]),
  ("split_sizes", lambda x: x.split([1, 4], dim=2)[1], lambda x: x.split([1, 4], dim=2)[1]),
  ("chunk", lambda x: x.chunk(2, 2)[1], lambda x: x.chunk(2, 2)[1]),
]

@pytest.mark.parametrize("name,fn,tfn", MOVES, ids=[m[0] for m in MOVES])
def test_movement(name, fn, tfn, dev):
  check(fn, tfn, [X], dev)

# negative (cropping) pads only in constant mode: torch rejects them for the other modes
PADS = [(p, m) for m in ["constant", "reflect", "replicate", "circular"] for p in [(1, 2), (1, 0, 0, 2), (0, 0, 2, 1, 1, 1), (-1, 2), (2, -1, 1, -2)]
        if m == "constant" or min(p) >= 0]

@pytest.mark.parametrize("pad,mode", PADS)
def test_pad_modes(pad, mode, dev):
  # torch pads 3 dims in a non-constant mode only for 4-D and 5-D inputs: give it a batch dim
  tfn = (lambda x: torch.nn.functional.pad(x[None], pad, mode=mode)[0]) if mode != "constant" and len(pad) == 6 else \
    (lambda x: torch.nn.functional.pad(x, pad, mode=mode))
  check(lambda x: x.pad(pad, mode=mode), tfn, [X], dev)

def test_pad_value_and_pairs(dev):
  check(lambda x: x.pad(((0, 1), None, (2, 0)), value=-1.5), lambda x: torch.nn.functional.pad(x, (2, 0, 0, 0, 0, 1), value=-1.5), [X], dev)
  check(lambda x: x.pad((1, 1), value=-math.inf).max(-1), lambda x: torch.nn.functional.pad(x, (1, 1), value=-math.inf).amax(-1), [X], dev)
  i = Tensor([[1, 2]], device=dev, dtype=dtypes.int8).pad((1, 1), value=7)
  assert i.dtype == dtypes.int8 and i.tolist() == [[7, 1, 2, 7]]
  b = Tensor([True], device=dev).pad((1, 0))
  assert b.dtype == dtypes.bool and b.tolist() == [False, True]

def test_cat_stack(dev):
  r = _rng(2)
  a, b, c = r.standard_normal((2, 3)).astype(np.float32), r.standard_normal((4, 3)).astype(np.float32), r.standard_normal((1, 3)).astype(np.float32)
  check(lambda x, y, z: x.cat(y, z), lambda x, y, z: torch.cat([x, y, z]), [a, b, c], dev)
  check(lambda x, y: Tensor.cat(x, y, dim=-1), lambda x, y: torch.cat([x, y], -1), [a, a * 2], dev)
  check(lambda x, y: x.stack(y), lambda x, y: torch.stack([x, y]), [a, a + 1], dev)
  check(lambda x, y: Tensor.stack(x, y, dim=-1), lambda x, y: torch.stack([x, y], -1), [a, a + 1], dev)
  check(lambda x, y: x.stack(y, dim=1), lambda x, y: torch.stack([x, y], 1), [a, a + 1], dev)
  e = Tensor.zeros(0, 3, device=dev)
  assert Tensor(a, device=dev).cat(e).shape == (2, 3)
  m = Tensor([1, 2], device=dev, dtype=dtypes.int8).cat(Tensor([1.5], device=dev))
  assert m.dtype == dtypes.float32 and m.tolist() == [1.0, 2.0, 1.5]
  neg0 = Tensor([-0.0], device=dev).cat(Tensor([1.0], device=dev)).numpy()
  assert np.signbit(neg0[0])
  bo = Tensor([True], device=dev).cat(Tensor([False, True], device=dev))
  assert bo.dtype == dtypes.bool and bo.tolist() == [True, False, True]
  with pytest.raises(ValueError, match="cat shape mismatch"): Tensor(a).cat(Tensor.ones(2, 4))
  with pytest.raises(ValueError, match="one shape"): Tensor(a).stack(Tensor(b))

def test_split_chunk(dev):
  t = Tensor(np.arange(10), device=dev)
  for sizes in (3, [2, 8], 10, 20):
    ref = torch.arange(10).split(sizes)
    out = t.split(sizes)
    assert len(out) == len(ref) and all(o.tolist() == r.tolist() for o, r in zip(out, ref))
  for n in (1, 3, 4, 10, 12):
    ref = torch.arange(10).chunk(n)
    out = t.chunk(n)
    assert len(out) == len(ref) and all(o.tolist() == r.tolist() for o, r in zip(out, ref))
  with pytest.raises(ValueError, match="add up"): t.split([3, 3])
  with pytest.raises(ValueError, match="positive"): t.chunk(0)

def test_movement_errors():
  x = Tensor.ones(2, 3)
  with pytest.raises(ValueError, match="cannot reshape"): x.reshape(4, 2)
  with pytest.raises(ValueError, match="only one dimension can be -1"): x.reshape(-1, -1)
  with pytest.raises(ValueError, match="not a permutation"): x.permute(0, 0)
  with pytest.raises(IndexError, match="out of range"): x.permute(0, 2)
  with pytest.raises(ValueError, match="only dims of size 1"): x.expand(4, 3)
  with pytest.raises(ValueError, match="fewer dims"): x.expand(3)
  with pytest.raises(ValueError, match="out of bounds"): x.shrink(((0, 3), None))
  with pytest.raises(ValueError, match="pad mode"): x.pad((1, 1), mode="wrap")
  with pytest.raises(ValueError, match="smaller than the dim size"): x.pad((3, 0), mode="reflect")
  with pytest.raises(ValueError, match="does not match"): x.pad(((1, 1),))
  with pytest.raises(ValueError, match="at least 2 dims"): Tensor.ones(3).tril()
  with pytest.raises(ValueError, match="at least"): x.repeat(2)
  with pytest.raises(ValueError, match="1-D or 2-D"): Tensor.ones(2, 2, 2).diag()
  with pytest.raises(ValueError, match="unfold size"): x.unfold(1, 5, 1)
  with pytest.raises(ValueError, match="multiply"): x.unflatten(1, (2, 2))
  with pytest.raises(IndexError, match="dim 5"): x.transpose(0, 5)

def test_noncontiguous_chain(dev):
  check(lambda x: x.permute(2, 0, 1)[1:, ::2].flip(0).reshape(4, -1).pad((1, 1)).expand(2, 4, -1),
        lambda x: torch.nn.functional.pad(x.permute(2, 0, 1)[1:, ::2].flip(0).reshape(4, -1), (1, 1)).expand(2, 4, -1), [X], dev)

# *** indexing ***
IDX = [
  ("int", lambda x: x[1]), ("neg_int", lambda x: x[-1]), ("slice", lambda x: x[1:3]), ("step", lambda x: x[::2]),
  ("neg_step", lambda x: x[::-1]), ("neg_step2", lambda x: x[:, 3:0:-2]), ("neg_step3", lambda x: x[:, ::-3, -2::-2]),
  ("ellipsis", lambda x: x[..., 1]), ("none", lambda x: x[None, 1]), ("none_mid", lambda x: x[:, None, 2:]),
  ("ellipsis_none", lambda x: x[1, ..., None]), ("mixed", lambda x: x[-2:, 1, ::3]), ("empty_slice", lambda x: x[2:1]),
  ("out_slice", lambda x: x[1:100, -100:2]), ("all", lambda x: x[...]),
  ("list", lambda x: x[[0, 2]]), ("list_neg", lambda x: x[[-1, 0, -1]]), ("tensor2d", lambda x: x[np.array([[0, 1], [2, 0]])]),
  ("two_adjacent", lambda x: x[[0, 2], [1, 3]]), ("col", lambda x: x[:, [0, 2]]), ("non_adjacent", lambda x: x[[0, 1], :, [1, 2]]),
  ("last_dim_neg", lambda x: x[..., [-1, 0]]), ("slice_then_idx", lambda x: x[1:, [0, 2]]), ("idx_then_slice", lambda x: x[[0, 2], 1:3]),
  ("int_between", lambda x: x[[0, 1], 1, [1, 2]]), ("int_and_idx", lambda x: x[0, :, [1, 2]]), ("broadcast_idx", lambda x: x[[[0], [2]], [1, 3]]),
  ("none_and_idx", lambda x: x[None, [0, 1], None, [1, 2]]), ("step_and_idx", lambda x: x[::2, [3, 0], ::-2]), ("repeat_idx", lambda x: x[[1, 1, 1]]),
]

def _torch_index(idx):
  # lists as index tensors (a list of lists is a tuple of indices, as torch and tinygrad: see test_nested_sequence_indices)
  return tuple(torch.tensor(i) if isinstance(i, list) else i for i in idx) if isinstance(idx, tuple) else \
    torch.tensor(idx) if isinstance(idx, list) else idx

class _Rec:
  def __getitem__(self, idx): return idx

@pytest.mark.parametrize("name,fn", IDX, ids=[i[0] for i in IDX])
def test_getitem(name, fn, dev):
  idx = fn(_Rec())
  steps = [i.step for i in (idx if isinstance(idx, tuple) else (idx,)) if isinstance(i, slice)]
  if any(s is not None and s < 0 for s in steps):
    # torch has no negative steps: numpy gives the values, and the gradient is w scattered back through the view
    t = Tensor(X, device=dev, requires_grad=True)
    out = fn(t)
    ref = X[idx]
    assert out.shape == ref.shape
    np.testing.assert_equal(out.numpy(), ref)
    w = _rng(1).standard_normal(ref.shape).astype(np.float32)
    (out * Tensor(w, device=dev)).sum().backward()
    g = np.zeros_like(X)
    np.add.at(g, idx, w)
    np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-6)
    return
  check(fn, lambda x: x[_torch_index(idx)], [X], dev)

def test_getitem_tensor_index(dev):
  idx = np.array([[2, 0], [1, 1]])
  check(lambda x: x[Tensor(idx, device=dev)], lambda x: x[torch.tensor(idx)], [X], dev)
  check(lambda x: x[:, Tensor(idx, device=dev, dtype=dtypes.int64)], lambda x: x[:, torch.tensor(idx)], [X], dev)
  check(lambda x: x[Tensor([0, 2], device=dev, dtype=dtypes.uint8), 1], lambda x: x[torch.tensor([0, 2]), 1], [X], dev)
  check(lambda x: x[np.array([1, 0])], lambda x: x[torch.tensor([1, 0])], [X], dev)

def test_getitem_bool_mask(dev):
  m = X[:, :, 0] > 0
  check(lambda x: x[Tensor(m, device=dev)], lambda x: x[torch.tensor(m)], [X], dev)
  m3 = X > 0.5
  check(lambda x: x[Tensor(m3, device=dev)], lambda x: x[torch.tensor(m3)], [X], dev)
  m1 = np.array([True, False, True, True, False])
  check(lambda x: x[..., Tensor(m1, device=dev)], lambda x: x[..., torch.tensor(m1)], [X], dev)
  check(lambda x: x[1, :, m1.tolist()], lambda x: x[1, :, torch.tensor(m1)], [X], dev)
  nothing = Tensor(X, device=dev)[Tensor(np.zeros((3, 4, 5), bool), device=dev)]
  assert nothing.shape == (0,)

@pytest.mark.parametrize("dt", [dtypes.int32, dtypes.int8, dtypes.bool, dtypes.float16, dtypes.int64])
def test_getitem_dtypes(dt, dev):
  x = (np.arange(12).reshape(3, 4) % 3 - 1)
  t = Tensor(x, device=dev).cast(dt)
  ref = x.astype({dtypes.int32: np.int32, dtypes.int8: np.int8, dtypes.bool: np.bool_, dtypes.float16: np.float16, dtypes.int64: np.int64}[dt])
  out = t[[2, 0], 1:]
  assert out.dtype == dt
  np.testing.assert_equal(out.numpy(), ref[[2, 0], 1:])

def test_getitem_errors():
  x = Tensor.ones(3, 4)
  with pytest.raises(IndexError, match="out of bounds"): x[3]
  with pytest.raises(IndexError, match="out of bounds"): x[0, -5]
  with pytest.raises(IndexError, match="too many indices"): x[0, 0, 0]
  with pytest.raises(IndexError, match="single ellipsis"): x[..., ...]
  # an index tensor is checked on the device: the error comes at the next sync
  with pytest.raises(IndexError, match="out of bounds"): x[[0, 3]].numpy()
  with pytest.raises(IndexError, match="out of bounds"): x[Tensor([-4, 0])].numpy()
  with pytest.raises(IndexError, match="int or bool"): x[Tensor([0.5])]
  with pytest.raises(IndexError, match="cannot index"): x["a"]
  with pytest.raises(IndexError, match="boolean mask"): x[Tensor([True, False])]
  with pytest.raises(IndexError, match="broadcast"): x[[0, 1], [0, 1, 2]]
  with pytest.raises(ValueError, match="step cannot be zero"): x[::0]

def test_setitem(dev):
  ref = np.zeros((4, 5), np.float32)
  t = Tensor.zeros(4, 5, device=dev).contiguous().realize()
  buf = t.lazydata.base.buffer
  for idx, v in [((1,), 5.0), ((slice(None), 2), np.array([1, 2, 3, 4], np.float32)), ((slice(None, None, 2), slice(1, None, 3)), -1.0),
                 ((slice(None, None, -1), 4), np.arange(4, dtype=np.float32)), ((Ellipsis, 0), 9.0), ((np.array([0, 3]), np.array([1, 1])), 7.0),
                 ((np.array([2, 2]), slice(0, 2)), np.array([[1, 2], [3, 4]], np.float32)), ((np.array([True, False, True, False]),), 0.5)]:
    ref[idx] = v
    t[tuple(x if not isinstance(x, np.ndarray) else (x.tolist() if x.dtype != bool else Tensor(x, device=dev)) for x in idx)] = \
      Tensor(v, device=dev) if isinstance(v, np.ndarray) else v
    np.testing.assert_equal(t.numpy(), ref)
  assert t.lazydata.base.buffer is buf
  i = Tensor.zeros(3, dtype=dtypes.int32, device=dev).contiguous().realize()
  i[1] = 4
  assert i.tolist() == [0, 4, 0]
  u = Tensor.ones(2, 2, device=dev)  # unrealized: setitem still works
  u[0, 0] = 3.0
  assert u.tolist() == [[3.0, 1.0], [1.0, 1.0]]
  with pytest.raises(ValueError, match="cannot assign"): t[0] = Tensor.ones(3, device=dev)
  with pytest.raises(RuntimeError, match="requires grad"): Tensor.ones(2, requires_grad=True)[0] = 1.0

# *** gather / scatter ***
def test_gather(dev):
  r = _rng(3)
  x = r.standard_normal((3, 4, 5)).astype(np.float32)
  for dim, ishape in ((0, (2, 4, 5)), (1, (3, 6, 2)), (2, (3, 4, 7)), (-1, (1, 1, 3))):
    idx = r.integers(0, x.shape[dim], ishape)
    check(lambda t, dim=dim, idx=idx: t.gather(dim, Tensor(idx, device=dev)), lambda t, dim=dim, idx=idx: t.gather(dim, torch.tensor(idx)), [x], dev)
  with pytest.raises(ValueError, match="dims"): Tensor(x).gather(0, Tensor([0, 1]))
  with pytest.raises(IndexError, match="out of bounds"): Tensor(x).gather(1, Tensor(np.full((3, 4, 5), 4))).numpy()
  with pytest.raises(TypeError, match="integer"): Tensor(x).gather(1, Tensor(np.zeros((3, 4, 5), np.float32)))
  with pytest.raises(ValueError, match="larger"): Tensor(x).gather(1, Tensor(np.zeros((4, 4, 5), np.int32)))

@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
def test_scatter(reduce, dev):
  r = _rng(4)
  x = r.standard_normal((4, 5)).astype(np.float32)
  src = r.standard_normal((3, 5)).astype(np.float32)
  # unique targets per column so "last write wins" matches torch exactly
  idx = np.stack([r.permutation(4)[:3] for _ in range(5)], 1)
  kw = {} if reduce is None else {"reduce": reduce}
  if reduce is None:
    check(lambda a, s: a.scatter(0, Tensor(idx, device=dev), s), lambda a, s: a.scatter(0, torch.tensor(idx), s), [x, src], dev)
  else:  # a tensor src with reduce is scatter_reduce's job (tinygrad 0.14 raises TypeError, before looking at the dims)
    with pytest.raises(TypeError, match="scatter_reduce"): Tensor(x).scatter(5, Tensor(idx), Tensor(src), **kw)
  idx2 = r.integers(0, 5, (4, 2))
  check(lambda a: a.scatter(1, Tensor(idx2, device=dev), 2.5, **kw), lambda a: a.scatter(1, torch.tensor(idx2), 2.5, **kw), [x], dev, grad=False)
  dup = Tensor.zeros(3, device=dev).scatter(0, Tensor([1, 1, 2], device=dev), Tensor([5.0, 6.0, 7.0], device=dev) if reduce is None else 5.0, **kw)
  assert dup.tolist() == {None: [0.0, 6.0, 7.0], "add": [0.0, 10.0, 5.0], "multiply": [0.0, 0.0, 0.0]}[reduce]
  with pytest.raises(ValueError, match="reduce"): Tensor(x).scatter(0, Tensor(idx), Tensor(src), reduce="max")

@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self, dev):
  r = _rng(5)
  x = r.standard_normal((4, 3)).astype(np.float32)
  src = r.standard_normal((6, 3)).astype(np.float32)
  idx = r.integers(0, 4, (6, 3))
  check(lambda a, s: a.scatter_reduce(0, Tensor(idx, device=dev), s, reduce, include_self=include_self),
        lambda a, s: a.scatter_reduce(0, torch.tensor(idx), s, reduce, include_self=include_self), [x, src], dev,
        atol=1e-5)

@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_extreme_ties(reduce, include_self, dev):
  # negative and repeated indices, values tied with each other and with self: the gradient is split among the ties, as torch's
  r = _rng(7)
  x = r.integers(-2, 3, (5, 4)).astype(np.float32)
  src = r.integers(-2, 3, (8, 4)).astype(np.float32)
  idx = r.integers(-5, 5, (8, 4))
  check(lambda a, s: a.scatter_reduce(0, Tensor(idx, device=dev), s, reduce, include_self=include_self),
        lambda a, s: a.scatter_reduce(0, torch.tensor(idx % 5), s, reduce, include_self=include_self), [x, src], dev, atol=1e-6)
  i2, xn, sn = r.integers(-4, 4, (5, 4)), x.astype(np.int32), src[:5].astype(np.int32)
  xi = Tensor(xn, device=dev).scatter_reduce(1, Tensor(i2, device=dev), Tensor(sn, device=dev), reduce, include_self=include_self)
  want = torch.tensor(xn).scatter_reduce(1, torch.tensor(i2 % 4), torch.tensor(sn), reduce, include_self=include_self)
  np.testing.assert_array_equal(xi.numpy(), want.numpy())

def test_masked_select(dev):
  x = _rng(6).standard_normal((3, 4)).astype(np.float32)
  m = x > 0
  check(lambda t: t.masked_select(Tensor(m, device=dev)), lambda t: t.masked_select(torch.tensor(m)), [x], dev)
  mrow = np.array([True, False, False, True])
  check(lambda t: t.masked_select(Tensor(mrow, device=dev)), lambda t: t.masked_select(torch.tensor(mrow)), [x], dev)
  with pytest.raises(ValueError, match="broadcast"): Tensor(x).masked_select(Tensor([True, False]))

@pytest.mark.parametrize("formula,sizes", [("b c h w -> b h w c", {}), ("b c (h w) -> b (c h) w", {"h": 2}), ("a b c -> (a b c)", {}),
                                           ("... c -> c ...", {}), ("(a b) c d -> a (b c) d", {"a": 3}), ("a ... -> ... a", {})], ids=str)
def test_rearrange(formula, sizes, dev):
  shape = {"b c h w -> b h w c": (2, 3, 4, 5), "b c (h w) -> b (c h) w": (3, 4, 6), "(a b) c d -> a (b c) d": (6, 4, 5)}.get(formula, (3, 4, 5))
  x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
  out = Tensor(x, device=dev).rearrange(formula, **sizes)
  # the reference: the same split/permute/merge done by hand in numpy
  ref = {"b c h w -> b h w c": lambda a: a.transpose(0, 2, 3, 1), "b c (h w) -> b (c h) w": lambda a: a.reshape(3, 4, 2, -1).reshape(3, 8, -1),
         "a b c -> (a b c)": lambda a: a.reshape(-1), "... c -> c ...": lambda a: a.transpose(2, 0, 1),
         "(a b) c d -> a (b c) d": lambda a: a.reshape(3, 2, 4, 5).reshape(3, 8, 5), "a ... -> ... a": lambda a: a.transpose(1, 2, 0)}[formula](x)
  np.testing.assert_equal(out.numpy(), ref)

def test_rearrange_errors():
  x = Tensor.ones(2, 3, 4)
  with pytest.raises(ValueError, match="'->'"): x.rearrange("a b c")
  with pytest.raises(ValueError, match="input dims"): x.rearrange("a b -> b a")
  with pytest.raises(ValueError, match="same names"): x.rearrange("a b c -> a b")
  with pytest.raises(ValueError, match="give the sizes"): x.rearrange("a b (c d e) -> a b c d e")
  with pytest.raises(ValueError, match="multiply"): x.rearrange("a b (c d) -> a b c d", c=3)

def test_pad_to_shrink_to(dev):
  x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=dev, requires_grad=True)
  p = x.pad_to(4, None)
  assert p.shape == (4, 3) and p.tolist() == [[0, 1, 2], [3, 4, 5], [0, 0, 0], [0, 0, 0]]
  s = x.shrink_to(1, 2)
  assert s.tolist() == [[0, 1]]
  (p.sum() + s.sum()).backward()
  assert x.grad.tolist() == [[2, 2, 1], [1, 1, 1]]
  with pytest.raises(ValueError, match="smaller"): x.pad_to(1, 3)
  with pytest.raises(ValueError, match="out of bounds"): x.shrink_to(3, 3)

def test_symbolic_shapes():
  """Variables (bound or not) pass through the shape entry points; realizing such shapes is the core's part."""
  from tinycore import Variable
  from tinycore.uop.symbolic import simplify
  v = Variable("bs", 1, 64)
  def same(a, b): return a is b or simplify(a - b).arg == 0
  x = Tensor.ones(64, 4).contiguous()
  for y in (x[:v], x.shrink(((0, v), None)), x[:v.bind(3)], x.shrink(((0, v.bind(5)), None)), x.shrink_to(v, None)):
    assert same(y.shape[0], v) and y.shape[1] == 4
  y = x[:v]
  assert y.reshape(v, 2, 2).shape[1:] == (2, 2) and same(y.reshape(v, 2, 2).shape[0], v)
  assert (y + 1).shape[1:] == (4,) and y.expand(v, 4).shape[1:] == (4,) and y[:, 1:3].shape[1:] == (2,)
  e = Tensor.empty(v, 3)
  assert e.shape[0] is v and Tensor.zeros(v.bind(2), 3).shape[0] is v
  with pytest.raises(ValueError, match="out of bounds"): x[:Variable("big", 1, 100)]
  with pytest.raises(IndexError, match="step"): x[:v:2]
  assert y.reshape(-1, 2).shape[1] == 2 and same(y.reshape(-1, 2).shape[0], v * 2)
  with pytest.raises(ValueError, match="cannot infer the -1"): y.reshape(-1, 3)

# *** tinygrad 0.14 semantics (issue 10) ***
def test_squeeze_0d_is_a_tensor(dev):
  x = Tensor(3.0, device=dev)
  for d in (0, -1, [0], None):
    out = x.squeeze(d)
    assert isinstance(out, Tensor) and out.shape == () and out.item() == torch.tensor(3.0).squeeze(*([d] if isinstance(d, int) else [])).item()
  with pytest.raises(IndexError): x.squeeze(1)

def test_meshgrid_0d(dev):
  for ts in ((3.0, 4.0), (3.0, [1.0, 2.0]), ([1.0, 2.0, 3.0], 5.0, [6.0, 7.0])):
    for indexing in ("ij", "xy"):
      out = Tensor(ts[0], device=dev).meshgrid(*[Tensor(t, device=dev) for t in ts[1:]], indexing=indexing)
      ref = torch.meshgrid(*[torch.tensor(t) for t in ts], indexing=indexing)
      assert [o.shape for o in out] == [tuple(r.shape) for r in ref]
      for o, r in zip(out, ref): np.testing.assert_equal(o.numpy(), r.numpy())

def test_stack_cat_of_a_list(dev):
  a, b = _rng(1).standard_normal((2, 3)).astype(np.float32), _rng(2).standard_normal((2, 3)).astype(np.float32)
  check(lambda x, y: Tensor.stack([x, y], dim=1), lambda x, y: torch.stack([x, y], dim=1), [a, b], dev)
  check(lambda x, y: Tensor.stack((x, y)), lambda x, y: torch.stack((x, y)), [a, b], dev)
  check(lambda x, y: Tensor.cat([x, y], dim=-1), lambda x, y: torch.cat([x, y], dim=-1), [a, b], dev)
  with pytest.raises(TypeError, match="needs Tensors"): Tensor.stack([])

@pytest.mark.parametrize("idx", [((0,),), ((0, 2),), ((0, 1), (1, 2)), [[0, 1], [1, 2]], [(0, 1), [1, 2]], (1, (0, 2)), [[0, 2]], [[[0, 1]]],
                                 [0, slice(1, 3)], [[0], [1]]], ids=repr)
def test_nested_sequence_indices(idx, dev):
  # a tuple inside an index is an index list, and a list holding sequences or slices is a tuple of indices (as torch)
  x = np.arange(12, dtype=np.float32).reshape(3, 4)
  import warnings
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # torch warns that it will change this rule some day
    check(lambda t: t[idx], lambda t: t[idx], [x], dev)

@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(1, -1, -1, 1), (2, -2, 0, 1), (2, -1, 0, 1), (-1, 2, 1, -1), (-1, 3, 0, 0), (3, -2, 0, 0), (3, -4, 1, 0)], ids=str)
def test_pad_mixed_negative_positive(pad, mode, dev):
  # reflect and replicate pad first and crop the padded tensor (as torch); circular crops first (as torch)
  x = _rng(3).standard_normal((1, 2, 3, 5)).astype(np.float32)
  try: torch.nn.functional.pad(torch.tensor(x), pad, mode=mode)
  except RuntimeError:
    with pytest.raises(RuntimeError): Tensor(x, device=dev).pad(pad, mode=mode)
    return
  if mode == "circular" and pad in ((2, -2, 0, 1), (3, -4, 1, 0)): return  # torch reads uninitialized memory for these
  check(lambda t: t.pad(pad, mode=mode), lambda t: torch.nn.functional.pad(t, pad, mode=mode), [x], dev)

def test_unfold_size_0(dev):
  x = np.arange(10, dtype=np.float32).reshape(2, 5)
  for d, step in ((1, 1), (1, 2), (0, 1)):
    t, ref = Tensor(x, device=dev).unfold(d, 0, step), torch.tensor(x).unfold(d, 0, step)
    assert t.shape == tuple(ref.shape) and t.dtype == dtypes.float32
  with pytest.raises(RuntimeError, match="step"): Tensor(x).unfold(1, 2, 0)
  with pytest.raises(RuntimeError, match="larger"): Tensor(x).unfold(1, 6, 1)

def test_pad_to_value(dev):
  x = _rng(4).standard_normal((2, 3)).astype(np.float32)
  check(lambda t: t.pad_to(4, 5, value=-2.5), lambda t: torch.nn.functional.pad(t, (0, 2, 0, 2), value=-2.5), [x], dev)
  np.testing.assert_equal(Tensor([1, 2], device=dev).pad_to((None, ), value=7).numpy(), [1, 2])

@pytest.mark.parametrize("formula,shapes", [("ij...,ij...->ij", [(2, 3, 4), (2, 3, 4)]), ("...j,...j->...", [(2, 3, 4), (2, 3, 4)]),
                                            ("i...->i", [(2, 3, 4)]), ("ij...->", [(2, 3, 4)]), ("b...,b...->...", [(2, 3), (2, 3)]),
                                            ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)])], ids=str)
def test_einsum_ellipsis(formula, shapes, dev):
  xs = [_rng(i).standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)]
  check(lambda *t: Tensor.einsum(formula, *t), lambda *t: torch.einsum(formula, *t), xs, dev, atol=1e-5)

def _tinygrad():
  import tinygrad
  tinygrad.helpers.DEV.value = "CPU"
  return tinygrad

@pytest.mark.parametrize("x", [np.array([[0, 1.5, 0], [2, 0, -3]], np.float32), np.array([0, 3, 0, 0, 5], np.int32), np.zeros((2, 2), np.float32),
                               np.array(4.0, np.float32), np.array([True, False, True]), np.zeros((0, 3), np.float32)], ids=lambda x: str(x.shape))
def test_nonzero(x, dev):
  tg = _tinygrad()
  t = Tensor(x, device=dev).nonzero()
  ref = torch.tensor(x).nonzero()
  assert t.dtype == dtypes.int32 and t.shape == tuple(ref.shape)  # int32 as tinygrad (torch: int64)
  np.testing.assert_equal(t.numpy(), ref.numpy())
  if x.ndim:
    for size in (0, 2, 7):
      s = Tensor(x, device=dev).nonzero(size=size, fill_value=-1)
      r = tg.Tensor(x).nonzero(size=size, fill_value=-1)
      assert s.shape == tuple(r.shape) == (size, x.ndim) and s.dtype.name == r.dtype.name
      np.testing.assert_equal(s.numpy(), r.numpy())

def test_masked_select_size(dev):
  tg = _tinygrad()
  x = _rng(5).standard_normal((3, 4)).astype(np.float32)
  m = x > 0.2
  for size in (0, 3, int(m.sum()), 20):
    for fill in (0, -7.5):
      t = Tensor(x, device=dev).masked_select(Tensor(m, device=dev), size=size, fill_value=fill)
      r = tg.Tensor(x).masked_select(tg.Tensor(m), size=size, fill_value=fill)
      assert t.shape == tuple(r.shape) == (size,)
      np.testing.assert_equal(t.numpy(), r.numpy())
      np.testing.assert_equal(t.numpy()[:min(size, int(m.sum()))], x[m][:size])
  i = np.arange(6, dtype=np.int32).reshape(2, 3)
  np.testing.assert_equal(Tensor(i, device=dev).masked_select(Tensor([True, False, True], device=dev), size=5, fill_value=9).numpy(), [0, 2, 3, 5, 9])

def test_pad_unknown_mode_is_not_implemented(dev):
  # torch and tinygrad 0.14 raise NotImplementedError for a mode they do not know
  with pytest.raises(NotImplementedError): torch.nn.functional.pad(torch.zeros(1, 3, 3), (1, 0), mode="typo")
  with pytest.raises(NotImplementedError): Tensor.zeros(1, 3, 3, device=dev).pad((1, 0), mode="typo")

def test_stack_of_a_list_and_more_tensors_is_an_error(dev):
  # one list of tensors, or the tensors themselves: a list followed by more tensors is a ValueError (tinygrad 0.14)
  a, b, c = (Tensor([float(i), 2.0], device=dev) for i in range(3))
  np.testing.assert_equal(Tensor.stack([a, b]).numpy(), np.stack([a.numpy(), b.numpy()]))
  with pytest.raises(ValueError): Tensor.stack((a, b), c)
  with pytest.raises(ValueError): Tensor.stack(a, [b, c])
