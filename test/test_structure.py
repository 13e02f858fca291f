"""The shape of the core's source: no import circle in tinycore/ and no file in it over 800 lines.

Every import counts, at module level or inside a function, and so does a call that stands in for one
(`importlib.import_module("tinycore.x")`, `__import__`, `lazy("tinycore.x:f")`); only imports under `if TYPE_CHECKING:`
are left out, as they never run. An import of `tinycore.a.b` depends on the file that defines it (tinycore/a/b.py or
tinycore/a/b/__init__.py), not on its parent packages' __init__ files. A circle is a set of files that each reach the
others through such imports."""
from __future__ import annotations
import ast, functools, pathlib
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = "tinycore"
MAX_LINES = 800
STUBS = ("import_module", "__import__", "lazy")  # calls whose first argument names a module that gets imported

# circles that another branch removes: strict xfails, so the integrator deletes the entry when it merges
KNOWN_CIRCLES = {
  ("tinycore/device.py", "tinycore/plugin.py", "tinycore/runtime/python.py"): "branch contract: the contract moves to tinycore/backend.py",
}

def _file_of(module: str) -> pathlib.Path | None:
  """The file that defines a dotted module name, if it is one of ours."""
  p = ROOT.joinpath(*module.split("."))
  return next((c for c in (p.with_suffix(".py"), p / "__init__.py") if c.is_file()), None)

def _type_checking_nodes(tree: ast.AST) -> set[int]:
  blocks = [n for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)]
  return {id(m) for b in blocks for stmt in b.body for m in ast.walk(stmt)}

def _imported(f: pathlib.Path, node: ast.AST) -> list[tuple[str, str]]:
  """(module, name) pairs one node imports: the name is what the importing file takes from the module."""
  if isinstance(node, ast.Import): return [(a.name, a.name) for a in node.names]
  if isinstance(node, ast.ImportFrom):
    base = node.module or ""
    if node.level:  # relative: resolved against the package the file is in
      pkg = list(f.relative_to(ROOT).with_suffix("").parts[:-1])
      base = ".".join(pkg[:len(pkg) - node.level + 1] + ([base] if base else []))
    # `from pkg import mod` imports the submodule where there is one, else a name defined in pkg
    return [(f"{base}.{a.name}" if _file_of(f"{base}.{a.name}") else base, a.name) for a in node.names]
  if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in STUBS and node.args and \
     isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
    return [(node.args[0].value.split(":")[0], node.args[0].value)]
  return []

@functools.cache
def import_graph() -> dict[str, dict[str, set[str]]]:
  """{file: {file it imports: the names it takes}} for every file of the package (paths relative to the repo)."""
  graph: dict[str, dict[str, set[str]]] = {}
  for f in sorted((ROOT / PKG).rglob("*.py")):
    tree, out = ast.parse(f.read_text()), graph.setdefault(str(f.relative_to(ROOT)), {})
    skip = _type_checking_nodes(tree)
    for node in ast.walk(tree):
      if id(node) in skip: continue
      for module, name in _imported(f, node):
        if module.split(".")[0] == PKG and (t := _file_of(module)) is not None and t != f:
          out.setdefault(str(t.relative_to(ROOT)), set()).add(name)
  return graph

@functools.cache
def circles() -> list[tuple[str, ...]]:
  """The sets of files that reach each other through imports (strongly connected parts of the graph), sorted."""
  graph = import_graph()
  def reach(f: str) -> set[str]:
    seen, todo = set(), [f]
    while todo:
      for t in graph[todo.pop()]:
        if t not in seen: seen.add(t); todo.append(t)  # noqa: E702
    return seen
  reaches = {f: reach(f) for f in graph}
  return sorted({tuple(sorted({f} | {g for g in reaches[f] if f in reaches[g]})) for f in graph if f in reaches[f]})

def describe(circle: tuple[str, ...]) -> str:
  edges = [f"  {a} -> {b}: {', '.join(sorted(names))}" for a in circle for b, names in import_graph()[a].items() if b in circle]
  return f"circle of {len(circle)} files:\n" + "\n".join(edges)

def line_counts() -> dict[str, int]: return {f: len((ROOT / f).read_text().splitlines()) for f in import_graph()}

def test_no_import_circle():
  new = [c for c in circles() if c not in KNOWN_CIRCLES]
  assert not new, "import circles in tinycore/ (an import inside a function counts too):\n" + "\n".join(describe(c) for c in new)

@pytest.mark.parametrize("circle", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=r), id="+".join(pathlib.Path(f).stem for f in c))
                                    for c, r in KNOWN_CIRCLES.items()])
def test_known_circle_is_gone(circle):
  assert circle not in circles(), describe(circle)

def test_no_file_over_limit():
  big = {f: n for f, n in line_counts().items() if n > MAX_LINES}
  assert not big, "\n".join(f"{f}: {n} lines (limit {MAX_LINES})" for f, n in big.items())

def test_the_check_sees_imports_inside_functions():
  # the walk itself: a late import inside a function, an importlib call and a TYPE_CHECKING import, on a small tree
  src = "import importlib\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING: from tinycore.c import C\n" \
        "def f():\n  from tinycore.b import g\n  return importlib.import_module('tinycore.uop.uop')\n"
  f = ROOT / PKG / "helpers.py"
  tree = ast.parse(src)
  skip = _type_checking_nodes(tree)
  found = [m for n in ast.walk(tree) if id(n) not in skip for m, _ in _imported(f, n)]
  assert "tinycore.b" in found and "tinycore.uop.uop" in found and "tinycore.c" not in found
