"""Level 1, contract: the plugin is found through its entry point and loads, declares a compatible API version, its
hooks build parts of the right types (and decline devices that are not theirs), and its declarations are well formed."""
from __future__ import annotations
import pytest
from tinycore.backend import Allocator, Compiler, Program
from tinycore.dtype import DType, dtypes
from tinycore.backend import Renderer
from tinycore_conformance.values import ALL_DTYPES, dtname

LAYER = 1
HOOKS = ("allocator", "renderer", "compiler", "program")

def _registry():
  from tinycore.plugin import registry
  registry.load()
  return registry

def provider(target):
  """The module that provides the device: the one registered whose tinycore_devices() names it."""
  reg = _registry()
  for name, mod in reg.pm.list_name_plugin():
    fn = getattr(mod, "tinycore_devices", None)
    try:
      if fn is not None and any(s.name == target.base for s in fn()): return name, mod
    except Exception: continue
  return None, None

@pytest.mark.cap("device is installed")
def test_device_is_installed(target):
  reg = _registry()
  assert target.entry is not None, (f"no installed plugin provides device {target.base}; installed devices: {', '.join(reg.device_names())}. "
                                    "A plugin is found through an entry point in group 'tinycore.backends' (see docs/writing-a-backend.md)")

@pytest.mark.cap("plugin loads")
def test_plugin_loads(target):
  assert target.entry is not None, f"no plugin provides {target.base}"
  assert target.entry.error is None, f"the plugin of {target.base} does not load: {target.entry.error}"

@pytest.mark.cap("entry point")
def test_entry_point(target):
  """Every device except the core's own PYTHON comes from an entry point of group tinycore.backends that loads to the module
  declaring it."""
  from tinycore.plugin import ENTRY_POINT_GROUP, _entry_points
  name, mod = provider(target)
  assert mod is not None, f"no registered module declares device {target.base} in tinycore_devices()"
  if target.entry.plugin == "tinycore": return  # the core's built-in device
  eps = [ep for ep in _entry_points() if ep.name == name]
  assert eps, f"module {mod.__name__} is not registered through an entry point of group {ENTRY_POINT_GROUP!r}"
  assert eps[0].load() is mod, f"entry point {eps[0].name} = {eps[0].value} does not load the module that declares {target.base}"

@pytest.mark.cap("API version")
def test_api_version(target):
  from tinycore.backend import API_VERSION, api_compatible
  _, mod = provider(target)
  assert mod is not None, f"no registered module declares device {target.base}"
  api = getattr(mod, "TINYCORE_API_VERSION", None)
  assert isinstance(api, str), f"module {mod.__name__} must declare TINYCORE_API_VERSION = '{API_VERSION}' (a string), it has {api!r}"
  assert api_compatible(api), f"module {mod.__name__} declares TINYCORE_API_VERSION {api}, this tinycore provides {API_VERSION}"
  # the version is stated once: Backend(api_version=TINYCORE_API_VERSION) and so every DeviceSpec carry the module's
  said = {f"DeviceSpec {s.name}": s.api_version for s in mod.tinycore_devices()}
  if (b := getattr(mod, "BACKEND", None)) is not None: said["Backend"] = getattr(b, "api_version", api)
  assert all(v == api for v in said.values()), (f"module {mod.__name__} declares TINYCORE_API_VERSION {api} but " +
    ", ".join(f"{k} says {v}" for k, v in said.items() if v != api) + ": pass api_version=TINYCORE_API_VERSION to Backend(...)")

@pytest.mark.cap("device spec")
def test_device_spec(target):
  from tinycore.backend import DeviceSpec, api_compatible
  assert target.entry is not None and target.entry.spec is not None, f"{target.base} has no DeviceSpec"
  s = target.entry.spec
  assert isinstance(s, DeviceSpec), f"tinycore_devices() must return DeviceSpec objects, got {type(s).__name__}"
  assert s.name == s.name.upper() and ":" not in s.name and s.name.isidentifier(), f"device name {s.name!r} must be an upper-case identifier"
  assert isinstance(s.priority, int), f"DeviceSpec.priority must be an int, got {s.priority!r}"
  assert api_compatible(s.api_version), f"DeviceSpec.api_version {s.api_version} is not compatible with this tinycore"
  assert callable(s.check), "DeviceSpec.check must be a callable returning None (available) or the reason it is not"

