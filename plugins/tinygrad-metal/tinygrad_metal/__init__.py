"""tinycore backend for Apple GPUs: Metal Shading Language rendered by a small C-style renderer, compiled by Apple's Metal
compiler (or the Metal framework), run through PyObjC's Metal bindings. macOS only for running.

Importing this module imports no PyObjC. Compile-only use, on any OS:
  from tinygrad_metal import make_renderer, make_compiler
  make_compiler().compile(make_renderer().render("k", uops))
On macOS make_compiler() is Apple's compiler; elsewhere it is metal-syntax-check (C++ against our stand-in <metal_stdlib>),
a syntax and type check only."""
from __future__ import annotations
import sys
from tinycore.backend import Backend, lazy
from tinygrad_metal import mock  # loads nothing: MOCKGPU's settings

TINYCORE_API_VERSION = "1.3.0"

def check(idx: int = 0) -> str | None:
  if sys.platform != "darwin" and not mock.enabled(): return "Metal needs macOS"
  from tinygrad_metal import runtime
  if mock.enabled():  # emulated: metal-syntax-check is the compiler and hostgrid runs the kernels, both need clang++
    from tinygrad_metal.compiler import syntax_check_unavailable_reason
    from tinycore.runtime.hostgrid import unavailable_reason
    return runtime.unavailable_reason(idx) or syntax_check_unavailable_reason() or unavailable_reason()
  return runtime.unavailable_reason(idx)

def make_renderer():
  from tinygrad_metal.renderer import MetalRenderer
  return MetalRenderer()

def make_compiler(device: str | None = None, syntax_check: bool | None = None):
  """Apple's Metal compiler on macOS; metal-syntax-check (compile-only, nothing runs) elsewhere or when syntax_check=True."""
  from tinygrad_metal import compiler
  if syntax_check is None: syntax_check = sys.platform != "darwin" or mock.enabled()  # MOCKGPU runs the checked source
  if syntax_check: return compiler.MetalSyntaxCheckCompiler()
  dev = None
  if device is not None and (idx := BACKEND.index(device)) is not None and check(idx) is None:
    from tinygrad_metal import runtime
    dev = runtime.get_device(device, idx)
  return compiler.MetalCompiler(dev)

# emulated (MOCKGPU), it is used only when asked for by name
BACKEND = Backend("METAL", priority=-40 if mock.enabled() else 40, check=check, api_version=TINYCORE_API_VERSION,
                  description=mock.DESCRIPTION if mock.enabled() else "Metal Shading Language -> Metal framework (PyObjC); macOS only",
                  allocator=lazy("tinygrad_metal.runtime:allocator"), program=lazy("tinygrad_metal.runtime:program"),
                  renderer=lambda device, idx: make_renderer(), compiler=lambda device, idx: make_compiler(device))
tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()
