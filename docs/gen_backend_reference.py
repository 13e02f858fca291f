"""Writes docs/backend-reference.md, every name and setting of the backend contract, from the code's own docstrings:
`python docs/gen_backend_reference.py`. The sources are tinycore/backend.py (the contract) and the renderer base
classes (Renderer there, CStyleLanguage in tinycore/renderer/cstyle.py). A setting's documentation is the string
literal right below its assignment (an attribute docstring). test/test_backend.py fails when the page is out of date or
a setting or public method has no docstring."""
from __future__ import annotations
import ast, inspect, pathlib, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "backend-reference.md"
# (module file, classes in the order a vendor meets them); Allocator's underscore methods are what a backend implements
SOURCES = [("tinycore/backend.py", ["Backend", "DeviceSpec", "BackendSpec", "Allocator", "LRUAllocator", "BufferSpec", "Compiler",
                                    "Program", "Renderer", "TensorCore", "Compiled", "CompileError", "DeviceError"]),
           ("tinycore/renderer/cstyle.py", ["CStyleLanguage"])]
FUNCTIONS = ["lazy", "open_once", "device_index", "api_compatible", "hook_problems"]
IMPLEMENTED = {"_alloc", "_free", "_copyin", "_copyout", "_offset", "_as_buffer", "_transfer"}

def settings(path: str, cls: str) -> list[tuple[str, str, str]]:
  """(name, `name: type = default` as written, its attribute docstring or '') for each attribute assigned in the class body."""
  src = (ROOT / path).read_text()
  node = next(n for n in ast.parse(src).body if isinstance(n, ast.ClassDef) and n.name == cls)
  out = []
  for stmt, nxt in zip(node.body, node.body[1:] + [None]):
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)): continue
    target = stmt.target if isinstance(stmt, ast.AnnAssign) else stmt.targets[0]
    if not isinstance(target, ast.Name) or target.id.startswith("_"): continue
    doc = nxt.value.value if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str) else ""
    text = " ".join((ast.get_source_segment(src, stmt) or "").split())
    out.append((target.id, text if len(text) <= 140 else text[:137] + "...", inspect.cleandoc(doc)))
  return out

def methods(path: str, obj: type) -> list[tuple[str, str, str]]:
  """(name, signature, docstring) for the public methods the class itself defines (and the Allocator parts a backend implements)."""
  out, fields = [], {n for n, _, _ in settings(path, obj.__name__)}
  for name, member in vars(obj).items():
    if (name.startswith("_") and name not in IMPLEMENTED) or name in fields or not callable(member) or isinstance(member, type): continue
    fn = getattr(member, "__func__", member)
    try: sig = str(inspect.signature(fn))
    except (TypeError, ValueError): sig = "(...)"
    out.append((name, sig, inspect.getdoc(fn) or ""))
  return out

def render() -> str:
  import importlib
  sys.path.insert(0, str(ROOT))
  from tinycore import backend
  lines = ["# Backend reference", "", "Generated from the docstrings of `tinycore/backend.py` and `tinycore/renderer/cstyle.py` by",
           "`python docs/gen_backend_reference.py`; do not edit by hand. The guide is `docs/writing-a-backend.md`.", "",
           f"Current API version: `{backend.API_VERSION}`.", "", "## The contract (`tinycore.backend`)", "", "```text",
           inspect.getdoc(backend) or "", "```", ""]
  for path, classes in SOURCES:
    mod = importlib.import_module(path[:-3].replace("/", "."))
    for cls in classes:
      obj = getattr(mod, cls)
      lines += [f"## `{mod.__name__}.{cls}`", "", inspect.getdoc(obj) or "", ""]
      if (st := settings(path, cls)): lines += ["Settings:", ""] + [f"- `{text}`" + (f": {doc}" if doc else "") for _, text, doc in st] + [""]
      if (ms := methods(path, obj)): lines += ["Methods:", ""] + [f"- `{n}{sig}`" + (f": {doc}" if doc else "") for n, sig, doc in ms] + [""]
  lines += ["## Helpers (`tinycore.backend`)", ""]
  for name in FUNCTIONS:
    fn = getattr(backend, name)
    lines += [f"- `{name}{inspect.signature(fn)}`: {inspect.getdoc(fn) or ''}"]
  return "\n".join(line.replace("\n", " ") if line.startswith("- ") else line for line in lines) + "\n"

def undocumented() -> list[str]:
  """Settings and public methods of the contract's classes that have no docstring."""
  import importlib
  missing = []
  for path, classes in SOURCES:
    mod = importlib.import_module(path[:-3].replace("/", "."))
    for cls in classes:
      missing += [f"{cls}.{n}" for n, _, doc in settings(path, cls) if not doc]
      missing += [f"{cls}.{n}" for n, _, doc in methods(path, getattr(mod, cls)) if not doc]
  return missing

if __name__ == "__main__":
  OUT.write_text(render())
  print(f"wrote {OUT.relative_to(ROOT)}; undocumented: {undocumented() or 'none'}")
