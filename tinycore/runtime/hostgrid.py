"""The host-source executor: a GPU kernel's rendered source (CUDA C, HIP, MSL) compiled for the host CPU with clang++ and
run over its grid, for emulated devices (MOCKGPU) that have no GPU. It is vendor-neutral: a plugin's mock gives it a
shim header for its language (how `threadIdx`, `__shared__`, `__syncthreads()`, `half` ... are spelled in C++ here).

The contract a shim relies on (the runtime part written before the shim, RUNTIME below):
  hg_group_id, hg_local_id, hg_global_id   (struct hg_uint3 {x, y, z}) the current work-item's ids, set before it runs
  hg_group_size, hg_grid_size              the launch's work-group size and number of groups
  hg_barrier()                             a work-group barrier
How a grid runs:
  - work-groups one after another; the work-items of a group in a shuffled order (a new order for every group and after
    every barrier), so a kernel that needs a barrier it lacks computes a wrong result here too;
  - a kernel without barriers (the shim's barrier spelling absent from the source) runs each work-item to its end in turn;
    one with barriers runs its work-items as fibers (ucontext), each switched out at a barrier until all have reached it;
  - shared memory is whatever the shim makes of it: static storage in the kernel, one per work-group in turn;
  - one launch runs at a time in a process (a lock), on the calling thread;
  - a work-item that faults (SIGSEGV, SIGBUS: a bad address or a buffer's guard page, see devicememory.py; SIGFPE; SIGILL:
    a trap) ends the launch, and the call returns the signal number (0 when all went well).
Arguments reach the kernel as CUDA's kernelParams do: an array of pointers, one to each argument's value, in the order of
the kernel's parameters (a template reads their types from the kernel's signature). A kernel that takes its ids as
parameters (Metal) gets pointers to hg_group_id, hg_local_id, hg_global_id there (HostKernel.id_addresses).

Compiled libraries are cached on disk by the whole translation unit and the compiler's version and flags."""
from __future__ import annotations
import ctypes, functools, os, pathlib, re, shutil, subprocess, tempfile, threading
from typing import Sequence
from tinycore.backend import CompileError
from tinycore.helpers import diskcache_get, diskcache_put
from tinycore.runtime.devicememory import DeviceMemory

CXX_NAMES = ("clang++-20", "clang++-19", "clang++-18", "clang++-17", "clang++-16", "clang++-15", "clang++")
# half and bfloat16 round after every operation, as on a GPU (no excess precision); no fused multiply-add
CXXFLAGS = ["-x", "c++", "-std=c++17", "-O1", "-shared", "-fPIC", "-w", "-fno-exceptions", "-fno-rtti", "-ffp-contract=off",
            "-Xclang", "-ffloat16-excess-precision=none", "-Xclang", "-fbfloat16-excess-precision=none"]
FIBER_STACK = 256 * 1024
# one launch at a time in the process: a launch installs process-wide fault handlers, and ctypes lets go of the GIL
_LAUNCH_LOCK = threading.Lock()

# C++'s <math.h> and <stdlib.h> pull in half of libstdc++ (0.2 s of every compile): the C functions are declared instead
RUNTIME = r"""
#include <setjmp.h>
#include <signal.h>
#include <ucontext.h>
extern "C" {
void* malloc(unsigned long); void free(void*); void* memcpy(void*, const void*, unsigned long);
float expf(float); float exp2f(float); float logf(float); float log2f(float); float sinf(float); float cosf(float);
float sqrtf(float); float fabsf(float); float floorf(float); float ceilf(float); float truncf(float); float powf(float, float);
double exp(double); double exp2(double); double log(double); double log2(double); double sin(double); double cos(double);
double sqrt(double); double fabs(double); double floor(double); double ceil(double); double trunc(double); double pow(double, double);
}
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
/* float -> bfloat16, round to nearest even (libgcc lacks it, the compiler calls it) */
extern "C" __attribute__((weak)) __bf16 __truncsfbf2(float f) {
  unsigned u; memcpy(&u, &f, 4);
  u = (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : u + 0x7fffu + ((u >> 16) & 1u);
  __asm__("" : "+r"(u));  /* else the optimizer sees a float -> bfloat16 conversion here and calls this function */
  unsigned short h = u >> 16; __bf16 r; memcpy(&r, &h, 2); return r;
}
extern "C" __attribute__((weak)) __bf16 __truncdfbf2(double d) { return __truncsfbf2((float)d); }
struct hg_uint3 { unsigned int x, y, z, pad_; };
extern "C" { hg_uint3 hg_group_id, hg_local_id, hg_global_id, hg_group_size, hg_grid_size; }
static void hg_barrier();
"""

