#!/usr/bin/env python3
"""One benchmark for tinycore (CLANG) against PyTorch (CPU), numpy and tinygrad 0.14.0, in one run.

    .venv/bin/python bench/bench.py            # the full run, writes bench/RESULTS.md
    .venv/bin/python bench/bench.py --quick    # fewer repetitions and smaller training loops, for iterating
    .venv/bin/python bench/bench.py --libs tinycore,torch --groups matmul,conv --no-write
    .venv/bin/python bench/bench.py --quick --libs tinycore,torch --groups resnet18,gpt,digits   # the real models (bench/models/)

Every (library, case group) runs in a process of its own, so each group's peak RSS is its own. Inside a process
each case is warmed up first (compiles, caches, allocator pools), then timed many times with the result realized /
synchronized inside the timed region; the table shows medians. The script also measures what this machine can do
at best: the bandwidth of a large copy (bytes read + written) and numpy's BLAS matmul rate.
Ratios are `peer time / tinycore time`: above 1 means tinycore is faster.

`--march native,x86-64-v3` runs tinycore once per CLANG_MARCH (x86-64-v3: AVX2 code, also on an AVX-512 CPU) in the same
run, each against the same peers; every tinycore result records the CPU model, the march and the ISA level that the
compiler's predefined macros give for it (tinygrad_clang.target)."""
from __future__ import annotations
import argparse, contextlib, datetime, gc, json, math, os, platform, random, resource, statistics, subprocess, sys, tempfile, time, traceback
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIBS = ("tinycore", "torch", "numpy", "tinygrad")
GROUPS = ("limits", "matmul", "elementwise", "reduce", "conv", "embedding", "overhead", "train_mlp", "train_cnn", "eager_mlp", "eager_gpt",
          "coldstart")
# real models (bench/models/): tinycore, torch eager and torch.compile in one process, one thread; not in the default
# run (tens of minutes on 2 cores): `--groups resnet18,gpt,digits`
MODEL_GROUPS = ("resnet18", "gpt", "digits")
N16M = 16 * 1024 * 1024

# *** measuring ***

def rss_now_mb() -> float:
  with open("/proc/self/statm") as f: return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
def rss_peak_mb() -> float: return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

class Timer:
  def __init__(self, quick: bool): self.quick = quick
  def median(self, fn: Callable[[], Any], warmup: int = 2, min_reps: int = 5, max_reps: int = 40, budget_s: float = 3.0) -> float:
    """Median seconds of one call of fn (fn must realize/synchronize its own result)."""
    if self.quick: min_reps, max_reps, budget_s = 3, max(3, max_reps // 4), budget_s / 4
    for _ in range(warmup): fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < max_reps and (len(times) < min_reps or time.perf_counter() - start < budget_s):
      st = time.perf_counter()
      fn()
      times.append(time.perf_counter() - st)
    return statistics.median(times)
  def median_per_call(self, fn: Callable[[], Any], calls: int = 1000, batches: int = 7, warmup: int = 50) -> float:
    """Median over batches of the mean time of one call, for calls too short to time one by one."""
    if self.quick: calls, batches = max(1, calls // 5), 3
    for _ in range(warmup): fn()
    out = []
    for _ in range(batches):
      st = time.perf_counter()
      for _ in range(calls): fn()
      out.append((time.perf_counter() - st) / calls)
    return statistics.median(out)

def result(t: float | None, metric: float | None = None, unit: str = "", note: str = "", **extra: Any) -> dict:
  return {"t": t, "metric": metric, "unit": unit, "note": note, **extra}

# *** the libraries, behind one small interface ***

class Lib:
  name = ""
  def __init__(self, quick: bool): self.timer, self.quick = Timer(quick), quick
  def rand(self, *shape: int) -> Any: raise NotImplementedError

class TinycoreLib(Lib):
  name = "tinycore"
  def __init__(self, quick: bool):
    super().__init__(quick)
    os.environ.setdefault("DEV", "CLANG")
    import tinycore
    from tinycore import Tensor, Device
    self.tc, self.Tensor, self.Device = tinycore, Tensor, Device
    self.np = __import__("numpy")
    self.rng = self.np.random.default_rng(0)
  def rand(self, *shape: int) -> Any: return self.Tensor(self.rng.standard_normal(shape, dtype=self.np.float32)).realize()
  def run(self, f: Callable[[], Any]) -> Callable[[], Any]: return lambda: f().realize()
  def jit(self, f: Callable) -> Callable: return self.tc.TinyJit(f)
  def sync(self) -> None: pass
  def training(self) -> Any:
    if hasattr(self.Tensor, "train"): return self.Tensor.train()
    self.Tensor.training = True
    return contextlib.nullcontext()

class TinygradLib(Lib):
  name = "tinygrad"
  def __init__(self, quick: bool):
    super().__init__(quick)
    os.environ.setdefault("DEV", "CPU")
    import tinygrad
    from tinygrad import Tensor, Device
    self.tc, self.Tensor, self.Device = tinygrad, Tensor, Device
    self.np = __import__("numpy")
    self.rng = self.np.random.default_rng(0)
  def rand(self, *shape: int) -> Any: return self.Tensor(self.rng.standard_normal(shape, dtype=self.np.float32)).realize()
  def sync(self) -> None: self.Device[self.Device.DEFAULT].synchronize()
  def run(self, f: Callable[[], Any]) -> Callable[[], Any]:
    def g() -> Any:
      out = f().realize()
      self.sync()
      return out
    return g
  def jit(self, f: Callable) -> Callable: return self.tc.TinyJit(f)
  def training(self) -> Any:
    from tinygrad.helpers import Context
    return Context(TRAINING=1)

class TorchLib(Lib):
  name = "torch"
  def __init__(self, quick: bool):
    super().__init__(quick)
    import torch
    self.torch = torch
    self.g = torch.Generator().manual_seed(0)
  def rand(self, *shape: int) -> Any: return self.torch.randn(*shape, generator=self.g)
  def run(self, f: Callable[[], Any]) -> Callable[[], Any]:
    def g() -> Any:
      with self.torch.no_grad(): return f()
    return g

class NumpyLib(Lib):
  name = "numpy"
  def __init__(self, quick: bool):
    super().__init__(quick)
    import numpy as np
    self.np = np
    self.rng = np.random.default_rng(0)
  def rand(self, *shape: int) -> Any: return self.rng.standard_normal(shape, dtype=self.np.float32)
  def run(self, f: Callable[[], Any]) -> Callable[[], Any]: return f

def make_lib(name: str, quick: bool) -> Lib:
  return {"tinycore": TinycoreLib, "tinygrad": TinygradLib, "torch": TorchLib, "numpy": NumpyLib}[name](quick)

NA = "n/a"

def _gelu_tensor(x: Any) -> Any:
  """tanh-approximated GELU on a tinycore/tinygrad Tensor, composed where the library has no gelu."""
  if hasattr(x, "gelu"): return x.gelu()
  return 0.5 * x * (1 + (math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)).tanh())

def _softmax_tensor(x: Any) -> Any:
  if hasattr(x, "softmax"): return x.softmax(-1)
  e = (x - x.max(-1, keepdim=True)).exp()
  return e / e.sum(-1, keepdim=True)

# *** case groups ***

def group_limits(lib: Lib) -> dict:
  """What this machine does at best: a large copy (read+write bytes) and numpy's BLAS matmul."""
  if lib.name != "numpy": return {}
  np = lib.np
  n = 64 * 1024 * 1024  # 256 MB per array
  a, b = np.ones(n, np.float32), np.empty(n, np.float32)
  b[:] = 0
  t = lib.timer.median(lambda: np.copyto(b, a), warmup=1, min_reps=5, max_reps=15)
  out = {"copy 256MB": result(t, 2 * a.nbytes / t / 1e9, "GB/s")}
  x, y = lib.rand(2048, 2048), lib.rand(2048, 2048)
  t = lib.timer.median(lambda: x @ y, warmup=1, min_reps=5, max_reps=20)
  out["BLAS matmul 2048"] = result(t, 2 * 2048**3 / t / 1e9, "GFLOP/s")
  return out

def group_matmul(lib: Lib) -> dict:
  out = {}
  for n in (256, 1024, 2048):
    a, b = lib.rand(n, n), lib.rand(n, n)
    if lib.name == "tinygrad" and n == 2048 and lib.quick: out[f"matmul {n}"] = result(None, note="skipped in --quick"); continue
    t = lib.timer.median(lib.run(lambda a=a, b=b: a @ b), max_reps=40 if n < 2048 else 15)
    out[f"matmul {n}"] = result(t, 2 * n**3 / t / 1e9, "GFLOP/s")
    del a, b
    gc.collect()
  return out

def group_elementwise(lib: Lib) -> dict:
  a, b, c = lib.rand(N16M), lib.rand(N16M), lib.rand(N16M)
  out = {}
  if lib.name == "numpy":
    np = lib.np
    f1 = lambda: np.maximum(a * b + c, 0)  # noqa: E731
    def f2() -> Any:
      x = a * b + c
      return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))
  elif lib.name == "torch":
    F = __import__("torch.nn.functional", fromlist=["gelu"])
    f1 = lambda: (a * b + c).relu()  # noqa: E731
    f2 = lambda: F.gelu(a * b + c, approximate="tanh")  # noqa: E731
  else:
    f1 = lambda: (a * b + c).relu()  # noqa: E731
    f2 = lambda: _gelu_tensor(a * b + c)  # noqa: E731
  t = lib.timer.median(lib.run(f1))
  out["(a*b+c).relu() 16M"] = result(t, 4 * N16M * 4 / t / 1e9, "GB/s")
  t = lib.timer.median(lib.run(f2), max_reps=20)
  out["gelu(a*b+c) 16M"] = result(t, 4 * N16M * 4 / t / 1e9, "GB/s")
  return out

