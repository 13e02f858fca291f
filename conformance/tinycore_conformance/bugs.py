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

# Found and since fixed in the core: cstyle rendered narrow int ops without wrapping them (1048edc), and rendered kernel
# arguments in the order the program listed them rather than by number (3960039).
BUGS: dict[str, Bug] = {
}

def _python_program(target: Any) -> bool:
  from tinycore.runtime.python import PythonProgram
  return target.parts.program is PythonProgram

def _python_compiler(target: Any) -> bool:
  from tinycore.runtime.python import PythonCompiler
  return type(target.compiler) is PythonCompiler

def known_bug(request: pytest.FixtureRequest, name: str, target: Any, dtype: DType | None = None) -> None:
  """Mark the running test xfail(strict=True) when core bug `name` applies to this target and dtype."""
  bug = BUGS[name]
  if bug.applies(target, dtype): request.node.add_marker(pytest.mark.xfail(strict=True, reason=f"core bug [{name}]: {bug.title}"))
