"""Known bugs of the tinycore core that this suite finds. A test a bug affects is marked xfail(strict=True) where the
bug applies (decided from the renderer's class or declarations, never from a device name): when the core is fixed,
the test passes, strict xfail turns that into a failure, and the entry here is removed."""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any, Callable
import pytest
from tinycore.dtype import DType, dtypes

NARROW_INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16)

def _cstyle(target: Any) -> bool:
  from tinycore.renderer.cstyle import CStyleLanguage
  return isinstance(target.renderer, CStyleLanguage)

@dataclass(frozen=True)
class Bug:
  title: str
  applies: Callable[[Any, DType | None], bool]
  repro: str

BUGS: dict[str, Bug] = {
  "cstyle_promotion": Bug(
    "tinycore/renderer/cstyle.py inlines single-use ALU results into the expression that uses them, so C's integer "
    "promotion computes int8/uint8/int16/uint16 ops in int: (a+b)<c, -a<b, (a<<c)>>c, (a+b)//c, max(a+b,c), cast(a*b) "
    "see the unwrapped value (tinycore's semantics wrap every op to its dtype, as the PYTHON reference does)",
    lambda target, dt: _cstyle(target) and dt in NARROW_INTS,
    "from tinycore import Tensor, dtypes\n"
    "a = Tensor([100], dtype=dtypes.int8, device='CLANG')\n"
    "print(((a + a) < 0).numpy(), (a + a).numpy())  # [False] [-56]: expected [True], since int8 100+100 wraps to -56"),
}

def known_bug(request: pytest.FixtureRequest, name: str, target: Any, dtype: DType | None = None) -> None:
  """Mark the running test xfail(strict=True) when core bug `name` applies to this target and dtype."""
  bug = BUGS[name]
  if bug.applies(target, dtype): request.node.add_marker(pytest.mark.xfail(strict=True, reason=f"core bug [{name}]: {bug.title}"))