def group_reduce(lib: Lib) -> dict:
  out = {}
  a = lib.rand(N16M)
  t = lib.timer.median(lib.run(lambda a=a: a.sum()))
  out["sum 16M"] = result(t, N16M * 4 / t / 1e9, "GB/s")
  del a
  x = lib.rand(4096, 4096)
  if lib.name == "numpy":
    np = lib.np
    def sm() -> Any:
      e = np.exp(x - x.max(-1, keepdims=True))
      return e / e.sum(-1, keepdims=True)
  elif lib.name == "torch": sm = lambda: x.softmax(-1)  # noqa: E731
  else: sm = lambda: _softmax_tensor(x)  # noqa: E731
  t = lib.timer.median(lib.run(sm), max_reps=20)
  out["softmax 4096x4096"] = result(t, 2 * 4096 * 4096 * 4 / t / 1e9, "GB/s")
  return out

def _conv_flops(bs: int, cin: int, cout: int, oh: int, ow: int, k: int) -> int: return 2 * bs * cout * oh * ow * cin * k * k

def group_conv(lib: Lib) -> dict:
  if lib.name == "numpy": return {"conv2d seed (16,3,64,64)": result(None, note=NA), "conv2d resnet (32,64,56,56)": result(None, note=NA)}
  out = {}
  for name, xs, ws, pad in (("conv2d seed (16,3,64,64)", (16, 3, 64, 64), (16, 3, 3, 3), 0),
                            ("conv2d resnet (32,64,56,56)", (32, 64, 56, 56), (64, 64, 3, 3), 1)):
    x, w = lib.rand(*xs), lib.rand(*ws)
    oh = xs[2] + 2 * pad - 2
    if lib.name == "torch":
      F = __import__("torch.nn.functional", fromlist=["conv2d"])
      f = lambda F=F, x=x, w=w, pad=pad: F.conv2d(x, w, padding=pad)  # noqa: E731
    else: f = lambda x=x, w=w, pad=pad: x.conv2d(w, padding=pad)  # noqa: E731
    t = lib.timer.median(lib.run(f), max_reps=30)
    out[name] = result(t, _conv_flops(xs[0], xs[1], ws[0], oh, oh, 3) / t / 1e9, "GFLOP/s")
  return out

def group_embedding(lib: Lib) -> dict:
  """An embedding lookup, 64 tokens of GPT-2's 50257 x 768 table and of a 6282-row one: forward `w[idx]`, and backward
  `(w[idx] * 2).sum()` into w's gradient. Its cost should follow the tokens, not the table (the gradient's zero-fill
  aside)."""
  out: dict[str, Any] = {}
  for rows in (50257, 6282):
    ids = [int(x) for x in __import__("numpy").random.default_rng(rows).integers(0, rows, 64)]
    w = lib.rand(rows, 768)
    if lib.name == "numpy":
      idx = lib.np.array(ids)
      out[f"embedding fwd 64 of {rows}x768"] = result(lib.timer.median(lambda w=w, idx=idx: w[idx]))
      out[f"embedding bwd 64 of {rows}x768"] = result(None, note=NA)
      continue
    if lib.name == "torch":
      idx = lib.torch.tensor(ids)
      w.requires_grad_(True)
    else:
      idx = lib.Tensor(ids).realize()
      w.requires_grad = True
    out[f"embedding fwd 64 of {rows}x768"] = result(lib.timer.median(lib.run(lambda w=w, idx=idx: w[idx]), max_reps=20))
    def bwd(w: Any = w, idx: Any = idx) -> None:
      w.grad = None
      (w[idx] * 2).sum().backward()
      if lib.name != "torch": w.grad.realize()
      if lib.name == "tinygrad": lib.sync()  # type: ignore[attr-defined]
    out[f"embedding bwd 64 of {rows}x768"] = result(lib.timer.median(bwd, max_reps=20))
  return out

