"""The pytest plugin (entry point group `pytest11`): options, fixtures, the capability of every test, xfails from a
file, reproductions, and the report. It is inert in pytest sessions that collect no conformance test.

  pytest --pyargs tinycore_conformance --device NAME [--compile-only] [--level N] [--xfails FILE] [--repro] [--report FILE]
"""
from __future__ import annotations
import fnmatch, os, pathlib
from dataclasses import dataclass, field
import pytest
from tinycore_conformance.report import Record, Report, LAYERS
from tinycore_conformance.progress import LevelProgress

PKG_DIR = pathlib.Path(__file__).resolve().parent

def pytest_addoption(parser: pytest.Parser) -> None:
  g = parser.getgroup("tinycore-conformance", "tinycore backend conformance suite")
  g.addoption("--device", dest="tc_device", default=None, help="the tinycore device to prove (default: DEV, else Device.DEFAULT)")
  g.addoption("--compile-only", dest="tc_compile_only", action="store_true",
              help="render and compile every kernel of every layer without running anything (no hardware needed)")
  g.addoption("--level", dest="tc_level", type=int, default=7, help="run the layers 1..LEVEL only (default 7: all)")
  g.addoption("--xfails", dest="tc_xfails", default=None,
              help="file of expected failures: one test id (or glob) per line, then its reason; '#' starts a comment")
  g.addoption("--repro", dest="tc_repro", action="store_true", help="print a standalone reproduction for every failing test")
  g.addoption("--report", dest="tc_report", default=None, help="write the report as FILE.md and FILE.json")
  g.addoption("--progress", dest="tc_progress", action="store_true", help="a progress bar per level on stderr (tests done, ETA)")

@dataclass
class XfailEntry:
  pattern: str
  reason: str
  line: int
  matched: set = field(default_factory=set)

def parse_xfails(path: str) -> list[XfailEntry]:
  out = []
  try: f = open(path)
  except OSError as e: raise pytest.UsageError(f"--xfails {path}: cannot read it ({e.strerror})") from None
  with f:
    for n, line in enumerate(f, 1):
      line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
      if not line: continue
      pat, _, reason = line.partition(" ")
      out.append(XfailEntry(pat.strip(), reason.strip() or "(no reason given)", n))
  return out

def _matches(nodeid: str, pat: str) -> bool:
  """An entry names a test by the end of its node id, or (if that matches nothing) as a glob over it."""
  if nodeid == pat or nodeid.endswith("/" + pat) or nodeid.endswith("::" + pat): return True
  if any(ch in pat for ch in "*?["):
    tail = nodeid.split("/")[-1]
    return fnmatch.fnmatchcase(tail, pat) or fnmatch.fnmatchcase(tail.split("::", 1)[-1], pat)
  return False

def _label(v: object) -> str:
  from tinycore.dtype import DType
  from tinycore_conformance.values import dtname
  if isinstance(v, DType): return dtname(v)
  if hasattr(v, "name") and type(v).__name__ == "Ops": return v.name  # type: ignore[attr-defined]
  return str(v)

def is_conformance_item(item: pytest.Item) -> bool:
  mod = getattr(item, "module", None)
  return mod is not None and hasattr(mod, "LAYER") and pathlib.Path(str(item.fspath)).resolve().parent == PKG_DIR

def capability(item: pytest.Item) -> tuple[int, str, str]:
  """(layer, group, dtype) of a conformance test: the module's LAYER, the `cap` marker's group (formatted with the test's
  parameters) and the `dtype` parameter (or the marker's dtype=)."""
  layer = int(item.module.LAYER)  # type: ignore[attr-defined]
  raw = getattr(getattr(item, "callspec", None), "params", {})
  # a parameter may carry its own report row: `cap_group` (used for its placeholder) and `cap_dtype`
  params = {k: str(v.cap_group) if hasattr(v, "cap_group") else _label(v) for k, v in raw.items()}
  m = item.get_closest_marker("cap")
  group = m.args[0].format(**params) if m is not None and m.args else item.originalname.removeprefix("test_")  # type: ignore[attr-defined]
  dtype = params.get("dtype", m.kwargs.get("dtype", "-") if m is not None else "-")
  for v in raw.values():
    if hasattr(v, "cap_dtype"): dtype = str(v.cap_dtype)
  return layer, group, dtype

