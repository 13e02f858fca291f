"""The conformance report: one row per capability (layer, group, dtype) with pass / fail / not-declared / not-run /
xfail counts and the first failure, a table per layer, and the verdict "conformant up to level N" (in compile-only mode
"no failure up to level N", naming the layers checked and those not run)."""
from __future__ import annotations
import datetime, json
from dataclasses import dataclass, field, asdict

LAYERS = {1: "contract", 2: "allocator", 3: "compiler", 4: "renderer", 5: "program", 6: "tensor", 7: "model"}
OUTCOMES = ("pass", "fail", "not-declared", "not-run", "xfail")

@dataclass
class Record:
  """The outcome of one test."""
  nodeid: str
  layer: int
  group: str
  dtype: str
  outcome: str          # one of OUTCOMES
  message: str = ""
  repro: str = ""
  xpass: bool = False   # listed in --xfails, but passed

@dataclass
class Row:
  layer: int
  group: str
  dtype: str
  counts: dict = field(default_factory=lambda: {o: 0 for o in OUTCOMES})
  first_failure: str = ""
  first_failure_test: str = ""
  @property
  def status(self) -> str:
    c = self.counts
    if c["fail"]: return "FAIL"
    if c["pass"] and c["xfail"]: return "pass+xfail"
    if c["pass"]: return "pass"
    if c["xfail"]: return "xfail"
    if c["not-declared"]: return "not declared"
    if c["not-run"]: return "not run"
    return "-"

def _short(s: str, n: int = 160) -> str:
  s = " ".join(s.split())
  return s if len(s) <= n else s[:n - 3] + "..."

def _md(s: str) -> str: return s.replace("|", "\\|")