def group_overhead(lib: Lib) -> dict:
  out: dict[str, Any] = {}
  if lib.name == "numpy":
    a, b = lib.rand(4), lib.rand(4)
    out["tiny a+b, cached"] = result(lib.timer.median_per_call(lambda: a + b, calls=20000), unit="us")
    return out
  if lib.name == "torch":
    a, b = lib.rand(4), lib.rand(4)
    out["tiny a+b, cached"] = result(lib.timer.median_per_call(lambda: a + b, calls=20000), unit="us")
    k = iter(range(1, 1 << 30))
    out["tiny a+c, new const"] = result(lib.timer.median_per_call(lambda: a + next(k), calls=20000), unit="us")
    def ten(x: Any) -> Any:
      for _ in range(10): x = x * 1.0001 + 1
      return x
    x = lib.rand(4)
    out["jit replay, 10 kernels"] = result(lib.timer.median_per_call(lambda: ten(x), calls=2000) / 10, unit="us",
                                           note="eager: per op, no jit")
    return out
  tiny = lib.name == "tinygrad"
  a, b = lib.rand(4), lib.rand(4)
  out["tiny a+b, cached"] = result(lib.timer.median_per_call(lambda: (a + b).realize(), calls=200 if tiny else 5000,
                                                             warmup=5 if tiny else 50), unit="us")
  # constants never used before (not even by an earlier run of this script): nothing can come from a disk cache
  k = iter(range(random.randrange(1 << 40), 1 << 62))
  out["tiny a+c, new const"] = result(lib.timer.median_per_call(lambda: (a + float(next(k))).realize(), calls=3 if tiny else 20,
                                                                batches=3, warmup=1), unit="us")
  def ten(x: Any) -> Any:
    for _ in range(10): x = (x * 1.0001 + 1).contiguous()
    return x
  j = lib.jit(ten)
  x = lib.rand(4)
  for _ in range(3): j(x)
  nk = 10
  out["jit replay, 10 kernels"] = result(lib.timer.median_per_call(lambda: j(x), calls=200 if tiny else 2000, warmup=5) / nk,
                                         unit="us", note="per kernel")
  if lib.name == "tinycore":
    try: out["jit replay, 10 kernels"]["kernels"] = len(j.jit_cache)
    except Exception: pass
  return out

# training: the seed's MNIST CNN and an MLP, Adam, batch 128, on a fixed synthetic batch

def _train_setup(lib: Lib, kind: str) -> tuple[Callable[[], Any], Callable[[Any], float]]:
  """A jitted (tinycore/tinygrad) or eager (torch) train step, and a function reading its loss."""
  bs = 128
  np = __import__("numpy")
  rng = np.random.default_rng(0)
  X = rng.standard_normal((bs, 1, 28, 28) if kind == "cnn" else (bs, 784), dtype=np.float32)
  Y = rng.integers(0, 10, bs)
  if lib.name == "torch":
    torch = lib.torch
    nn = torch.nn
    torch.manual_seed(0)
    if kind == "mlp": model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    else:
      model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), nn.Dropout(0.5), nn.Linear(1600, 10))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xt, yt = torch.from_numpy(X), torch.from_numpy(Y).long()
    def step() -> Any:
      opt.zero_grad()
      loss = nn.functional.cross_entropy(model(xt), yt)
      loss.backward()
      opt.step()
      return loss
    return step, lambda l: float(l.item())
  Tensor, nnm = lib.Tensor, lib.tc.nn
  Tensor.manual_seed(0)
  if kind == "mlp":
    layers = [nnm.Linear(784, 512), nnm.Linear(512, 512), nnm.Linear(512, 10)]
    def model(x: Any) -> Any: return layers[2](layers[1](layers[0](x).relu()).relu())
  else:
    l1, l2, l3 = nnm.Conv2d(1, 32, kernel_size=(3, 3)), nnm.Conv2d(32, 64, kernel_size=(3, 3)), nnm.Linear(1600, 10)
    def model(x: Any) -> Any:
      x = l1(x).relu().max_pool2d((2, 2))
      x = l2(x).relu().max_pool2d((2, 2))
      x = x.flatten(1)
      return l3(x.dropout(0.5) if hasattr(x, "dropout") else x)
  params = nnm.state.get_parameters(layers if kind == "mlp" else [l1, l2, l3])
  opt = nnm.optim.Adam(params, lr=1e-3)
  xt, yt = Tensor(X).realize(), Tensor(Y.astype(np.int32)).realize()
  onehot = Tensor(np.eye(10, dtype=np.float32)[Y]).realize()
  def loss_fn(out: Any, y: Any, oh: Any) -> Any:
    if hasattr(out, "sparse_categorical_crossentropy"): return out.sparse_categorical_crossentropy(y)
    m = out.max(-1, keepdim=True)
    logp = out - m - (out - m).exp().sum(-1, keepdim=True).log()
    return -(logp * oh).sum(-1).mean()
  def _step(x: Any, y: Any, oh: Any) -> Any:
    opt.zero_grad()
    loss = loss_fn(model(x), y, oh).backward()
    opt.step()
    return loss.realize()
  @lib.jit
  def step(x: Any, y: Any, oh: Any) -> Any:
    with lib.training(): return _step(x, y, oh)
  return (lambda: step(xt, yt, onehot)), lambda l: float(l.item())

def _group_train(lib: Lib, kind: str) -> dict:
  name = f"train step {kind.upper()} bs128 Adam"
  if lib.name == "numpy": return {name: result(None, note=NA)}
  try:
    step, read = _train_setup(lib, kind)
    st = time.perf_counter()
    read(step())
    first = time.perf_counter() - st
  except Exception as e:
    return {name: result(None, note=f"not available yet ({type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''})")}
  sync = getattr(lib, "sync", lambda: None)
  def one() -> None:
    step()
    sync()
  t = lib.timer.median(one, warmup=3, min_reps=10, max_reps=60)
  # memory over a training loop: RSS after step 20 and after step 200 (and the process peak)
  steps = 60 if lib.quick else 200
  rss = {}
  loss = None
  for i in range(steps):
    loss = step()
    if i + 1 == 20: sync(); rss[20] = rss_now_mb()
  sync()
  final_loss = read(loss)
  rss[steps] = rss_now_mb()
  return {name: result(t, None, "ms", first_step_s=first, rss20_mb=rss[20], rss_end_mb=rss[steps], steps=steps,
                       loss=final_loss, peak_mb=rss_peak_mb())}

def group_train_mlp(lib: Lib) -> dict: return _group_train(lib, "mlp")
def group_train_cnn(lib: Lib) -> dict: return _group_train(lib, "cnn")

