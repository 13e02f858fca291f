"""Scaffolding every backend plugin's own tests share, as plain helpers and pytest fixtures (this module is registered as
a pytest plugin through the `pytest11` entry point, so a plugin's tests get the fixtures by installing
tinycore-conformance; no conftest needed). A plugin's test file then holds only what is specific to it.

  run_python(code, **env)           a fresh interpreter (what `import plugin` loads, env-dependent reasons)
  plugin_registry(module, dist)     a Registry with the plugin in it, installed or run from a source checkout
  hardware(why)                     (needs, no_hardware_only): skip marks for tests that need the device / need its absence
  check_declaration(module, name)   level-1 facts every plugin repeats: API version, one DeviceSpec, hooks decline others
  check_refuses_without_hardware(module, name, why)   opening fails at once, naming the reason; the hooks raise too
  fake_plugin (fixture)             writes a plugin module and its dist-info into tmp_path: an installed distribution
                                    for a subprocess with PYTHONPATH=tmp_path (tests of discovery and validation)"""
from __future__ import annotations
import os, pathlib, subprocess, sys, textwrap
from types import ModuleType
from typing import Callable
import pytest

OTHER_DEVICES = ("PYTHON", "CLANG", "OPENCL", "CUDA", "NV", "AMD", "METAL")
PART_HOOKS = ("allocator", "renderer", "compiler", "program")

def run_python(code: str, timeout: int = 120, **env: str) -> subprocess.CompletedProcess:
  """`python -c code` in a fresh interpreter with the current environment plus `env`."""
  return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout,
                        env={**os.environ, **env})

def plugin_registry(module: ModuleType, dist: str):
  """A fresh Registry (not the process's) that holds `module`'s devices: through its entry point when installed, else
  added by hand (tests run from a source checkout)."""
  from tinycore.plugin import Registry
  r = Registry()
  r.load()
  names = [s.name for s in module.tinycore_devices()]
  if not all(n in r.entries for n in names): r._add(module, module.__name__, dist, "source")
  return r

def hardware(why: str | None, what: str) -> tuple[pytest.MarkDecorator, pytest.MarkDecorator]:
  """Skip marks from a plugin's `check()` answer: (needs: skip unless the device opens here, no_hardware_only: skip when it
  does, since the no-hardware path cannot be observed then)."""
  return (pytest.mark.skipif(why is not None, reason=f"needs {what}: {why}"),
          pytest.mark.skipif(why is None, reason=f"{what} is usable here: the no-hardware path cannot be observed"))

def check_declaration(module: ModuleType, name: str) -> None:
  """The plugin declares the core's API (semver-compatible), exactly one DeviceSpec named `name`, and its part hooks
  answer None for every other device."""
  from tinycore.backend import API_VERSION, DeviceSpec, api_compatible, hook_problems
  api = module.TINYCORE_API_VERSION
  assert api_compatible(api, API_VERSION), f"{module.__name__} declares API {api}, the core provides {API_VERSION}"
  assert hook_problems(module) == [], hook_problems(module)
  (spec,) = module.tinycore_devices()
  assert isinstance(spec, DeviceSpec) and spec.name == name and spec.api_version == api
  for hook in PART_HOOKS:
    for other in (*(d for d in OTHER_DEVICES if d != name), f"{name}X"):
      assert getattr(module, f"tinycore_{hook}")(device=other) is None, f"tinycore_{hook} answered for {other}"

def check_refuses_without_hardware(module: ModuleType, name: str, dist: str, why: str) -> None:
  """Where the device cannot open: opening it fails at once with the reason, and the hooks that need hardware raise
  DeviceError rather than hand back something unusable."""
  from tinycore.backend import DeviceError
  reg = plugin_registry(module, dist)
  for dev in (name, f"{name}:1"):
    with pytest.raises(DeviceError) as e: reg.open(dev)
    assert name in str(e.value) and (dev != name or why in str(e.value)), str(e.value)
  for hook in ("allocator", "program"):
    with pytest.raises(DeviceError, match="cannot be used"): getattr(module, f"tinycore_{hook}")(device=name)

