"""A vendor's backend written from the template alone reaches level 7: the template is copied into a temporary directory
and renamed (HOSTC), its four TODO classes are filled in the way the guide says (C99 from the base C renderer, compiled
by the host C compiler into a shared object, launched through ctypes on numpy host memory), it is installed the way pip
installs it (a dist-info with its entry point beside the package, on PYTHONPATH), and the whole suite runs against it."""
from __future__ import annotations
import os, pathlib, re, shutil, subprocess, sys, tomllib
import pytest

TEMPLATE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "plugin-template"
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")

# what the vendor writes in place of the template's four TODO classes
PARTS = '''
import ctypes, os, shutil, subprocess, tempfile, time
import numpy as np
from tinycore.backend import CompileError
from tinycore.renderer.cstyle import CStyleLanguage

class MyAllocator(Allocator):
  """Host memory: a handle is a numpy byte array; views are numpy slices."""
  def _alloc(self, size: int, options: BufferSpec) -> Any: return np.zeros(size, np.uint8)
  def _free(self, opaque: Any, options: BufferSpec) -> None: pass
  def _copyin(self, dest: Any, src: memoryview) -> None: dest[:] = np.frombuffer(src, np.uint8)
  def _copyout(self, dest: memoryview, src: Any) -> None: np.frombuffer(dest, np.uint8)[:] = src
  def _offset(self, buf: Any, size: int, offset: int) -> Any: return buf[offset:offset + size]
  def _as_buffer(self, buf: Any) -> memoryview: return memoryview(buf)

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
CFLAGS = ["-std=c99", "-O1", "-fwrapv", "-shared", "-fPIC"]  # -fwrapv: integers wrap, as the op set says

class MyCompiler(Compiler):
  cachekey = f"hostc:{CC}:{' '.join(CFLAGS)}"
  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory() as d:
      out = os.path.join(d, "k.so")
      p = subprocess.run([CC, *CFLAGS, "-x", "c", "-", "-o", out, "-lm"], input=src.encode(), capture_output=True)
      if p.returncode != 0: raise CompileError(f"{CC} failed:\\n{p.stderr.decode()}")
      with open(out, "rb") as f: return f.read()

class MyRenderer(CStyleLanguage):
  math_fns = {Ops.EXP2: "exp2f", Ops.LOG2: "log2f", Ops.SIN: "sinf", Ops.SQRT: "sqrtf"}  # float32 is the only float declared
  def __init__(self) -> None:
    super().__init__(device=DEVICE, dtypes=(dtypes.bool, dtypes.uint8, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.float32))

class MyProgram(Program):
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as f: f.write(lib)
    try: self.fxn = getattr(ctypes.CDLL(f.name), name)
    finally: os.unlink(f.name)
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = None,
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    st = time.perf_counter()
    self.fxn(*[ctypes.c_void_p(b.ctypes.data) for b in bufs], *[ctypes.c_int(v) for v in vals])
    return time.perf_counter() - st if wait else None

'''

def vendor_plugin(dest: pathlib.Path) -> pathlib.Path:
  """The template, renamed to tinycore-hostc / HOSTC and filled in, installed under dest (put dest on PYTHONPATH)."""
  src = dest / "src"
  shutil.copytree(TEMPLATE, src)
  pkg = src / "tinycore_myaccel"
  code = (pkg / "__init__.py").read_text()
  start, end = code.index("class MyAllocator(Allocator):"), code.index("# *** the hooks tinycore calls")
  code = code[:start] + PARTS + code[end:]
  code = code.replace("from tinycore.uop.uop import UOp", "from tinycore.ops import Ops\nfrom tinycore.uop.uop import UOp")
  code = code.replace('DEVICE = "MYACCEL"', 'DEVICE = "HOSTC"').replace("priority=-1", "priority=-5")
  shutil.copytree(pkg, dest / "tinycore_hostc")
  (dest / "tinycore_hostc" / "__init__.py").write_text(code)
  meta = tomllib.loads((src / "pyproject.toml").read_text())["project"]
  (ep_name, _), = meta["entry-points"]["tinycore.backends"].items()
  di = dest / "tinycore_hostc-0.1.0.dist-info"
  di.mkdir()
  (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tinycore-hostc\nVersion: {meta['version']}\n")
  (di / "entry_points.txt").write_text(f"[tinycore.backends]\n{re.sub('myaccel', 'hostc', ep_name)} = tinycore_hostc\n")
  return dest

@pytest.mark.skipif(CC is None, reason="no host C compiler")
def test_vendor_backend_from_the_template_reaches_level_7(tmp_path):
  site = vendor_plugin(tmp_path / "site")
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
         "TINYCORE_CACHE_DIR": str(tmp_path / "cache")}
  env.pop("DEV", None)
  proc = subprocess.run([sys.executable, "-m", "tinycore_conformance", "HOSTC", "--report", str(tmp_path / "report"), "-p", "no:randomly"],
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
  out = proc.stdout + proc.stderr
  assert proc.returncode == 0 and "conformant up to level 7" in out, out[-6000:]
