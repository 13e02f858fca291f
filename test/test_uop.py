"""UOp IR: hash-consing, bounds, the pattern matcher, and symbolic simplification checked by evaluation."""
import random
import pytest
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.uop import UOp, UPat, PatternMatcher, graph_rewrite, Variable
from tinycore.uop.symbolic import simplify

def evaluate(u: UOp, env: dict) -> int:
  """Evaluate integer index math with C semantics (the reference the rendered code follows)."""
  if u.op is Ops.CONST: return u.arg
  if u.op is Ops.DEFINE_VAR: return env[u.arg[0]]
  a = [evaluate(s, env) for s in u.src]
  if u.op is Ops.ADD: return a[0] + a[1]
  if u.op is Ops.MUL: return a[0] * a[1]
  if u.op is Ops.IDIV: return int(a[0] / a[1])
  if u.op is Ops.MOD: return a[0] - a[1] * int(a[0] / a[1])
  if u.op is Ops.CMPLT: return a[0] < a[1]
  if u.op is Ops.CMPNE: return a[0] != a[1]
  if u.op is Ops.AND: return a[0] and a[1]
  if u.op is Ops.OR: return a[0] or a[1]
  if u.op is Ops.MAX: return max(a)
  if u.op is Ops.WHERE: return a[1] if a[0] else a[2]
  raise NotImplementedError(u.op)

def random_expr(rng: random.Random, vs: list, depth: int) -> UOp:
  if depth == 0: return rng.choice(vs) if rng.random() < 0.7 else UOp.const(dtypes.int32, rng.randint(0, 9))
  a, b = random_expr(rng, vs, depth - 1), random_expr(rng, vs, depth - 1)
  op = rng.choice(["add", "mul", "div", "mod", "addc", "mulc"])
  c = rng.randint(1, 8)
  return {"add": lambda: a + b, "mul": lambda: a * rng.randint(0, 5), "div": lambda: a // c, "mod": lambda: a % c,
          "addc": lambda: a + c, "mulc": lambda: a * c}[op]()

def test_hash_consing():
  a = UOp.const(dtypes.int32, 3)
  assert a is UOp.const(dtypes.int32, 3)
  x = Variable("x", 0, 10)
  assert (x + a) is (x + a) and (x + a) is not (a + x)

@pytest.mark.parametrize("seed", range(40))
def test_simplify_preserves_value(seed):
  rng = random.Random(seed)
  vs = [Variable("a", 0, 7), Variable("b", 0, 3), Variable("c", 0, 20)]
  e = random_expr(rng, vs, 3)
  s = simplify(e)
  for _ in range(30):
    env = {"a": rng.randint(0, 7), "b": rng.randint(0, 3), "c": rng.randint(0, 20)}
    assert evaluate(s, env) == evaluate(e, env), f"{e.render()} -> {s.render()} at {env}"
    # bounds hold on the sampled points
    assert e.vmin <= evaluate(e, env) <= e.vmax

