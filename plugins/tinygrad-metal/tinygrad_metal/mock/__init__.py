"""MOCKGPU=1: this plugin's Metal runtime runs above a fake of the PyObjC `Metal` module (metal.py), on any OS: buffers in
host memory, kernels (the MSL source, checked by metal-syntax-check as the compiler) compiled for the host CPU by the
host-source executor (tinycore.runtime.hostgrid) with an MSL shim (shim.py). MOCKGPU_MEMORY caps the device memory
(bytes, default 8 GiB); MOCKGPU_SEED seeds the work-item order. Importing this package loads nothing."""
from __future__ import annotations
import os

def enabled() -> bool:
  """True when MOCKGPU is set to something other than 0."""
  return os.getenv("MOCKGPU", "0") not in ("", "0")

DESCRIPTION = "emulated: mock Metal (PyObjC stand-in), kernels run as MSL compiled for the host CPU (hostgrid); metal-syntax-check compiles"