LAUNCHER = r"""
template <class T> struct hg_bare { typedef T type; };
template <class T> struct hg_bare<T&> { typedef T type; };
template <int... I> struct hg_seq {};
template <int N, int... I> struct hg_make : hg_make<N - 1, N - 1, I...> {};
template <int... I> struct hg_make<0, I...> { typedef hg_seq<I...> type; };
template <class... A, int... I> static void hg_invoke(void (*k)(A...), void** a, hg_seq<I...>) { k(*(typename hg_bare<A>::type*)a[I]...); }
template <class... A> static void hg_call(void (*k)(A...), void** a) { hg_invoke(k, a, typename hg_make<sizeof...(A)>::type()); }
static void** hg_args;
static void hg_item() { hg_call(&HG_ENTRY, hg_args); }

static unsigned long long hg_rng;
static unsigned hg_rand(unsigned n) { hg_rng ^= hg_rng << 13; hg_rng ^= hg_rng >> 7; hg_rng ^= hg_rng << 17; return (unsigned)(hg_rng % n); }
static void hg_shuffle(unsigned* order, unsigned n) {
  for (unsigned i = n; i > 1; i--) { unsigned j = hg_rand(i), t = order[i - 1]; order[i - 1] = order[j]; order[j] = t; }
}
static void hg_set_local(unsigned i) {
  hg_local_id.x = i % hg_group_size.x; hg_local_id.y = i / hg_group_size.x % hg_group_size.y; hg_local_id.z = i / (hg_group_size.x * hg_group_size.y);
  hg_global_id.x = hg_group_id.x * hg_group_size.x + hg_local_id.x; hg_global_id.y = hg_group_id.y * hg_group_size.y + hg_local_id.y;
  hg_global_id.z = hg_group_id.z * hg_group_size.z + hg_local_id.z;
}

#ifdef HG_FIBERS
static ucontext_t hg_main_ctx, *hg_ctx;
static char* hg_stacks;
static unsigned hg_cur, *hg_done;
static void hg_barrier() { swapcontext(&hg_ctx[hg_cur], &hg_main_ctx); }
static void hg_fiber() { hg_item(); hg_done[hg_cur] = 1; }
/* the fibers' stacks live for one launch: a library per kernel keeping them would hold their touched pages forever */
static void hg_fibers_alloc(unsigned n) {
  hg_stacks = (char*)malloc((size_t)n * HG_STACK); hg_ctx = (ucontext_t*)malloc(n * sizeof(ucontext_t));
  hg_done = (unsigned*)malloc(n * sizeof(unsigned));
}
static void hg_fibers_free() { free(hg_stacks); free(hg_ctx); free(hg_done); }
static void hg_group(unsigned n, unsigned* order) {
  for (unsigned i = 0; i < n; i++) {
    getcontext(&hg_ctx[i]);
    hg_ctx[i].uc_stack.ss_sp = hg_stacks + (size_t)i * HG_STACK; hg_ctx[i].uc_stack.ss_size = HG_STACK; hg_ctx[i].uc_link = &hg_main_ctx;
    makecontext(&hg_ctx[i], hg_fiber, 0);
    hg_done[i] = 0;
  }
  for (unsigned live = n; live;) {  /* one round: every live work-item runs to its next barrier or its end */
    hg_shuffle(order, n);
    live = 0;
    for (unsigned k = 0; k < n; k++) {
      if (hg_done[hg_cur = order[k]]) continue;
      hg_set_local(hg_cur);
      swapcontext(&hg_main_ctx, &hg_ctx[hg_cur]);
      live += !hg_done[hg_cur];
    }
  }
}
#else
static void hg_barrier() {}
static void hg_fibers_alloc(unsigned n) {}
static void hg_fibers_free() {}
static void hg_group(unsigned n, unsigned* order) {
  hg_shuffle(order, n);
  for (unsigned k = 0; k < n; k++) { hg_set_local(order[k]); hg_item(); }
}
#endif

static sigjmp_buf hg_fault;
static void hg_on_fault(int sig) { siglongjmp(hg_fault, sig); }
static const int hg_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};

extern "C" int hg_launch(const unsigned* grid, const unsigned* group, void** args, unsigned long long seed) {
  static char altstack[1 << 16];
  stack_t ss = {}, old_ss;
  ss.ss_sp = altstack; ss.ss_size = sizeof(altstack);
  sigaltstack(&ss, &old_ss);
  struct sigaction sa = {}, old[4];
  sa.sa_handler = hg_on_fault; sa.sa_flags = SA_ONSTACK | SA_NODEFER;
  for (int i = 0; i < 4; i++) sigaction(hg_signals[i], &sa, &old[i]);
  hg_args = args; hg_rng = seed * 2654435761ull + 88172645463325252ull;
  hg_grid_size = {grid[0], grid[1], grid[2], 0}; hg_group_size = {group[0], group[1], group[2], 0};
  unsigned n = group[0] * group[1] * group[2];
  unsigned* order = (unsigned*)malloc(n * sizeof(unsigned));
  for (unsigned i = 0; i < n; i++) order[i] = i;
  hg_fibers_alloc(n);
  int sig = sigsetjmp(hg_fault, 1);
  if (!sig) {
    for (unsigned z = 0; z < grid[2]; z++) for (unsigned y = 0; y < grid[1]; y++) for (unsigned x = 0; x < grid[0]; x++) {
      hg_group_id = {x, y, z, 0};
      hg_group(n, order);
    }
  }
  free(order);
  hg_fibers_free();
  for (int i = 0; i < 4; i++) sigaction(hg_signals[i], &old[i], 0);
  sigaltstack(&old_ss, 0);
  return sig;
}
"""

