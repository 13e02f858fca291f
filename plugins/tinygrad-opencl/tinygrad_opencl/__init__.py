"""tinycore backend for OpenCL: OpenCL C rendered by the core's C-style renderer, built and run with pyopencl.

Importing this module touches no driver and needs no pyopencl: the runtime (tinygrad_opencl.runtime) is imported
only when a device is checked or opened. Devices are every device of every OpenCL platform, in platform order:
`OPENCL` (or `OPENCL:0`) is the first, `OPENCL:1` the second, and so on."""
from __future__ import annotations
from tinycore.plugin import DeviceSpec, hookimpl

TINYCORE_API_VERSION = "1.0.0"
DEVICE_NAME = "OPENCL"
PRIORITY = 5  # below CLANG (10), above PYTHON (0): PoCL on a CPU is usually slower to compile than clang

def device_index(device: str) -> int | None:
  """The OpenCL device index of a tinycore device string, or None if the string names another backend."""
  name, _, idx = device.partition(":")
  if name.upper() != DEVICE_NAME: return None
  if idx and not idx.isdigit():
    from tinycore.device import DeviceError
    raise DeviceError(f"bad device {device!r}: expected OPENCL or OPENCL:n")
  return int(idx) if idx else 0

def check() -> str | None:
  """None when at least one OpenCL device exists here, else why not (in words a user can act on)."""
  try: from tinygrad_opencl import runtime
  except ImportError as e:
    return f"pyopencl is not installed (pip install pyopencl): {e}" if "pyopencl" in str(e) else f"the OpenCL runtime failed to import: {e}"
  return runtime.unavailable_reason()

@hookimpl
def tinycore_devices() -> list[DeviceSpec]:
  return [DeviceSpec(DEVICE_NAME, priority=PRIORITY, api_version=TINYCORE_API_VERSION, check=check,
                     description="OpenCL C through pyopencl; OPENCL:n is the n-th device of all platforms")]

def _runtime(device: str):
  # opening a device when none is usable raises tinycore's DeviceError carrying the reason check() gives
  from tinygrad_opencl import runtime
  return runtime

@hookimpl
def tinycore_allocator(device: str):
  if (idx := device_index(device)) is None: return None
  rt = _runtime(device)
  return rt.CLAllocator(rt.get_device(device, idx))

@hookimpl
def tinycore_compiler(device: str):
  if (idx := device_index(device)) is None: return None
  rt = _runtime(device)
  return rt.CLCompiler(rt.get_device(device, idx))

@hookimpl
def tinycore_program(device: str):
  if (idx := device_index(device)) is None: return None
  rt = _runtime(device)
  rt.get_device(device, idx)  # fail here, with the clear error, if the device does not exist
  return rt.CLProgram

@hookimpl
def tinycore_renderer(device: str):
  if (idx := device_index(device)) is None: return None
  rt = _runtime(device)
  from tinygrad_opencl.renderer import OpenCLRenderer
  return OpenCLRenderer.for_device(rt.get_device(device, idx))
