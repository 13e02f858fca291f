"""PTX text -> a Module: its functions as flat lists of instructions with resolved operands, its module-scope data.

What the parser keeps: `.entry` and `.func` bodies (with their `.param` lists), `.reg` / `.shared` / `.local` / `.param`
declarations, module-scope `.global` / `.const` data with initializers, labels, and instructions with an optional
guard `@%p` / `@!%p`. Comments, `.version`, `.target`, `.address_size`, `.pragma`, `.loc`, `.file`, `.maxntid` and the
like are read and dropped. Braces open scopes: a name declared inside `{ }` (inline asm from cuda_fp16.h, NVRTC's call
sequences) shadows the same name outside, so every name is given a unique spelling `function/scope/name` here.

Operand forms: a register, an immediate (decimal, 0x hex, 0fXXXXXXXX / 0dXXXXXXXXXXXXXXXX float bits), a special register
(%tid.x ...), a symbol (a variable's address, a label, a function), an address `[base+offset]`, a vector `{a, b}`, `_`."""
from __future__ import annotations
import functools, re
from dataclasses import dataclass, field

class PTXUnsupported(NotImplementedError):
  """The PTX uses something this interpreter does not implement (the message names it)."""

SPECIALS = {"%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%warpsize"}

@dataclass(frozen=True)
class Reg:
  name: str
@dataclass(frozen=True)
class Imm:
  text: str
@dataclass(frozen=True)
class Special:
  name: str
@dataclass(frozen=True)
class Sym:
  name: str
@dataclass(frozen=True)
class Addr:
  base: Reg | Sym | Imm | None
  offset: int
@dataclass(frozen=True)
class Vec:
  items: tuple

@dataclass
class Instr:
  op: str                    # the full opcode, e.g. 'ld.global.nc.v4.f32'
  args: list                 # operands, destinations first
  guard: tuple[str, bool] | None = None  # (predicate register, negated)
  text: str = ""

@dataclass
class Var:
  """A declared variable of a state space (shared, local, param, global, const): bytes, alignment, initial bytes."""
  name: str
  space: str
  size: int
  align: int
  init: bytes = b""

@dataclass
class Function:
  name: str
  entry: bool
  params: list[Var] = field(default_factory=list)   # in order
  rets: list[Var] = field(default_factory=list)
  body: list[Instr] = field(default_factory=list)
  labels: dict[str, int] = field(default_factory=dict)
  regs: dict[str, str] = field(default_factory=dict)  # unique name -> declared type ('b32', 'f32', 'pred' ...)
  vars: list[Var] = field(default_factory=list)       # shared/local/param variables declared in the body

@dataclass
class Module:
  functions: dict[str, Function]
  globals: list[Var]

_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8}

@functools.cache
def type_bytes(t: str) -> int:
  if t == "pred": return 1
  if t.endswith("x2"): return 2 * type_bytes(t[:-2])
  return _TYPE_BYTES[re.sub(r"^[a-z]+", "", t)]

def _events(text: str):
  """('stmt', text) / ('open',) / ('close',) in order. A '{' that begins a statement opens a scope; one inside a statement
  (a vector operand, an initializer) belongs to it. A function header ends at its '{'."""
  buf: list[str] = []
  depth_in_stmt = 0
  for ch in text:
    if depth_in_stmt:
      buf.append(ch)
      depth_in_stmt += {"{": 1, "}": -1}.get(ch, 0)
      continue
    if ch == "{":
      s = "".join(buf).strip()
      if not s or re.search(r"\.(entry|func)\b", s) or re.fullmatch(r"(\s*[\w$]+\s*:)+\s*", s):
        if s: yield ("stmt", s)
        buf = []
        yield ("open",)
      else:
        buf.append(ch)
        depth_in_stmt = 1
    elif ch == "}":
      if (s := "".join(buf).strip()): yield ("stmt", s)
      buf = []
      yield ("close",)
    elif ch == ";":
      if (s := "".join(buf).strip()): yield ("stmt", s)
      buf = []
    else: buf.append(ch)
  if (s := "".join(buf).strip()): yield ("stmt", s)

def _strip_comments(text: str) -> str: return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))

def _split_args(s: str) -> list[str]:
  out, cur, depth = [], [], 0
  for ch in s:
    if ch in "{[(": depth += 1
    elif ch in "}])": depth -= 1
    if ch == "," and depth == 0:
      out.append("".join(cur).strip())
      cur = []
    else: cur.append(ch)
  if "".join(cur).strip(): out.append("".join(cur).strip())
  return out

