"""Compilers for Metal Shading Language.

MetalCompiler (macOS): Apple's offline compiler when Xcode's metal toolchain is there (`xcrun metal` + `xcrun metallib`
-> a .metallib, bytes starting b"MTLB"); else the Metal framework compiles the source (newLibraryWithSource) to check it and
the source itself is the binary, compiled again (and cached by Metal) when the program loads.

MetalSyntaxCheckCompiler (anywhere): metal-syntax-check, compile-only. The kernel is compiled as C++ against our stand-in
<metal_stdlib> (metal_syntax/metal_stdlib): a syntax and type check of what the renderer emits, nothing more. Its output
is the checked source; it never runs on a GPU."""
from __future__ import annotations
import functools, hashlib, os, pathlib, re, shutil, subprocess, tempfile
from tinycore.backend import CompileError, Compiler, DeviceError
from tinygrad_metal.renderer import METAL_STD

SYNTAX_DIR = pathlib.Path(__file__).parent / "metal_syntax"
CXX_NAMES = ("clang++-20", "clang++-19", "clang++-18", "clang++-17", "clang++-16", "clang++-15", "clang++", "g++-14", "g++-13", "g++")

@functools.cache
def _cxx_version(cxx: str) -> tuple[str, int, str]:
  """(family, major, version line) of a C++ compiler."""
  out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
  line = out.splitlines()[0] if out else ""
  if (m := re.search(r"clang version (\d+)", out)): return "clang", int(m.group(1)), line
  m = re.search(r"(\d+)\.\d+\.\d+", line)
  return "gcc", int(m.group(1)) if m else 0, line

@functools.cache
def find_cxx() -> str | None:
  """A C++ compiler with _Float16 and __bf16 in C++ on this host: clang++ >= 15 or g++ >= 13; $METAL_SYNTAX_CXX overrides."""
  if (env := os.getenv("METAL_SYNTAX_CXX")): return env
  for name in CXX_NAMES:
    if (p := shutil.which(name)):
      family, major, _ = _cxx_version(p)
      if major >= (15 if family == "clang" else 13): return p
  return None

def syntax_check_unavailable_reason() -> str | None:
  if find_cxx() is not None: return None
  return "metal-syntax-check needs clang++ >= 15 or g++ >= 13 (for _Float16 and __bf16 in C++): apt-get install clang-19"

class MetalSyntaxCheckCompiler(Compiler):
  """metal-syntax-check: C++ -fsyntax-only against our stand-in <metal_stdlib>. Returns the source, checked."""
  def __init__(self) -> None:
    if (cxx := find_cxx()) is None: raise DeviceError(syntax_check_unavailable_reason())
    self.cxx = cxx
    family, _, line = _cxx_version(cxx)
    self.args = ["-x", "c++", "-std=c++17", "-fsyntax-only", "-I", str(SYNTAX_DIR),
                 "-Wno-unknown-attributes" if family == "clang" else "-Wno-attributes"]
    header = (SYNTAX_DIR / "metal_stdlib").read_bytes()
    self.cachekey = f"metal-syntax-check {line} header {hashlib.sha256(header).hexdigest()[:16]}"

  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tinycore-metal-") as d:
      f = pathlib.Path(d) / "k.metal.cpp"
      f.write_text(src)
      r = subprocess.run([self.cxx, *self.args, str(f)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0: raise CompileError(f"metal-syntax-check ({pathlib.Path(self.cxx).name}) rejected the kernel:\n{r.stderr or r.stdout}")
    return src.encode()

def _xcrun(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run(["xcrun", "-sdk", "macosx", *args], capture_output=True, text=True, timeout=300)

@functools.cache
def metal_toolchain() -> str | None:
  """`xcrun metal --version`'s first line when Apple's offline Metal compiler is installed, else None."""
  if shutil.which("xcrun") is None: return None
  try: r = _xcrun("metal", "--version")
  except (OSError, subprocess.TimeoutExpired): return None
  return (r.stdout or r.stderr).splitlines()[0] if r.returncode == 0 and (r.stdout or r.stderr) else None

class MetalCompiler(Compiler):
  """macOS only: Apple's Metal compiler (offline, to a .metallib), else the Metal framework as a checker."""
  def __init__(self, device=None) -> None:
    self.device, self.toolchain = device, metal_toolchain()
    self.args = [f"-std={METAL_STD}", "-fno-fast-math"]
    if self.toolchain is None and device is None: raise DeviceError("no Metal compiler: install Xcode's metal toolchain, or open a Metal device")
    self.cachekey = f"metal {self.toolchain} {' '.join(self.args)}" if self.toolchain else None  # the source is the binary otherwise

  def compile(self, src: str) -> bytes:
    if self.toolchain is None:
      from tinygrad_metal import runtime
      runtime.library_from_source(self.device, src)  # raises CompileError with the framework's message
      return src.encode()
    with tempfile.TemporaryDirectory(prefix="tinycore-metal-") as d:
      p = pathlib.Path(d)
      (p / "k.metal").write_text(src)
      r = _xcrun("metal", *self.args, "-c", str(p / "k.metal"), "-o", str(p / "k.air"))
      if r.returncode != 0: raise CompileError(f"metal failed:\n{r.stderr or r.stdout}")
      r = _xcrun("metallib", str(p / "k.air"), "-o", str(p / "k.metallib"))
      if r.returncode != 0: raise CompileError(f"metallib failed:\n{r.stderr or r.stdout}")
      return (p / "k.metallib").read_bytes()
