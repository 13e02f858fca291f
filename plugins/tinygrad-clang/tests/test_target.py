"""CLANG_MARCH: the target CPU of CLANG's kernels, its place in the cache keys, and that both ISA levels compute the same."""
import json, os, platform, shutil, subprocess, sys
import numpy as np
import pytest
from tinygrad_clang import ClangCompiler, ClangRenderer
from tinygrad_clang.target import cpu_target, isa_level, predefined_macros

x86 = platform.machine() in ("x86_64", "AMD64")
needs_x86 = pytest.mark.skipif(not x86, reason="x86-64 march levels")

@needs_x86
def test_march_and_cpu_are_in_the_cache_keys(monkeypatch):
  keys = {}
  for m in ("native", "x86-64-v3"):
    monkeypatch.setenv("CLANG_MARCH", m)
    c, r = ClangCompiler(), ClangRenderer()
    assert f"-march={m}" in c.cachekey and r.target.cpu_model in c.cachekey and f"march={m}" in r.cachekey
    keys[m] = (c.cachekey, r.cachekey)
  assert keys["native"][0] != keys["x86-64-v3"][0] and keys["native"][1] != keys["x86-64-v3"][1]

@needs_x86
def test_isa_level_comes_from_the_compilers_macros():
  cc = ClangCompiler().cc
  t = cpu_target(cc, "x86-64-v3")
  assert t.isa == "AVX2" and max(t.vector_widths) == 8 and t.vector_registers == 16
  assert cpu_target(cc, "x86-64").isa == "SSE2"
  if "__AVX512F__" in predefined_macros(cc, "native"): assert cpu_target(cc, "native").vector_registers == 32
  assert isa_level(frozenset({"__AVX512F__", "__AVX2__"})) == "AVX-512" and isa_level(frozenset({"__ARM_NEON"})) == "NEON"

# a matmul and a 3x3 conv in a fresh process (the device is opened once per process): the result, and the kernels'
# binaries disassembled
SCRIPT = r"""
import json, os, subprocess, sys, tempfile
import numpy as np
from tinycore import Tensor, Device
from tinycore.ops import Ops
from tinycore.engine.realize import get_program_for
rng = np.random.default_rng(0)
a, b = rng.standard_normal((64, 96), dtype=np.float32), rng.standard_normal((96, 128), dtype=np.float32)
x, w = rng.standard_normal((2, 8, 12, 12), dtype=np.float32), rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
outs = [Tensor(a) @ Tensor(b), Tensor(x).conv2d(Tensor(w), padding=1)]
asm, spills = "", 0
for i, o in enumerate(outs):
  for si in o.schedule():
    if si.ast.op is not Ops.SINK: continue
    lib = Device["CLANG"].compiler.compile_cached(get_program_for("CLANG", si.ast).src)
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
      f.write(lib); f.flush()
      asm += (d := subprocess.run(["objdump", "-d", f.name], capture_output=True, text=True, check=True).stdout)
    # the matmul's vector registers spilled to the stack (its tile is sized to the register file)
    if i == 0: spills += sum("mm" in ln and "(%rsp)" in ln for ln in d.splitlines())
np.save(sys.argv[1] + "_mm.npy", outs[0].numpy()); np.save(sys.argv[1] + "_conv.npy", outs[1].numpy())
print(json.dumps({"zmm": "zmm" in asm, "ymm": "ymm" in asm, "isa": Device["CLANG"].renderer.target.isa, "spills": spills}))
"""

@needs_x86
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) not installed")
def test_avx2_code_has_no_zmm_no_matmul_spills_and_computes_the_same(tmp_path):
  res = {}
  for m in ("native", "x86-64-v3"):
    # NOOPT=0: the registers checked are the heuristics' vector code (NOOPT=1 has no vector lanes)
    env = {**os.environ, "CLANG_MARCH": m, "TINYCORE_CACHE_DIR": str(tmp_path / "cache"), "DEV": "CLANG", "NOOPT": "0"}
    env.pop("VECTOR_WIDTHS", None)
    p = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / m)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    res[m] = json.loads(p.stdout.strip().splitlines()[-1])
  assert res["x86-64-v3"] == {"zmm": False, "ymm": True, "isa": "AVX2", "spills": 0}
  assert res["native"]["spills"] == 0
  if res["native"]["isa"] == "AVX-512": assert res["native"]["zmm"], "AVX-512 code uses the zmm registers"
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((64, 96), dtype=np.float32), rng.standard_normal((96, 128), dtype=np.float32)
  ref = a.astype(np.float64) @ b.astype(np.float64)
  for m in res:
    np.testing.assert_allclose(np.load(tmp_path / f"{m}_mm.npy"), ref, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(np.load(tmp_path / "native_conv.npy"), np.load(tmp_path / "x86-64-v3_conv.npy"), rtol=1e-5, atol=1e-5)
