"""A matmul's register and cache tiles on a CPU (codegen/matmul.py): the tile sized to the declared register file, no
unroll whose loads would spill, a cache tile over blocks of rows; values against numpy in float64 at odd sizes, at the
machine's ISA level and at AVX2 (CLANG_MARCH=x86-64-v3, in a fresh process)."""
import numpy as np
import pytest
from tinycore import Tensor, Device
from tinycore.backend import Renderer
from tinycore.codegen import Kernel
from tinycore.codegen.heuristic import hand_coded_optimizations
from tinycore.codegen.matmul import matmul_rows, register_tile
from tinycore.helpers import prod
from tinycore.ops import Ops
from test.fresh_process import run_fresh

def cpu(widths=(16, 8, 4), regs=32, cache=2 << 20) -> Renderer:
  return Renderer(has_local=False, vector_widths=widths, vector_registers=regs, cache_bytes=cache)

def test_register_tile_rule():
  # the most accumulators that leave a step's vectors and one broadcast room: 8 x 3 in 32 registers, 4 x 3 in 16
  assert register_tile(cpu(), 2048, 2048) == (8, 3) and register_tile(cpu((8, 4), 16), 2048, 2048) == (4, 3)
  # only vector counts that divide the columns where they cannot be padded; equal accumulators and loads: more rows
  assert register_tile(cpu((8, 4), 16), 512, 512, padded=False) == (4, 2)
  for r in (cpu(), cpu((8, 4), 16)):
    for m in (1, 7, 12, 2047, 2048):
      rows, vecs = register_tile(r, m, 2048)
      assert m % rows == 0 and rows * vecs + vecs + 1 <= r.vector_registers

def test_odd_rows_padded_to_whole_tiles():
  # a 2047-row matmul took 1 row x 4 vectors (7.6 GFLOP/s on one AVX-512 core, 72 padded to 2048 rows)
  assert matmul_rows(cpu(), 2047, 2064) == 2048 and matmul_rows(cpu(), 2049, 2064) == 2112 and matmul_rows(cpu(), 20, 48) == 24
  assert matmul_rows(cpu(), 2048, 2064) == 2048 and matmul_rows(cpu((8, 4), 16), 2046, 2064) == 2048
  r = Device[Device.DEFAULT].renderer
  if r.has_local or max(r.vector_widths) == 1: pytest.skip("a device with vectors and no thread ids (a CPU)")
  k = _matmul_kernel(r, 2047, 2047, 2047)
  assert prod(k.full_shape[d] for d in k.dims("U")) == prod(register_tile(r, 2048, 2047)) * max(r.vector_widths), (k.full_shape, k.applied_opts)

def _matmul_kernel(r: Renderer, m: int, k: int, n: int) -> Kernel:
  si = [s for s in (Tensor.empty(m, k) @ Tensor.empty(k, n)).schedule() if s.ast.op is Ops.SINK][-1]
  return hand_coded_optimizations(Kernel(si.ast, r))

@pytest.mark.parametrize("widths,regs", [((16, 8, 4), 32), ((8, 4), 16)])
def test_matmul_2048_tile(monkeypatch, widths, regs):
  # the 2048 matmul (B repacked in panels) took the conv forward's tile since its panels looked like a conv weight's:
  # no cache tile and no unroll, 36-45 GFLOP/s on one AVX-512 core where this tile runs at 100-135
  r = Device[Device.DEFAULT].renderer
  if r.has_local or max(r.vector_widths) == 1: pytest.skip("a device with vectors and no thread ids (a CPU)")
  for name, val in (("vector_widths", widths), ("vector_registers", regs), ("cache_bytes", 2 << 20)): monkeypatch.setattr(r, name, val)
  k = _matmul_kernel(r, 2048, 2048, 2048)
  rows, vecs = register_tile(r, 2048, 2048)
  assert prod(k.full_shape[d] for d in k.dims("U")) == rows * vecs * widths[0], (k.applied_opts, k.full_shape)
  assert k.dims("t"), f"a cache tile over blocks of rows: {k.applied_opts}"
  assert not k.dims("u"), "an unrolled step's loads do not fit beside the accumulators: no unroll"

