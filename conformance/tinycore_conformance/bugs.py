"""Known bugs of the tinycore core that this suite finds. A test a bug affects is marked xfail(strict=True) where the
bug applies (decided from the renderer's class or declarations, never from a device name): when the core is fixed,
the test passes, strict xfail turns that into a failure, and the entry here is removed."""
from __future__ import annotations
from dataclasses import dataclass
from typing import Any, Callable
import pytest
from tinycore.dtype import DType

def _cstyle(target: Any) -> bool:
  from tinycore.renderer.cstyle import CStyleLanguage
  return isinstance(target.renderer, CStyleLanguage)

@dataclass(frozen=True)
class Bug:
  title: str
  applies: Callable[[Any, DType | None], bool]
  repro: str

BUGS: dict[str, Bug] = {
  "cstyle_arg_order": Bug(
    "tinycore/renderer/cstyle.py renders the kernel's buffer arguments in the order the DEFINE_GLOBALs appear in the linear "
    "program instead of by their arg (the argument number): when the linearizer lists DEFINE_GLOBAL 2 before 1, the "
    "kernel reads buffer 2 where it means buffer 1 (Program calls pass buffers by number, as the PYTHON device reads them)",
    lambda target, dt: _cstyle(target),
    "import numpy as np\nfrom tinycore import Tensor\n"
    "a = Tensor(np.array([5, 100], np.int32), device='CLANG'); b = Tensor(np.array([3, 1], np.int32), device='CLANG')\n"
    "print((a - b).numpy())  # [-2 -99], expected [2 99]: the kernel is `void E_2(int* data0, const int* data2, const int* data1)`"),
}

def known_bug(request: pytest.FixtureRequest, name: str, target: Any, dtype: DType | None = None) -> None:
  """Mark the running test xfail(strict=True) when core bug `name` applies to this target and dtype."""
  bug = BUGS[name]
  if bug.applies(target, dtype): request.node.add_marker(pytest.mark.xfail(strict=True, reason=f"core bug [{name}]: {bug.title}"))
