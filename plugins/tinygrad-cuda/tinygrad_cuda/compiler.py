"""NVRTC (CUDA C -> PTX or cubin) and ptxas (PTX -> cubin). Neither needs a GPU or the driver.

Where things come from, first match wins:
  libnvrtc        cuda.bindings.nvrtc loads it (PyPI nvidia-cuda-nvrtc-cu12, or a CUDA toolkit on the library path)
  CUDA headers    $CUDA_INCLUDE, cuda.pathfinder (PyPI nvidia-cuda-runtime-cu12), $CUDA_HOME/include, /usr/local/cuda/include
  ptxas           $PTXAS, cuda.pathfinder (PyPI nvidia-cuda-nvcc-cu12: nvidia/cuda_nvcc/bin/ptxas), $PATH, $CUDA_HOME/bin"""
from __future__ import annotations
import functools, os, pathlib, re, shutil, subprocess, tempfile
from tinycore.backend import CompileError, Compiler, DeviceError

def _cuda_homes() -> list[pathlib.Path]:
  return [pathlib.Path(p) for p in (os.getenv("CUDA_HOME"), os.getenv("CUDA_PATH"), "/usr/local/cuda") if p]

def _wheel_dirs(sub: str) -> list[pathlib.Path]:
  """`nvidia/<sub>` in every site-packages holding NVIDIA's wheels (`nvidia` is a namespace package)."""
  import importlib.util
  try: spec = importlib.util.find_spec("nvidia")
  except (ImportError, ValueError): return []
  return [pathlib.Path(p) / sub for p in (spec.submodule_search_locations or [])] if spec is not None else []

@functools.cache
def find_cuda_include() -> pathlib.Path | None:
  """The directory holding cuda_fp16.h (needed by kernels that use half or bfloat16), or None."""
  cands = [pathlib.Path(p) for p in (os.getenv("CUDA_INCLUDE"),) if p]
  try:
    from cuda import pathfinder
    if (d := getattr(pathfinder, "find_nvidia_header_directory", lambda _: None)("cudart")): cands.append(pathlib.Path(d))
  except Exception: pass  # an old cuda-pathfinder, or none: the plain search below still runs
  cands += _wheel_dirs("cuda_runtime/include") + [h / "include" for h in _cuda_homes()]
  return next((d for d in cands if (d / "cuda_fp16.h").is_file()), None)

@functools.cache
def find_ptxas() -> str | None:
  """Path of NVIDIA's PTX assembler, or None."""
  if (p := os.getenv("PTXAS")): return p
  try:
    from cuda import pathfinder
    if (p := getattr(pathfinder, "find_nvidia_binary_utility", lambda _: None)("ptxas")): return str(p)
  except Exception: pass
  cands = [d / "ptxas" for d in _wheel_dirs("cuda_nvcc/bin")] + [h / "bin" / "ptxas" for h in _cuda_homes()]
  if (w := shutil.which("ptxas")): cands.insert(0, pathlib.Path(w))
  return next((str(c) for c in cands if c.is_file() and os.access(c, os.X_OK)), None)

def _nvrtc():
  try: from cuda.bindings import nvrtc
  except ImportError as e: raise DeviceError(f"cuda-bindings is not installed (pip install 'cuda-bindings<13'): {e}") from e
  return nvrtc

@functools.cache
def nvrtc_version() -> tuple[int, int]:
  """NVRTC's (major, minor); raises DeviceError when cuda-bindings or libnvrtc is missing."""
  nvrtc = _nvrtc()
  try: err, major, minor = nvrtc.nvrtcVersion()
  except Exception as e:  # cuda.pathfinder's DynamicLibNotFoundError and friends
    raise DeviceError(f"libnvrtc was not found (pip install nvidia-cuda-nvrtc-cu12, or put a CUDA toolkit's lib64 on the "
                      f"library path): {type(e).__name__}: {e}") from e
  if err != nvrtc.nvrtcResult.NVRTC_SUCCESS: raise DeviceError(f"nvrtcVersion failed: {err}")
  return int(major), int(minor)

def nvrtc_unavailable_reason() -> str | None:
  try: nvrtc_version()
  except DeviceError as e: return str(e)
  return None

def _header_version(inc: pathlib.Path | None) -> str:
  if inc is None: return "none"
  try: m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", (inc / "cuda_runtime_api.h").read_text(errors="replace"))
  except OSError: m = None
  return m.group(1) if m else str(inc)