@functools.cache
def find_cxx() -> str | None:
  """clang++ (15 or newer: _Float16 and __bf16 in C++), or $HOSTGRID_CXX."""
  if (env := os.getenv("HOSTGRID_CXX")): return env
  for name in CXX_NAMES:
    if (p := shutil.which(name)) and (m := re.search(r"clang version (\d+)", _version(p))) and int(m.group(1)) >= 15: return p
  return None

@functools.cache
def _version(cxx: str) -> str:
  out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
  return out.splitlines()[0] if out else cxx

def unavailable_reason() -> str | None:
  """None when kernels can be compiled for the host here, else why not."""
  return None if find_cxx() else "the host-source executor needs clang++ 15 or newer (apt-get install clang-19), or set HOSTGRID_CXX"

def c_params(src: str, entry: str) -> list[tuple[int, bool]] | None:
  """(size in bytes, is a pointer) of each parameter of the C-like kernel `entry` in src (pointers, else 32-bit ints, as
  tinycore's renderers declare them); None when src defines no such kernel."""
  if (m := re.search(rf"\b{re.escape(entry)}\s*\(([^)]*)\)\s*\{{", src)) is None: return None
  return [(8, True) if "*" in p else (4, False) for p in m.group(1).split(",") if p.strip()]

class HostKernel:
  """One kernel of rendered GPU source, compiled for the host. `shim` is the language's header (C++), `headers` files the
  source #includes (name -> text), `barrier` the barrier's spelling in the source (its absence runs plain loops)."""
  def __init__(self, shim: str, src: str, entry: str, barrier: str, headers: dict[str, str] | None = None):
    if (cxx := find_cxx()) is None: raise CompileError(unavailable_reason() or "")
    self.entry, self.fibers, headers = entry, barrier in src, headers or {}
    defines = [f"#define HG_ENTRY {entry}", f"#define HG_STACK {FIBER_STACK}"] + (["#define HG_FIBERS 1"] if self.fibers else [])
    unit = "\n".join([RUNTIME, shim, '#line 1 "kernel"', src, *defines, LAUNCHER])
    key = "\n".join([unit, *(f"{n}\n{t}" for n, t in sorted(headers.items()))])
    table = f"hostgrid {_version(cxx)} {' '.join(CXXFLAGS)}"
    if (lib := diskcache_get(table, key)) is None: lib = diskcache_put(table, key, self._compile(cxx, unit, headers))
    with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as f: f.write(lib)
    try: self.dll = ctypes.CDLL(f.name)
    finally: os.unlink(f.name)
    self.dll.hg_launch.argtypes = [ctypes.POINTER(ctypes.c_uint)] * 2 + [ctypes.c_void_p, ctypes.c_ulonglong]
    self.dll.hg_launch.restype = ctypes.c_int

  @staticmethod
  def _compile(cxx: str, unit: str, headers: dict[str, str]) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tinycore-hostgrid-") as d:
      for name, text in headers.items(): (pathlib.Path(d) / name).write_text(text)
      (pathlib.Path(d) / "k.cpp").write_text(unit)
      r = subprocess.run([cxx, *CXXFLAGS, "-I", d, "-o", str(pathlib.Path(d) / "k.so"), str(pathlib.Path(d) / "k.cpp")],
                         capture_output=True, text=True, timeout=300)
      if r.returncode != 0: raise CompileError(f"the host-source executor could not compile the kernel for the host:\n{r.stderr or r.stdout}")
      return (pathlib.Path(d) / "k.so").read_bytes()

  def id_addresses(self) -> tuple[int, int, int]:
    """Addresses of hg_group_id, hg_local_id, hg_global_id: argument values for a kernel that takes its ids as parameters."""
    return tuple(ctypes.addressof(ctypes.c_uint.in_dll(self.dll, n)) for n in ("hg_group_id", "hg_local_id", "hg_global_id"))  # type: ignore

  def run(self, grid: Sequence[int], group: Sequence[int], params: Sequence[tuple[int, bool]], values: Sequence[int], mem: DeviceMemory,
          seed: int = 0) -> int:
    """Runs the grid with each parameter's value (params as c_params gives them; pointers as device addresses of mem,
    DeviceMemoryError for one that is not live). 0, or the signal a work-item raised."""
    vals = [ctypes.c_uint64(mem.host_address(v)) if is_ptr else (ctypes.c_int32 if size == 4 else ctypes.c_uint64)(v)
            for (size, is_ptr), v in zip(params, values)]
    args = (ctypes.c_void_p * max(len(vals), 1))(*[ctypes.addressof(v) for v in vals])
    return self(grid, group, ctypes.addressof(args), seed)

  def __call__(self, grid: Sequence[int], group: Sequence[int], args: int, seed: int = 0) -> int:
    """Runs the grid; `args` is the address of an array of pointers to the argument values. 0, or the signal a work-item
    raised (the launch stops there)."""
    with _LAUNCH_LOCK: return self.dll.hg_launch((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*group), args, seed)