@pytest.mark.parametrize("m,k,n", [(2047, 96, 2049), (2049, 64, 2047), (1, 2048, 64), (2048, 64, 1), (96, 2048, 96), (256, 200, 2048)])
def test_matmul_values(monkeypatch, m, k, n):
  # a small cache_bytes sends the operands through the panels (padded where n is no whole panels) and the cache tile
  r = Device[Device.DEFAULT].renderer
  monkeypatch.setattr(r, "cache_bytes", 16384)
  rng = np.random.default_rng(m + k + n)
  a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)

AVX2_CHECK = """
import numpy as np
from tinycore import Tensor, Device
r = Device[Device.DEFAULT].renderer
r.cache_bytes = 16384
print("isa", r.target.isa if hasattr(r, "target") else "none")
ok = True
for m, k, n in ((2047, 96, 2049), (1, 2048, 64), (2048, 64, 1), (512, 256, 512)):
  rng = np.random.default_rng(m + k + n)
  a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
  ok &= np.allclose((Tensor(a) @ Tensor(b)).numpy(), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
print("close", bool(ok))
"""

def test_matmul_values_avx2(tmp_path):
  r = Device[Device.DEFAULT].renderer
  if getattr(getattr(r, "target", None), "isa", None) != "AVX-512": pytest.skip("an AVX-512 CPU runs the AVX2 code too")
  assert run_fresh(AVX2_CHECK, tmp_path, CLANG_MARCH="x86-64-v3")["isa"] == "AVX2"

@pytest.mark.parametrize("noopt", [0, 1])
def test_linear_weight_transposed_into_panels(noopt):
  # x @ W.T (a Linear, 128 rows or more): W.T is repacked into panels first and takes the matmul tile (the tile of a reduce
  # contiguous in both operands combines each output's lanes after it: GPT's forward at 36-55 GFLOP/s); its gradients by
  # Dot's rule, the weight gradient in place (rows of 96 floats) or through grad transposed (rows of 1024)
  from tinycore.helpers import Context
  r = Device[Device.DEFAULT].renderer
  if r.has_local or max(r.vector_widths) == 1: pytest.skip("a device with vectors and no thread ids (a CPU)")
  assert len([s for s in Tensor.empty(2, 100, 96).linear(Tensor.empty(80, 96).T).schedule() if s.ast.op is Ops.SINK]) == 2, "the repack, the matmul"
  rng = np.random.default_rng(5)
  for k in (96, 1024):
    xn, wn, gn = (rng.standard_normal(s).astype(np.float32) for s in ((2, 100, k), (80, k), (2, 100, 80)))
    with Context(NOOPT=noopt):
      x, w = Tensor(xn, requires_grad=True), Tensor(wn, requires_grad=True)
      out = x.linear(w.T)
      (out * Tensor(gn)).sum().backward()
      got = out.numpy(), x.grad.numpy(), w.grad.numpy()
    x64, w64, g64 = xn.astype(np.float64), wn.astype(np.float64), gn.astype(np.float64)
    for a, b in zip(got, (x64 @ w64.T, g64 @ w64, np.einsum("btn,btk->nk", g64, x64))): np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)

