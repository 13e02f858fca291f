"""tinycore backend for AMD GPUs: HIP-style source (with its own small header, no HIP headers), compiled by clang's amdgcn
target into a code object, run through the HIP runtime (libamdhip64, ctypes).

Importing this module loads no library. Renderer and compiler need no GPU (compile-only use):
  from tinygrad_amd import make_renderer, make_compiler
  hsaco = make_compiler("gfx942").compile(make_renderer("gfx942").render("k", uops))
Devices: AMD (= AMD:0), AMD:1, ... in the HIP runtime's order."""
from __future__ import annotations
import os
from tinycore.plugin import DeviceSpec, hookimpl

TINYCORE_API_VERSION = "1.0.0"
DEVICE_NAME = "AMD"
PRIORITY = 40
DEFAULT_ARCH = "gfx1100"  # compile-only target when no GPU says otherwise; AMD_ARCH=gfxNNN overrides (e.g. gfx90a, gfx942)

def device_index(device: str) -> int | None:
  base, _, idx = device.partition(":")
  if base.upper() != DEVICE_NAME: return None
  if idx and not idx.isdigit():
    from tinycore.device import DeviceError
    raise DeviceError(f"bad device {device!r}: expected AMD or AMD:n")
  return int(idx) if idx else 0

def check(idx: int = 0) -> str | None:
  """None when AMD GPU `idx` can open here, else why not."""
  from tinygrad_amd import runtime
  return runtime.unavailable_reason(idx)

def target_arch(device: str | None = None) -> str:
  """The gfx target to compile for: $AMD_ARCH, else the opened GPU's own, else gfx1100."""
  if (env := os.getenv("AMD_ARCH")): return env
  if device is not None and (idx := device_index(device)) is not None and check(idx) is None:
    from tinygrad_amd import runtime
    return runtime.get_device(device, idx).arch
  return DEFAULT_ARCH

def make_renderer(arch: str | None = None):
  from tinygrad_amd.renderer import AMDRenderer
  return AMDRenderer(arch or target_arch())

def make_compiler(arch: str | None = None):
  from tinygrad_amd.compiler import AMDCompiler
  return AMDCompiler(arch or target_arch())

@hookimpl
def tinycore_devices() -> list[DeviceSpec]:
  return [DeviceSpec(DEVICE_NAME, priority=PRIORITY, api_version=TINYCORE_API_VERSION, check=check,
                     description="HIP-style source -> clang amdgcn code object -> HIP runtime; AMD:n is the n-th GPU")]

@hookimpl
def tinycore_allocator(device: str):
  if (idx := device_index(device)) is None: return None
  from tinygrad_amd import runtime
  return runtime.AMDAllocator(runtime.get_device(device, idx))

@hookimpl
def tinycore_renderer(device: str):
  if device_index(device) is None: return None
  return make_renderer(target_arch(device))

@hookimpl
def tinycore_compiler(device: str):
  if device_index(device) is None: return None
  return make_compiler(target_arch(device))

@hookimpl
def tinycore_program(device: str):
  if (idx := device_index(device)) is None: return None
  from tinygrad_amd import runtime
  runtime.get_device(device, idx)
  return runtime.AMDProgram
