"""Discovery of backends: the built-in PYTHON device and every entry point of group `tinycore.backends`, loaded once,
lazily and fault-tolerantly (the contract itself, what a backend implements, is tinycore.backend).

A plugin that fails to import, declares an incompatible API version, or defines hooks that do not match the spec
(a misspelt name, arguments the spec does not give) is listed with the reason, naming its distribution, version and
the offending hook, and never breaks `import tinycore` or another device; asking for its device raises that DeviceError.

The contract's names are re-exported here for plugins published against API 1.0/1.1 (`from tinycore.plugin import
hookimpl`); new code imports them from tinycore.backend."""
from __future__ import annotations
import traceback
from dataclasses import dataclass, field
import pluggy
try: from importlib.metadata import entry_points, EntryPoint
except ImportError: from importlib_metadata import entry_points, EntryPoint  # type: ignore[no-redef]
from tinycore.backend import (API_VERSION, Allocator, Backend, BackendSpec, Compiled, Compiler, DeviceError, DeviceSpec, Program,  # noqa: F401
                              Renderer, api_compatible, device_index, hook_problems, hookimpl, hookspec, lazy, open_once)

# tinygrad's names for devices tinycore provides under its own: `Tensor(x, device="CPU")` and DEV=CPU open the CLANG
# backend as a device named "CPU" (its own buffers and kernels; `.device` reads "CPU", as tinygrad code expects)
DEVICE_ALIASES: dict[str, str] = {"CPU": "CLANG"}
ENTRY_POINT_GROUP = "tinycore.backends"

@dataclass
class DeviceEntry:
  name: str
  plugin: str
  version: str
  spec: DeviceSpec | None = None
  error: str | None = None       # why the plugin could not be loaded
  _reason: list = field(default_factory=list)
  def reason(self) -> str | None:
    """None when the device can be opened here, else why not."""
    if self.error is not None: return self.error
    if not self._reason:
      try: self._reason.append(self.spec.check() if self.spec is not None else "no device spec")
      except Exception as e: self._reason.append(f"availability check raised {type(e).__name__}: {e}")
    return self._reason[0]

