"""The WebGPU runtime on wgpu-py: the adapter, buffers, shader validation, compute pipelines and dispatches.

One adapter (the system's preferred, `power_preference="high-performance"`), one GPUDevice opened with the adapter's
own limits (WebGPU's defaults are far lower: 8 storage buffers per stage, 256 threads per group) and one queue.
Buffers are storage buffers whose sizes are rounded up to 4 bytes (WebGPU copies and bindings move whole words).

Kernels are recorded into one command encoder and submitted together (a submission costs about as much as a small
kernel here): the encoder is submitted after BATCH kernels, and before anything that the queue would otherwise order
ahead of them (a host write or read, a wait, freeing a buffer)."""
from __future__ import annotations
import functools, math, os, tempfile, time
from typing import Any, Sequence
import numpy as np
import wgpu
from tinycore.backend import BufferSpec, CompileError, Compiler, LRUAllocator, Program, open_once
from tinygrad_webgpu.renderer import FOLDED, WORKGROUP_SIZE, WGSLRenderer

NO_ADAPTER = ("no WebGPU adapter found: wgpu found no Vulkan, Metal or D3D12 driver (on Debian/Ubuntu `apt install "
              "mesa-vulkan-drivers` gives a CPU one, lavapipe)")
# the limits this backend relies on: asked for at the adapter's values
LIMITS = ("max-storage-buffers-per-shader-stage", "max-storage-buffer-binding-size", "max-buffer-size", "max-compute-invocations-per-workgroup",
          "max-compute-workgroup-size-x", "max-compute-workgroup-size-y", "max-compute-workgroup-size-z", "max-compute-workgroups-per-dimension",
          "max-compute-workgroup-storage-size", "max-bindings-per-bind-group")
USAGE = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
BATCH = 32

@functools.cache
def adapter() -> Any:
  """The system's preferred WebGPU adapter, or None."""
  # Mesa's Vulkan drivers print "error: XDG_RUNTIME_DIR is invalid" on stderr while enumerating when it is unset (a
  # server, CI): compute needs no window system, so a private empty folder stands in for the call
  if os.environ.get("XDG_RUNTIME_DIR"): return wgpu.gpu.request_adapter_sync(power_preference="high-performance")
  with tempfile.TemporaryDirectory() as run_dir:
    os.environ["XDG_RUNTIME_DIR"] = run_dir
    try: return wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    finally: del os.environ["XDG_RUNTIME_DIR"]

def unavailable_reason(idx: int = 0) -> str | None:
  """None when WEBGPU:idx can open here, else why not."""
  try: a = adapter()
  except Exception as e: return f"{NO_ADAPTER} ({type(e).__name__}: {e})"  # wgpu-native raises when it finds no backend at all
  if a is None: return NO_ADAPTER
  if idx != 0: return f"only WEBGPU (the preferred adapter, {describe(a)}) exists: this backend opens one adapter"
  return None

def describe(a: Any) -> str:
  """The adapter in words: its name, whether it is a software (CPU) or a hardware one, and the native API under it."""
  info = a.info
  kind = {"CPU": "a software adapter (runs on the CPU)", "DiscreteGPU": "a discrete GPU", "IntegratedGPU": "an integrated GPU"}
  return f"{info.get('device') or info.get('vendor')}, {kind.get(info.get('adapter_type'), 'hardware')}, through {info.get('backend_type')}"

class WebGPUDevice:
  """The opened adapter: its device, queue, limits and features."""
  def __init__(self, device: str, idx: int):
    self.device, self.adapter = device, adapter()
    self.limits = {k: self.adapter.limits[k] for k in LIMITS}
    self.has_f16 = "shader-f16" in self.adapter.features
    self.dev = self.adapter.request_device_sync(required_features=["shader-f16"] if self.has_f16 else [], required_limits=self.limits)
    self.queue = self.dev.queue
    self.modules: dict[str, Any] = {}  # shader modules by source: validated by the compiler, reused by the program
    self.pending: Any = None  # the command encoder recording kernels not yet submitted
    self.npending = 0
  def module(self, src: str) -> Any:
    """The shader module of a WGSL source (validated once); CompileError with the compiler's message."""
    if src not in self.modules:
      try: self.modules[src] = self.dev.create_shader_module(code=src)
      except wgpu.GPUError as e: raise CompileError(f"WGSL error on {self.device} ({describe(self.adapter)}):\n{e}\n{src}") from e
    return self.modules[src]
  def encoder(self) -> Any:
    """The command encoder that records work until the next flush."""
    if self.pending is None: self.pending = self.dev.create_command_encoder()
    self.npending += 1
    return self.pending
  def dispatch(self, pipe: Any, group: Any, groups: tuple[int, ...]) -> None:
    """Records one kernel launch; submits the batch when it is full."""
    cp = self.encoder().begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, group)
    cp.dispatch_workgroups(*groups)
    cp.end()
    if self.npending >= BATCH: self.flush()
  def flush(self) -> None:
    """Submits the recorded work."""
    if self.pending is not None: self.queue.submit([self.pending.finish()])
    self.pending, self.npending = None, 0
  def synchronize(self) -> None:
    """Waits for every recorded command: mapping a buffer for reading completes only after the work queued before it."""
    self.flush()
    self.queue.read_buffer(self.sync_buffer)
  @functools.cached_property
  def sync_buffer(self) -> Any: return self.dev.create_buffer(size=4, usage=USAGE)

