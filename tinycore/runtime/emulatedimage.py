"""What an emulated device (MOCKGPU) loads in place of a GPU binary, and the compiler that makes it.

The vendor's compiler still runs on every kernel (NVRTC, ptxas, clang for amdgcn), so what compile-only proves stays
proven; but a GPU binary cannot be executed here, so the emulated device's loader receives an image that carries what
its executor runs instead:
  MAGIC, one line of JSON {"executor": name, "sections": [[name, nbytes], ...]}, then the sections' bytes in that order.
Sections every image has: "source" (the rendered kernel), "binary-sha256" (the hex digest of the vendor compiler's output,
proof that it compiled). A plugin adds what its executor needs (e.g. "ptx": NVRTC's PTX of CUDA C)."""
from __future__ import annotations
import hashlib, json
from typing import Callable
from tinycore.backend import Compiler

MAGIC = b"TINYCORE-EMULATED-IMAGE 1\n"

def pack(executor: str, sections: dict[str, bytes]) -> bytes:
  """An image for `executor` holding `sections`."""
  head = json.dumps({"executor": executor, "sections": [[n, len(b)] for n, b in sections.items()]}).encode()
  return MAGIC + head + b"\n" + b"".join(sections.values())

def unpack(lib: bytes) -> tuple[str, dict[str, bytes]] | None:
  """(executor, sections) of an image; None for bytes that are not one (a real GPU binary)."""
  if not lib.startswith(MAGIC): return None
  head, _, body = lib[len(MAGIC):].partition(b"\n")
  meta, sections, pos = json.loads(head), {}, 0
  for name, n in meta["sections"]: sections[name], pos = body[pos:pos + n], pos + n
  return meta["executor"], sections

class EmulatedCompiler(Compiler):
  """The vendor compiler `real`, then an image for `executor` with the source, the hash of real's binary, and the
  sections `extra` makes from the source (name -> function of the source)."""
  def __init__(self, real: Compiler, executor: str, extra: dict[str, Callable[[str], bytes]] | None = None):
    self.real, self.executor, self.extra = real, executor, extra or {}
    self.cachekey = None if real.cachekey is None else f"{real.cachekey} emulated-image {executor} {' '.join(self.extra)}"

  def compile(self, src: str) -> bytes:
    digest = hashlib.sha256(self.real.compile(src)).hexdigest().encode()
    return pack(self.executor, {"source": src.encode(), "binary-sha256": digest, **{n: f(src) for n, f in self.extra.items()}})

  def disassemble(self, lib: bytes) -> str:
    return "" if (img := unpack(lib)) is None else "\n".join(f"--- {n}\n{b.decode(errors='replace')}" for n, b in img[1].items())
