"""Writes docs/api.md, the API reference, from the docstrings: `python docs/gen_api.py`.
test/test_docs.py fails when the file is out of date or a public Tensor method has no docstring."""
from __future__ import annotations
import inspect, pathlib, sys

def _members(obj: object) -> dict[str, object]:
  """A module's names, or a class's with those of the mixins it is composed of (Tensor: one per concern)."""
  if not isinstance(obj, type): return dict(vars(obj))
  out: dict[str, object] = {}
  for c in reversed(obj.__mro__[:-1]): out.update(vars(c))
  return out

def _entries(obj: object, public_only: bool = True) -> list[tuple[str, object]]:
  out = []
  for name, member in sorted(_members(obj).items()):
    if public_only and name.startswith("_") and name not in ("__getitem__", "__setitem__", "__init__"): continue
    fn = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
    if callable(fn) or isinstance(member, property): out.append((name, member))
  return out

def _signature(name: str, member: object) -> str:
  fn = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
  try:
    params = inspect.signature(fn)  # type: ignore[arg-type]
    # a classmethod is called without its cls, as a staticmethod is: show what the caller passes
    sig = str(params.replace(parameters=list(params.parameters.values())[1:]) if isinstance(member, classmethod) else params)
  except (TypeError, ValueError): sig = "(...)"
  return f"{name}{sig}" if not isinstance(member, property) else name

def _doc(member: object) -> str:
  fn = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
  return inspect.getdoc(fn) or ""

def undocumented(cls: type) -> list[str]:
  return [n for n, m in _entries(cls) if not _doc(m) and n != "__init__"]

def render() -> str:
  from tinycore import Tensor, nn
  from tinycore.nn import optim, state
  lines = ["# API reference", "", "Generated from the docstrings by `python docs/gen_api.py`; do not edit by hand.", ""]
  def section(title: str, obj: object, members: list[tuple[str, object]]) -> None:
    lines.extend([f"## {title}", "", inspect.getdoc(obj) or "", ""])
    for name, m in members:
      lines.extend([f"### `{_signature(name, m)}`", "", _doc(m) or "(no docstring)", ""])
  section("Tensor", Tensor, _entries(Tensor))
  for mod, title in ((nn, "nn"), (optim, "nn.optim"), (state, "nn.state")):
    public = [(n, getattr(mod, n)) for n in sorted(dir(mod)) if not n.startswith("_") and getattr(getattr(mod, n), "__module__", "") == mod.__name__]
    section(title, mod, public)
  return "\n".join(lines).rstrip() + "\n"

if __name__ == "__main__":
  sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
  (pathlib.Path(__file__).parent / "api.md").write_text(render())
  print("wrote docs/api.md")