class Report:
  def __init__(self, device: str, compile_only: bool, max_level: int, plugin: str = "", selection: str = ""):
    self.device, self.compile_only, self.max_level, self.plugin, self.selection = device, compile_only, max_level, plugin, selection
    self.records: list[Record] = []
    self.stale: list[tuple[str, str]] = []   # (xfails entry, why it is stale)
    self.when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

  def rows(self) -> list[Row]:
    rows: dict[tuple, Row] = {}
    for r in self.records:
      row = rows.setdefault((r.layer, r.group, r.dtype), Row(r.layer, r.group, r.dtype))
      row.counts[r.outcome] += 1
      if r.outcome == "fail" and not row.first_failure: row.first_failure, row.first_failure_test = r.message, r.nodeid
    return sorted(rows.values(), key=lambda x: x.layer)  # stable: groups keep the order the tests ran in

  def layer_counts(self) -> dict[int, dict[str, int]]:
    out = {lv: {o: 0 for o in OUTCOMES} for lv in sorted({r.layer for r in self.records})}
    for r in self.records: out[r.layer][r.outcome] += 1
    return out

  @property
  def failed(self) -> int: return sum(1 for r in self.records if r.outcome == "fail")

  def level(self) -> int:
    """The highest level N such that levels 1..N all ran and none of their tests failed."""
    lc, n = self.layer_counts(), 0
    for lv in range(1, self.max_level + 1):
      c = lc.get(lv)
      if c is None or c["fail"]: break
      n = lv
    return n

  def unrun_layers(self, upto: int) -> list[int]:
    """The levels 1..upto in which no test ran (every one 'not run' or 'not declared', as the runtime layers in
    compile-only mode): a verdict must not claim them."""
    lc = self.layer_counts()
    return [lv for lv in range(1, upto + 1) if not any(lc.get(lv, {}).get(o, 0) for o in ("pass", "fail", "xfail"))]

  def verdict(self) -> str:
    n, lc = self.level(), self.layer_counts()
    unrun = self.unrun_layers(n)
    names = lambda lvs: ", ".join(f"{LAYERS.get(lv, '?')} ({lv})" for lv in lvs)  # noqa: E731
    if n == 0 and 1 not in lc: head = f"{self.device}: no verdict: level 1 ({LAYERS[1]}) did not run (a test selection?)"
    elif n == 0: head = f"{self.device}: not conformant: level 1 ({LAYERS[1]}) fails"
    elif self.compile_only:
      ran = [lv for lv in range(1, n + 1) if lv not in unrun]
      head = (f"{self.device}: compile-only: no failure up to level {n}; layers checked (kernels rendered and compiled, nothing run): "
              f"{names(ran)}" + (f"; not run: {names(unrun)} (they need the device: run without --compile-only)" if unrun else ""))
    else:
      head = f"{self.device}: conformant up to level {n}" + (f" (no test ran in {names(unrun)})" if unrun else "")
    xf = sum(1 for r in self.records if r.outcome == "xfail" and r.layer <= n)
    if xf: head += f", with {xf} expected failure{'s' if xf != 1 else ''} (xfail)"
    if n and n < self.max_level:
      nxt = n + 1
      if nxt in lc:
        first = next((r for r in self.records if r.layer == nxt and r.outcome == "fail"), None)
        head += f"; level {nxt} ({LAYERS.get(nxt, '?')}) fails" + (f": {_short(first.message, 240)}" if first else "")
      else: head += f"; level {nxt} did not run"
    elif n and self.max_level < 7: head += f" (levels above {self.max_level} not run: --level {self.max_level})"
    return head

  # *** output ***
  def layer_table(self) -> str:
    lc = self.layer_counts()
    lines = ["| level | layer | pass | fail | not declared | not run | xfail | status |", "|---|---|---|---|---|---|---|---|"]
    for lv, c in lc.items():
      st = "FAIL" if c["fail"] else "pass" if c["pass"] or c["xfail"] else "not run" if c["not-run"] else "not declared"
      lines.append(f"| {lv} | {LAYERS.get(lv, '?')} | {c['pass']} | {c['fail']} | {c['not-declared']} | {c['not-run']} | {c['xfail']} | {st} |")
    return "\n".join(lines)

  def capability_table(self, only_interesting: bool = False) -> str:
    lines = ["| level | group | dtype | pass | fail | not declared | not run | xfail | status | first failure |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in self.rows():
      c = row.counts
      if only_interesting and row.status == "pass": continue
      lines.append(f"| {row.layer} | {_md(row.group)} | {row.dtype} | {c['pass']} | {c['fail']} | {c['not-declared']} | {c['not-run']} | "
                   f"{c['xfail']} | {row.status} | {_md(_short(row.first_failure))} |")
    return "\n".join(lines)

  def header(self) -> str:
    total = {o: sum(1 for r in self.records if r.outcome == o) for o in OUTCOMES}
    return (f"device: {self.device}" + (f" (plugin {self.plugin})" if self.plugin else "") +
            f"; mode: {'compile-only' if self.compile_only else 'run'}; levels 1-{self.max_level}" +
            (f"; {self.selection}" if self.selection else "") +
            f"; {self.when}\ntests: " + ", ".join(f"{v} {k}" for k, v in total.items()))

  def markdown(self) -> str:
    out = [f"# tinycore conformance: {self.device}", "", f"**{self.verdict()}**", "", self.header().replace("\n", "  \n"), "",
           "## Layers", "", self.layer_table(), "", "## Capabilities", "", self.capability_table(), ""]
    fails = [r for r in self.records if r.outcome == "fail"]
    if fails:
      out += ["## Failures", ""] + [f"- `{r.nodeid}`: {_md(_short(r.message, 400))}" for r in fails] + [""]
    xf = [r for r in self.records if r.outcome == "xfail"]
    if xf: out += ["## Expected failures (xfail)", ""] + [f"- `{r.nodeid}`: {_md(_short(r.message, 300))}" for r in xf] + [""]
    if self.stale: out += ["## Stale xfails", ""] + [f"- `{e}`: {why}" for e, why in self.stale] + [""]
    return "\n".join(out)

  def terminal(self) -> str:
    out = [self.header(), "", self.layer_table(), "", self.capability_table()]
    if self.stale: out += ["", "stale xfails (remove them from the file):"] + [f"  {e}: {why}" for e, why in self.stale]
    out += ["", self.verdict()]
    return "\n".join(out)

  def to_json(self) -> dict:
    return {"device": self.device, "plugin": self.plugin, "compile_only": self.compile_only, "max_level": self.max_level,
            "when": self.when, "level": self.level(), "verdict": self.verdict(), "failed": self.failed,
            "layers": {str(k): {"name": LAYERS.get(k, "?"), **v} for k, v in self.layer_counts().items()},
            "capabilities": [{"layer": r.layer, "group": r.group, "dtype": r.dtype, **r.counts, "status": r.status,
                              "first_failure": r.first_failure, "first_failure_test": r.first_failure_test} for r in self.rows()],
            "tests": [asdict(r) for r in self.records], "stale_xfails": [{"entry": e, "why": w} for e, w in self.stale]}

  def write(self, path: str) -> list[str]:
    """Write the markdown and the JSON report: PATH.md and PATH.json (a .md or .json suffix on PATH is replaced)."""
    stem = path[:-3] if path.endswith(".md") else path[:-5] if path.endswith(".json") else path
    with open(stem + ".md", "w") as f: f.write(self.markdown())
    with open(stem + ".json", "w") as f: json.dump(self.to_json(), f, indent=1)
    return [stem + ".md", stem + ".json"]