class NVRTCCompiler(Compiler):
  """CUDA C -> cubin for a real architecture (output='cubin', NVRTC's own backend: no ptxas, no driver JIT), or -> PTX text
  for the virtual architecture (output='ptx', which the driver JIT-compiles at load: needs a driver as new as NVRTC)."""
  def __init__(self, arch: str = "sm_80", output: str = "cubin", extra_options: tuple[str, ...] = ()):
    if output not in ("cubin", "ptx"): raise ValueError(f"output must be 'cubin' or 'ptx', not {output!r}")
    from tinygrad_cuda.renderer import arch_number
    self.arch, self.output, self.number = arch, output, arch_number(arch)
    self.include = find_cuda_include()
    target = arch if output == "cubin" else f"compute_{arch.split('_', 1)[1]}"
    self.options = [f"--gpu-architecture={target}", *extra_options] + ([f"-I{self.include}"] if self.include else [])
    major, minor = nvrtc_version()
    self.cachekey = f"nvrtc {major}.{minor} {output} {' '.join(o for o in self.options if not o.startswith('-I'))} " \
                    f"cudart-headers {_header_version(self.include)}"

  def compile(self, src: str) -> bytes:
    nvrtc = _nvrtc()
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"<tinycore>", 0, [], [])
    if err != ok: raise CompileError(f"nvrtcCreateProgram failed: {err}")
    try:
      (err,) = nvrtc.nvrtcCompileProgram(prog, len(self.options), [o.encode() for o in self.options])
      if err != ok:
        log = self._log(prog)
        hint = "" if self.include or "cuda_fp16.h" not in log and "cuda_bf16.h" not in log else \
          "\n(no CUDA headers found: pip install nvidia-cuda-runtime-cu12, or set CUDA_INCLUDE)"
        raise CompileError(f"NVRTC ({self.arch}) failed to compile:\n{log}{hint}")
      get_size, get = (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if self.output == "cubin" else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX)
      err, size = get_size(prog)
      buf = b" " * size
      (err2,) = get(prog, buf)
      if err != ok or err2 != ok: raise CompileError(f"NVRTC produced no {self.output}: {err} {err2}\n{self._log(prog)}")
      return buf.rstrip(b"\0") + b"\0" if self.output == "ptx" else buf  # the driver wants PTX NUL-terminated
    finally: nvrtc.nvrtcDestroyProgram(prog)

  @staticmethod
  def _log(prog) -> str:
    from cuda.bindings import nvrtc
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    return log.rstrip(b"\0").decode(errors="replace")

  def disassemble(self, lib: bytes) -> str: return lib.rstrip(b"\0").decode(errors="replace") if self.output == "ptx" else ""

@functools.cache
def ptxas_version(ptxas: str) -> str:
  out = subprocess.run([ptxas, "--version"], capture_output=True, text=True, timeout=60).stdout
  return m.group(1) if (m := re.search(r"(V\d+\.\d+\.\d+)", out)) else out.strip().splitlines()[-1] if out.strip() else "unknown"

class PTXASCompiler(Compiler):
  """PTX text -> cubin with NVIDIA's ptxas. Used by the tinygrad-nv plugin, and here to cross-check NVRTC's PTX."""
  def __init__(self, arch: str = "sm_80", options: tuple[str, ...] = ("-O3",)):
    if (ptxas := find_ptxas()) is None:
      raise DeviceError("ptxas was not found (pip install nvidia-cuda-nvcc-cu12, put a CUDA toolkit's bin on PATH, or set PTXAS)")
    self.ptxas, self.arch, self.opts = ptxas, arch, list(options)
    self.cachekey = f"ptxas {ptxas_version(ptxas)} {arch} {' '.join(self.opts)}"

  def compile(self, src: str) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tinycore-ptxas-") as d:
      ptx, cubin = pathlib.Path(d) / "k.ptx", pathlib.Path(d) / "k.cubin"
      ptx.write_text(src)
      r = subprocess.run([self.ptxas, f"--gpu-name={self.arch}", *self.opts, "-o", str(cubin), str(ptx)], capture_output=True, text=True,
                         timeout=300)
      if r.returncode != 0: raise CompileError(f"ptxas ({self.arch}) failed:\n{r.stderr or r.stdout}")
      return cubin.read_bytes()