def write_fake_plugin(tmp: pathlib.Path, name: str, module_src: str, version: str = "0.1") -> pathlib.Path:
  """A minimal installed distribution `name` (dist-info with an entry point in group tinycore.backends) whose module
  `{name}_mod` is module_src; put `tmp` on PYTHONPATH to install it."""
  (tmp / f"{name}_mod.py").write_text(textwrap.dedent(module_src))
  di = tmp / f"{name}-{version}.dist-info"
  di.mkdir()
  (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
  (di / "entry_points.txt").write_text(f"[tinycore.backends]\n{name} = {name}_mod\n")
  return tmp

@pytest.fixture
def fake_plugin(tmp_path: pathlib.Path) -> Callable[..., dict[str, str]]:
  """`fake_plugin(name, module_src)` installs a plugin into tmp_path and returns the env ({'PYTHONPATH': ...}) under which
  a `run_python` subprocess sees it."""
  def make(name: str, module_src: str, version: str = "0.1") -> dict[str, str]:
    write_fake_plugin(tmp_path, name, module_src, version)
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
  return make

# *** on the hardware ***

def run_kernel(device: str, name: str, uops: list, inputs: list, out_nbytes: int, global_size: tuple, local_size: tuple | None,
               vals: tuple = ()) -> tuple[bytes, float | None]:
  """Render, compile and run a hand-built program on the opened `device`: buffer 0 is the output (out_nbytes), the others
  hold `inputs` (numpy arrays). Returns the output bytes and the run time (wait=True)."""
  import numpy as np
  from tinycore.device import Device
  dev = Device[device]
  prg = dev.program(dev.device, name, dev.compiler.compile(dev.renderer.render(name, uops)))
  bufs = [dev.allocator.alloc(out_nbytes)] + [dev.allocator.alloc(x.nbytes) for x in inputs]
  for b, x in zip(bufs[1:], inputs): dev.allocator.copyin(b, memoryview(np.ascontiguousarray(x)).cast("B"))
  t = prg(*bufs, global_size=global_size, local_size=local_size, vals=vals, wait=True)
  out = bytearray(out_nbytes)
  dev.allocator.copyout(memoryview(out), bufs[0])
  return bytes(out), t

def check_gpu_kernels(device: str) -> None:
  """The three kernels every GPU plugin's own tests run first on real hardware, against numpy: elementwise with timing,
  a shared-memory reverse (local ids, barrier), a reduce over a symbolic length."""
  import numpy as np
  from tinycore_conformance import programs as kernels
  a, b = np.random.rand(1024).astype(np.float32), np.random.rand(1024).astype(np.float32)
  out, t = run_kernel(device, "elementwise", kernels.elementwise(), [a, b], 4096, (16, 1, 1), (64, 1, 1))
  np.testing.assert_allclose(np.frombuffer(out, np.float32), a + b)
  assert isinstance(t, float) and t > 0
  x = np.arange(512, dtype=np.float32)
  out, _ = run_kernel(device, "shared_reverse", kernels.shared_reverse(), [x], 2048, (8, 1, 1), (64, 1, 1))
  np.testing.assert_equal(np.frombuffer(out, np.float32), x.reshape(8, 64)[:, ::-1].reshape(-1))
  y = np.random.rand(3200).astype(np.float32)
  out, _ = run_kernel(device, "reduce_sum", kernels.reduce_sum(), [y], 128, (32, 1, 1), (1, 1, 1), vals=(100,))
  np.testing.assert_allclose(np.frombuffer(out, np.float32), y.reshape(32, 100).sum(1), rtol=1e-5)

def check_runtime_edges(device: str, out_of_bounds_faults: bool = False) -> None:
  """What a GPU runtime must get right besides results: alloc/free and copies both ways (views included), a launch with
  local_max threads and one past it (a DeviceError naming the limit, not a crash), wait=True returning the run time, a
  kernel replayed by TinyJit; with out_of_bounds_faults (an emulated device with guard pages), a kernel that runs off
  its buffer fails with a DeviceError at the next synchronizing call instead of returning garbage."""
  import numpy as np
  import pytest
  from tinycore import Tensor
  from tinycore.backend import DeviceError
  from tinycore.device import Device
  from tinycore.engine.jit import TinyJit
  from tinycore_conformance import programs as kernels
  dev = Device[device]
  al, x = dev.allocator, np.random.default_rng(0).random(1024).astype(np.float32)
  bufs = [al.alloc(4096) for _ in range(3)]
  for b in bufs[1:]: al.copyin(b, memoryview(x).cast("B"))
  back = np.empty(256, np.float32)
  al.copyout(memoryview(back).cast("B"), al._offset(bufs[1], 1024, 1024))  # a view: bytes 1024..2047
  np.testing.assert_equal(back, x[256:512])
  limit = min(dev.renderer.local_max[0], 1024)
  # a kernel made for the limit: a GPU refuses a block larger than the one the kernel was compiled for (CUDA's
  # __launch_bounds__; an H100 said CUDA_ERROR_INVALID_VALUE where the mock once ran it)
  big = dev.program(dev.device, "edges", dev.compiler.compile(dev.renderer.render("edges", kernels.elementwise(local=limit, groups=1))))
  t = big(*bufs, global_size=(1, 1, 1), local_size=(limit, 1, 1), wait=True)  # at the limit: i = lidx0 < 1024
  assert isinstance(t, float) and t >= 0, f"wait=True must return the run time in seconds, got {t!r}"
  out = np.empty(1024, np.float32)
  al.copyout(memoryview(out).cast("B"), bufs[0])
  np.testing.assert_equal(out[:limit], (x + x)[:limit])
  with pytest.raises(DeviceError): big(*bufs, global_size=(1, 1, 1), local_size=(limit + 1, 1, 1), wait=True)
  prg = dev.program(dev.device, "edges", dev.compiler.compile(dev.renderer.render("edges", kernels.elementwise())))
  if out_of_bounds_faults:
    with pytest.raises(DeviceError): prg(*bufs, global_size=(17, 1, 1), local_size=(64, 1, 1), wait=True)  # reads x[1024:1088]
  for b in bufs: al.free(b, 4096)
  @TinyJit
  def step(a: Tensor, b: Tensor) -> Tensor: return (a * b + 1).sum(0).realize()
  w = Tensor(x.reshape(32, 32), device=device)
  for i in range(4):
    y = np.full((32, 32), i, np.float32)
    np.testing.assert_allclose(step(Tensor(y, device=device), w).numpy(), (y.astype(np.float64) * x.reshape(32, 32) + 1).sum(0), rtol=1e-5)