def test_index_math_folds():
  a, b = Variable("a", 0, 10), Variable("b", 0, 3)
  assert simplify((a * 4 + b) // 4) is a
  assert simplify((a * 4 + b) % 4) is b
  assert simplify((a + 1) + 2).render() == "(a+3)"
  assert simplify(a * 2 + a * 3).render() == "(a*5)"
  assert simplify((a * 4 + b) < 44).arg is True
  assert simplify(UOp.const(dtypes.float32, 2.0) * 3.0).arg == 6.0

def test_pattern_matcher_and_rewrite():
  x = Variable("x", 0, 5)
  pm = PatternMatcher([(UPat(Ops.MUL, src=[UPat.var("v"), UPat.cvar("c")]), lambda v, c: v + v if c.arg == 2 else None)])
  out = graph_rewrite((x * 2) * 3, pm)
  # only the inner *2 matches; the outer *3 is left alone
  assert out.op is Ops.MUL and out.src[0] is (x + x)

def test_variable_bind_checks_range():
  v = Variable("bs", 1, 64)
  assert v.bind(16).unbind() == (v, 16)
  with pytest.raises(ValueError, match="out of range"): v.bind(100)

def test_symbolic_has_no_truth_value():
  with pytest.raises(TypeError, match="no truth value"): bool(Variable("x", 0, 3) < 2)

def random_index(rng: random.Random, vs: list) -> UOp:
  """A linear index like a view's: each variable times a coefficient (often a multiple of another, sometimes
  negative), plus a constant."""
  base = rng.choice([1, 2, 3, 4, 6, 12, 13, 14, 42])
  e = UOp.const(dtypes.int32, rng.choice([0, 1, 5, 40]))
  for v in vs: e = e + v * rng.choice([1, 2, 3, -1, base, base * rng.randint(1, 4), base * 3])
  return e

@pytest.mark.parametrize("seed", range(60))
def test_divmod_below_a_divisor_preserves_value(seed):
  # (f*B + s)//(f*m) -> B//m and (f*B + s)%(f*m) -> (B%m)*f + s for 0 <= s < f, checked by evaluation
  rng = random.Random(seed)
  vs = [Variable("a", 0, rng.randint(1, 40)), Variable("b", 0, rng.randint(0, 12)), Variable("c", 0, rng.randint(0, 3))]
  x = random_index(rng, vs)
  for e in (x // rng.choice([2, 3, 6, 14, 42, 126, 168]), x % rng.choice([2, 3, 6, 14, 42, 126, 168]), (x // 42) % rng.randint(2, 12)):
    s = simplify(e)
    for _ in range(40):
      env = {v.arg[0]: rng.randint(v.arg[1], v.arg[2]) for v in vs}
      assert evaluate(s, env) == evaluate(e, env), f"{e.render()} -> {s.render()} at {env}"

def test_divmod_below_a_divisor_folds():
  r, s, t = Variable("r", 0, 1000), Variable("s", 0, 12), Variable("t", 0, 2)
  x = r * 42 + s + t * 13  # s + t*13 < 42
  assert simplify(x // 126).render() == "(r//3)"
  assert simplify((x // 126) % 11).render() == "((r//3)%11)"
  assert simplify((r * 4 + 1) // 8).render() == "(r//2)"
  assert simplify(x // 126 + x % 126 * 0).render() == "(r//3)"
  # s + 13*t reaches 42 when t can be 3: no fold
  assert "s" in simplify((r * 42 + s + Variable("t", 0, 3) * 13) // 126).render()

def test_tinygrad_uop_ops_module():
  # the names `tinygrad.uop.ops` programs import: UOp (UOp.const in tinygrad 0.14's order too) and Ops; others say they are not provided
  from tinycore.uop.ops import UOp as U, Ops as O, Variable as V
  assert U is UOp and O is Ops and V is Variable
  c = U.const(3, dtypes.int32)
  assert c is U.const(dtypes.int32, 3) and c.op is O.CONST and c.arg == 3 and c.dtype == dtypes.int32
  assert U.const(2.5).dtype == dtypes.float32 and U.const(True).dtype == dtypes.bool
  e = U.variable("x", 1, 10) * 2 + c
  assert (e.vmin, e.vmax) == (5, 23) and e.render() == "((x*2)+3)"
  import tinycore.uop.ops as ops
  with pytest.raises(AttributeError, match="does not provide 'AxisType'"): _ = ops.AxisType

def test_int_of_a_symbolic_value():
  # uop.py knows no rewrite rules: int() takes the value the bounds pin, and a value they leave open is refused by name
  a = Variable("a", 3, 3)
  assert int(a * 4 + 2) == 3 * 4 + 2 and int(UOp.const(dtypes.float32, 2.5)) == int(2.5)
  with pytest.raises(TypeError, match=r"\(b\+1\) is not a constant"): int(Variable("b", 0, 4) + 1)
  assert int(simplify(Variable("b", 0, 4) * 2 - Variable("b", 0, 4) * 2)) == 0  # folding that needs the rules: simplify first
