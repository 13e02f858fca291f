"""Compiling small kernels several to one compiler run (engine/compiles.py, the CLANG compiler's compile_batch): the
grouping, one shared object loaded once, a failing source isolated, and through the disk cache a warm process that
compiles nothing and gets the same bits, a changed CLANG_OPT that misses the binary cache, damaged entries rebuilt."""
import textwrap
import numpy as np
from tinycore.engine import compiles
from test.fresh_process import run_fresh

def test_small_sources_are_grouped_with_distinct_names_large_ones_alone():
  big = "x" * compiles.BATCH_SRC_MAX
  jobs = [("E_1", "a"), ("E_1", "b"), ("E_2", "c"), ("r_4", big), ("E_3", "d"), ("E_4", "e")]
  groups = compiles.batches(jobs, most=8)
  assert sorted(i for g in groups for i in g) == list(range(len(jobs)))
  assert [3] in groups
  for g in groups:
    names = [jobs[i][0] for i in g]
    assert len(names) == len(set(names))  # one shared object cannot hold two kernels of one name
  assert all(len(g) <= 3 for g in groups)  # (two cores or more: the small ones spread over at least two groups)

def test_large_sources_are_compiled_largest_first():
  # the pool takes the groups in order: a long compile taken last would run alone at the end
  jobs = [(f"r_{i}", "x" * (compiles.BATCH_SRC_MAX + n)) for i, n in enumerate((10, 3000, 0, 500))] + [("E_1", "a")]
  assert compiles.batches(jobs)[:4] == [[1], [3], [0], [2]]

def _clang():
  from tinycore import Device
  dev = Device["CLANG"]
  return dev.compiler, dev.program

def test_kernels_with_the_same_binary_and_different_arguments_run_each_with_its_own():
  # parameters a kernel never reads do not change its code: `E_16(out)` and `E_16(out, a, b, c, d)` storing the same
  # constant compile to the same bytes, so they share one loaded library; the first call's argument types must not
  # stick to the second kernel (it raised "takes at least 5 arguments (1 given)": x ** 0.0 then x ** 1.0)
  comp, program = _clang()
  unread = ", ".join(f"const float* restrict d{i}" for i in range(1, 5))
  five = f"void E_9(float* restrict d0, {unread}) {{ for (int j = 0; j < 4; j++) d0[j] = 1.0f; }}"
  one = "void E_9(float* restrict d0) { for (int j = 0; j < 4; j++) d0[j] = 1.0f; }"
  a, b = program("CLANG", "E_9", comp.compile(five)), program("CLANG", "E_9", comp.compile(one))
  bufs = [np.zeros(4, np.float32) for _ in range(5)]
  a(*bufs)
  b(bufs[1])
  np.testing.assert_array_equal(np.stack([bufs[0], bufs[1]]), np.ones((2, 4), np.float32))

def test_a_batch_is_one_library_loaded_once_and_each_kernel_runs():
  comp, program = _clang()
  srcs = [f"void k{i}(float* restrict out, const float* restrict a) {{ for (int j = 0; j < 8; j++) out[j] = a[j] * {i + 2}.0f; }}"
          for i in range(3)]
  libs = comp.compile_batch(srcs)
  progs = [program("CLANG", f"k{i}", lib) for i, lib in enumerate(libs)]
  assert all(p.dll is progs[0].dll for p in progs)
  a = np.arange(8, dtype=np.float32)
  for i, p in enumerate(progs):
    out = np.zeros(8, np.float32)
    p(out, a)
    np.testing.assert_array_equal(out, a.astype(np.float64) * (i + 2))

def test_a_source_that_does_not_compile_leaves_the_others_built(tmp_path, monkeypatch):
  monkeypatch.setenv("TINYCORE_CACHE_DIR", str(tmp_path))
  comp, _ = _clang()
  jobs = [(f"g{i}", f"void g{i}(float* restrict o) {{ o[0] = {i}.0f; }}") for i in range(4)] + [("bad", "void bad( {")]
  libs = compiles.compile_all(comp, jobs)
  assert libs[-1] is None and all(lib is not None for lib in libs[:-1])

