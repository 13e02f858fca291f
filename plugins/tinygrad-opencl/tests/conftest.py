"""Fixtures for the OpenCL plugin tests. Tests that need a real OpenCL device skip, saying why, only when pyopencl is not
installed or no OpenCL platform/device exists here; everything else runs."""
from __future__ import annotations
import pytest

def _why_no_opencl() -> str | None:
  try: import pyopencl  # noqa: F401
  except ImportError: return "pyopencl is not installed (pip install pyopencl)"
  from tinygrad_opencl import runtime
  return runtime.unavailable_reason()

@pytest.fixture(scope="session")
def cldev():
  """The CLDevice of OPENCL (device 0)."""
  if (why := _why_no_opencl()) is not None: pytest.skip(f"no usable OpenCL here: {why}")
  from tinygrad_opencl import runtime
  return runtime.get_device("OPENCL", 0)

@pytest.fixture(scope="session")
def alloc(cldev):
  from tinygrad_opencl.runtime import CLAllocator
  return CLAllocator(cldev)

@pytest.fixture(scope="session")
def compiler(cldev):
  from tinygrad_opencl.runtime import CLCompiler
  return CLCompiler(cldev)

@pytest.fixture(scope="session")
def renderer(cldev):
  from tinygrad_opencl.renderer import OpenCLRenderer
  return OpenCLRenderer.for_device(cldev)
