"""The plugin through the core's device registry and Buffer: what tinycore itself calls."""
from __future__ import annotations
import os, subprocess, sys
import numpy as np
import pytest
from tinycore.backend import DeviceError
from tinycore.device import Buffer, Device
from tinycore.dtype import dtypes

@pytest.fixture(scope="module")
def dev(cldev):
  return Device["OPENCL"]

def test_registry_opens_opencl(dev):
  from tinycore.plugin import registry
  assert "OPENCL" in registry.available_devices()
  assert dev.plugin == "tinygrad-opencl" and Device["OPENCL:0"] is dev

def test_buffer_roundtrip_and_views(dev, cldev):
  x = np.arange(1000, dtype=np.float32) * 1.5
  b = Buffer("OPENCL", 1000, dtypes.float32, initial_value=x.tobytes())
  np.testing.assert_array_equal(b.numpy(), x)
  per = cldev.sub_buffer_align // 4  # floats per alignment step
  v = b.view(10, dtypes.float32, cldev.sub_buffer_align)
  np.testing.assert_array_equal(v.ensure_allocated().numpy(), x[per:per + 10])
  vi = b.view(10, dtypes.int32, 0)  # a view may reinterpret the bytes
  np.testing.assert_array_equal(vi.ensure_allocated().numpy(), x[:10].view(np.int32))

def test_buffer_copy_between_devices(dev):
  x = np.random.default_rng(0).standard_normal(257).astype(np.float32)
  cl_buf = Buffer("OPENCL", 257, dtypes.float32, initial_value=x.tobytes())
  py_buf = Buffer("PYTHON", 257, dtypes.float32)
  py_buf.copy_from(cl_buf)
  np.testing.assert_array_equal(py_buf.numpy(), x)
  back = Buffer("OPENCL", 257, dtypes.float32)
  back.copy_from(py_buf)
  np.testing.assert_array_equal(back.numpy(), x)
  same = Buffer("OPENCL", 257, dtypes.float32)
  same.copy_from(back)  # OPENCL -> OPENCL goes through the allocator's _transfer
  np.testing.assert_array_equal(same.numpy(), x)

def test_second_device_through_registry(cldev):
  from tinygrad_opencl.runtime import enumerate_devices
  devs = enumerate_devices()
  if len(devs) > 1: assert Device["OPENCL:1"].allocator.dev.dev == devs[1][1]
  else:
    with pytest.raises(DeviceError, match="OPENCL:1 does not exist"): Device["OPENCL:1"]

def test_dev_env_selects_opencl(cldev):
  r = subprocess.run([sys.executable, "-c", "from tinycore.device import Device; print(Device.DEFAULT)"], capture_output=True, text=True,
                     timeout=120, env={**os.environ, "DEV": "OPENCL"})
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "OPENCL"
