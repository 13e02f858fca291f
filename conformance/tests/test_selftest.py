"""Self-tests of the conformance suite: a deliberately wrong backend is caught and named, reproductions run on their own,
xfails files work (and report stale entries), the template plugin passes level 1 and fails level 2 with a message
saying what to implement, compile-only mode runs, the report's verdict logic, and the pytest plugin stays out of the way
of unrelated test sessions.

The fake backends are registered without installing anything: a folder with a module and a `*.dist-info` holding an
entry point of group tinycore.backends is put on PYTHONPATH, which is exactly how an installed plugin is found."""
from __future__ import annotations
import json, os, pathlib, re, subprocess, sys
import pytest
from tinycore_conformance.report import Record, Report

HERE = pathlib.Path(__file__).resolve().parent
FAKE = HERE / "fake_plugins"
TEMPLATE = HERE.parents[1] / "examples" / "plugin-template"

def run_suite(args: list[str], tmp_path: pathlib.Path, extra_path: list[pathlib.Path] = (), timeout: int = 600) -> tuple[int, str, dict]:
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join([str(p) for p in extra_path] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
  env["TINYCORE_CACHE_DIR"] = str(tmp_path / "cache")
  report = tmp_path / "report"
  proc = subprocess.run([sys.executable, "-m", "tinycore_conformance", *args, "--report", str(report)], capture_output=True, text=True,
                        env=env, cwd=tmp_path, timeout=timeout)
  out = proc.stdout + proc.stderr
  data = json.loads((tmp_path / "report.json").read_text()) if (tmp_path / "report.json").exists() else {}
  return proc.returncode, out, data

def row(data: dict, layer: int, group: str, dtype: str = "-") -> dict:
  rows = [r for r in data["capabilities"] if r["layer"] == layer and r["group"] == group and r["dtype"] == dtype]
  assert rows, f"no report row ({layer}, {group!r}, {dtype!r})"
  return rows[0]

def test_wrong_renderer_is_caught(tmp_path):
  """WRONGADD renders int8 ADD as a subtraction: levels 1-3 pass, level 4 fails, and the report names ADD and int8."""
  rc, out, data = run_suite(["WRONGADD", "--level", "4"], tmp_path, [FAKE])
  assert rc != 0, f"a failing backend must give a non-zero exit code\n{out[-3000:]}"
  bad = row(data, 4, "ADD", "int8")
  assert bad["status"] == "FAIL" and bad["fail"] == 1, bad
  assert "ADD int8" in bad["first_failure"] and "differ" in bad["first_failure"], bad["first_failure"]
  assert row(data, 4, "ADD", "int32")["status"] == "pass"
  assert row(data, 4, "MUL", "int8")["status"] == "pass"
  fails = {(r["group"], r["dtype"]) for r in data["capabilities"] if r["status"] == "FAIL"}
  # every failure is the wrong ADD: the op itself, and the fused expressions and accumulators that add int8 values
  assert ("ADD", "int8") in fails and all(d == "int8" and ("ADD" in g or "+" in g or g == "accumulate") for g, d in fails), fails
  assert data["level"] == 3 and data["verdict"].startswith("WRONGADD: conformant up to level 3"), data["verdict"]
  assert "level 4 (renderer) fails: ADD int8" in data["verdict"], data["verdict"]
  assert "ADD int8" in data["verdict"]
  assert "| 4 | ADD | int8 |" in (tmp_path / "report.md").read_text()

def test_repro_is_standalone(tmp_path):
  """--repro prints a program that, run on its own, shows the wrong ADD."""
  rc, out, _ = run_suite(["WRONGADD", "--level", "4", "--repro", "-k", "test_alu and ADD and int8"], tmp_path, [FAKE])
  assert rc != 0
  m = re.search(r"-+ reproduction: \S+test_alu\[ADD-int8\] -+\n(.*?)\n# --- the kernel source", out, re.S)
  assert m, f"no reproduction printed\n{out[-3000:]}"
  script = tmp_path / "repro.py"
  script.write_text(m.group(1))
  env = dict(os.environ, PYTHONPATH=str(FAKE))
  proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "elements differ" in proc.stdout and "buffer 0" in proc.stdout, proc.stdout[-2000:]

def test_xfails_file(tmp_path):
  """A listed failure becomes an expected failure (exit code 0); listed tests that pass or no longer exist are stale."""
  xf = tmp_path / "xfails.txt"
  xf.write_text("# known problems of WRONGADD\n"
                "test_alu[ADD-int8]  int8 ADD is rendered as SUB\n"
                "test_4_renderer.py::test_alu[ADD-int32]  this one passes\n"
                "test_alu[NOSUCHOP-int8]  a test that does not exist\n")
  rc, out, data = run_suite(["WRONGADD", "--level", "4", "--xfails", str(xf), "-k", "test_alu and ADD"], tmp_path, [FAKE])
  assert rc == 0, out[-3000:]
  assert row(data, 4, "ADD", "int8")["status"] == "xfail"
  stale = {s["entry"].split()[0]: s["why"] for s in data["stale_xfails"]}
  assert "passes now" in stale.get("test_4_renderer.py::test_alu[ADD-int32]", ""), stale
  assert "no longer exists" in stale.get("test_alu[NOSUCHOP-int8]", ""), stale
  assert "test_alu[ADD-int8]" not in stale
  assert "stale xfails" in out

def _template_env(tmp_path: pathlib.Path) -> pathlib.Path:
  """The template plugin, found through an entry point exactly as if it were installed."""
  d = tmp_path / "site"
  di = d / "tinycore_myaccel-0.1.0.dist-info"
  di.mkdir(parents=True)
  (di / "METADATA").write_text("Metadata-Version: 2.1\nName: tinycore-myaccel\nVersion: 0.1.0\n")
  ep = re.search(r'\[project\.entry-points\."tinycore\.backends"\]\n(.*?)\n', (TEMPLATE / "pyproject.toml").read_text(), re.S)
  assert ep, "the template's pyproject.toml declares no tinycore.backends entry point"
  (di / "entry_points.txt").write_text("[tinycore.backends]\n" + ep.group(1).replace('"', "") + "\n")
  return d

def test_template_plugin(tmp_path):
  """The template as it stands: level 1 passes; level 2 fails, telling the vendor what to implement."""
  rc, out, data = run_suite(["MYACCEL", "--level", "2"], tmp_path, [TEMPLATE, _template_env(tmp_path)])
  assert rc != 0
  assert data["layers"]["1"]["fail"] == 0 and data["layers"]["1"]["pass"] > 0, data["layers"]
  assert data["level"] == 1, data["verdict"]
  first = row(data, 2, "round trip (allocator)", "float32")["first_failure"]
  assert "TODO" in first and "implement" in first.lower() and "docs/writing-a-backend.md" in first, first

def test_compile_only(tmp_path):
  """--compile-only runs without running anything: runtime checks are 'not run', and nothing fails on PYTHON."""
  rc, out, data = run_suite(["PYTHON", "--compile-only", "--level", "4", "-k", "not test_cast and not test_bitcast"], tmp_path)
  assert rc == 0, out[-3000:]
  assert data["compile_only"] and data["level"] == 4, data["verdict"]
  assert data["layers"]["2"]["not-run"] > 0 and data["layers"]["2"]["pass"] == 0
  assert data["layers"]["4"]["pass"] > 100
  assert "compile-only" in data["verdict"]

def test_plugin_is_inert(tmp_path):
  """In a pytest session without conformance tests the plugin adds nothing (the options exist, no report is printed)."""
  (tmp_path / "test_other.py").write_text("def test_one():\n  assert 1 + 1 == 2\n")
  proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_other.py")],
                        capture_output=True, text=True, cwd=tmp_path, timeout=120)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  assert "tinycore conformance" not in proc.stdout

