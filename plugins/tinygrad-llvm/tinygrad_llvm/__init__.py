"""tinygrad-llvm: a second CPU backend. Renders LLVM IR (renderer.py), compiles it in this process with llvmlite for the
host CPU and links the object into the process with LLVM's JIT linker, called through ctypes (runtime.py)."""
from __future__ import annotations
import importlib.util
from tinycore.backend import Backend, lazy

TINYCORE_API_VERSION = "1.3.0"

def _check() -> str | None:
  return None if importlib.util.find_spec("llvmlite") else "llvmlite is not installed: pip install llvmlite"

# priority 8: above PYTHON (0), below CLANG (10): the C backend stays the default CPU device where both are installed
BACKEND = Backend("LLVM", priority=8, check=_check, api_version=TINYCORE_API_VERSION,
                  description="LLVM IR on the host CPU, compiled in process by llvmlite",
                  allocator=lazy("tinygrad_llvm.runtime:allocator"), renderer=lazy("tinygrad_llvm.runtime:renderer"),
                  compiler=lazy("tinygrad_llvm.runtime:compiler"), program=lazy("tinygrad_llvm.runtime:program"))
tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()
