"""Differential: every computing function of tinygrad 0.14's Tensor, its operators, the nn layers, the optimizers and
the state-dict round trip, called the same way in tinygrad (CPU) and tinycore (CLANG and PYTHON) on the same generated
inputs (compat.specs), compared by compat.harness.differences: shape, dtype, values, gradient(), backward() and .grad,
or the exception class. tinygrad's outcome is computed once per case and shared by both devices.

Plus a hypothesis search over edge values (inf, nan, -0.0, huge and tiny) for the elementwise ops, derandomized so CI
sees the same examples every run, shrinking a failure to its smallest input."""
import functools, re
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from compat.harness import TG, TC, T, Case, run, differences, on_device, seed_of
from compat.specs import SPECS, NOT_COMPUTED, DIFFERS, torch_op
from compat.surface import tensor_names
from compat.allowlist import ALLOWED

DEVICES = ["CLANG", "PYTHON"]

@functools.cache
def cases(name: str) -> list[Case]: return SPECS[name](name)(np.random.default_rng(seed_of(name)))

@functools.cache
def reference(name: str, i: int) -> dict: return run(TG, cases(name)[i])

def check(case: Case, ref: dict, dev: str) -> None:
  """The one assertion of the suite: tinycore on dev does what tinygrad did."""
  with on_device(dev): got = run(TC, case)
  alt = case.torch(*[a.data for a in case.args]) if case.torch is not None else None
  probs = differences(ref, got, case.tol, alt)
  assert not probs, "\n".join(probs)

# a name tinycore leaves out on purpose (compat.allowlist) has its spec kept for the day it is offered, but no cases
PARAMS = [pytest.param(n, i, id=re.sub(r"[^\w.()=,-]", "", f"{n}-{i}-{c.label}")) for n in SPECS if f"Tensor.{n}" not in ALLOWED
          for i, c in enumerate(cases(n))]

def test_documented_differences_name_cases():
  stale = sorted(set(DIFFERS) - {p.id for p in PARAMS})
  assert not stale, f"compat.specs.DIFFERS names no case: {stale}"

@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("name,i", PARAMS)
def test_same_as_tinygrad(name: str, i: int, dev: str):
  if re.sub(r"[^\w.()=,-]", "", f"{name}-{i}-{cases(name)[i].label}") in DIFFERS:  # a documented difference must still differ
    with pytest.raises(AssertionError): check(cases(name)[i], reference(name, i), dev)
    return
  check(cases(name)[i], reference(name, i), dev)

def test_every_tensor_function_has_a_spec():
  """A new tinygrad function fails here until it gets a spec (or a reason it computes nothing, or an allowlist entry)."""
  names = set(tensor_names())
  missing = sorted(n for n in names if n not in SPECS and n not in NOT_COMPUTED and f"Tensor.{n}" not in ALLOWED)
  assert not missing, f"tinygrad Tensor functions with no differential spec: {missing}"
  extra = sorted(n for n in set(SPECS) | set(NOT_COMPUTED) if n not in names and not n.startswith(("nn.", "Tensor")) and n not in NOT_COMPUTED)
  assert not extra, f"specs for names tinygrad 0.14's Tensor does not have (stale): {extra}"

# *** edge values, searched ***

EDGE_UNARY = ("exp", "log", "sqrt", "sin", "tanh", "sigmoid", "reciprocal", "relu", "abs", "floor", "round", "trunc", "sign", "isinf", "exp2", "erf")
EDGE_BINARY = ("add", "mul", "div", "pow", "maximum", "minimum", "mod", "eq", "copysign")
floats = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=False)

@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(EDGE_UNARY + EDGE_BINARY), a=st.lists(floats, min_size=3, max_size=3), b=st.lists(floats, min_size=3, max_size=3),
       dev=st.sampled_from(DEVICES))
def test_edge_values(name: str, a: list, b: list, dev: str):
  args = (T(np.array(a, np.float32), grad=False),) + ((T(np.array(b, np.float32), grad=False),) if name in EDGE_BINARY else ())
  case = Case(name, args, torch=torch_op(name))
  check(case, run(TG, case), dev)