def group_coldstart(lib: Lib) -> dict:
  """The first call of the MLP train step, timed (the process's compile cache dir is set by the parent)."""
  if lib.name != "tinycore": return {}
  try:
    step, read = _train_setup(lib, "mlp")
    st = time.perf_counter()
    read(step())
    t1 = time.perf_counter() - st
    st = time.perf_counter()
    read(step())
    read(step())
    t23 = time.perf_counter() - st
  except Exception as e:
    return {"mlp first step": result(None, note=f"not available yet ({type(e).__name__})")}
  return {"mlp first step": result(t1, unit="s", then_2_3_s=t23)}

# eager training (no TinyJit), as a PyTorch user writes it: every step builds its graph anew and reads its loss

def _eager_mlp_setup(lib: Lib, gathered: bool) -> Callable[[], float]:
  """An eager MLP step (64-128-10, Adam, batch 128) over a 1024-sample data set: the batch is a slice (X[i:i+128], the
  8 batches of an epoch in turn) or a gather of random rows (X[idx], a new index tensor each step)."""
  np = __import__("numpy")
  rng = np.random.default_rng(0)
  n, bs = EPOCH * 128, 128
  X, Y = rng.standard_normal((n, 64), dtype=np.float32), rng.integers(0, 10, n).astype(np.int32)
  order = iter(range(1 << 62))
  def batch_idx() -> Any: return rng.integers(0, n, bs).astype(np.int32)
  if lib.name == "torch":
    torch = lib.torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    topt = torch.optim.Adam(model.parameters(), lr=1e-3)
    tX, tY = torch.from_numpy(X), torch.from_numpy(Y).long()
    def tstep() -> float:
      if gathered:
        idx = torch.from_numpy(batch_idx()).long()
        x, y = tX[idx], tY[idx]
      else:
        s = next(order) * bs % n
        x, y = tX[s:s + bs], tY[s:s + bs]
      topt.zero_grad()
      loss = torch.nn.functional.cross_entropy(model(x), y)
      loss.backward()
      topt.step()
      return loss.item()
    return tstep
  Tensor, nnm = lib.Tensor, lib.tc.nn
  Tensor.manual_seed(0)
  l1, l2 = nnm.Linear(64, 128), nnm.Linear(128, 10)
  opt = nnm.optim.Adam(nnm.state.get_parameters([l1, l2]), lr=1e-3)
  dX, dY = Tensor(X).realize(), Tensor(Y).realize()
  def step() -> float:
    if gathered:
      idx = Tensor(batch_idx())
      x, y = dX[idx], dY[idx]
    else:
      s = next(order) * bs % n
      x, y = dX[s:s + bs], dY[s:s + bs]
    with lib.training():
      opt.zero_grad()
      loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward()
      opt.step()
    return loss.item()
  return step

EPOCH = 8  # batches in the eager MLP's data set

def group_eager_mlp(lib: Lib) -> dict:
  """The eager MLP step, timed after one epoch (a slice at a new offset is a new kernel in tinycore and tinygrad: the
  first epoch compiles EPOCH variants; its time is reported as first_epoch_s)."""
  out = {}
  for gathered in (False, True):
    name = f"eager MLP step 64-128-10 bs128 Adam, {'gathered X[idx]' if gathered else 'sliced'} batch"
    if lib.name == "numpy": out[name] = result(None, note=NA); continue
    step = _eager_mlp_setup(lib, gathered)
    st = time.perf_counter()
    for _ in range(EPOCH): step()
    first = time.perf_counter() - st
    slow = lib.name == "tinygrad"
    t = lib.timer.median(step, warmup=EPOCH, min_reps=2 * EPOCH, max_reps=5 * EPOCH if slow else 50 * EPOCH)
    out[name] = result(t, None, "ms", first_epoch_s=first)
  return out

GPT = {"vocab": 1024, "d": 256, "heads": 4, "blocks": 2, "T": 128, "bs": 8}