@pytest.mark.parametrize("outcomes,level", [({1: ["pass"], 2: ["pass", "not-declared"], 3: ["fail"]}, 2),
                                            ({1: ["fail"], 2: ["pass"]}, 0),
                                            ({1: ["pass"], 2: ["xfail", "pass"], 3: ["not-run"]}, 3),
                                            ({1: ["pass"], 3: ["pass"]}, 1)])
def test_verdict(outcomes, level):
  rep = Report("X", False, 3)
  rep.records = [Record(f"t{lv}{i}", lv, "g", "-", o, "boom" if o == "fail" else "") for lv, os_ in outcomes.items() for i, o in enumerate(os_)]
  assert rep.level() == level
  v = rep.verdict()
  assert (f"conformant up to level {level}" in v) if level else ("not conformant" in v)

# *** the command line on bad input: one clear line, exit code 2, before pytest starts ***

def _nohw_plugin(tmp_path: pathlib.Path) -> pathlib.Path:
  """A backend whose availability check says its hardware is missing (as CUDA without a GPU)."""
  d = tmp_path / "nohw"
  (d / "tinycore_nohw-0.0.1.dist-info").mkdir(parents=True)
  (d / "tinycore_nohw-0.0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: tinycore-nohw\nVersion: 0.0.1\n")
  (d / "tinycore_nohw-0.0.1.dist-info" / "entry_points.txt").write_text("[tinycore.backends]\nnohw = tinycore_nohw\n")
  (d / "tinycore_nohw.py").write_text(
    "from tinycore.backend import DeviceSpec, hookimpl\nfrom tinycore.runtime import python as py\nTINYCORE_API_VERSION = '1.3.0'\n"
    "def _mine(device): return device.split(':')[0] == 'NOHW'\n"
    "@hookimpl\ndef tinycore_devices(): return [DeviceSpec('NOHW', priority=-100, check=lambda: 'no NOHW card in this machine')]\n"
    "@hookimpl\ndef tinycore_renderer(device): return py.PythonRenderer() if _mine(device) else None\n"
    "@hookimpl\ndef tinycore_compiler(device): return py.PythonCompiler() if _mine(device) else None\n")
  return d

