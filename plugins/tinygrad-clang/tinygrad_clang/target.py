"""The CPU that CLANG's kernels are compiled for: the compiler's `-march` (CLANG_MARCH, default `native`) and what it
implies, read from the compiler's predefined macros for that march (`cc -march=X -dM -E`), never from the CPU's name:
`CLANG_MARCH=x86-64-v3` (AVX2) on an AVX-512 machine gives exactly the code an AVX2 machine would get.

  ISA level      float vector widths   vector registers
  AVX-512        16, 8, 4              32 (zmm0-31)
  AVX2 / AVX     8, 4                  16 (ymm0-15)
  SSE2 (x86-64)  4                     16 (xmm0-15)
  NEON (arm64)   4                     32 (v0-31)

`VECTOR_WIDTHS=8,4` still overrides the widths alone. The CPU model and the march are part of the compile cache key: a
`-march=native` binary from another CPU may hold instructions this one lacks."""
from __future__ import annotations
import functools, os, subprocess
from dataclasses import dataclass
from tinycore.runtime.hostcpu import cpu_model, l2_bytes

@dataclass(frozen=True)
class CpuTarget:
  march: str
  """What -march is given (CLANG_MARCH)."""
  isa: str
  """The vector ISA level the march enables: AVX-512, AVX2, AVX, SSE2, NEON or scalar."""
  vector_widths: tuple[int, ...]
  """Float vector lengths worth emitting, the widest first."""
  vector_registers: int
  """Architectural vector registers (what a register tile may hold)."""
  cpu_model: str
  """The host CPU's model name (kernels run here, whatever the march)."""
  l2_bytes: int
  """One core's L2 cache (what a cache tile should fit in)."""

def march() -> str:
  """CLANG_MARCH, or native."""
  return os.getenv("CLANG_MARCH", "native")

@functools.cache
def predefined_macros(cc: str, march: str) -> frozenset[str]:
  """The names of the macros `cc -march=<march>` predefines (empty where the compiler cannot say)."""
  try: out = subprocess.run([cc, f"-march={march}", "-dM", "-E", "-x", "c", os.devnull], capture_output=True, text=True, check=True).stdout
  except (OSError, subprocess.CalledProcessError): return frozenset()
  return frozenset(ln.split()[1] for ln in out.splitlines() if ln.startswith("#define "))

def isa_level(macros: frozenset[str]) -> str:
  if "__AVX512F__" in macros: return "AVX-512"
  if "__AVX2__" in macros: return "AVX2"
  if "__AVX__" in macros: return "AVX"
  if "__ARM_NEON" in macros: return "NEON"
  if "__SSE2__" in macros: return "SSE2"
  return "scalar"

def cpu_target(cc: str | None, arch: str | None = None) -> CpuTarget:
  """The target of compiler `cc` with -march=`arch` (default: CLANG_MARCH; read on each call)."""
  return _cpu_target(cc, arch or march(), os.getenv("VECTOR_WIDTHS", ""))

@functools.cache
def _cpu_target(cc: str | None, arch: str, widths_env: str) -> CpuTarget:
  isa = isa_level(predefined_macros(cc, arch) if cc else frozenset())
  widths = {"AVX-512": (16, 8, 4), "AVX2": (8, 4), "AVX": (8, 4), "NEON": (4,), "SSE2": (4,)}.get(isa, (1,))
  if widths_env: widths = tuple(int(x) for x in widths_env.split(","))
  return CpuTarget(arch, isa, widths, 32 if isa in ("AVX-512", "NEON") else 16, cpu_model(), l2_bytes())
