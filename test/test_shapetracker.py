"""ShapeTracker against numpy: random chains of movement ops on an arange, read back element by element."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.shape import ShapeTracker
from tinycore.uop.uop import UOp

def read(stk: ShapeTracker, base: np.ndarray) -> np.ndarray:
  out = np.zeros(stk.shape, dtype=base.dtype)
  for pos in np.ndindex(*stk.shape):
    idx, valid = stk.to_indexed_uops([UOp.const(dtypes.int32, p) for p in pos])
    assert idx.op is Ops.CONST and valid.op is Ops.CONST
    out[pos] = base[idx.arg] if valid.arg else 0
  return out

@st.composite
def movement_chains(draw):
  shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
  ops = []
  cur = shape
  for _ in range(draw(st.integers(1, 5))):
    op = draw(st.sampled_from(["reshape", "permute", "expand", "pad", "shrink", "flip"]))
    if op == "permute": arg = tuple(draw(st.permutations(range(len(cur)))))
    elif op == "reshape":
      n = int(np.prod(cur))
      d = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
      arg = draw(st.sampled_from([(d, n // d), (n // d, 1, d), (n,)] + ([()] if n == 1 else [])))  # a single element may become 0-d
    elif op == "expand": arg = tuple(draw(st.integers(1, 3)) if s == 1 else s for s in cur)
    elif op == "pad": arg = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in cur)
    elif op == "shrink":
      arg = []
      for s in cur:
        b = draw(st.integers(0, s - 1))
        arg.append((b, draw(st.integers(b + 1, s))))
      arg = tuple(arg)
    else: arg = tuple(draw(st.booleans()) for _ in cur)
    ops.append((op, arg))
    cur = np_apply(op, arg, np.zeros(cur)).shape
  return shape, ops

def np_apply(op: str, arg, ref: np.ndarray) -> np.ndarray:
  if op == "permute": return ref.transpose(arg)
  if op == "reshape": return ref.reshape(arg)
  if op == "expand": return np.broadcast_to(ref, arg)
  if op == "pad": return np.pad(ref, arg) if arg else ref  # (numpy takes no pad widths for a 0-d array)
  if op == "shrink": return ref[tuple(slice(b, e) for b, e in arg)]
  return np.flip(ref, [i for i, f in enumerate(arg) if f]) if any(arg) else ref

@settings(max_examples=150, deadline=None)
@given(movement_chains())
def test_movement_chain_matches_numpy(chain):
  shape, ops = chain
  base = np.arange(1, int(np.prod(shape)) + 1)
  stk, ref = ShapeTracker.from_shape(shape), base.reshape(shape)
  for op, arg in ops:
    stk, ref = getattr(stk, op)(arg), np_apply(op, arg, ref)
  np.testing.assert_array_equal(read(stk, base), ref)

def test_reshape_merges_into_last_view():
  s = ShapeTracker.from_shape((4, 6)).permute((1, 0)).reshape((6, 2, 2))
  assert len(s.views) == 1, "splitting a permuted dim is still one strided view"
  assert ShapeTracker.from_shape((4, 6)).reshape((24,)).views[0].contiguous

def test_reshape_stacks_a_view_when_it_must():
  s = ShapeTracker.from_shape((4, 6)).permute((1, 0)).reshape((24,))
  assert len(s.views) == 2, "merging dims that are not one strided run needs a second view"

def test_movement_is_zero_copy_index_math():
  s = ShapeTracker.from_shape((3, 4)).flip((True, False)).shrink(((1, 3), (0, 4)))
  idx, valid = s.to_indexed_uops([UOp.const(dtypes.int32, 0), UOp.const(dtypes.int32, 2)])
  assert (idx.arg, valid.arg) == (1 * 4 + 2, True)

def test_bad_reshape_names_shapes():
  with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 2\)"): ShapeTracker.from_shape((2, 3)).reshape((4, 2))

def test_fully_masked_view_stays_masked_at_0d():
  # an element taken from the padding, then made 0-d: a 0-d view has no dim to hold the empty mask, it must not turn valid
  s = ShapeTracker.from_shape((1,)).pad(((1, 0),)).shrink(((0, 1),)).reshape(())
  idx, valid = s.to_indexed_uops([])
  assert valid.op is Ops.CONST and valid.arg is False, f"the padding element reads the buffer: {s}"
  # and back to 1-d, broadcast, merged with the view below: still nothing valid
  s2 = s.reshape((1,)).expand((3,))
  assert all(s2.to_indexed_uops([UOp.const(dtypes.int32, i)])[1].arg is False for i in range(3))

def test_shifts_compose_into_one_view():
  # a shift (shrink then pad) applied on top of another: the lower view's index runs past its dim only where the top
  # view is padding, so the two merge into one masked view (a scan's gradient stacked 7 views per load before)
  n = 12
  a = ShapeTracker.from_shape((n,)).shrink(((0, n - 4),)).pad(((4, 0),))
  b = ShapeTracker.from_shape((n,)).shrink(((0, n - 1),)).pad(((1, 0),))
  s = a + b
  assert len(s.views) == 1, s
  base = np.arange(1, n + 1)
  np.testing.assert_array_equal(read(s, base), np.pad(np.pad(base[:n - 4], (4, 0))[:n - 1], (1, 0)))

def test_view_hash_survives_pickling_into_another_process():
  # a View caches its hash, which holds a symbolic size's (process-specific) hash: a pickled one works it out again
  import pickle, subprocess, sys, os
  from tinycore.shape.view import View
  from tinycore.uop.uop import Variable
  n = Variable("n", 1, 10)
  data = pickle.dumps([View.create((3, 4)), View.create((n, 4))])
  code = ("import pickle, sys; from tinycore.shape.view import View; from tinycore.uop.uop import Variable; "
          "a, b = pickle.loads(sys.stdin.buffer.read()); n = Variable('n', 1, 10); "
          "assert {View.create((3, 4)): 1}[a] == 1 and b == View.create((n, 4)) and hash(b) == hash(View.create((n, 4)))")
  subprocess.run([sys.executable, "-c", code], input=data, check=True, env={**os.environ, "PYTHONHASHSEED": "7"})
