"""tinygrad-webgpu: the contract without an adapter, and on the adapter here (lavapipe in CI) what WGSL makes special:
bool buffers packed in words, the dtypes it lacks, launch limits, compiler messages. Tests that need an adapter skip,
saying why, where there is none."""
from __future__ import annotations
import gc
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.backend import CompileError, DeviceError
from tinycore_conformance.fixtures import check_declaration, check_gpu_kernels, hardware, run_python
import tinygrad_webgpu

WHY = tinygrad_webgpu.check()
needs_adapter, no_adapter_only = hardware(WHY, "a WebGPU adapter")
NO_VULKAN = {"VK_ICD_FILENAMES": "/nonexistent.json", "VK_DRIVER_FILES": "/nonexistent.json", "WGPU_BACKEND_TYPE": "Vulkan"}

# *** the contract, no adapter needed ***

def test_declaration():
  check_declaration(tinygrad_webgpu, "WEBGPU")
  assert 0 < tinygrad_webgpu.tinycore_devices()[0].priority < 5, "WEBGPU ranks below OPENCL (5) and CLANG, above PYTHON"

def test_import_touches_no_driver():
  r = run_python("import sys, tinygrad_webgpu; tinygrad_webgpu.tinycore_devices(); print('wgpu' in sys.modules)")
  assert r.returncode == 0, r.stderr
  assert r.stdout.strip() == "False"

def test_reason_without_wgpu():
  r = run_python("import sys; sys.modules['wgpu'] = None\nimport tinygrad_webgpu; print(tinygrad_webgpu.check())")
  assert r.returncode == 0, r.stderr
  assert "pip install wgpu" in r.stdout

def test_no_adapter_fails_at_once_with_the_reason():
  # no Vulkan driver: `devices` says why, DEV=WEBGPU fails at once with that reason, the renderer still renders
  r = run_python("from tinycore.backend import DeviceError\nfrom tinycore.device import Device\nimport tinygrad_webgpu\n"
                 "print('why:', tinygrad_webgpu.check())\nprint(tinygrad_webgpu.tinycore_renderer(device='WEBGPU').dtypes)\n"
                 "try: Device['WEBGPU']\nexcept DeviceError as e: print('error:', e)", **NO_VULKAN)
  assert r.returncode == 0, r.stderr
  assert "why: no WebGPU adapter found" in r.stdout and "mesa-vulkan-drivers" in r.stdout, r.stdout
  assert "error: " in r.stdout and "no WebGPU adapter found" in r.stdout.split("error: ")[1], r.stdout
  r = run_python("from tinycore.__main__ import devices; devices()", **NO_VULKAN)
  assert "WEBGPU" in r.stdout and "unavailable: no WebGPU adapter found" in r.stdout, r.stdout

def test_device_index_parsing():
  assert tinygrad_webgpu.device_index("WEBGPU") == 0 and tinygrad_webgpu.device_index("WEBGPU:2") == 2
  assert tinygrad_webgpu.device_index("CLANG") is None
  with pytest.raises(DeviceError, match="WEBGPU:x"): tinygrad_webgpu.device_index("WEBGPU:x")

# *** on the adapter ***

@needs_adapter
def test_gpu_kernels():
  check_gpu_kernels("WEBGPU")

@needs_adapter
def test_devices_names_the_adapter():
  r = run_python("from tinycore.__main__ import devices; devices()")
  line = next(x for x in r.stdout.splitlines() if x.startswith("WEBGPU"))
  from tinygrad_webgpu.runtime import adapter, describe
  assert " ok " in line and describe(adapter()) in line, line

@needs_adapter
def test_declares_what_wgsl_has():
  from tinycore.device import Device
  from tinygrad_webgpu.runtime import adapter
  declared = set(Device["WEBGPU"].renderer.supported_dtypes())
  assert {dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.float32} <= declared
  assert not declared & {dtypes.int64, dtypes.uint64, dtypes.float64, dtypes.bfloat16}
  assert (dtypes.float16 in declared) == ("shader-f16" in adapter().features)

@needs_adapter
def test_undeclared_dtype_is_a_clear_error():
  with pytest.raises(TypeError, match="WEBGPU does not support dtypes.long"):
    (Tensor([1, 2, 3], device="WEBGPU").cast(dtypes.int64) + 1).realize()