_DECL = re.compile(r"^\.(reg|shared|local|param|global|const)\b(.*)$", re.S)

def _var_decl(space: str, rest: str) -> tuple[list[tuple[str, int, int]], str, bytes]:
  """'.align 8 .b8 name[16] = {...}' -> ([(name, size, align)], type, init bytes)."""
  init = b""
  if "=" in rest:
    rest, ini = rest.split("=", 1)
    vals = [int(v, 0) for v in re.findall(r"-?(?:0x[0-9a-fA-F]+|\d+)", ini)]
    init = bytes(v & 0xFF for v in vals)
  align = int(m.group(1)) if (m := re.search(r"\.align\s+(\d+)", rest)) else 0
  toks = [t for t in re.sub(r"\.align\s+\d+", "", rest).split() if t]
  types = [t[1:] for t in toks if t.startswith(".")]
  names = " ".join(t for t in toks if not t.startswith("."))
  t = types[-1] if types else "b8"
  if t not in ("pred",) and not re.match(r"^[bsuf]\d+(x2)?$|^bf16(x2)?$", t): raise PTXUnsupported(f"PTX declaration type .{t} in '.{space} {rest}'")
  out = []
  for nm in _split_args(names):
    if (m := re.match(r"^([%\w$.]+)\s*\[\s*(\d*)\s*\]$", nm)): out.append((m.group(1), type_bytes(t) * int(m.group(2) or 0), align or type_bytes(t)))
    else: out.append((nm, type_bytes(t), align or type_bytes(t)))
  if init and t.startswith(("b", "u", "s")) and type_bytes(t) > 1:  # initializers of wider types: one value per element
    w = type_bytes(t)
    vals = [int(v, 0) for v in re.findall(r"-?(?:0x[0-9a-fA-F]+|\d+)", ini)]
    init = b"".join((v & ((1 << (8 * w)) - 1)).to_bytes(w, "little") for v in vals)
  return out, t, init

class _Body:
  """Parses one function body: scopes, declarations, labels, instructions."""
  def __init__(self, fn: Function, module_names: set[str]):
    self.fn, self.module_names = fn, module_names
    self.scopes: list[dict[str, str]] = [{v.name: f"{fn.name}/{v.name}" for v in fn.params + fn.rets}]
    self.nscopes = 0

  def open(self) -> None:
    self.nscopes += 1
    self.scopes.append({})
  def close(self) -> None: self.scopes.pop()
  def declare(self, name: str) -> str:
    u = f"{self.fn.name}/{self.nscopes}/{name}"
    self.scopes[-1][name] = u
    return u
  def resolve(self, name: str) -> str | None:
    for sc in reversed(self.scopes):
      if name in sc: return sc[name]
    return None

  def statement(self, s: str) -> None:
    while (m := re.match(r"^([A-Za-z_$][\w$]*)\s*:(?!:)\s*", s)):  # labels
      self.fn.labels[m.group(1)] = len(self.fn.body)
      s = s[m.end():]
    if not s: return
    if (m := _DECL.match(s)):
      space, rest = m.groups()
      if space == "reg":
        t = [x[1:] for x in rest.split() if x.startswith(".")][-1]
        names = re.sub(r"\.[\w]+", "", rest)
        for nm in _split_args(names):
          if (r := re.match(r"^(%?[\w$]+)<(\d+)>$", nm)):
            for i in range(int(r.group(2))): self.fn.regs[self.declare(f"{r.group(1)}{i}")] = t
          else: self.fn.regs[self.declare(nm)] = t
      else:
        decls, _, init = _var_decl(space, rest)
        for nm, size, align in decls: self.fn.vars.append(Var(self.declare(nm), space, size, align, init))
      return
    if s.startswith("."): return  # .pragma, .loc, .file, .maxnreg ...
    guard = None
    if (m := re.match(r"^@(!?)(%?[\w$]+)\s+", s)):
      guard = (self.reg_name(m.group(2)), m.group(1) == "!")
      s = s[m.end():]
    parts = s.split(None, 1)
    op, args = parts[0], (_split_args(parts[1]) if len(parts) > 1 else [])
    if op.startswith("call"): args = self.call_args(parts[1])
    else: args = [self.operand(a) for a in args]
    self.fn.body.append(Instr(op, args, guard, s))

  def call_args(self, s: str) -> list:
    """'(ret), func, (a, b)' / 'func, (a)' / '(ret), func' -> [rets Vec, Sym func, args Vec]."""
    parts = _split_args(s)
    rets: tuple = ()
    if parts[0].startswith("("):
      rets = tuple(self.operand(x) for x in _split_args(parts[0][1:-1]))
      parts = parts[1:]
    fn = Sym(parts[0].strip())
    args = tuple(self.operand(x) for x in _split_args(parts[1].strip()[1:-1])) if len(parts) > 1 else ()
    return [Vec(rets), fn, Vec(args)]

  def reg_name(self, nm: str) -> str:
    if (u := self.resolve(nm)) is None: raise PTXUnsupported(f"PTX: undeclared register {nm} in {self.fn.name}")
    return u

  def operand(self, a: str):
    a = a.strip()
    if a.startswith("{"): return Vec(tuple(self.operand(x) for x in _split_args(a[1:-1])))
    if a.startswith("["):
      inner = a[1:-1].replace(" ", "")
      m = re.match(r"^([^+\-]*)(?:\+?(-?(?:0x[0-9a-fA-F]+|\d+)))?$", inner)
      if m is None: raise PTXUnsupported(f"PTX address form [{inner}]")
      base = self.operand(m.group(1)) if m.group(1) else None
      return Addr(base, int(m.group(2), 0) if m.group(2) else 0)
    if a == "_": return None
    if re.match(r"^-?(0[fFdD][0-9a-fA-F]+|0[xX][0-9a-fA-F]+U?|\d+U?|\d*\.\d+([eE][-+]?\d+)?)$", a): return Imm(a)
    if "." in a and a.split(".")[0] in SPECIALS: return Special(a)
    if a in SPECIALS: return Special(a)
    if (u := self.resolve(a)) is not None: return Reg(u) if u in self.fn.regs else Sym(u)
    return Sym(a)  # a label, a function, a module-scope variable