@pytest.mark.cap("availability check")
def test_availability(target):
  """check() answers None or a reason string without raising; in run mode the device must be available."""
  why = target.entry.reason() if target.entry is not None else "not installed"
  assert why is None or (isinstance(why, str) and why.strip()), f"DeviceSpec.check() must return None or a non-empty reason, got {why!r}"
  if why is not None and "availability check raised" in why: raise AssertionError(why)
  target.require_runtime()
  assert why is None, f"device {target.device} is not available here: {why} (use --compile-only to check rendering and compiling without it)"

@pytest.mark.cap("hook returns {hook}")
@pytest.mark.parametrize("hook", HOOKS)
def test_hook_types(target, hook):
  """Each hook builds its part for the device, of the right type. In compile-only mode the renderer and compiler must
  build without the hardware; the allocator and program are not asked for."""
  if hook in ("allocator", "program"): target.require_runtime()
  part = getattr(target.parts, hook)
  want = {"allocator": Allocator, "renderer": Renderer, "compiler": Compiler}.get(hook)
  if hook == "program": assert isinstance(part, type) and issubclass(part, Program), f"tinycore_program must return a Program subclass, got {part!r}"
  else: assert isinstance(part, want), f"tinycore_{hook} must return a {want.__name__}, got {type(part).__name__}"

@pytest.mark.cap("hooks decline other devices")
@pytest.mark.parametrize("hook", HOOKS)
def test_hook_declines(target, hook):
  """Hooks are firstresult: a hook that answers for a device it does not own hijacks that device from its plugin."""
  _, mod = provider(target)
  fn = getattr(mod, f"tinycore_{hook}", None)
  if fn is None: return  # the plugin does not implement this hook (another plugin it depends on may)
  other = "NOSUCHDEVICE" if target.base != "NOSUCHDEVICE" else "OTHERDEVICE"
  assert fn(device=other) is None, f"{mod.__name__}.tinycore_{hook}(device={other!r}) must return None for a device it does not provide"

@pytest.mark.cap("renderer declarations")
def test_renderer_declarations(target):
  r = target.renderer
  dts = r.supported_dtypes()
  assert isinstance(dts, (tuple, list)) and dts, f"supported_dtypes() must return a non-empty tuple of dtypes, got {dts!r}"
  bad = [d for d in dts if not isinstance(d, DType) or d.scalar() not in dtypes.all]
  assert not bad, f"supported_dtypes() contains things that are not scalar tinycore dtypes: {bad}"
  assert isinstance(r.has_local, bool) and isinstance(r.has_shared, bool), "has_local and has_shared must be bools"
  assert not r.has_shared or r.has_local, "has_shared (local memory) needs has_local (local ids)"
  if r.has_local:
    assert r.local_max is not None and len(r.local_max) == 3 and all(isinstance(x, int) and x > 0 for x in r.local_max), \
      f"a renderer with local ids must declare local_max as 3 positive ints, got {r.local_max!r}"
  if r.global_max is not None: assert all(isinstance(x, int) and x > 0 for x in r.global_max), f"bad global_max {r.global_max!r}"
  if r.has_shared: assert isinstance(r.shared_max, int) and r.shared_max > 0, f"bad shared_max {r.shared_max!r}"
  assert all(isinstance(w, int) and w >= 1 for w in r.vector_widths), f"vector_widths must be positive ints, got {r.vector_widths!r}"
  assert isinstance(r.max_upcast, int) and r.max_upcast >= 1, f"bad max_upcast {r.max_upcast!r}"
  assert r.device.split(":")[0] == target.base, f"Renderer.device is {r.device!r}, it must name the device ({target.base})"

@pytest.mark.cap("compiler declarations")
def test_compiler_declarations(target):
  key = target.compiler.cachekey
  assert key is None or (isinstance(key, str) and key.strip()), f"Compiler.cachekey must be None (no caching) or a non-empty string, got {key!r}"

@pytest.mark.cap("declares dtype")
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtname)
def test_declared_dtype(target, dtype):
  """One row per dtype: the declaration every later layer is parametrized by."""
  target.require_dtype(dtype)

@pytest.mark.cap("device opens")
def test_device_opens(target):
  target.require_runtime()
  from tinycore.backend import Compiled
  from tinycore.device import Device
  d = Device[target.device]
  assert isinstance(d, Compiled)
