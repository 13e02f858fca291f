"""clang's amdgcn target: HIP-style source -> AMDGPU code object (an ELF shared object hipModuleLoadData loads).

  clang -x hip --offload-arch=ARCH -nogpulib -nogpuinc --cuda-device-only --no-gpu-bundle-output -O3 -c k.hip -o k.hsaco

-nogpuinc/-nogpulib: no HIP headers and no ROCm device libraries, the kernel brings its own prelude; --no-gpu-bundle-output:
a plain code object rather than a clang offload bundle. clang links it with ld.lld, so lld must be installed beside it.
clang is $AMD_CLANG, else the first of clang-20, clang-19, clang-18, clang-17, clang on PATH (LLVM >= 17 knows gfx942)."""
from __future__ import annotations
import functools, os, pathlib, re, shutil, subprocess, tempfile
from tinycore.backend import CompileError, Compiler, DeviceError

CLANG_NAMES = ("clang-20", "clang-19", "clang-18", "clang-17", "clang")
MIN_LLVM = 17

@functools.cache
def clang_version(clang: str) -> tuple[int, str]:
  """(major version, full version line) of a clang binary."""
  out = subprocess.run([clang, "--version"], capture_output=True, text=True, timeout=60).stdout
  m = re.search(r"clang version (\d+)\.(\d+)\.(\d+)", out)
  return (int(m.group(1)) if m else 0), (out.splitlines()[0] if out else "unknown")

@functools.cache
def find_clang() -> str | None:
  """A clang new enough for gfx942/gfx1100 whose ld.lld is present, or None."""
  if (env := os.getenv("AMD_CLANG")): return env
  for name in CLANG_NAMES:
    if (p := shutil.which(name)) and clang_version(p)[0] >= MIN_LLVM and _lld_for(p): return p
  return None

def _lld_for(clang: str) -> bool:
  r = subprocess.run([clang, "-print-prog-name=ld.lld"], capture_output=True, text=True, timeout=60)
  p = r.stdout.strip()
  return bool(p) and (os.path.isabs(p) and os.path.exists(p) or shutil.which(p) is not None)

def toolchain_unavailable_reason() -> str | None:
  if find_clang() is not None: return None
  found = [(n, clang_version(p)[0]) for n in CLANG_NAMES if (p := shutil.which(n))]
  return ("no clang >= 17 with ld.lld found for the amdgcn target (Debian: apt-get install clang-19 lld-19; or set AMD_CLANG)"
          + (f"; found {', '.join(f'{n} (LLVM {v})' for n, v in found)}" if found else ""))

class AMDCompiler(Compiler):
  def __init__(self, arch: str = "gfx1100", opt: str = "-O3"):
    if (clang := find_clang()) is None: raise DeviceError(toolchain_unavailable_reason())
    self.clang, self.arch = clang, arch
    self.args = ["-x", "hip", f"--offload-arch={arch}", "-nogpulib", "-nogpuinc", "--cuda-device-only", "--no-gpu-bundle-output", opt,
                 "-Wno-unused-command-line-argument"]
    self.cachekey = f"amdgcn {clang_version(clang)[1]} {' '.join(self.args)}"

  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tinycore-amd-") as d:
      inp, out = pathlib.Path(d) / "k.hip", pathlib.Path(d) / "k.hsaco"
      inp.write_text(src)
      r = subprocess.run([self.clang, *self.args, "-c", str(inp), "-o", str(out)], capture_output=True, text=True, timeout=300)
      if r.returncode != 0 or not out.exists(): raise CompileError(f"clang ({self.arch}) failed:\n{r.stderr or r.stdout}")
      return out.read_bytes()

  def disassemble(self, lib: bytes) -> str:
    objdump = shutil.which(f"llvm-objdump-{clang_version(self.clang)[0]}") or shutil.which("llvm-objdump")
    if objdump is None: return ""
    with tempfile.NamedTemporaryFile(suffix=".hsaco") as f:
      f.write(lib); f.flush()
      return subprocess.run([objdump, "-d", f"--mcpu={self.arch}", f.name], capture_output=True, text=True, timeout=120).stdout
