"""tinycore backend for OpenCL: OpenCL C rendered by the core's C-style renderer, built and run with pyopencl.

Importing this module touches no driver and needs no pyopencl: the runtime (tinygrad_opencl.runtime) is imported
only when a device is checked or opened. Devices are every device of every OpenCL platform, in platform order:
`OPENCL` (or `OPENCL:0`) is the first, `OPENCL:1` the second, and so on."""
from __future__ import annotations
from tinycore.backend import Backend, lazy

TINYCORE_API_VERSION = "1.3.0"

def check() -> str | None:
  """None when at least one OpenCL device exists here, else why not (in words a user can act on)."""
  try: from tinygrad_opencl import runtime
  except ImportError as e:
    return f"pyopencl is not installed (pip install pyopencl): {e}" if "pyopencl" in str(e) else f"the OpenCL runtime failed to import: {e}"
  return runtime.unavailable_reason()

# priority 5: below CLANG (10), above PYTHON (0), as PoCL on a CPU is usually slower to compile than clang. Every part
# opens the device (the renderer reads its capabilities): one that does not exist fails with the reason check() gives
BACKEND = Backend("OPENCL", priority=5, check=check, api_version=TINYCORE_API_VERSION,
                  description="OpenCL C through pyopencl; OPENCL:n is the n-th device of all platforms",
                  allocator=lazy("tinygrad_opencl.runtime:allocator"), renderer=lazy("tinygrad_opencl.runtime:renderer"),
                  compiler=lazy("tinygrad_opencl.runtime:compiler"), program=lazy("tinygrad_opencl.runtime:program"))
tinycore_devices, tinycore_allocator, tinycore_renderer, tinycore_compiler, tinycore_program = BACKEND.hookimpls()
device_index = BACKEND.index
