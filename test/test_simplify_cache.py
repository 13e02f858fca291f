"""The simplifier's speed-ups change nothing it produces: a rewrite that keeps each node's result on the node gives what a
fresh rewrite gives, and a sum's terms come out in the order of the plain nested-tuple keys."""
import random, sys
import pytest
import tinycore.uop.symbolic  # noqa: F401
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.uop.rewrite import PatternMatcher, _rewrite
from tinycore.uop.uop import UOp
sym = sys.modules["tinycore.uop.symbolic"]  # (the package exports the rules under the module's name)

def plain_key(u: UOp) -> tuple: return (u.op.value, repr(u.arg), tuple(plain_key(s) for s in u.src))

def random_expr(rng: random.Random, depth: int) -> UOp:
  """Index arithmetic over a few loop variables: sums, products by constants, divisions and remainders, xors."""
  leaves = [UOp(Ops.RANGE, dtypes.int32, (UOp.const(dtypes.int32, 0), UOp.const(dtypes.int32, n)), arg=i) for i, n in enumerate((3, 8, 16, 5))]
  def build(d: int) -> UOp:
    if d == 0 or rng.random() < 0.2: return rng.choice(leaves) if rng.random() < 0.8 else UOp.const(dtypes.int32, rng.randint(0, 9))
    a, b = build(d - 1), build(d - 1)
    op = rng.choice(["add", "add", "mul", "div", "mod", "xor"])
    if op == "add": return a + b
    if op == "mul": return a * rng.randint(1, 6)
    if op == "div": return a // rng.randint(1, 8)
    if op == "mod": return a % rng.randint(1, 8)
    return a ^ b
  return build(depth)

@pytest.mark.parametrize("seed", range(6))
def test_kept_results_equal_a_fresh_rewrite(seed):
  rng = random.Random(seed)
  fresh = PatternMatcher(sym.symbolic.patterns)  # the same rules, no results kept
  for _ in range(40):
    x = random_expr(rng, 5)
    assert sym.graph_rewrite(x, sym.symbolic) is _rewrite(x, fresh, None)

@pytest.mark.parametrize("keys_max", [10 ** 6, 7])
def test_terms_sort_as_the_nested_tuple_keys(monkeypatch, keys_max):
  # (keys_max 7: the interned keys are dropped between sorts again and again; the order must not change)
  monkeypatch.setattr(sym, "_KEYS_MAX", keys_max)
  rng = random.Random(1)
  for _ in range(60):
    terms = {random_expr(rng, rng.randint(1, 6)): 1 for _ in range(rng.randint(2, 12))}
    terms = {t: 1 for t in terms if t.op not in (Ops.ADD, Ops.CONST)}
    assert sym._sorted_terms(terms) == sorted(terms, key=plain_key)

def test_deep_terms_that_differ_at_the_bottom():
  # two hash-like chains that differ only in their first input (the random generator's rounds): the keys are compared
  # down the one path where they differ
  a = UOp(Ops.RANGE, dtypes.uint32, (UOp.const(dtypes.uint32, 0), UOp.const(dtypes.uint32, 4)), arg=0)
  chains = []
  for start in (a * 3, a):
    x = start
    for i in range(150): x = (x ^ UOp.const(dtypes.uint32, i)) * 5
    chains.append(x ^ a)
  assert sym._sorted_terms({chains[0]: 1, chains[1]: 1}) == sorted(chains, key=plain_key)