@needs_adapter
def test_bool_bytes_written_by_neighbouring_threads():
  # four threads write the four bytes of one word: none may lose another's byte
  x = np.random.default_rng(0).standard_normal(4099).astype(np.float32)
  np.testing.assert_equal((Tensor(x, device="WEBGPU") > 0).numpy(), x > 0)
  np.testing.assert_equal(((Tensor(x, device="WEBGPU") > 0) & (Tensor(x, device="WEBGPU") < 1)).numpy(), (x > 0) & (x < 1))

@needs_adapter
@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16])
def test_narrow_ints_packed_in_words(dt):
  # neighbouring elements of one word written by different threads, and arithmetic that wraps at the dtype's width
  info = np.iinfo(dt.fmt)
  x = np.random.default_rng(1).integers(info.min, info.max + 1, 1027).astype(dt.fmt)
  t = Tensor(x, device="WEBGPU")
  np.testing.assert_equal((t * 3 + 7).numpy(), x * np.array(3, dt.fmt) + np.array(7, dt.fmt))
  np.testing.assert_equal(t.cast(dtypes.float32).numpy(), x.astype(np.float32))

@needs_adapter
def test_buffer_freed_by_the_garbage_collector_is_reused_safely():
  # a core Buffer in a reference cycle: the collector finalizes it (handing its GPUBuffer to the LRU cache) and, before
  # the fix, the GPUBuffer too (releasing it), so the next allocation of that size got a dead buffer
  from tinycore.device import Buffer
  class Cycle: pass
  c = Cycle()
  c.self, c.buf = c, Buffer("WEBGPU", 37, dtypes.float32).allocate()
  del c
  gc.collect()
  x = np.arange(37, dtype=np.float32)
  np.testing.assert_equal((Tensor(x, device="WEBGPU") + 1).numpy(), x + 1)

@needs_adapter
def test_compile_error_carries_the_wgsl_message():
  from tinycore.device import Device
  with pytest.raises(CompileError, match="error") as e: Device["WEBGPU"].compiler.compile("fn broken( {")
  assert "expected" in str(e.value)

@needs_adapter
def test_more_workgroups_than_a_dispatch_holds():
  # 2^24 + 1000 elements: more than 65535 groups along one axis, numbered linearly over a 2-D dispatch
  x = np.random.default_rng(2).standard_normal((1 << 24) + 1000).astype(np.float32)
  np.testing.assert_equal((Tensor(x, device="WEBGPU") * 2 - 1).numpy(), x * 2 - 1)

@needs_adapter
def test_launch_beyond_the_adapters_limits_is_a_clear_error():
  from tinycore.device import Device
  from tinycore_conformance import programs as kernels
  dev = Device["WEBGPU"]
  prg = dev.program(dev.device, "elementwise", dev.compiler.compile(dev.renderer.render("elementwise", kernels.elementwise())))
  bufs = [dev.allocator.alloc(16) for _ in range(3)]
  most = dev.renderer.global_max[0]
  with pytest.raises(RuntimeError, match=f"at most {most} per dimension"): prg(*bufs, global_size=(most + 1, 1, 1), local_size=(1, 1, 1))
  with pytest.raises(RuntimeError, match="beyond the adapter's limits"): prg(*bufs, global_size=(1, 1, 1), local_size=(4096, 1, 1))

@needs_adapter
def test_exp2_of_a_log2_keeps_nan():
  # the driver may fuse exp2(y*log2(x)) into pow(x, y), which lavapipe evaluates to 0 for a NaN x
  b, e = np.array([np.nan, 0.0, 2.0], np.float32), np.array([1.0, np.nan, 0.5], np.float32)
  got = (Tensor(e, device="WEBGPU") * Tensor(b, device="WEBGPU").log2()).exp2().numpy()
  with np.errstate(divide="ignore", invalid="ignore"): np.testing.assert_allclose(got, np.exp2(e * np.log2(b)), rtol=1e-6)

@needs_adapter
def test_devices_prints_no_driver_noise_without_xdg_runtime_dir():
  """Mesa's Vulkan drivers printed 'error: XDG_RUNTIME_DIR is invalid' twice above `python -m tinycore devices` on a
  server; the adapter is now enumerated with a private folder standing in."""
  import os, subprocess, sys
  env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
  p = subprocess.run([sys.executable, "-m", "tinycore", "devices"], env=env, capture_output=True, text=True, timeout=120)
  assert p.returncode == 0 and "WEBGPU" in p.stdout, p.stdout + p.stderr
  assert "XDG_RUNTIME_DIR" not in p.stdout + p.stderr, p.stderr