def test_matmul_prefetches_b(monkeypatch):
  # b's panel of the whole reduce streams from L2 once per row tile: its vectors are prefetched PREFETCH_STEPS steps
  # ahead where the renderer declares prefetch (2048 on one AVX-512 core: 114-118 -> 124-129 GFLOP/s), never elsewhere
  from dataclasses import replace
  from tinycore.codegen.matmul import PREFETCH_STEPS
  from tinycore.codegen.program import get_program
  r = Device[Device.DEFAULT].renderer
  if r.has_local or max(r.vector_widths) == 1: pytest.skip("a device with vectors and no thread ids (a CPU)")
  # the scheduler cuts b's panels for the device's vectors: make them cpu()'s 16 lanes at any ISA level (AVX2's are 8)
  src_of_r = r.prefetch and get_program(_matmul_kernel(r, 512, 512, 512), Device.DEFAULT).src
  for name, val in (("vector_widths", (16, 8, 4)), ("vector_registers", 32)): monkeypatch.setattr(r, name, val)
  k = _matmul_kernel(replace(cpu(), prefetch=True), 2048, 2048, 2048)
  assert list(k.prefetch.values()) == [48 * PREFETCH_STEPS], "the panels' 48 floats a reduce step, ahead by PREFETCH_STEPS steps"
  assert not _matmul_kernel(cpu(), 2048, 2048, 2048).prefetch, "a renderer without prefetch gets no hint"
  if r.prefetch: assert "__builtin_prefetch" in src_of_r, src_of_r

@pytest.mark.parametrize("noopt", [0, 1])
def test_matmul_values_non_contiguous(monkeypatch, noopt):
  # transposed, strided and broadcast operands through the tile (and NOOPT's plain kernels), odd sizes, vs float64
  from tinycore.helpers import Context
  monkeypatch.setattr(Device[Device.DEFAULT].renderer, "cache_bytes", 16384)
  rng = np.random.default_rng(7)
  an, bn = rng.standard_normal((130, 2 * 67)).astype(np.float32), rng.standard_normal((257, 130)).astype(np.float32)
  cases = [(lambda a, b: a[:, ::2].T @ b.T, lambda a, b: a[:, ::2].T @ b.T),   # (67, 130) @ (130, 257): both transposed, a strided
           (lambda a, b: a[3:100] @ b[:134, 1:100], lambda a, b: a[3:100] @ b[:134, 1:100]),  # slices of each
           (lambda a, b: a[:1, :130].expand(96, 130) @ b[:130], lambda a, b: np.broadcast_to(a[:1, :130], (96, 130)) @ b[:130])]
  with Context(NOOPT=noopt):
    for f, g in cases:
      np.testing.assert_allclose(f(Tensor(an), Tensor(bn)).numpy(), g(an.astype(np.float64), bn.astype(np.float64)), rtol=1e-4, atol=1e-4)

def test_padding_at_vector_boundaries_loads_vectors():
  # panels of 3 vectors (a matmul's B of a width that is no whole panels, zero-padded, `matmul_panel`): where the pad
  # starts and ends on whole vectors each vector is one gated vector load; it was a gated scalar load per lane (the
  # 2048 repack at AVX2: 10.5 -> 3.4 ms on one Zen 4 core). Pads inside a vector stay lane by lane; values vs numpy.
  from tinycore.codegen import get_kernel, get_program
  from tinycore.helpers import Context
  r = Device[Device.DEFAULT].renderer
  if r.has_local or max(r.vector_widths) == 1: pytest.skip("a device with vectors and no thread ids (a CPU)")
  w = max(r.vector_widths)
  x = np.random.default_rng(3).standard_normal((8, 4 * w)).astype(np.float32)
  with Context(NOOPT=0):
    for pads, whole in ((((0, 0), (0, 2 * w)), True), (((0, 0), (w, w)), True), (((0, 0), (3, 2 * w - 3)), False), (((0, 0), (1, 2 * w - 1)), False)):
      t = Tensor(x).pad(pads).reshape(8, 2, 3 * w).permute(1, 0, 2).contiguous()
      si = [s for s in t.schedule() if s.ast.op is Ops.SINK][-1]
      loads = [u for u in get_program(get_kernel(si.ast, r), Device.DEFAULT).uops if u.op is Ops.LOAD]
      if whole: assert loads and all(u.dtype.count == w for u in loads), (pads, [u.dtype for u in loads])
      np.testing.assert_array_equal(t.numpy(), np.pad(x, pads).reshape(8, 2, 3 * w).transpose(1, 0, 2))