class State:
  def __init__(self, config: pytest.Config):
    self.config = config
    self.device = config.getoption("tc_device")
    self.compile_only = bool(config.getoption("tc_compile_only"))
    self.level = int(config.getoption("tc_level"))
    self.repro = bool(config.getoption("tc_repro"))
    self.report_path = config.getoption("tc_report")
    self.xfails_path = config.getoption("tc_xfails")
    self.xfails = parse_xfails(self.xfails_path) if self.xfails_path else []
    self.collected: set[str] | None = None
    self.records: dict[str, Record] = {}
    self.report: Report | None = None
    self.progress: LevelProgress | None = None
    self._target = None

  @property
  def target(self):
    if self._target is None:
      from tinycore_conformance.target import Target
      dev = self.device
      if dev is None:
        from tinycore.device import Device
        dev = Device.DEFAULT
      self._target = Target(dev, self.compile_only)
    return self._target

KEY = pytest.StashKey[State]()

def _state(config: pytest.Config) -> State: return config.stash[KEY]

def pytest_configure(config: pytest.Config) -> None:
  config.addinivalue_line("markers", "cap(group, dtype=None): the capability (report row) a conformance test checks")
  config.stash[KEY] = State(config)

# *** fixtures ***

@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest):
  """The backend under test (tinycore_conformance.target.Target)."""
  return _state(request.config).target

@pytest.fixture(scope="session")
def batch(target):
  """Runs hand-built cases as few kernels on the target and on the PYTHON reference."""
  from tinycore_conformance.target import Batch
  return Batch(target)

@pytest.fixture
def repro():
  """What a failing test prints with --repro."""
  from tinycore_conformance.repro import Repro
  return Repro()

# *** collection: capabilities, --level, --xfails ***

def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
  st = _state(config)
  ours = [it for it in items if is_conformance_item(it)]
  if not ours: return
  st.collected = {it.nodeid for it in ours}
  for it in ours:
    for e in st.xfails:
      if _matches(it.nodeid, e.pattern):
        e.matched.add(it.nodeid)
        it.add_marker(pytest.mark.xfail(reason=f"listed in {os.path.basename(st.xfails_path)}:{e.line}: {e.reason}", strict=False))
        break
  keep, drop = [], []
  for it in items:
    (drop if is_conformance_item(it) and capability(it)[0] > st.level else keep).append(it)
  if drop:
    config.hook.pytest_deselected(items=drop)
    items[:] = keep
  if config.getoption("tc_progress"): st.progress = LevelProgress([capability(it)[0] for it in items if is_conformance_item(it)])

# *** outcomes ***

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
  outcome = yield
  rep = outcome.get_result()
  if not is_conformance_item(item): return
  layer, group, dtype = capability(item)
  props = {"layer": layer, "group": group, "dtype": dtype}
  st = _state(item.config)
  if rep.failed and st.repro and call.when == "call" and "repro" in getattr(item, "funcargs", {}):
    text = item.funcargs["repro"].render()
    if text: props["repro"] = text
  rep.user_properties = list(rep.user_properties) + [("tinycore_conformance", props)]

def _message(rep: pytest.TestReport) -> str:
  lr = rep.longrepr
  if lr is None: return ""
  if isinstance(lr, tuple): return str(lr[2])
  crash = getattr(lr, "reprcrash", None)
  if crash is not None and getattr(crash, "message", None): msg = str(crash.message)
  else: msg = str(lr).strip().splitlines()[-1] if str(lr).strip() else ""
  for prefix in ("tinycore_conformance.values.Mismatch: ", "AssertionError: "):  # the message says it all
    if msg.startswith(prefix): msg = msg[len(prefix):]
  return msg

