"""Devices and plugin discovery: selection, clear errors, and broken or missing plugins."""
import os, pathlib, subprocess, sys, textwrap
import numpy as np
import pytest
import tinycore
from tinycore import Tensor, Device, DeviceError
from tinycore.backend import API_VERSION, Backend, api_compatible, device_index, lazy, open_once
from tinycore.plugin import registry
from tinycore_conformance.fixtures import write_fake_plugin as fake_distribution

ROOT = pathlib.Path(tinycore.__file__).parent.parent

def run_py(code: str, env: dict | None = None, python: str = sys.executable) -> subprocess.CompletedProcess:
  e = {k: v for k, v in os.environ.items() if k not in ("DEV", "DEBUG", "CLANG", "PYTHON")}
  e.update(env or {})
  return subprocess.run([python, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e, timeout=120)

def test_devices_listed():
  names = registry.device_names()
  assert "CLANG" in names and "PYTHON" in names
  out = subprocess.run([sys.executable, "-m", "tinycore", "devices"], capture_output=True, text=True, timeout=120).stdout
  assert "CLANG" in out and "PYTHON" in out and "tinygrad-clang" in out and "default device:" in out

def test_unknown_device_is_a_clear_error():
  with pytest.raises(DeviceError, match=r"unknown device 'NOPE'.*installed devices are"):
    Device["NOPE"]
  with pytest.raises(DeviceError, match="unknown device"):
    Tensor([1, 2], device="NOPE")

def test_dev_env_and_legacy_flag_pick_the_device():
  for env in ({"DEV": "PYTHON"}, {"PYTHON": "1"}, {"DEV": "python:0"}):
    r = run_py("from tinycore import Device; print(Device.DEFAULT)", env)
    assert r.stdout.strip() == "PYTHON", (env, r.stderr)
  assert run_py("from tinycore import Device; print(Device.DEFAULT)").stdout.strip() == "CLANG", "CLANG outranks PYTHON"

def test_named_device_that_cannot_open_does_not_fall_back():
  r = run_py("from tinycore import Tensor; Tensor([1.0]).numpy()", {"DEV": "NOSUCH"})
  assert r.returncode != 0 and "unknown device 'NOSUCH'" in r.stderr

def test_broken_plugin_is_listed_and_does_not_break_others(tmp_path):
  fake_distribution(tmp_path, "brokenbackend", 'raise ImportError("libfoo.so: cannot open shared object file")\n')
  env = {"PYTHONPATH": str(tmp_path)}
  r = subprocess.run([sys.executable, "-m", "tinycore", "devices"], capture_output=True, text=True, env={**os.environ, **env}, timeout=120)
  assert r.returncode == 0, r.stderr
  line = next(x for x in r.stdout.splitlines() if x.startswith("BROKENBACKEND"))
  assert "failed to import" in line and "libfoo.so" in line
  r = run_py("""
    import numpy as np
    from tinycore import Tensor, Device, DeviceError
    print((Tensor([1.0, 2.0]) * 3).numpy().tolist(), Device.DEFAULT)
    try: Device["BROKENBACKEND"]
    except DeviceError as e: print("ERR", e)
  """, env)
  assert "[3.0, 6.0] CLANG" in r.stdout, r.stderr
  err = r.stdout.split("ERR ", 1)[1]
  assert "BROKENBACKEND" in err and "brokenbackend 0.1" in err and "libfoo.so" in err

def test_incompatible_api_version_is_refused(tmp_path):
  fake_distribution(tmp_path, "futurebackend", """
    TINYCORE_API_VERSION = "2.0.0"
    def tinycore_devices(): raise AssertionError("must not be called")
  """)
  r = run_py("""
    from tinycore import Device, DeviceError
    try: Device["FUTUREBACKEND"]
    except DeviceError as e: print("ERR", e)
  """, {"PYTHONPATH": str(tmp_path)})
  assert "API 2.0.0" in r.stdout and f"provides API {API_VERSION}" in r.stdout, r.stdout + r.stderr

def test_api_semver():
  assert api_compatible("1.0.0") and api_compatible("1.0.3") and api_compatible("1.1.0")
  assert not api_compatible("2.0.0") and not api_compatible("1.9.0") and not api_compatible("garbage")

def test_without_the_clang_plugin_python_is_default(tmp_path):
  """A real environment with the core but no tinygrad-clang distribution: import works, PYTHON is the default."""
  venv = tmp_path / "venv"
  subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
  site = next(venv.glob("lib/python*/site-packages"))
  import numpy, pluggy
  # only the core and its dependencies: numpy and pluggy are linked in, the core is put on the path
  for mod in (numpy, pluggy):
    src = pathlib.Path(mod.__file__).parent
    (site / src.name).symlink_to(src)
  for extra in pathlib.Path(numpy.__file__).parent.parent.glob("numpy.libs"): (site / extra.name).symlink_to(extra)
  (site / "tinycore_src.pth").write_text(str(ROOT) + "\n")
  r = run_py("""
    import tinycore
    from tinycore import Tensor, Device
    from tinycore.plugin import registry
    print(Device.DEFAULT, sorted(registry.device_names()), (Tensor([1.0, 2.0]) + 1).numpy().tolist())
  """, python=str(venv / "bin" / "python"))
  assert r.returncode == 0, r.stderr
  assert r.stdout.split()[0] == "PYTHON" and "CLANG" not in r.stdout and "[2.0, 3.0]" in r.stdout

def test_binary_op_shape_mismatch_names_shapes():
  with pytest.raises(ValueError, match=r"\(2, 3\) and \(4,\)"): Tensor.ones(2, 3) + Tensor.ones(4)

def test_matmul_shape_mismatch_names_shapes():
  with pytest.raises(ValueError, match=r"\(2, 3\) @ \(4, 5\)"): Tensor.ones(2, 3) @ Tensor.ones(4, 5)

def test_compile_error_carries_compiler_output():
  from tinycore import CompileError
  comp = Device["CLANG"].compiler
  with pytest.raises(CompileError, match="error") as e: comp.compile("void f(void) { this is not C; }")
  assert "this" in str(e.value) or "expected" in str(e.value)

def test_buffer_copy_between_devices():
  a = Tensor(np.arange(6, dtype=np.float32), device="CLANG")
  b = a.to("PYTHON") * 2
  assert b.device == "PYTHON"
  np.testing.assert_array_equal(b.to("CLANG").numpy(), np.arange(6) * 2)

# *** the Backend helpers a plugin declares its device with ***

def test_device_index():
  assert device_index("MYDEV", "MYDEV") == 0 and device_index("mydev:3", "MYDEV") == 3 and device_index("OTHER:1", "MYDEV") is None
  with pytest.raises(DeviceError, match="bad device 'MYDEV:x'"): device_index("MYDEV:x", "MYDEV")

def test_backend_hooks_answer_only_for_their_device():
  made = []
  def part(kind):
    def factory(device, idx):
      made.append((kind, device, idx))
      return f"{kind}-{idx}"
    return factory
  b = Backend("MYDEV", allocator=part("alloc"), renderer=part("renderer"), compiler=part("compiler"), program=part("program"),
              priority=7, check=lambda: "no hardware", description="test")
  devices, alloc, renderer, compiler, program = b.hookimpls()
  spec, = devices()
  assert (spec.name, spec.priority, spec.check(), spec.api_version) == ("MYDEV", 7, "no hardware", API_VERSION)
  assert [f.__name__ for f in (alloc, renderer, compiler, program)] == [f"tinycore_{p}" for p in ("allocator", "renderer", "compiler", "program")]
  assert alloc("OTHER") is None and renderer("OTHER:2") is None and made == []
  assert (alloc("MYDEV"), program("MYDEV:2")) == ("alloc-0", "program-2") and made == [("alloc", "MYDEV", 0), ("program", "MYDEV:2", 2)]

def test_lazy_imports_on_first_call():
  f = lazy("textwrap:dedent")
  assert f("  a\n  b") == "a\nb" and "textwrap:dedent" in f.__name__
  with pytest.raises(ModuleNotFoundError): lazy("no_such_module_here:f")()

def test_open_once():
  opened = []
  get = open_once(lambda idx: None if idx == 0 else f"no GPU number {idx}", lambda dev, idx: opened.append(idx) or object())
  assert get("MYDEV", 0) is get("MYDEV", 0) and opened == [0]
  with pytest.raises(DeviceError, match="device MYDEV:1 cannot be used: no GPU number 1"): get("MYDEV:1", 1)

def test_cpu_is_tinygrads_name_for_clang():
  # DEV=CPU (and CPU=1) give a device named "CPU", backed by the CLANG plugin, as tinygrad code expects; CLANG stays
  code = """
    from tinycore import Tensor, Device
    t = Tensor([1.0, 2.0]) * 3 + 1
    print(Device.DEFAULT, t.device, Tensor([1], device="cpu").device, t.tolist(), Device["CPU"].plugin)"""
  for env in ({"DEV": "CPU"}, {"DEV": "cpu"}, {"CPU": "1"}):
    r = run_py(code, env)
    assert r.stdout.split() == ["CPU", "CPU", "CPU", "[4.0,", "7.0]", "tinygrad-clang"], (env, r.stderr)
  t = Tensor([1.0, 2.0], device="CPU")
  assert t.device == "CPU" and Device.canonicalize("cpu:0") == "CPU" and Device.canonicalize("cpu:1") == "CPU:1"
  assert (t.to("CLANG") + 1).tolist() == [2.0, 3.0] and Tensor([5], device="CLANG").to("CPU").device == "CPU"
  assert Device.can_open("CPU") and registry.resolve("CPU") == "CLANG" and "CPU" not in registry.device_names()

def test_devices_lists_the_aliases(capsys):
  """`python -m tinycore devices` names every alias DEV accepts (DEV=CPU, tinygrad's name, is CLANG) beside the backends."""
  from tinycore.__main__ import main
  from tinycore.plugin import DEVICE_ALIASES
  assert main(["devices"]) == 0
  lines = capsys.readouterr().out.splitlines()
  for alias, target in DEVICE_ALIASES.items():
    assert any(ln.split()[:1] == [alias] and f"alias of {target}" in ln for ln in lines), lines