def _gpt_torch(lib: Lib, cfg: dict) -> Callable[[Any, Any], Any]:
  """A GPT (pre-norm blocks, causal attention, GELU MLP, tied embedding), its loss as a function of tokens and targets."""
  torch = lib.torch
  nn, F = torch.nn, torch.nn.functional
  torch.manual_seed(0)
  d, h, T, V = cfg["d"], cfg["heads"], cfg["T"], cfg["vocab"]
  wte, wpe = nn.Embedding(V, d), nn.Embedding(T, d)
  blocks = [dict(ln1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d), proj=nn.Linear(d, d), ln2=nn.LayerNorm(d), fc=nn.Linear(d, 4 * d),
                 fc2=nn.Linear(4 * d, d)) for _ in range(cfg["blocks"])]
  lnf = nn.LayerNorm(d)
  mods = nn.ModuleList([wte, wpe, lnf] + [m for b in blocks for m in b.values()])
  def loss(tok: Any, tgt: Any) -> Any:
    B = tok.shape[0]
    x = wte(tok) + wpe.weight
    for b in blocks:
      q, k, v = b["qkv"](b["ln1"](x)).split(d, dim=-1)
      q, k, v = (z.reshape(B, T, h, d // h).transpose(1, 2) for z in (q, k, v))
      a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, d)
      x = x + b["proj"](a)
      x = x + b["fc2"](F.gelu(b["fc"](b["ln2"](x)), approximate="tanh"))
    return F.cross_entropy((lnf(x) @ wte.weight.T).reshape(-1, V), tgt.reshape(-1))
  loss.params = list(mods.parameters())  # type: ignore[attr-defined]
  return loss

def _gpt_tensor(lib: Lib, cfg: dict) -> Callable[[Any, Any], Any]:
  """The same GPT in tinycore / tinygrad (one API)."""
  Tensor, nn = lib.Tensor, lib.tc.nn
  Tensor.manual_seed(0)
  d, h, T, V = cfg["d"], cfg["heads"], cfg["T"], cfg["vocab"]
  wte, wpe = nn.Embedding(V, d), nn.Embedding(T, d)
  blocks = [dict(ln1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d), proj=nn.Linear(d, d), ln2=nn.LayerNorm(d), fc=nn.Linear(d, 4 * d),
                 fc2=nn.Linear(4 * d, d)) for _ in range(cfg["blocks"])]
  lnf = nn.LayerNorm(d)
  def loss(tok: Any, tgt: Any) -> Any:
    B = tok.shape[0]
    x = wte(tok) + wpe.weight
    for b in blocks:
      q, k, v = b["qkv"](b["ln1"](x)).split(d, dim=-1)
      q, k, v = (z.reshape(B, T, h, d // h).transpose(1, 2) for z in (q, k, v))
      a = q.scaled_dot_product_attention(k, v, is_causal=True).transpose(1, 2).reshape(B, T, d)
      x = x + b["proj"](a)
      x = x + b["fc2"](_gelu_tensor(b["fc"](b["ln2"](x))))
    return (lnf(x) @ wte.weight.T).reshape(-1, V).sparse_categorical_crossentropy(tgt.reshape(-1))
  loss.params = nn.state.get_parameters([wte, wpe, lnf] + [m for b in blocks for m in b.values()])  # type: ignore[attr-defined]
  return loss

def _gpt_step(lib: Lib, cfg: dict, jit: bool) -> Callable[[], float]:
  """One GPT training step (AdamW) on a new random batch of tokens, its loss read back; jit: the step under TinyJit
  (torch runs eagerly either way)."""
  np = __import__("numpy")
  rng = np.random.default_rng(0)
  def tokens() -> Any: return rng.integers(0, cfg["vocab"], (cfg["bs"], cfg["T"] + 1)).astype(np.int32)
  if lib.name == "torch":
    torch = lib.torch
    lossf = _gpt_torch(lib, cfg)
    opt = torch.optim.AdamW(lossf.params, lr=1e-3)  # type: ignore[attr-defined]
    def tstep() -> float:
      tok = torch.from_numpy(tokens()).long()
      opt.zero_grad()
      loss = lossf(tok[:, :-1], tok[:, 1:])
      loss.backward()
      opt.step()
      return loss.item()
    return tstep
  lossf = _gpt_tensor(lib, cfg)
  opt = lib.tc.nn.optim.AdamW(lossf.params, lr=1e-3)  # type: ignore[attr-defined]
  def inner(tok: Any) -> Any:
    with lib.training():
      opt.zero_grad()
      loss = lossf(tok[:, :-1], tok[:, 1:]).backward()
      opt.step()
    return loss.realize()
  f = lib.tc.TinyJit(inner) if jit else inner
  def step() -> float: return f(lib.Tensor(tokens())).item()
  return step

def group_eager_gpt(lib: Lib) -> dict:
  """A small GPT training step without TinyJit (AdamW, a new random batch of tokens each step), the same step under
  TinyJit, and the model at GPT-2's vocabulary (50257) without TinyJit (torch eager in every case)."""
  out = {}
  for cfg, jit in ((GPT, False), (GPT, True), (dict(GPT, vocab=50257), False)):
    name = f"{'jit' if jit else 'eager'} GPT step v{cfg['vocab']} d{cfg['d']} h{cfg['heads']} L{cfg['blocks']} T{cfg['T']} bs{cfg['bs']} AdamW"
    if lib.name == "numpy" or (lib.name == "torch" and jit): out[name] = result(None, note=NA); continue
    if lib.name == "tinygrad" and cfg["vocab"] > GPT["vocab"]: out[name] = result(None, note="skipped (minutes per step)"); continue
    step = _gpt_step(lib, cfg, jit)
    st = time.perf_counter()
    first_loss = step()
    first = time.perf_counter() - st
    slow = lib.name == "tinygrad" or cfg["vocab"] > GPT["vocab"]
    t = lib.timer.median(step, warmup=1 if slow else 3, min_reps=3 if slow else 5, max_reps=5 if slow else 30, budget_s=10.0)
    out[name] = result(t, None, "ms", first_step_s=first, first_loss=first_loss)
  return out

# real models (bench/models/): each group runs tinycore, torch eager and torch.compile in the tinycore worker's process,
# first_only: just the first step (the cold-compile-cache run)

def group_model(lib: Lib, group: str, first_only: bool = False) -> dict:
  if lib.name != "tinycore": return {}
  sys.path.insert(0, ROOT)  # ahead of this script's folder, where `bench` would be this file
  from bench.models import MODELS
  return __import__(f"bench.models.{MODELS[group]}", fromlist=["bench"]).bench(lib.quick, first_only)

# *** worker / driver ***

def worker(lib_name: str, group: str, quick: bool) -> None:
  try:
    lib = make_lib(lib_name, quick)
    base = group.removesuffix(":first")
    res = group_model(lib, base, group.endswith(":first")) if base in MODEL_GROUPS else globals()[f"group_{group}"](lib)
    if lib_name == "tinycore": res = {k: {**v, **target_info()} if isinstance(v, dict) else v for k, v in res.items()}
  except ImportError as e: res = {"_error": f"{lib_name} not installed ({e})"}
  except Exception as e:
    traceback.print_exc(file=sys.stderr)
    res = {"_error": f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"}
  res["_rss_peak_mb"] = rss_peak_mb()
  print("BENCHJSON " + json.dumps(res))

# the peers limited to the ISA level of a march (numpy's OpenBLAS, torch's ATen, oneDNN and MKL), so that on an AVX-512
# machine the AVX2 code is compared with what the peers do on an AVX2 machine
PEER_ISA_ENV = {"x86-64-v3": {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                              "MKL_ENABLE_INSTRUCTIONS": "AVX2"}}

def target_info() -> dict:
  """What the CLANG kernels were compiled for: CPU model, -march and ISA level."""
  from tinycore import Device
  t = getattr(Device["CLANG"].renderer, "target", None)
  return {"cpu": t.cpu_model, "march": t.march, "isa": t.isa} if t is not None else {}

def spawn(lib: str, group: str, quick: bool, env_extra: dict[str, str] | None = None, timeout: int = 1800) -> dict:
  env = {**os.environ, **(env_extra or {})}
  env.pop("DEBUG", None)
  cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, group] + (["--quick"] if quick else [])
  try: proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
  except subprocess.TimeoutExpired: return {"_error": f"timed out after {timeout}s"}
  for line in proc.stdout.splitlines():
    if line.startswith("BENCHJSON "): return json.loads(line[len("BENCHJSON "):])
  return {"_error": f"worker exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1][:150] if proc.stderr.strip() else ''}"}

def run_model_group(key: str, group: str, quick: bool, env: dict[str, str], raw: dict) -> list[str]:
  """A real-model group: its first step with an empty compile cache (a process that stops there), then the whole bench
  in a second process on the same cache (its first step is the warm one). One thread (THREADS=1 unless set); torch
  limited to the march's ISA level as the peers elsewhere."""
  env = {"THREADS": os.environ.get("THREADS", "1"), **env, **PEER_ISA_ENV.get(env.get("CLANG_MARCH", ""), {})}
  errors = []
  with tempfile.TemporaryDirectory() as d:
    cold = spawn("tinycore", group + ":first", quick, {**env, "TINYCORE_CACHE_DIR": d}, timeout=3600)
    # torch.compile's own cache private to the run: inductor's shared /tmp cache, written by runs at another ISA level,
    # once crashed a compiled kernel (SystemError inside an inductor kernel at AVX2)
    res = spawn("tinycore", group, quick, {**env, "TINYCORE_CACHE_DIR": d, "TORCHINDUCTOR_CACHE_DIR": os.path.join(d, "inductor")}, timeout=7200)
  for tag, r in (("cold", cold), ("", res)):
    if "_error" in r: errors.append(f"{key}/{group}{' (' + tag + ')' if tag else ''}: {r['_error']}")
  for case, v in res.items():
    if case.startswith("_"): continue
    v.update(group=group, load_avg=os.getloadavg())
    if "first_step_s" in v: v["first_step_warm_s"] = v["first_step_s"]
    if "first_step_s" in cold.get(case, {}): v["first_step_cold_s"] = cold[case]["first_step_s"]
    raw.setdefault(key, {})[case] = v
  return errors

def fmt_t(r: dict) -> str:
  t, unit = r.get("t"), r.get("unit")
  if t is None: return r.get("note") or NA
  if unit == "us": return f"{t*1e6:.1f} us"
  if unit == "s": return f"{t:.2f} s"
  return f"{t*1e3:.2f} ms" if t < 10 else f"{t:.1f} s"
def fmt_m(r: dict) -> str:
  m = r.get("metric")
  return "" if m is None else f"{m:.1f} {r['unit']}"

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--quick", action="store_true", help="fewer repetitions, shorter training loops")
  ap.add_argument("--libs", default=",".join(LIBS))
  ap.add_argument("--groups", default=",".join(GROUPS), help=f"default: all but the real models ({','.join(MODEL_GROUPS)})")
  ap.add_argument("--march", default=os.getenv("CLANG_MARCH", "native"),
                  help="CLANG_MARCH values to run tinycore with, comma-separated (e.g. native,x86-64-v3: AVX-512 and AVX2)")
  ap.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
  ap.add_argument("--no-write", action="store_true", help="print the table only")
  ap.add_argument("--json", help="also dump the raw results here")
  ap.add_argument("--worker", nargs=2, metavar=("LIB", "GROUP"), help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.worker: return worker(*args.worker, args.quick)
  libs, groups, marches = args.libs.split(","), args.groups.split(","), args.march.split(",")
  # tinycore runs once per march: "tinycore" for the first, "tinycore@<march>" for the others
  variants = {"tinycore" if i == 0 else f"tinycore@{m}": m for i, m in enumerate(marches)}
  raw: dict[str, dict[str, dict]] = {lib: {} for lib in libs}
  rss: dict[tuple[str, str], float] = {}
  errors: list[str] = []
  t0 = time.perf_counter()
  # numpy and torch run once per march too, at its ISA level (PEER_ISA_ENV)
  def run_keys(lib: str) -> list[tuple[str, dict]]:
    if lib not in ("tinycore", "numpy", "torch"): return [(lib, {})]
    return [(lib if i == 0 else f"{lib}@{m}", {"CLANG_MARCH": m} if lib == "tinycore" else PEER_ISA_ENV.get(m, {})) for i, m in enumerate(marches)]
  runs = [r for lib in libs for r in run_keys(lib)]
  for g in groups:
    only = "numpy" if g == "limits" else "tinycore" if g in ("coldstart",) + MODEL_GROUPS else None
    for key, env in ([r for r in runs if r[0].split("@")[0] == only] if only else runs):
      lib = key.split("@")[0]
      if g in MODEL_GROUPS:
        errors += run_model_group(key, g, args.quick, env, raw)
        print(f"  [{time.perf_counter()-t0:6.1f}s] {key:9s} {g:12s} done", file=sys.stderr)
        continue
      if g == "coldstart":
        with tempfile.TemporaryDirectory() as d:
          cold = spawn(lib, g, args.quick, {**env, "TINYCORE_CACHE_DIR": d})
          warm = spawn(lib, g, args.quick, {**env, "TINYCORE_CACHE_DIR": d})
        for tag, res in (("cold", cold), ("warm", warm)):
          if "_error" in res: errors.append(f"{key}/{g} ({tag}): {res['_error']}")
          for k, v in res.items():
            if not k.startswith("_"): raw.setdefault(key, {})[f"{k} ({tag} compile cache)"] = v
        continue
      res = spawn(lib, g, args.quick, env)
      print(f"  [{time.perf_counter()-t0:6.1f}s] {key:9s} {g:12s} {'ERROR ' + res['_error'] if '_error' in res else 'ok'}", file=sys.stderr)
      if "_error" in res: errors.append(f"{key}/{g}: {res['_error']}")
      rss[(key, g)] = res.get("_rss_peak_mb", float("nan"))
      for k, v in res.items():
        if not k.startswith("_"):
          v["group"] = g
          raw.setdefault(key, {})[k] = v
  # one report per march, each with its peers (the keys of the first march are the plain library names)
  def of(v: str) -> dict[str, str]: return {lib: v.replace("tinycore", lib) for lib in ("tinycore", "numpy", "torch")}
  md = "".join(render({**raw, **{lib: raw.get(k, {}) for lib, k in of(v).items()}},
                      {**rss, **{(lib, g): x for lib, k in of(v).items() for (lb, g), x in rss.items() if lb == k}}, libs, groups,
                      errors if i == 0 else [], args.quick, head=i == 0) for i, v in enumerate(variants))
  print(md)
  if args.json:
    with open(args.json, "w") as f: json.dump({"raw": raw, "rss": {f"{a}/{b}": v for (a, b), v in rss.items()}}, f, indent=1)
  if not args.no_write:
    with open(args.out, "w") as f: f.write(md)
    print(f"wrote {args.out}", file=sys.stderr)

def _cpu_model() -> str:
  """The CPU's model name (Linux), or the platform's processor string."""
  with contextlib.suppress(OSError):
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"): return line.split(":", 1)[1].strip()
  return platform.processor() or "unknown CPU"

def render(raw: dict, rss: dict, libs: list[str], groups: list[str], errors: list[str], quick: bool, head: bool = True) -> str:
  """The markdown of one run with one tinycore variant (`raw["tinycore"]`); head: with the title and the machine."""
  import numpy
  tgt = next((r for r in raw.get("tinycore", {}).values() if r.get("isa")), {})
  isa = f"{tgt['isa']} (CLANG_MARCH={tgt['march']})" if tgt else "unknown ISA level"
  if not head:
    note = ("Same run; numpy and torch limited to the same ISA level (OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, "
            "MKL_ENABLE_INSTRUCTIONS), tinygrad as above.")
    return "\n".join(["", f"# tinycore compiled for {isa}", "", note, ""] + _tables(raw, rss, libs, errors)) + "\n"
  lines = ["# Benchmark results", "",
           f"Measured {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} with `bench/bench.py{' --quick' if quick else ''}` "
           f"on {platform.machine()} ({os.cpu_count()} cores: {_cpu_model()}), Python {platform.python_version()}, numpy {numpy.__version__}."
           + _versions(libs) + f" Load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} (1, 5, 15 min). "
           f"tinycore's kernels compiled for {isa}.", "",
           "Times are medians of many runs after a warm-up, with the result realized (synchronized) inside the timed "
           "region. `x` columns are `peer time / tinycore time` (above 1: tinycore is faster). RSS is the peak of the "
           "process that ran the case's group (one process per library and group).", ""]
  lim = raw.get("numpy", {})
  if "copy 256MB" in lim:
    lines += ["## This machine", "", f"- large copy: {fmt_m(lim['copy 256MB'])} (bytes read + written)",
              f"- numpy BLAS matmul 2048: {fmt_m(lim['BLAS matmul 2048'])}", ""]
  return "\n".join(lines + _tables(raw, rss, libs, errors)) + "\n"

def _tables(raw: dict, rss: dict, libs: list[str], errors: list[str]) -> list[str]:
  lines: list[str] = []
  peers = [l for l in libs if l != "tinycore"]
  cases = [c for c, r in raw.get("tinycore", {}).items() if r.get("group") not in MODEL_GROUPS] or \
    sorted({c for l in libs for c in raw.get(l, {}) if c not in ("copy 256MB", "BLAS matmul 2048")})
  head = ["case", "tinycore", "rate"] + [x for p in peers for x in (p, f"x {p}")] + ["RSS MB (" + "/".join(libs) + ")"]
  lines += ["## Cases", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for c in cases:
    tc = raw.get("tinycore", {}).get(c, {})
    row = [c, fmt_t(tc), fmt_m(tc)]
    for p in peers:
      pr = raw.get(p, {}).get(c)
      if pr is None: row += ["", ""]; continue
      row.append(fmt_t(pr) + (f" ({fmt_m(pr)})" if fmt_m(pr) else ""))
      row.append(f"{pr['t']/tc['t']:.2f}" if pr.get("t") and tc.get("t") else "")
    g = tc.get("group")
    row.append("/".join(f"{rss[(l, g)]:.0f}" if (l, g) in rss and not math.isnan(rss[(l, g)]) else "-" for l in libs) if g else "")
    lines.append("| " + " | ".join(row) + " |")
  train = [(l, c, r) for l in libs for c, r in raw.get(l, {}).items() if c.startswith("train") and r.get("t")]
  if train:
    lines += ["", "## Training loops: memory", "", "| library | case | first step | RSS after 20 steps | RSS at end | steps | peak RSS | loss |",
              "|---|---|---|---|---|---|---|---|"]
    for l, c, r in train:
      lines.append(f"| {l} | {c} | {r['first_step_s']:.2f} s | {r['rss20_mb']:.0f} MB | {r['rss_end_mb']:.0f} MB | {r['steps']} | "
                   f"{r['peak_mb']:.0f} MB | {r['loss']:.3f} |")
  lines += _model_tables(raw.get("tinycore", {}))
  checks = targets(raw)
  if checks:
    lines += ["", "## Targets (issues 6, 13 and 20), from this run", "", "| target | measured | met |", "|---|---|---|"]
    lines += [f"| {name} | {measured} | {'yes' if ok else '**no**'} |" for name, measured, ok in checks]
    lines.append(f"\n{sum(ok for _, _, ok in checks)} of {len(checks)} met.")
  if errors: lines += ["", "## Errors", ""] + [f"- {e}" for e in errors]
  return lines

def _model_tables(tc: dict) -> list[str]:
  """The real models: CPU-time medians on one thread of tinycore (TinyJit) vs torch eager and torch.compile in the same
  process, first steps, the loss check, and each library's training-loop memory (RSS of a process of its own)."""
  models = {c: r for c, r in tc.items() if r.get("group") in MODEL_GROUPS}
  if not models: return []
  def ms(r: dict | None, unit: str | None = None) -> str:
    if not r or r.get("t") is None: return NA
    return f"{r['metric']:.0f} tok/s" if (unit or r.get("unit")) == "tok/s" else f"{r['t'] * 1e3:.1f} ms"
  def x(r: dict, p: dict | None) -> str: return f"{p['t'] / r['t']:.2f}" if p and p.get("t") and r.get("t") else ""
  def s_(v: float | None) -> str: return "" if v is None else f"{v:.1f} s"
  r0 = next(iter(models.values()))
  lines = ["", "## Real models (bench/models/)", "",
           f"One thread (THREADS=1, torch.set_num_threads(1)), CPU time (process_time), medians; tinycore on {r0.get('cpu', '?')}, "
           f"{r0.get('isa', '?')} (CLANG_MARCH={r0.get('march', '?')}); load average (1, 5, 15 min) during the group in the last column. "
           "First step: tinycore's first call of the jitted step with an empty compile cache (cold) and with the cache the cold "
           "run left (warm, a new process), wall time. torch.compile: inductor's first call (compile) apart. Loss: the first "
           "step's loss (digits: the eval-mode loss) against torch's from the same weights, relative error.", "",
           "| case | tinycore | torch eager | x eager | torch.compile | x compile | compile (inductor) | first step cold / warm | loss rel. err "
           "| load |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  for c, r in models.items():
    tco = r.get("torch.compile")
    ok = "" if "loss_rel_err" not in r else f"{r['loss_rel_err']:.1e}{'' if r['loss_ok'] else ' **FAIL**'}"
    extra = f" (tokens equal {r['tokens_equal']:.0%})" if "tokens_equal" in r else ""
    lines.append(f"| {c} | {ms(r)} | {ms(r.get('torch'), r.get('unit'))} | {x(r, r.get('torch'))} | {ms(tco)} | {x(r, tco)} | "
                 f"{s_((tco or {}).get('compile_wall_s'))} | {s_(r.get('first_step_cold_s'))} / {s_(r.get('first_step_warm_s'))} | {ok}{extra} | "
                 f"{' '.join(f'{v:.1f}' for v in r.get('load_avg', ()))} |")
  mem = [(c, lib, m) for c, r in models.items() for lib, m in (r.get("memory") or {}).items()]
  if mem:
    lines += ["", "Training-loop memory, each library in a process of its own: RSS after imports (base), after the first step, after "
              "step 20 and at the end; the process's peak; the loop's own peak (peak - base); tinycore's allocated buffers at the end.", "",
              "| case | library | base | first step | step 20 | end | steps | peak | peak - base | tinycore buffers |", "|---" * 10 + "|"]
    for c, lib, m in mem:
      if "error" in m: lines.append(f"| {c} | {lib} | {m['error']} | | | | | | | |"); continue
      lines.append(f"| {c} | {lib} | {m['rss_base_mb']:.0f} MB | {m['rss_setup_mb']:.0f} MB | {m['rss_early_mb']:.0f} MB | "
                   f"{m['rss_end_mb']:.0f} MB | "
                   f"{m['steps']} | {m['peak_mb']:.0f} MB | {m['peak_mb'] - m['rss_base_mb']:.0f} MB | "
                   f"{'' if 'tc_buffers_mb' not in m else format(m['tc_buffers_mb'], '.0f') + ' MB'} |")
  return lines

def model_targets(tc: dict) -> list[tuple[str, str, bool]]:
  """Issue 13's real-model targets."""
  out: list[tuple[str, str, bool]] = []
  for c, r in tc.items():
    if r.get("group") not in MODEL_GROUPS or not r.get("t"): continue
    if "loss_ok" in r: out.append((f"{c}: first loss within 1e-4 of torch's", f"{r['loss_rel_err']:.1e}", bool(r["loss_ok"])))
    if r["group"] == "digits": continue
    for peer, at_least in (("torch", 1.0), ("torch.compile", 0.8)):
      p = r.get(peer) or {}
      if p.get("t"): out.append((f"{c}: >= {at_least:g}x {peer}", f"{p['t'] / r['t']:.2f}x", p["t"] / r["t"] >= at_least))
    if c.startswith("ResNet"):
      for tag, limit in (("cold", 20), ("warm", 2)):
        if (v := r.get(f"first_step_{tag}_s")) is not None: out.append((f"{c}: first step, {tag} compile cache < {limit} s", f"{v:.1f} s", v < limit))
    mem = r.get("memory") or {}
    t, p = mem.get("tinycore") or {}, mem.get("torch") or {}
    if "peak_mb" in t and "peak_mb" in p:
      a, b = t["peak_mb"] - t["rss_base_mb"], p["peak_mb"] - p["rss_base_mb"]
      out.append((f"{c}: loop peak memory <= 1.2x torch eager's", f"{a:.0f} / {b:.0f} MB", a <= 1.2 * b))
      grew = t["rss_end_mb"] - t["rss_early_mb"]
      out.append((f"{c}: RSS flat after step 20", f"{grew:+.1f} MB over {t['steps'] - 20} steps", grew <= max(0.01 * t["rss_early_mb"], 1.0)))
  return out

def targets(raw: dict) -> list[tuple[str, str, bool]]:
  """Issue 6's and 20's targets, checked against the peers and machine limits measured in the same run."""
  tc, torch, tg = raw.get("tinycore", {}), raw.get("torch", {}), raw.get("tinygrad", {})
  out: list[tuple[str, str, bool]] = model_targets(tc)
  def t(lib: dict, case: str) -> float | None: return (lib.get(case) or {}).get("t")
  def vs(case: str, peer: dict, pname: str, at_least: float) -> None:
    a, b = t(tc, case), t(peer, case)
    if a and b: out.append((f"{case}: >= {at_least:g}x {pname}", f"{b / a:.2f}x", b / a >= at_least))
  for case, x in (("gelu(a*b+c) 16M", 3), ("softmax 4096x4096", 1.5), ("train step MLP bs128 Adam", 1), ("train step CNN bs128 Adam", 1),
                  ("matmul 2048", 0.6), ("conv2d resnet (32,64,56,56)", 0.6), ("conv2d seed (16,3,64,64)", 0.5)):
    vs(case, torch, "torch", x)
  # issue 13: the same on any CPU and ISA level (bench.py --march native,x86-64-v3)
  for case, x, peer, pname in (("matmul 2048", 0.9, raw.get("numpy", {}), "numpy BLAS"), ("conv2d resnet (32,64,56,56)", 1.0, torch, "torch"),
                                ("conv2d seed (16,3,64,64)", 1.0, torch, "torch"), ("train step MLP bs128 Adam", 1.2, torch, "torch eager"),
                                ("train step CNN bs128 Adam", 1.2, torch, "torch eager")):
    vs(case, peer, pname, x)
  for case in tc:  # issue 20: an eager training step within 5x of torch eager
    if case.startswith("eager MLP"): vs(case, torch, "torch", 0.2)
    if case.startswith("jit GPT"):  # issue 20: the GPT step under TinyJit within 1.5x of torch eager
      a, b = t(tc, case), t(torch, case.replace("jit", "eager", 1))
      if a and b: out.append((f"{case}: >= 0.67x torch eager", f"{b / a:.2f}x", b / a >= 1 / 1.5))
  # issue 20: an embedding lookup costs its tokens, not its table
  for case, x in (("embedding fwd 64 of 50257x768", 0.1), ("embedding bwd 64 of 50257x768", 0.5)): vs(case, torch, "torch", x)
  big, small = t(tc, "embedding fwd 64 of 50257x768"), t(tc, "embedding fwd 64 of 6282x768")
  if big and small: out.append(("embedding fwd 64 of 50257x768: <= 2x the time of 6282 rows", f"{big / small:.2f}x", big <= 2 * small))
  copy = (raw.get("numpy", {}).get("copy 256MB") or {}).get("metric")
  for case in ("(a*b+c).relu() 16M", "sum 16M"):
    m = (tc.get(case) or {}).get("metric")
    if copy and m: out.append((f"{case}: >= 70% of the copy bandwidth ({copy:.1f} GB/s)", f"{m:.1f} GB/s = {m / copy:.0%}", m >= 0.7 * copy))
  for case in tc:
    if not case.startswith("mlp first step"): vs(case, tg, "tinygrad", 5)
  for case in ("train step MLP bs128 Adam", "train step CNN bs128 Adam"):
    r, p = tc.get(case) or {}, torch.get(case) or {}
    if r.get("peak_mb") and p.get("peak_mb"):
      out.append((f"{case}: peak RSS <= 1.5x torch's", f"{r['peak_mb']:.0f} / {p['peak_mb']:.0f} MB", r["peak_mb"] <= 1.5 * p["peak_mb"]))
    if r.get("rss20_mb"):
      grew = r["rss_end_mb"] - r["rss20_mb"]
      out.append((f"{case}: RSS does not grow after step 20", f"{grew:+.1f} MB over {r['steps'] - 20} steps", grew <= 0.01 * r["rss20_mb"]))
  for case, limit, scale, unit in (("tiny a+b, cached", 20e-6, 1e6, "us"), ("jit replay, 10 kernels", 5e-6, 1e6, "us"),
                                   ("mlp first step (cold compile cache)", 5, 1, "s"), ("mlp first step (warm compile cache)", 0.5, 1, "s")):
    v = t(tc, case)
    if v is not None: out.append((f"{case}: < {limit * scale:g} {unit}", f"{v * scale:.2f} {unit}", v < limit))
  return out

def _versions(libs: list[str]) -> str:
  out = []
  from importlib import metadata
  for l in ("torch", "tinygrad"):
    if l in libs:
      try: out.append(f"{l} {metadata.version(l)}")
      except metadata.PackageNotFoundError: out.append(f"{l} missing")
  return (" Peers: " + ", ".join(out) + ".") if out else ""

if __name__ == "__main__": main()
