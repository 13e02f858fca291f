"""The on-disk program cache (engine/realize.py): a warm process runs no code generator, gets bit-identical results,
misses the cache when a knob that changes the program changes, and rebuilds an entry it cannot use."""
import hashlib, pickle, platform, textwrap
import pytest
from test.fresh_process import run_fresh

# a few kernels of different kinds (matmul, conv, reduces, elementwise with a transcendental), checked against numpy
# float64, with the result's bytes hashed (the warm run must give the same bits) and the code generator's runs counted
PROG = textwrap.dedent("""
  import hashlib, numpy as np
  from tinycore import Tensor
  from tinycore.engine import realize
  runs = []
  orig = realize.get_program
  def counting(k, device): runs.append(k.name); return orig(k, device)
  realize.get_program = counting
  rng = np.random.default_rng(0)
  a, w = rng.standard_normal((2, 3, 10, 10)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
  m = rng.standard_normal((24, 40)).astype(np.float32)
  t, mt = Tensor(a), Tensor(m)
  outs = [t.conv2d(Tensor(w), padding=1).relu().sum((2, 3)), mt @ mt.T, (mt * 0.5).exp().max(1), (mt - 1).abs().mean(0)]
  Tensor.realize(*outs)
  got = [o.numpy() for o in outs]
  a64, w64, m64 = a.astype(np.float64), w.astype(np.float64), m.astype(np.float64)
  p = np.pad(a64, ((0, 0), (0, 0), (1, 1), (1, 1)))
  conv = np.einsum("bchwij,ocij->bohw", np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(2, 3)), w64)
  refs = [np.maximum(conv, 0).sum((2, 3)), m64 @ m64.T, np.exp(m64 * 0.5).max(1), np.abs(m64 - 1).mean(0)]
  print("close", all(np.allclose(g, r, rtol=1e-4, atol=1e-4) for g, r in zip(got, refs)))
  print("bits", hashlib.sha256(b"".join(g.tobytes() for g in got)).hexdigest())
  print("codegen runs", len(runs))
  """)

def run(cache, **env) -> dict:
  out = run_fresh(PROG, cache, **env)
  return {"runs": int(out["codegen runs"]), "bits": out["bits"]}

def test_warm_process_runs_no_code_generator_and_gives_the_same_bits(tmp_path):
  cold = run(tmp_path)
  warm = run(tmp_path)
  assert cold["runs"] >= 4 and warm["runs"] == 0
  assert warm["bits"] == cold["bits"]

KNOBS = [{"NOOPT": 1}, {"THREADS": 1}]
if platform.machine() in ("x86_64", "AMD64"): KNOBS.append({"CLANG_MARCH": "x86-64-v2"})

@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: ",".join(k))
def test_a_changed_knob_misses_the_program_cache(tmp_path, knob):
  base = {"THREADS": 2}
  run(tmp_path, **base)
  assert run(tmp_path, **base)["runs"] == 0
  changed = run(tmp_path, **{**base, **knob})
  assert changed["runs"] >= 1, f"{knob} changes the program: its programs must not come from the cache"

def test_program_entry_of_the_wrong_shape_is_rebuilt(tmp_path):
  # an entry whose bytes are intact (its checksum holds) but whose content is no program (a format from another version):
  # a miss, built again, with the same answer
  from tinycore.helpers import _CACHE_MAGIC
  cold = run(tmp_path)
  entries = list(tmp_path.glob("programs*/*"))
  assert len(entries) >= 4
  value = pickle.dumps({"unexpected": 1})
  for p in entries: p.write_bytes(_CACHE_MAGIC + len(value).to_bytes(8, "little") + hashlib.sha256(value).digest() + value)
  again = run(tmp_path)
  assert again["runs"] >= 4 and again["bits"] == cold["bits"]