_RANK = {"pass": 0, "not-run": 1, "not-declared": 1, "xfail": 2, "xpass": 2, "fail": 3}

def pytest_runtest_logreport(report: pytest.TestReport) -> None:
  props = dict(report.user_properties).get("tinycore_conformance")
  if props is None: return
  cfg = _CONFIG[0]
  if cfg is None: return
  st = _state(cfg)
  if st.progress is not None and report.when == "teardown": st.progress.done(props["layer"])
  if report.passed and hasattr(report, "wasxfail"): outcome, msg = "xpass", str(report.wasxfail)
  elif report.skipped and hasattr(report, "wasxfail"): outcome, msg = "xfail", f"{report.wasxfail} -- {_message(report)}"
  elif report.skipped:
    msg = _message(report).removeprefix("Skipped: ")
    outcome = "not-declared" if msg.startswith("not declared") else "not-run" if msg.startswith("not run") else "fail"
    if outcome == "fail": msg = f"skipped, but a conformance test may only skip because of a declaration: {msg}"
  elif report.failed: outcome, msg = "fail", (f"[{report.when}] " if report.when != "call" else "") + _message(report)
  else:
    if report.when != "call": return
    outcome, msg = "pass", ""
  prev = st.records.get(report.nodeid)
  if prev is not None and _RANK["xpass" if prev.xpass else prev.outcome] >= _RANK[outcome]: return
  rec = Record(report.nodeid, props["layer"], props["group"], props["dtype"], outcome, msg, props.get("repro", ""))
  if outcome == "xpass": rec.outcome, rec.xpass, rec.message = "pass", True, f"unexpectedly passes ({msg})"
  st.records[report.nodeid] = rec

_CONFIG: list = [None]

@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None: _CONFIG[0] = session.config

def build_report(st: State) -> Report:
  plugin = ""
  try:
    e = st.target.entry
    if e is not None: plugin = f"{e.plugin} {e.version}"
  except Exception: pass
  rep = Report(st.target.device, st.compile_only, st.level, plugin, "xfails: " + st.xfails_path if st.xfails_path else "")
  rep.records = list(st.records.values())
  for e in st.xfails:
    if not e.matched and st.collected is not None:
      rep.stale.append((f"{e.pattern} (line {e.line})", "no such test (it no longer exists)"))
      continue
    ran = [st.records[n] for n in e.matched if n in st.records]
    passed = [r for r in ran if r.xpass]
    if ran and len(passed) == len(ran): rep.stale.append((f"{e.pattern} (line {e.line})", "it passes now"))
    elif passed: rep.stale.append((f"{e.pattern} (line {e.line})", f"{len(passed)} of {len(ran)} matching tests pass now: " +
                                   ", ".join(r.nodeid.split('::')[-1] for r in passed[:5])))
  return rep

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
  st = _state(session.config)
  if st.progress is not None: st.progress.close()
  if not st.records: return
  st.report = build_report(st)
  if st.report.failed and session.exitstatus == 0: session.exitstatus = pytest.ExitCode.TESTS_FAILED

def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
  st = _state(config)
  if st.report is None: return
  tr = terminalreporter
  tr.section(f"tinycore conformance: {st.report.device}")
  tr.write_line(st.report.terminal())
  if st.repro:
    for r in st.report.records:
      if r.outcome == "fail" and r.repro:
        tr.section(f"reproduction: {r.nodeid}", sep="-")
        tr.write_line(r.repro)
  if st.report_path:
    files = st.report.write(st.report_path)
    tr.write_line(f"report written to {', '.join(files)}")

__all__ = ["LAYERS", "is_conformance_item", "capability"]
