"""BEAM search: kernels optimized by search compute what numpy computes; the choice is cached on disk."""
import numpy as np
import pytest
from tinycore import Tensor, Context, Device
from tinycore.codegen import search
from tinycore.codegen.kernel import Kernel
from tinycore.engine import realize
from tinycore.ops import Ops

@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
  monkeypatch.setenv("TINYCORE_CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(search, "MAX_ROUNDS", 1)  # one round exercises the search and keeps the test quick
  realize.method_cache.clear()
  yield
  realize.method_cache.clear()

def ints(*shape, seed=0) -> np.ndarray: return np.random.default_rng(seed).integers(-3, 4, shape).astype(np.float32)

CASES = {
  "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, ((16, 32), (32, 8))),
  "elementwise": (lambda a, b: (a * b + 1).relu(), lambda a, b: np.maximum(a * b + 1, 0), ((16, 16), (16, 16))),
  "sum_rows": (lambda a, b: (a * 2 + b).sum(1), lambda a, b: (a * 2 + b).sum(1), ((8, 64), (8, 64))),
  "conv": (lambda a, b: a.conv2d(b, padding=1), None, ((1, 2, 8, 8), (4, 2, 3, 3))),
}

@pytest.mark.parametrize("case", CASES)
def test_beam_matches_numpy(case):
  fn, ref_fn, (sa, sb) = CASES[case]
  a, b = ints(*sa), ints(*sb, seed=1)
  with Context(BEAM=2): out = fn(Tensor(a), Tensor(b)).numpy()
  with Context(NOOPT=1): ref = fn(Tensor(a), Tensor(b)).numpy() if ref_fn is None else ref_fn(a, b)
  np.testing.assert_array_equal(out, ref)

def test_beam_choice_is_cached_on_disk(monkeypatch):
  a, b = Tensor(ints(8, 16)).realize(), Tensor(ints(16, 8, seed=1)).realize()
  si = [x for x in (a @ b).schedule() if x.ast.op is Ops.SINK][-1]
  k1 = search.beam_search(Kernel(si.ast, Device["CLANG"].renderer), 2)
  # a second search must not time anything: the optimizations come from the cache
  monkeypatch.setattr(search, "_Bench", None)
  k2 = search.beam_search(Kernel(si.ast, Device["CLANG"].renderer), 2)
  assert k2.applied_opts == k1.applied_opts

def test_beam_lowers_each_kernel_once_and_caps_the_lanes(monkeypatch):
  # lowering is most of a search's time: a kernel reached by the same opts in another order is not lowered again,
  # and candidates with more than BEAM_UPCAST_MAX lanes are not tried
  monkeypatch.setattr(search, "MAX_ROUNDS", 2)
  monkeypatch.setattr(search, "UPCAST_MAX", 16)
  lowered: list = []
  orig = search.get_program
  def spy(k, device):
    lowered.append((search._state(k), search._lanes(k)))
    return orig(k, device)
  monkeypatch.setattr(search, "get_program", spy)
  a, b = Tensor(ints(16, 32)).realize(), Tensor(ints(32, 16, seed=1)).realize()
  si = [x for x in (a @ b).schedule() if x.ast.op is Ops.SINK][-1]
  k = search.beam_search(Kernel(si.ast, Device["CLANG"].renderer), 2)
  hc, searched = lowered[0], lowered[1:]  # the heuristic's choice is measured first, whatever its lanes
  assert len(searched) > 2 and all(lanes <= 16 for _, lanes in searched)
  states = [s for s, _ in searched]
  assert len(states) == len(set(states)), "a kernel was lowered twice"
  assert search._lanes(k) <= 16 or search._state(k) == hc[0]

def test_beam_symbolic_shape(device):
  # the Variables of a symbolic kernel live in its views' ShapeTrackers and launch sizes (PYTHON): the search times it
  # at their largest values
  from tinycore import Variable
  X = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
  xt, v = Tensor(X).realize(), Variable("bs", 1, 16)
  for n in (3, 16):
    with Context(BEAM=2): out = (xt[:v.bind(n)] * 2 + 1).sum(1).numpy()
    np.testing.assert_allclose(out, (X[:n] * 2 + 1).sum(1), rtol=1e-5, atol=1e-5)
