"""The LLVM device's compiler, memory and programs, all in this process: llvmlite parses the IR, optimizes it (O2, loop
and SLP vectorizers on) and emits an object file for the host CPU (its name and features, `-march=native`); the object
is linked into the process by LLVM's ORC JIT (LLJIT, one library per kernel, libm's symbols from the process) and
called through ctypes. No compiler process is started, no file is written.

Threads: a kernel the renderer cut into chunks (see renderer.py) runs them on THREADS threads of a Python pool: ctypes
releases the GIL for the call, so the chunks run in parallel; the threads take chunks from a shared counter, so one
that the OS does not schedule delays nothing."""
from __future__ import annotations
import ctypes, ctypes.util, functools, itertools, os, threading, time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence
import numpy as np
import llvmlite.binding as llvm
from tinycore.backend import BufferSpec, CompileError, Compiler, LRUAllocator, Program
from tinycore.helpers import DEBUG, getenv
from tinycore.runtime.hostmemory import aligned_host_bytes
from tinycore.runtime.hostcpu import cpu_model, l2_bytes
from tinygrad_llvm.renderer import LLVMRenderer

THREADS = max(1, getenv("THREADS", len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)))
OPT = 2  # the optimization level, as clang's -O2 (CLANG's)

@functools.cache
def host() -> tuple[str, str, str]:
  """The host's target triple, CPU name and CPU features (what -march=native picks)."""
  llvm.initialize_native_target()
  llvm.initialize_native_asmprinter()
  return llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()

def vector_widths() -> tuple[int, ...]:
  """Float vector lengths worth emitting here: 16 (512-bit) with AVX-512, 8 (256-bit) with AVX, else 4 (SSE, NEON)."""
  feats = host()[2].split(",")
  return (16, 8, 4) if "+avx512f" in feats else (8, 4) if "+avx" in feats else (4,)

def vector_registers() -> int:
  """Architectural vector registers: 32 with AVX-512 (zmm0-31) and on arm64 (v0-31), else 16 (ymm/xmm0-15)."""
  triple, _, feats = host()
  return 32 if "+avx512f" in feats.split(",") or triple.startswith(("aarch64", "arm64")) else 16

_local = threading.local()
def target_machine() -> llvm.TargetMachine:
  """This thread's target machine for the host (the core compiles kernels on several threads; a TargetMachine is not
  shared between them)."""
  if (tm := getattr(_local, "tm", None)) is None:
    triple, cpu, feats = host()
    tm = _local.tm = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=feats, opt=OPT, reloc="pic", codemodel="default")
  return tm

class LLVMCompiler(Compiler):
  """IR text -> optimized module -> object file bytes. The cache key names LLVM's version, the target and the level."""
  def __init__(self) -> None:
    triple, cpu, feats = host()
    self.cachekey = f"llvm:{'.'.join(map(str, llvm.llvm_version_info))}:{triple}:{cpu}:{feats}:O{OPT}"
  def optimized(self, src: str) -> llvm.ModuleRef:
    """The module parsed, verified and optimized; CompileError with LLVM's message when the IR is wrong."""
    try:
      mod = llvm.parse_assembly(src, context=llvm.create_context())
      mod.verify()
    except RuntimeError as e: raise CompileError(f"LLVM rejected the IR: {e}") from None
    pto = llvm.create_pipeline_tuning_options(speed_level=OPT)
    pto.loop_vectorization = pto.slp_vectorization = True
    pb = llvm.create_pass_builder(target_machine(), pto)
    pb.getModulePassManager().run(mod, pb)
    return mod
  def compile(self, src: str) -> bytes: return target_machine().emit_object(self.optimized(src))
  def compile_cached(self, src: str) -> bytes:
    """As Compiler.compile_cached; DEBUG=5 also prints the kernel's assembly (made again when the object was cached)."""
    if DEBUG >= 5: print(target_machine().emit_assembly(self.optimized(src)))
    return super().compile_cached(src)

# the half-precision conversions LLVM leaves to a runtime library where the CPU has no instruction for them (double to
# half without AVX-512 FP16: `__truncdfhf2`; a CPU without F16C: all of them); compiler-rt's names, which GCC's libgcc_s
# exports too (GCC 12 on), and its older names
HALF_HELPERS = ("__truncdfhf2", "__truncsfhf2", "__extendhfsf2", "__extendhfdf2", "__gnu_f2h_ieee", "__gnu_h2f_ieee")

@functools.cache
def runtime_helpers() -> dict[str, int]:
  """The addresses of HALF_HELPERS that the C runtime's support library has (none where it is not found): the process
  itself does not load libgcc_s, so LLJIT's lookup in the process missed them (a float64 -> float16 cast failed to link)."""
  name = ctypes.util.find_library("gcc_s")
  try: lib = ctypes.CDLL(name) if name else None
  except OSError: lib = None
  return {h: ctypes.cast(getattr(lib, h), ctypes.c_void_p).value for h in HALF_HELPERS if lib is not None and hasattr(lib, h)}

