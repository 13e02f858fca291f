"""Inventory: every public name of tinygrad 0.14 (as compat.surface lists it from tinygrad itself) exists in tinycore,
of the same kind (callable or not, the same dtype), with a compatible signature. compat.allowlist names the deliberate
differences, a whole name (`Tensor.keccak`) or one parameter (`Tensor.realize(do_update_stats)`); an entry that no
longer differs, or that tinygrad no longer has, fails as stale, so the allowlist only shrinks towards the truth."""
import pytest
from compat.harness import TG, TC, dtype_name
from compat.surface import surface, signature_problems
from compat.allowlist import ALLOWED

SURFACE = surface()

def problems(name: str) -> dict[str, str]:
  """What is wrong with tinycore's counterpart of a tinygrad name, keyed as the allowlist keys it ({}: nothing)."""
  ref = SURFACE[name](TG)
  try: got = SURFACE[name](TC)
  except Exception as e: return {name: f"missing in tinycore ({type(e).__name__}: {str(e)[:160]})"}
  if callable(ref) != callable(got): return {name: f"kind: tinygrad {type(ref).__name__}, tinycore {type(got).__name__}"}
  DT = type(TG.dtypes.float32)
  if isinstance(ref, DT):
    return {} if dtype_name(TG, ref) == dtype_name(TC, got) else {name: f"dtype: tinygrad {dtype_name(TG, ref)}, tinycore {got!r}"}
  if isinstance(ref, tuple) and ref and all(isinstance(d, DT) for d in ref):
    want, have = {dtype_name(TG, d) for d in ref}, {dtype_name(TC, d) for d in got} if isinstance(got, (tuple, list, set)) else set()
    return {} if want == have else {name: f"dtype set: tinygrad {sorted(want)}, tinycore {sorted(have)}"}
  if not callable(ref): return {}
  return {name if p == "*" else f"{name}({p})": why for p, why in signature_problems(ref, got).items()}

def own_entries(name: str) -> list[str]: return [k for k in ALLOWED if k == name or (k.startswith(name + "(") and k not in SURFACE)]

@pytest.mark.parametrize("name", sorted(SURFACE))
def test_name(name: str):
  probs = problems(name)
  stale = [k for k in own_entries(name) if k not in probs and not probs.get(name)]  # a missing name keeps its parameter entries
  assert not stale, f"stale allowlist entries {stale}: tinycore now matches tinygrad there, remove them"
  left = {k: v for k, v in probs.items() if k not in ALLOWED and name not in ALLOWED}
  assert not left, "\n".join(f"{k}: {v}" for k, v in left.items())

def test_allowlist_names_exist():
  gone = sorted(k for k in ALLOWED if k.split("(")[0] not in SURFACE and k not in SURFACE)
  assert not gone, f"allowlist entries for names tinygrad 0.14 does not have (stale, remove them): {gone}"