get_device = open_once(unavailable_reason, WebGPUDevice)

def _words(n: int) -> int: return max(4, (n + 3) // 4 * 4)

# *** allocator ***

class WebGPUAllocator(LRUAllocator):
  """GPUBuffers of whole 4-byte words; the handle is the GPUBuffer (its `size` is the padded size).

  Every buffer not yet freed stays referenced from `live`: a GPUBuffer releases its memory in `__del__`, and when the
  garbage collector breaks a cycle holding a core Buffer, it finalizes the GPUBuffer too, after or before the Buffer's
  own `__del__` has handed it to the LRU cache, which would then give out a released buffer."""
  def __init__(self, dev: WebGPUDevice):
    self.dev, self.live = dev, set[Any]()
    super().__init__()
  def _alloc(self, size: int, options: BufferSpec) -> Any:
    # a kernel binds the whole buffer, so no buffer may exceed what one binding can hold
    if size > (most := min(self.dev.limits["max-storage-buffer-binding-size"], self.dev.limits["max-buffer-size"])):
      raise MemoryError(f"{self.dev.device}: cannot allocate {size} bytes: the adapter binds at most {most} bytes per storage buffer")
    try: buf = self.dev.dev.create_buffer(size=_words(size), usage=USAGE)
    except wgpu.GPUError as e: raise MemoryError(f"{self.dev.device}: allocating {size} bytes failed: {e}") from e
    self.live.add(buf)
    return buf
  def _free(self, opaque: Any, options: BufferSpec) -> None:
    self.dev.flush()  # recorded kernels may use it
    self.live.discard(opaque)
    opaque.destroy()
  def _copyin(self, dest: Any, src: memoryview) -> None:
    if src.nbytes == 0: return
    data = bytes(src) + b"\0" * (_words(src.nbytes) - src.nbytes)  # queue writes move whole words
    self.dev.flush()  # the queue runs a write before work submitted after it: recorded kernels go first
    self.dev.queue.write_buffer(dest, 0, data)
  def _copyout(self, dest: memoryview, src: Any) -> None:
    if dest.nbytes == 0: return
    self.dev.flush()
    dest[:] = self.dev.queue.read_buffer(src, 0, _words(dest.nbytes))[:dest.nbytes]
  def _transfer(self, dest: Any, src: Any, nbytes: int, src_dev: Any = None, dest_dev: Any = None) -> None:
    if nbytes == 0: return
    self.dev.encoder().copy_buffer_to_buffer(src, 0, dest, 0, _words(nbytes))
  def synchronize(self) -> None: self.dev.synchronize()

# *** compiler ***

class WebGPUCompiler(Compiler):
  """WGSL is compiled by the driver when a pipeline is made: `compile` validates the source (naga, inside wgpu) and the
  binary is the source itself. Nothing is cached on disk (cachekey None): validation is cheaper than a cache lookup."""
  def __init__(self, dev: WebGPUDevice): self.dev = dev
  def compile(self, src: str) -> bytes:
    self.dev.module(src)
    return src.encode()

# *** program ***

class WebGPUProgram(Program):
  """A compute pipeline per workgroup size (the size is an override constant) and a bind group per set of buffers."""
  def __init__(self, device: str, name: str, lib: bytes):
    super().__init__(device, name, lib)
    self.dev = get_device(device, self.index)
    self.module = self.dev.module(lib.decode())
    self.pipelines: dict[tuple[int, int, tuple[int, ...]], Any] = {}
  def pipeline(self, nbufs: int, nvals: int, local_size: tuple[int, ...]) -> tuple[Any, Any]:
    """The pipeline and its bind group layout for this many buffers (storage) and variables (one uniform), made once."""
    if (key := (nbufs, nvals, local_size)) not in self.pipelines:
      stage = wgpu.ShaderStage.COMPUTE
      entries = [{"binding": i, "visibility": stage, "buffer": {"type": "storage"}} for i in range(nbufs)]
      if nvals: entries.append({"binding": nbufs, "visibility": stage, "buffer": {"type": "uniform"}})
      layout = self.dev.dev.create_bind_group_layout(entries=entries)
      try:
        pipe = self.dev.dev.create_compute_pipeline(layout=self.dev.dev.create_pipeline_layout(bind_group_layouts=[layout]), compute={
          "module": self.module, "entry_point": self.name, "constants": dict(zip(WORKGROUP_SIZE, local_size))})
      except wgpu.GPUError as e: raise CompileError(f"{self.device}: making the pipeline of {self.name} failed: error {e}") from e
      self.pipelines[key] = (pipe, layout)
    return self.pipelines[key]
  def launcher(self, bufs: Sequence[Any], global_size: Sequence[int], local_size: Sequence[int] | None, vals: Sequence[int] = ()) -> Any:
    gs, ls = _pad3(global_size), _pad3(local_size or (1, 1, 1))
    lim = self.dev.limits
    if (most := lim["max-compute-workgroups-per-dimension"]) < max(gs):
      # a kernel the renderer folded numbers its groups linearly over rows of `most`
      if FOLDED not in self.lib.decode() or (total := math.prod(gs)) > most * most:
        raise RuntimeError(f"{self.device}: {self.name} needs {gs} workgroups, the adapter dispatches at most {most} per dimension")
      gs = (most, (total + most - 1) // most, 1)
    if (n := ls[0] * ls[1] * ls[2]) > lim["max-compute-invocations-per-workgroup"] or any(
        s > lim[f"max-compute-workgroup-size-{a}"] for s, a in zip(ls, "xyz")):
      raise RuntimeError(f"{self.device}: {self.name} asks for a workgroup of {ls} ({n} threads), beyond the adapter's limits")
    if len(bufs) > (most := lim["max-storage-buffers-per-shader-stage"]):
      raise RuntimeError(f"{self.device}: {self.name} binds {len(bufs)} buffers, the adapter allows {most} storage buffers per shader stage")
    pipe, layout = self.pipeline(len(bufs), len(vals), ls)
    entries = [{"binding": i, "resource": {"buffer": b}} for i, b in enumerate(bufs)]
    if vals:
      ub = self.dev.dev.create_buffer(size=_words(16 * ((len(vals) + 3) // 4)), usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
      self.dev.queue.write_buffer(ub, 0, np.array(vals, dtype=np.int32).tobytes())
      entries.append({"binding": len(bufs), "resource": {"buffer": ub}})
    group = self.dev.dev.create_bind_group(layout=layout, entries=entries)
    def launch() -> None:
      if 0 not in gs: self.dev.dispatch(pipe, group, gs)  # an empty launch has no work
    return launch
  def __call__(self, *bufs: Any, global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] | None = (1, 1, 1),
               vals: Sequence[int] = (), wait: bool = False) -> float | None:
    launch = self.launcher(bufs, global_size, local_size, vals)
    if wait: self.dev.synchronize()
    st = time.perf_counter()
    launch()
    if not wait: return None
    self.dev.synchronize()
    return time.perf_counter() - st

def _pad3(x: Sequence[int]) -> tuple[int, ...]:
  if len(x) > 3: raise ValueError(f"WebGPU dispatches have at most 3 dimensions, got {tuple(x)}")
  return tuple(x) + (1,) * (3 - len(x))

# *** the parts the plugin's hooks build, each for the opened device ***

def allocator(device: str, idx: int) -> WebGPUAllocator: return WebGPUAllocator(get_device(device, idx))
def compiler(device: str, idx: int) -> WebGPUCompiler: return WebGPUCompiler(get_device(device, idx))
# WebGPU's guaranteed limits: what a renderer declares where no adapter is here to ask (rendering needs no hardware)
DEFAULT_LIMITS = {"max-compute-workgroup-size-x": 256, "max-compute-workgroup-size-y": 256, "max-compute-workgroup-size-z": 64,
                  "max-compute-invocations-per-workgroup": 256, "max-compute-workgroups-per-dimension": 65535,
                  "max-compute-workgroup-storage-size": 16384}

def renderer(device: str, idx: int) -> WGSLRenderer:
  if unavailable_reason(idx) is not None: return WGSLRenderer.for_limits(device, DEFAULT_LIMITS, has_f16=False)
  d = get_device(device, idx)
  return WGSLRenderer.for_limits(device, d.limits, d.has_f16)
def program(device: str, idx: int) -> type[WebGPUProgram]:
  get_device(device, idx)
  return WebGPUProgram
