"""The table of ONNX ops tinycore implements, and how a node finds its implementation.

An implementation is a plain function named after the op, registered with `@onnx_op(since=...)`:
- its positional-only parameters are the node's inputs in ONNX order (None where an optional input is absent or empty);
- its keyword-only parameters are the attributes it understands, with ONNX's defaults;
- it returns a Tensor, or a tuple of Tensors for an op with several outputs;
- keyword-only parameters named with a leading underscore are not attributes: the runner fills `_noutputs` (how many
  outputs the node asks for), `_version` (the op version in effect), `_out_types` (the ONNX element types of the
  node's outputs, from shape inference; 0 where unknown) and `_scope` (the values a subgraph sees) where
  an implementation declares them.
The rules a node is checked against when a model is loaded (never in the middle of a run):
- the op's version in effect is the newest version of the op (per ONNX's schemas) at or below the model's opset for the
  op's domain; the implementation used is the one registered with the largest `since` at or below that version, and an
  op with none, or whose version is newer than `until`, is not supported;
- every attribute the node sets must be a keyword-only parameter of the implementation, and where `values` names the
  values an attribute may take, the node's value (each item of a list value) must be one of them.
Anything else raises NotImplementedError naming the op, its version, the model's opset and the node."""
from __future__ import annotations
import dataclasses, functools, inspect
from typing import Any, Callable

@dataclasses.dataclass
class OpImpl:
  """One implementation of an ONNX op over a range of the op's versions."""
  name: str
  since: int
  until: int | None
  fn: Callable[..., Any]
  values: dict[str, tuple[Any, ...]]
  @functools.cached_property
  def attributes(self) -> tuple[str, ...]:
    params = inspect.signature(self.fn).parameters.values()
    return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY and not p.name.startswith("_"))
  @functools.cached_property
  def private(self) -> tuple[str, ...]:
    """The keyword-only parameters the runner fills (named with a leading underscore)."""
    return tuple(p for p in inspect.signature(self.fn).parameters if p.startswith("_"))
  @functools.cached_property
  def scoped(self) -> bool: return "_scope" in self.private

REGISTRY: dict[str, list[OpImpl]] = {}

DEFAULT_DOMAINS = ("", "ai.onnx")

def key(op_type: str, domain: str) -> str:
  """The op's name in REGISTRY: the bare name for the default domain, else `domain.name` ("ai.onnx.ml.Binarizer")."""
  return op_type if domain in DEFAULT_DOMAINS else f"{domain}.{op_type}"

def onnx_op(since: int = 1, until: int | None = None, name: str | None = None, values: dict[str, tuple[Any, ...]] | None = None,
            domain: str = ""):
  """Register the decorated function as the implementation of ONNX op `name` (default: the function's name) of `domain`
  from op version `since` up to `until` (inclusive; None: every later version). `values` limits an attribute to the values listed."""
  def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
    impls = REGISTRY.setdefault(key(name or fn.__name__, domain), [])
    impls.append(OpImpl(key(name or fn.__name__, domain), since, until, fn, values or {}))
    impls.sort(key=lambda i: i.since)
    return fn
  return deco

def op_version(op_type: str, domain: str, opset: int) -> int:
  """The version of op `op_type` in effect at `opset` of `domain`, per the installed onnx package's schemas."""
  from onnx import defs
  try: return defs.get_schema(op_type, opset, domain).since_version
  except defs.SchemaError: return opset  # an op onnx does not know at this opset: no version of ours can match it below

def find(op_type: str, domain: str, opset: int, node_name: str, attrs: dict[str, Any]) -> OpImpl:
  """The implementation for one node, after checking its attributes; NotImplementedError naming what is missing."""
  where = f"ONNX op {domain + '.' if domain else ''}{op_type} in node {node_name!r} (model opset {opset}"
  name = key(op_type, domain)
  if domain not in DEFAULT_DOMAINS and not any(k.startswith(f"{domain}.") for k in REGISTRY):
    raise NotImplementedError(f"{where}): the domain {domain!r} is not supported, only {', '.join(sorted(domains()))}")
  if name not in REGISTRY: raise NotImplementedError(f"{where}): tinycore does not implement {name}")
  version = op_version(op_type, "" if domain in DEFAULT_DOMAINS else domain, opset)
  where += f", {op_type} version {version})"
  impl = next((i for i in reversed(REGISTRY[name]) if i.since <= version), None)
  if impl is None or (impl.until is not None and version > impl.until):
    raise NotImplementedError(f"{where}: tinycore implements {op_type} versions {versions(name)} only")
  for a, v in attrs.items():
    if a not in impl.attributes:
      raise NotImplementedError(f"{where}: attribute {a!r} is not supported (supported: {', '.join(impl.attributes) or 'none'})")
    if a in impl.values and any(x not in impl.values[a] for x in (v if isinstance(v, list) else [v])):
      raise NotImplementedError(f"{where}: {a}={v!r} is not supported (supported: {', '.join(map(repr, impl.values[a]))})")
  return impl

def domains() -> set[str]:
  """The ONNX domains tinycore implements ops of ('' is the default one, ai.onnx)."""
  return {"ai.onnx"} | {k.rsplit(".", 1)[0] for k in REGISTRY if "." in k}

def versions(op_type: str) -> str:
  """The op versions implemented, as text for errors and the coverage table: '1-12, 13+'."""
  return ", ".join(f"{i.since}-{i.until}" if i.until else f"{i.since}+" for i in REGISTRY[op_type])