def _header(s: str) -> tuple[str, bool, list[Var], list[Var]]:
  """'.visible .entry k(.param .u64 a, ...)' or '.func (.param .b32 r) f(.param ...)' -> (name, entry, params, rets)."""
  entry = bool(re.search(r"\.entry\b", s))
  rets: list[Var] = []
  m = re.search(r"\.(?:entry|func)\s*(\(([^)]*)\))?\s*([\w$]+)\s*(\(([^)]*)\))?", s, re.S)
  if m is None: raise PTXUnsupported(f"PTX function header {s[:80]!r}")
  def plist(txt: str | None) -> list[Var]:
    out = []
    for p in _split_args(txt or ""):
      p = p.strip()
      if not p: continue
      if not p.startswith(".param"): raise PTXUnsupported(f"PTX parameter {p!r}")
      decls, _, _ = _var_decl("param", p[len(".param"):])
      out += [Var(nm, "param", size, align) for nm, size, align in decls]
    return out
  if m.group(1): rets = plist(m.group(2))
  return m.group(3), entry, plist(m.group(5)), rets

@functools.lru_cache(maxsize=256)
def parse(text: str) -> Module:
  """The Module of a PTX text (cached by text: a module loaded once runs many launches)."""
  mod = Module({}, [])
  events = list(_events(_strip_comments(text)))
  i = 0
  while i < len(events):
    ev = events[i]
    if ev[0] == "stmt":  # .version/.target/.address_size end without ';': they prefix the next statement
      ev = ("stmt", re.sub(r"^(\s*\.(version|target|address_size)\s+[^\n]*\n)+", "", ev[1] + "\n").strip())
    if ev[0] == "stmt" and re.search(r"\.(entry|func)\b", ev[1]):
      name, entry, params, rets = _header(ev[1])
      if i + 1 < len(events) and events[i + 1][0] == "open":
        fn = Function(name, entry, params, rets)
        body = _Body(fn, set())
        depth, i = 1, i + 2
        while depth:
          e = events[i]
          if e[0] == "open": depth += 1; body.open()
          elif e[0] == "close":
            depth -= 1
            if depth: body.close()
          else: body.statement(e[1])
          i += 1
        mod.functions[name] = fn
        continue
    elif ev[0] == "stmt" and (m := re.match(r"^(?:\.(?:visible|extern|weak)\s+)*\.(global|const)\b(.*)$", ev[1], re.S)):
      decls, _, init = _var_decl(m.group(1), m.group(2))
      mod.globals += [Var(nm, m.group(1), size, align, init) for nm, size, align in decls]
    elif ev[0] == "stmt" and re.match(r"^(?:\.(?:visible|extern|weak)\s+)*\.shared\b", ev[1]):
      raise PTXUnsupported("PTX: module-scope .shared variables")
    i += 1
  return mod