_jit: Any = None
_jit_lock, _libs = threading.Lock(), itertools.count()
def link(lib: bytes, symbols: Sequence[str]) -> tuple[Any, list[int]]:
  """Links an object file into the process (its own JIT library, so kernels of the same name do not clash); the
  library's handle (it stays loaded while the handle lives) and the addresses of `symbols`."""
  global _jit
  with _jit_lock:
    if _jit is None: _jit = llvm.create_lljit_compiler(target_machine())
    b = llvm.JITLibraryBuilder().add_object_img(lib).add_current_process()
    for h, addr in runtime_helpers().items(): b.import_symbol(h, addr)
    for s in symbols: b.export_symbol(s)
    rt = b.link(_jit, f"kernel{next(_libs)}")
    return rt, [rt[s] for s in symbols]

class HostMemory:
  """A buffer: host bytes as a numpy array and its address (asking numpy for it on every launch costs more than one)."""
  __slots__ = ("arr", "addr")
  def __init__(self, arr: np.ndarray): self.arr, self.addr = arr, arr.ctypes.data

class LLVMAllocator(LRUAllocator):
  """Host memory, 64-byte aligned; views and host access are zero-copy. Buffers of 2 MiB and more are anonymous
  mappings advised to use huge pages (fresh memory costs a page fault per page on first touch, 512 times fewer)."""
  def _alloc(self, size: int, options: BufferSpec) -> HostMemory: return HostMemory(aligned_host_bytes(size, "LLVM"))
  def _copyin(self, dest: HostMemory, src: memoryview) -> None: dest.arr[:] = np.frombuffer(src, dtype=np.uint8)
  def _copyout(self, dest: memoryview, src: HostMemory) -> None: np.frombuffer(dest, dtype=np.uint8)[:] = src.arr
  def _as_buffer(self, src: HostMemory) -> memoryview: return memoryview(src.arr)
  def _offset(self, buf: HostMemory, size: int, offset: int) -> HostMemory: return HostMemory(buf.arr[offset:offset + size])

@functools.cache
def pool() -> ThreadPoolExecutor: return ThreadPoolExecutor(THREADS - 1, thread_name_prefix="tinygrad-llvm")

class LLVMProgram(Program):
  """A kernel linked into the process; a kernel cut into chunks runs them on the thread pool."""
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    self.handle, (addr, chunks_addr) = link(lib, [name, f"{name}_chunks"])
    self.addr, self.chunks = addr, ctypes.c_int.from_address(chunks_addr).value
    self.fxn: Any = None
  def _bind(self, bufs: Sequence[Any], vals: Sequence[int]) -> Callable[[], Any]:
    if self.fxn is None:
      extra = [ctypes.c_int] * 2 if self.chunks > 1 else []
      self.fxn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(bufs), *[ctypes.c_int] * len(vals), *extra)(self.addr)
    args = [b.addr for b in bufs] + list(vals)
    if self.chunks == 1: return functools.partial(self.fxn, *args)
    return functools.partial(self._run_chunks, self.fxn, args, self.chunks)
  @staticmethod
  def _run_chunks(fxn: Callable[..., None], args: list[Any], chunks: int) -> None:
    # the caller waits for the chunks, not for the helpers: a helper the OS has not scheduled yet (the machine is busy)
    # finds no chunk left when it runs, and delays nothing (next() on a count is atomic under the GIL)
    taken, done, finished = itertools.count(), itertools.count(1), threading.Event()
    def work() -> None:
      while (c := next(taken)) < chunks:
        fxn(*args, c, chunks)
        if next(done) == chunks: finished.set()
    for _ in range(min(THREADS, chunks) - 1): pool().submit(work)
    work()
    finished.wait()
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = None,
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    st = time.perf_counter()
    self._bind(bufs, vals)()
    return time.perf_counter() - st if wait else None
  def launcher(self, bufs: Sequence[Any], global_size: Sequence[int], local_size: Sequence[int] | None,
               vals: Sequence[int] = ()) -> Callable[[], Any]:
    return self._bind(bufs, vals)  # the addresses are worked out once, not on every launch

# *** the device's parts, as Backend's factories (device, n) ***
def allocator(device: str, idx: int) -> LLVMAllocator: return LLVMAllocator()
def renderer(device: str, idx: int) -> LLVMRenderer:
  bf16 = any(f"+{f}" in host()[2].split(",") for f in ("avx512bf16", "avxneconvert"))  # see LLVMRenderer on bfloat16
  return LLVMRenderer(device, vector_widths(), THREADS, getenv("CHUNKS_PER_CORE", 4), getenv("PARALLEL_MIN_WORK", 1 << 18), bf16,
                      vector_registers(), l2_bytes(), cpu_model())
def compiler(device: str, idx: int) -> LLVMCompiler: return LLVMCompiler()
def program(device: str, idx: int) -> type[LLVMProgram]: return LLVMProgram