class Registry:
  """Loads the built-in PYTHON backend and every entry point of group `tinycore.backends`, once, on first use."""
  def __init__(self) -> None:
    self.pm: pluggy.PluginManager | None = None
    self.entries: dict[str, DeviceEntry] = {}
    self.failed: list[DeviceEntry] = []

  def load(self) -> None:
    if self.pm is not None: return
    self.pm = pluggy.PluginManager("tinycore")
    self.pm.add_hookspecs(BackendSpec)
    from tinycore.runtime import python as python_backend
    self._add(python_backend, "tinycore.runtime.python", "tinycore", _core_version())
    for ep in _entry_points():
      dist = ep.dist.name if getattr(ep, "dist", None) is not None else ep.value
      version = ep.dist.version if getattr(ep, "dist", None) is not None else "?"
      try: module = ep.load()
      except Exception as e:
        detail = traceback.format_exception_only(type(e), e)[-1].strip()
        self.failed.append(DeviceEntry(ep.name.upper(), dist, version, error=f"plugin {dist} {version} failed to import: {detail}"))
        continue
      self._add(module, ep.name, dist, version)

  def _add(self, module: object, name: str, dist: str, version: str) -> None:
    assert self.pm is not None
    api = getattr(module, "TINYCORE_API_VERSION", None)
    if api is None or not api_compatible(str(api)):
      return self._broken(module, name, (f"plugin {dist} {version} declares no TINYCORE_API_VERSION" if api is None else
        f"plugin {dist} {version} was built for tinycore API {api}, but this tinycore provides API {API_VERSION}: "
        f"install a release of {dist} built for API {API_VERSION.split('.')[0]}.x, or a tinycore that provides API {api}"), dist, version, ask=False)
    if (problems := hook_problems(module)):
      return self._broken(module, name, f"plugin {dist} {version} is broken: " + "; ".join(problems), dist, version)
    try:
      self.pm.register(module, name=name)
      specs = module.tinycore_devices()  # type: ignore[attr-defined]
    except Exception as e:
      if self.pm.is_registered(module): self.pm.unregister(module)
      detail = str(e) if isinstance(e, pluggy.PluginValidationError) else f"{type(e).__name__}: {e}"
      return self._broken(module, name, f"plugin {dist} {version} is broken: {detail}", dist, version)
    for spec in specs:
      if spec.name in self.entries: continue  # first plugin to claim a name keeps it
      err = None if api_compatible(spec.api_version) else \
        f"device {spec.name} of plugin {dist} {version} needs tinycore API {spec.api_version}, this tinycore provides {API_VERSION}"
      self.entries[spec.name] = DeviceEntry(spec.name, dist, version, spec, err)

  def _broken(self, module: object, name: str, why: str, dist: str, version: str, ask: bool = True) -> None:
    """Lists the plugin as broken under each device it says it provides (when it may be `ask`ed), else under its entry
    point's name. A plugin built for another API is never called."""
    try: names = [s.name for s in module.tinycore_devices()] if ask else []  # type: ignore[attr-defined]
    except Exception: names = []
    for n in names or [name.upper()]: self.failed.append(DeviceEntry(n, dist, version, error=why))

  def all_entries(self) -> list[DeviceEntry]:
    self.load()
    return sorted(self.entries.values(), key=lambda e: (-(e.spec.priority if e.spec else 0), e.name)) + self.failed
  def device_names(self) -> list[str]: return [e.name for e in self.all_entries()]
  def available_devices(self) -> list[str]: return [e.name for e in self.all_entries() if e.error is None and e.reason() is None]
  def reasons(self) -> dict[str, str]: return {e.name: r for e in self.all_entries() if (r := e.reason()) is not None}
  @staticmethod
  def resolve(name: str) -> str:
    """The device a (base) name opens: an alias's target, else the name itself."""
    return DEVICE_ALIASES.get(name, name)

  def open(self, device: str) -> Compiled:
    """Build `device` (a canonical name, "NAME" or "NAME:n") from its plugin's parts; an alias asks its target's plugin."""
    self.load()
    assert self.pm is not None
    alias = device.split(":")[0]
    base = self.resolve(alias)
    target = base + device[len(alias):]  # what the plugin's hooks answer to
    entry = self.entries.get(base) or next((e for e in self.failed if e.name == base), None)
    if entry is None:
      known = ", ".join(self.device_names())
      raise DeviceError(f"unknown device {device!r}: installed devices are {known}. A backend is a separate package, "
                        f"for example `pip install tinygrad-{base.lower()}`")
    if (why := entry.reason()) is not None: raise DeviceError(f"device {device} (plugin {entry.plugin} {entry.version}) cannot be used: {why}")
    parts = {}
    for part in ("allocator", "renderer", "compiler", "program"):
      try: parts[part] = getattr(self.pm.hook, f"tinycore_{part}")(device=target)
      except DeviceError: raise
      except Exception as e:
        raise DeviceError(f"device {device} (plugin {entry.plugin} {entry.version}) failed to build its {part}: {type(e).__name__}: {e}") from e
      if parts[part] is None: raise DeviceError(f"device {device} (plugin {entry.plugin}) provides no {part}")
    if not isinstance(parts["allocator"], Allocator) or not isinstance(parts["renderer"], Renderer) or \
       not isinstance(parts["compiler"], Compiler) or not (isinstance(parts["program"], type) and issubclass(parts["program"], Program)):
      raise DeviceError(f"device {device} (plugin {entry.plugin}) returned parts of the wrong types: "
                        + ", ".join(f"{k}={type(v).__name__}" for k, v in parts.items()))
    return Compiled(device, parts["allocator"], parts["renderer"], parts["compiler"], parts["program"], plugin=entry.plugin)

def _entry_points() -> list[EntryPoint]: return list(entry_points(group=ENTRY_POINT_GROUP))

def _core_version() -> str:
  try:
    from importlib.metadata import version
    return version("tinycore")
  except Exception: return "dev"

registry = Registry()
