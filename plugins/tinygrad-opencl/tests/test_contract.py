"""The plugin as the core sees it: lazy import, device spec, availability reasons, device indices."""
from __future__ import annotations
import os
import pytest
from tinycore.backend import DeviceError
from tinycore_conformance.fixtures import check_declaration, run_python
import tinygrad_opencl

def test_declaration():
  check_declaration(tinygrad_opencl, "OPENCL")
  assert 0 < tinygrad_opencl.tinycore_devices()[0].priority < 10, "OPENCL ranks below CLANG (10) and above PYTHON (0)"

def test_import_touches_no_driver():
  # importing the plugin and asking for its spec must not load pyopencl (and so cannot create a context)
  r = run_python("import sys, tinygrad_opencl; tinygrad_opencl.tinycore_devices(); print('pyopencl' in sys.modules)")
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "False"

def test_import_without_pyopencl_and_reason():
  # sys.modules[name] = None makes `import pyopencl` raise ImportError, as on a machine without it
  r = run_python("import sys; sys.modules['pyopencl'] = None\n"
          "import tinygrad_opencl; print(tinygrad_opencl.check())")
  assert r.returncode == 0, r.stderr
  assert "pip install pyopencl" in r.stdout

def test_device_index_parsing():
  assert tinygrad_opencl.device_index("OPENCL") == 0 and tinygrad_opencl.device_index("OPENCL:3") == 3
  assert tinygrad_opencl.device_index("CLANG") is None
  with pytest.raises(DeviceError, match="OPENCL:x"): tinygrad_opencl.device_index("OPENCL:x")

# *** with no OpenCL platform ***

@pytest.fixture
def no_platform(monkeypatch):
  cl = pytest.importorskip("pyopencl", reason="pyopencl is not installed (pip install pyopencl)")
  from tinygrad_opencl import runtime
  monkeypatch.setattr(runtime, "_DEVICES", {})  # forget devices already opened in this process
  def raise_no_platform(): raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")
  monkeypatch.setattr(cl, "get_platforms", raise_no_platform)
  return monkeypatch

def test_no_platform_reason(no_platform):
  why = tinygrad_opencl.check()
  assert why is not None and "no OpenCL platform found" in why and "pocl-opencl-icd" in why

def test_zero_platforms_reason(no_platform):
  import pyopencl as cl
  no_platform.setattr(cl, "get_platforms", lambda: [])
  why = tinygrad_opencl.check()
  assert why is not None and "no OpenCL platform found" in why

def test_no_platform_open_raises_device_error(no_platform):
  why = tinygrad_opencl.check()
  for hook in (tinygrad_opencl.tinycore_allocator, tinygrad_opencl.tinycore_compiler, tinygrad_opencl.tinycore_program,
               tinygrad_opencl.tinycore_renderer):
    with pytest.raises(DeviceError) as e: hook(device="OPENCL")
    assert str(e.value) == why

def test_no_platform_through_registry(no_platform):
  """Opening OPENCL through the core's registry raises DeviceError carrying check()'s reason."""
  pytest.importorskip("tinycore.runtime.python", reason="the core's PYTHON device (tinycore.runtime.python) is not written yet")
  from tinycore import plugin
  class EP:  # a stand-in entry point, so only this plugin is discovered
    name, value, dist = "opencl", "tinygrad_opencl", None
    def load(self): return tinygrad_opencl
  no_platform.setattr(plugin, "_entry_points", lambda: [EP()])
  reg = plugin.Registry()
  assert "OPENCL" not in reg.available_devices()
  assert "no OpenCL platform found" in reg.reasons()["OPENCL"]
  with pytest.raises(DeviceError, match="no OpenCL platform found"): reg.open("OPENCL")

def test_no_icd_real_loader():
  """A real run with an ICD loader that finds no vendor: ocl-icd reads its vendor list from OCL_ICD_VENDORS."""
  pytest.importorskip("pyopencl", reason="pyopencl is not installed (pip install pyopencl)")
  empty = os.path.join(os.path.dirname(__file__), "__no_icd__")
  os.makedirs(empty, exist_ok=True)
  try: r = run_python("import tinygrad_opencl; print(tinygrad_opencl.check())", OCL_ICD_VENDORS=empty)
  finally: os.rmdir(empty)
  assert r.returncode == 0, r.stderr
  if "None" == r.stdout.strip(): pytest.skip("this ICD loader ignores OCL_ICD_VENDORS (not ocl-icd); covered by the monkeypatched tests")
  assert "no OpenCL platform found" in r.stdout

# *** device indices on a real device ***

def test_opencl_index_semantics(cldev):
  from tinygrad_opencl import runtime
  devs = runtime.enumerate_devices()
  assert cldev.dev == devs[0][1], "OPENCL is the first device of the first platform"
  if len(devs) == 1:
    with pytest.raises(DeviceError) as e: tinygrad_opencl.tinycore_allocator(device="OPENCL:1")
    msg = str(e.value)
    assert "OPENCL:1" in msg and "does not exist" in msg and devs[0][1].name in msg
  else:
    a = tinygrad_opencl.tinycore_allocator(device="OPENCL:1")
    assert a.dev.dev == devs[1][1]
  n = len(devs)
  with pytest.raises(DeviceError, match=f"OPENCL:{n} does not exist"): tinygrad_opencl.tinycore_compiler(device=f"OPENCL:{n}")

def test_hooks_return_contract_types(cldev):
  from tinycore.backend import Allocator, Compiler, Program, Renderer
  assert isinstance(tinygrad_opencl.tinycore_allocator(device="OPENCL"), Allocator)
  assert isinstance(tinygrad_opencl.tinycore_compiler(device="OPENCL"), Compiler)
  assert isinstance(tinygrad_opencl.tinycore_renderer(device="OPENCL"), Renderer)
  p = tinygrad_opencl.tinycore_program(device="OPENCL")
  assert isinstance(p, type) and issubclass(p, Program)
