"""The backend contract (tinycore.backend): one module, one way in, validated at registration."""
import ast, pathlib, types
import pytest
import tinycore
from tinycore import backend
from tinycore.backend import API_VERSION, Backend, DeviceError, Program, hookimpl
from tinycore.plugin import Registry, registry
from tinycore_conformance.fixtures import run_python

CORE = pathlib.Path(tinycore.__file__).parent

def test_backend_is_a_leaf_of_the_core():
  """backend.py imports only dtype and helpers from the core (UOp only for type checking), never the loading machinery."""
  tree = ast.parse((CORE / "backend.py").read_text())
  imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("tinycore")
              and not any(isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test) and n in ast.walk(p) for p in ast.walk(tree))}
  assert imported == {"tinycore.dtype", "tinycore.helpers"}, imported

def test_old_import_paths_are_the_same_objects():
  """Plugins published against API 1.0/1.1 import the contract from device.py, plugin.py and renderer/: still the same classes."""
  from tinycore import device, plugin, renderer
  for name in ("Allocator", "LRUAllocator", "BufferSpec", "Compiler", "Program", "Compiled", "CompileError", "DeviceError"):
    assert getattr(device, name) is getattr(backend, name), name
  for name in ("Backend", "DeviceSpec", "BackendSpec", "hookimpl", "hookspec", "lazy", "open_once", "device_index", "API_VERSION", "api_compatible"):
    assert getattr(plugin, name) is getattr(backend, name), name
  assert renderer.Renderer is backend.Renderer and renderer.TensorCore is backend.TensorCore

def test_every_backend_is_declared_with_backend_at_the_current_api():
  registry.load()
  assert registry.pm is not None
  for name, mod in registry.pm.list_name_plugin():
    if mod is None or not hasattr(mod, "tinycore_devices"): continue
    assert isinstance(getattr(mod, "BACKEND", None), Backend), f"{name} is not declared with Backend(...)"
    assert mod.TINYCORE_API_VERSION == API_VERSION == mod.BACKEND.api_version, f"{name} declares API {mod.TINYCORE_API_VERSION}"

def test_program_index_is_parsed_once_by_the_base_class():
  assert [Program(d, "k", b"").index for d in ("CUDA", "CUDA:0", "CUDA:3")] == [0, 0, 3]

def test_bare_renderer_declares_the_least():
  r = backend.Renderer()
  assert not r.has_local and not r.has_shared and r.local_max is None and r.shared_max == 0
  assert set(r.supported_dtypes()) == set(backend.MINIMAL_DTYPES) and r.vector_widths == (1,) and not r.tensor_cores

# *** validation at registration ***

def _plugin(**hooks) -> types.ModuleType:
  """A plugin module declaring device FAKE (PYTHON's parts) plus the given extra functions."""
  from tinycore.runtime import python as py
  mod = types.ModuleType("fake_mod")
  mod.TINYCORE_API_VERSION = API_VERSION
  b = Backend("FAKE", allocator=lambda d, i: py.PythonAllocator(), renderer=lambda d, i: py.PythonRenderer(),
              compiler=lambda d, i: py.PythonCompiler(), program=lambda d, i: py.PythonProgram, api_version=API_VERSION)
  mod.tinycore_devices, mod.tinycore_allocator, mod.tinycore_renderer, mod.tinycore_compiler, mod.tinycore_program = b.hookimpls()
  for k, v in hooks.items(): setattr(mod, k, v)
  return mod

def _registered(mod: types.ModuleType) -> Registry:
  r = Registry()
  r.load()
  r._add(mod, "fake", "fake-backend", "0.3")
  return r

def test_a_good_plugin_registers():
  r = _registered(_plugin())
  assert "FAKE" in r.entries and r.entries["FAKE"].error is None and r.open("FAKE").device == "FAKE"

@pytest.mark.parametrize("hooks, why", [
  ({"tinycore_renderr": hookimpl(lambda device: None)}, "hook tinycore_renderr is not a hook of the tinycore API (did you mean tinycore_renderer?)"),
  ({"tinycore_renderer": lambda device: None}, "hook tinycore_renderer is not marked with @hookimpl (pluggy would ignore it)"),
  ({"tinycore_compiler": hookimpl(lambda device, arch: None)}, "hook tinycore_compiler(device, arch) takes arch, the spec gives only (device)"),
], ids=["misspelt", "unmarked", "wrong-arguments"])
def test_a_bad_hook_makes_the_plugin_broken_by_name(hooks, why):
  r = _registered(_plugin(**hooks))
  assert "FAKE" not in r.entries
  (entry,) = [e for e in r.failed if e.name == "FAKE"]
  assert entry.error == f"plugin fake-backend 0.3 is broken: {why}"
  with pytest.raises(DeviceError) as e: r.open("FAKE")
  assert "FAKE" in str(e.value) and "fake-backend 0.3" in str(e.value) and why in str(e.value)
  assert r.open("PYTHON").device == "PYTHON", "the other devices keep working"

def test_misspelt_hook_is_listed_broken_and_others_work(fake_plugin):
  env = fake_plugin("misspelt", """
    from tinycore.backend import API_VERSION, Backend, hookimpl
    from tinycore.runtime import python as py
    TINYCORE_API_VERSION = API_VERSION
    BACKEND = Backend("MISSPELT", allocator=lambda d, i: py.PythonAllocator(), renderer=lambda d, i: py.PythonRenderer(),
                      compiler=lambda d, i: py.PythonCompiler(), program=lambda d, i: py.PythonProgram, api_version=API_VERSION)
    tinycore_devices, tinycore_allocator, _, tinycore_compiler, tinycore_program = BACKEND.hookimpls()
    @hookimpl
    def tinycore_renderr(device): return py.PythonRenderer()
  """, version="0.7")
  env["DEV"] = ""  # the default device, whatever this process was told
  r = run_python("import runpy, sys; sys.argv = ['tinycore', 'devices']; runpy.run_module('tinycore', run_name='__main__')", **env)
  line = next(x for x in r.stdout.splitlines() if x.startswith("MISSPELT"))
  assert "misspelt 0.7" in line and "broken:" in line and "tinycore_renderr" in line, r.stdout + r.stderr
  r = run_python("""
    from tinycore import Tensor, Device, DeviceError
    print((Tensor([1.0, 2.0]) * 3).tolist())
    try: Device["MISSPELT"]
    except DeviceError as e: print("ERR", e)
  """, **env)
  assert "[3.0, 6.0]" in r.stdout, r.stderr
  assert "ERR device MISSPELT (plugin misspelt 0.7) cannot be used: plugin misspelt 0.7 is broken: hook tinycore_renderr" in r.stdout

# *** the reference page is generated from these docstrings ***

def test_backend_reference_is_current_and_complete():
  import sys
  sys.path.insert(0, str(CORE.parent / "docs"))
  from gen_backend_reference import OUT, render, undocumented
  assert undocumented() == [], "every setting and public method of the contract needs a docstring"
  assert OUT.read_text() == render(), "run `python docs/gen_backend_reference.py` to regenerate docs/backend-reference.md"