@pytest.mark.parametrize("args, says", [(["NOSUCH"], "unknown device 'NOSUCH': installed devices are"),
                                        (["NOHW"], "device unavailable here: device NOHW"),
                                        (["PYTHON", "--xfails", "missing.txt"], "--xfails missing.txt: no such file")])
def test_cli_bad_input_is_one_line(tmp_path, args, says):
  """Once 455 lines of tracebacks (an unknown device), 2454 (CUDA without a GPU), or a pytest INTERNALERROR."""
  rc, out, _ = run_suite(args, tmp_path, [_nohw_plugin(tmp_path)], timeout=120)
  assert rc == 2 and says in out and len(out.strip().splitlines()) == 1, out[-3000:]
  if args[0] == "NOHW": assert "no NOHW card in this machine" in out and "--compile-only" in out

def test_broken_hook_is_reported_by_level_1(tmp_path):
  """A plugin with a misspelt hook is not silently half-registered: level 1 fails naming the plugin, version and hook."""
  from tinycore_conformance.fixtures import write_fake_plugin
  d = tmp_path / "misspelt"
  d.mkdir()
  write_fake_plugin(d, "tinycore_misspelt", """
    from tinycore.backend import API_VERSION, DeviceSpec, hookimpl
    TINYCORE_API_VERSION = API_VERSION
    @hookimpl
    def tinycore_devices(): return [DeviceSpec("MISSPELT", priority=-100)]
    @hookimpl
    def tinycore_renderr(device): return None
  """, version="0.2")
  rc, out, data = run_suite(["MISSPELT", "--level", "1"], tmp_path, [d], timeout=120)
  assert rc == 1, out[-3000:]
  r = row(data, 1, "plugin loads")
  assert r["status"] == "FAIL" and "tinycore_misspelt 0.2 is broken: hook tinycore_renderr" in r["first_failure"], r

@pytest.mark.parametrize("compile_only", [True, False])
def test_verdict_names_the_layers_that_ran(compile_only):
  """A compile-only run does not run the allocator and program layers: the verdict says so, and claims no conformance."""
  rep = Report("X", compile_only, 5)
  outcomes = {1: "pass", 2: "not-run", 3: "pass", 4: "pass", 5: "not-run"}
  rep.records = [Record(f"t{lv}", lv, "g", "-", o) for lv, o in outcomes.items()]
  v = rep.verdict()
  if compile_only:
    assert "conformant up to" not in v and "compile-only: no failure up to level 5" in v, v
    assert "contract (1), compiler (3), renderer (4)" in v and "not run: allocator (2), program (5)" in v, v
  else: assert "conformant up to level 5 (no test ran in allocator (2), program (5))" in v, v
