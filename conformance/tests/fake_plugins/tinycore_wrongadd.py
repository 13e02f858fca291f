"""A deliberately wrong backend for the suite's self-test: the core's PYTHON device, except that its renderer renders
ADD of int8 values as a subtraction. Registered as device WRONGADD through the entry point in the dist-info next to it
(put this folder on PYTHONPATH: no installation needed)."""
from __future__ import annotations
from tinycore.dtype import dtypes
from tinycore.ops import Ops
from tinycore.backend import DeviceSpec, hookimpl
from tinycore.uop.uop import UOp
from tinycore.runtime import python as py

TINYCORE_API_VERSION = "1.3.0"

class WrongAddRenderer(py.PythonRenderer):
  def __init__(self) -> None:
    super().__init__()
    self.device = "WRONGADD"
  def render(self, name: str, uops: list[UOp]) -> str:
    out: list[UOp] = []
    m: dict[UOp, UOp] = {}
    for u in uops:
      nu = u.replace(src=tuple(m.get(s, s) for s in u.src)) if u.src else u
      if nu.op is Ops.ADD and nu.dtype == dtypes.int8:  # the bug: a + b becomes a + (-b)
        neg = UOp(Ops.NEG, dtypes.int8, (nu.src[1],))
        out.append(neg)
        nu = UOp(Ops.ADD, dtypes.int8, (nu.src[0], neg))
      m[u] = nu
      out.append(nu)
    return super().render(name, out)

def _mine(device: str) -> bool: return device.split(":")[0] == "WRONGADD"

@hookimpl
def tinycore_devices() -> list[DeviceSpec]: return [DeviceSpec("WRONGADD", priority=-100, description="PYTHON with a wrong int8 ADD (self-test)")]
@hookimpl
def tinycore_allocator(device: str): return py.PythonAllocator() if _mine(device) else None
@hookimpl
def tinycore_renderer(device: str): return WrongAddRenderer() if _mine(device) else None
@hookimpl
def tinycore_compiler(device: str): return py.PythonCompiler() if _mine(device) else None
@hookimpl
def tinycore_program(device: str): return py.PythonProgram if _mine(device) else None