PROG = textwrap.dedent("""
  import hashlib, numpy as np
  from tinycore import Device, Tensor
  comp = Device["CLANG"].compiler
  compiled = []
  orig = comp.compile_batch
  def counting(srcs): compiled.extend(srcs); return orig(srcs)
  comp.compile_batch = counting
  rng = np.random.default_rng(0)
  m, v = rng.standard_normal((24, 40)).astype(np.float32), rng.standard_normal(40).astype(np.float32)
  t, tv = Tensor(m), Tensor(v)
  outs = [(t * 0.5).exp().max(1), (t - 1).abs().mean(0), t.sum(1) + 1, (t * tv).relu().sum(0), t @ t.T, (t + tv).sqrt().sum()]
  Tensor.realize(*outs)
  got = [o.numpy() for o in outs]
  m64, v64 = m.astype(np.float64), v.astype(np.float64)
  refs = [np.exp(m64 * 0.5).max(1), np.abs(m64 - 1).mean(0), m64.sum(1) + 1, np.maximum(m64 * v64, 0).sum(0), m64 @ m64.T,
          np.sqrt(m64 + v64).sum()]
  print("close", all(np.allclose(g, r, rtol=1e-4, atol=1e-4, equal_nan=True) for g, r in zip(got, refs)))
  print("bits", hashlib.sha256(b"".join(g.tobytes() for g in got)).hexdigest())
  print("compiled", len(compiled))
  """)

def run(cache, **env) -> dict:
  out = run_fresh(PROG, cache, **env)
  return {"compiled": int(out["compiled"]), "bits": out["bits"]}

def test_warm_compiles_nothing_a_changed_opt_level_misses_damaged_entries_are_rebuilt(tmp_path):
  cold = run(tmp_path)
  assert cold["compiled"] >= 4
  warm = run(tmp_path)
  assert warm["compiled"] == 0 and warm["bits"] == cold["bits"]
  o1 = run(tmp_path, CLANG_OPT=1)
  assert o1["compiled"] == cold["compiled"], "CLANG_OPT changes the binary: no binary of -O2 may serve it"
  # every binary entry damaged (a batch's shared object is each of its kernels' entry): rebuilt, the same bits
  entries = [p for p in tmp_path.glob("clang*/*") if p.stat().st_size > 1000]
  assert len(entries) >= cold["compiled"]
  for p in entries: p.write_bytes(p.read_bytes()[:-7] + b"garbage")
  again = run(tmp_path)
  assert again["compiled"] >= 1 and again["bits"] == cold["bits"]

def test_kernels_sharing_helpers_compile_as_one_unit():
  # vector typedefs, the NaN-propagating max and the vector exp2 appear in each kernel's source: once in the unit
  from tinycore import Tensor
  from tinycore.engine.realize import get_program_for
  from tinycore.ops import Ops
  from tinygrad_clang import one_unit
  from tinycore.helpers import Context
  t = Tensor(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32), device="CLANG").realize()
  progs = {}
  for out in [(t * 0.5).exp(), t.max(1), (t * 2).exp().max(0), t.relu().max(1) + 1]:
    for si in out.schedule():
      # (the vector helpers come with optimized kernels: also under CI's NOOPT=1 pass)
      with Context(NOOPT=0):
        if si.ast.op is Ops.SINK: progs.setdefault((p := get_program_for("CLANG", si.ast)).name, p)
  srcs = [p.src for p in progs.values()]
  assert len(srcs) >= 3 and sum("static inline" in s for s in srcs) >= 2
  unit = one_unit(srcs)
  for s in srcs:
    for line in s.splitlines():
      if line.startswith(("typedef ", "static inline")): assert unit.count(line) == 1
  comp, _ = _clang()
  libs = comp.compile_batch(srcs)  # (no CompileError: the shared helpers are not defined twice)
  assert len(set(libs)) == 1
