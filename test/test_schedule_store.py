"""The schedule cache on disk (engine/schedulestore.py): a new process with a graph of a structure scheduled before
groups nothing and gets the same bits; anything that could change the kernels (tinycore's source, a knob, the
renderer's settings, a dtype, a shape) misses; a damaged or foreign entry is a miss (scheduled again), never a crash."""
import hashlib, pickle, platform, textwrap, warnings
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.helpers import Context, _CACHE_MAGIC
from tinycore.engine import schedule, schedulestore
from test.fresh_process import run_fresh

RNG = np.random.default_rng(7)
A, B = RNG.standard_normal((16, 24)).astype(np.float32), RNG.standard_normal((24, 8)).astype(np.float32)

def _graph(dtype=np.float32, rows: int = 16) -> tuple[list[Tensor], list[np.ndarray]]:
  """A matmul, a chain of elementwise ops, reduces, a softmax (refused fusions), and two assigns reading each other's
  old values (the assign cycle: one value gets a buffer of its own), with numpy float64 references."""
  a64, b64 = A[:rows].astype(np.float64), B.astype(np.float64)
  a, b = Tensor(A[:rows].astype(dtype)), Tensor(B.astype(dtype))
  x, x64 = a @ b, a64 @ b64
  for i in range(6): x, x64 = (x * 0.5 + i).relu(), np.maximum(x64 * 0.5 + i, 0)
  e = np.exp(x64 - x64.max(-1, keepdims=True))
  outs, refs = [x.softmax(-1), x.sum(0) + x.max(1).sum()], [e / e.sum(-1, keepdims=True), x64.sum(0) + x64.max(1).sum()]
  p, q = Tensor(B[:, 0].copy()).realize(), Tensor(B[:, 1].copy()).realize()
  np_, nq = p - 0.1 * q.exp(), q - 0.1 * p.sin()
  p.assign(np_)
  q.assign(nq)
  p64, q64 = B[:, 0].astype(np.float64), B[:, 1].astype(np.float64)
  return outs + [p, q], refs + [p64 - 0.1 * np.exp(q64), q64 - 0.1 * np.sin(p64)]

@pytest.fixture
def disk(tmp_path, monkeypatch):
  """A private cache folder, every graph stored (MIN_BASES 0), and the number of graphs scheduled from scratch;
  forget() drops the in-memory cache, as a new process starts without it."""
  monkeypatch.setenv("TINYCORE_CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(schedulestore, "MIN_BASES", 0)
  made, orig = [], schedule._create_schedule
  monkeypatch.setattr(schedule, "_create_schedule", lambda outs, grouped=True: made.append(1) or orig(outs, grouped))
  class Disk:
    path = tmp_path
    def forget(self) -> None: schedule._sched_cache.clear()
    def run(self, **kw) -> tuple[int, list[np.ndarray]]:
      """Schedule and run the graph from an empty in-memory cache: (graphs scheduled from scratch, values)."""
      self.forget()
      made.clear()
      outs, refs = _graph(**kw)
      Tensor.realize(*outs)
      got = [o.numpy() for o in outs]
      tol = 1e-4 if kw.get("dtype", np.float32) == np.float32 else 2e-2
      for g, r in zip(got, refs): np.testing.assert_allclose(g, r, rtol=tol, atol=tol)
      return len(made), got
    def entries(self) -> list: return sorted(tmp_path.glob("schedules*/*"))
  monkeypatch.setattr(schedule, "_sched_cache", {})
  return Disk()

def test_a_graph_scheduled_before_is_read_from_disk(disk):
  cold, want = disk.run()
  assert cold >= 2 and disk.entries(), "the cold run schedules (the assign cycle once more) and writes its entries"
  warm, got = disk.run()
  assert warm == 0, "every schedule of the warm run came from disk"
  assert all(g.tobytes() == w.tobytes() for g, w in zip(got, want))

@pytest.mark.parametrize("change", [{"dtype": np.float16}, {"rows": 12}], ids=["dtype", "shape"])
def test_another_dtype_or_shape_misses(disk, change):
  disk.run()
  assert disk.run(**change)[0] >= 1

def test_a_changed_knob_or_source_misses(disk, monkeypatch):
  disk.run()
  with Context(KERNEL_OPS_MAX=999): assert disk.run()[0] >= 1, "a knob the scheduler reads"
  assert disk.run()[0] == 0
  schedulestore.source_hash.cache_clear()
  monkeypatch.setattr(schedulestore, "source_hash", lambda: "another-tinycore")
  assert disk.run()[0] >= 1, "another version of tinycore's source"

def test_display_knobs_share_the_entries(disk):
  disk.run()
  with Context(DEBUG=1): assert disk.run()[0] == 0

def _rewrite(path, value: bytes) -> None:
  path.write_bytes(_CACHE_MAGIC + len(value).to_bytes(8, "little") + hashlib.sha256(value).digest() + value)

def _damage_each(disk, how) -> tuple[int, list[np.ndarray]]:
  """The values of a run after damaging every entry of a cold run with `how(path, entry)`, and its count of schedules."""
  _, want = disk.run()
  for p in disk.entries(): how(p, pickle.loads(p.read_bytes()[len(_CACHE_MAGIC) + 40:]))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # (a damaged file's warning: helpers.diskcache_get)
    n, got = disk.run()
  assert all(g.tobytes() == w.tobytes() for g, w in zip(got, want))
  return n, got

def _positions_out_of_range(p, d):
  if "own" in d: d["own"] = [10**6]
  else: d["pos"] = [[[10**6], *rest] for _, *rest in d["pos"]]
  _rewrite(p, pickle.dumps(d))

def _not_kernels(p, d):
  if "nodes" in d: d["nodes"] = [(schedulestore.Ops.CONST, *n[1:]) if i == len(d["nodes"]) - 1 else n for i, n in enumerate(d["nodes"])]
  else: d["own"] = ["x"]
  _rewrite(p, pickle.dumps(d))

DAMAGE = {
  "truncated": lambda p, d: p.write_bytes(p.read_bytes()[:-7]),
  "empty": lambda p, d: p.write_bytes(b""),
  "bit flipped": lambda p, d: p.write_bytes((raw := bytearray(p.read_bytes())) and bytes(raw[:-1] + bytes([raw[-1] ^ 1]))),
  "not a pickle": lambda p, d: _rewrite(p, b"\x00not a pickle"),
  "another format": lambda p, d: _rewrite(p, pickle.dumps({"unexpected": 1})),
  "another key": lambda p, d: _rewrite(p, pickle.dumps({**d, "key": ((), (), ())})),
  "positions out of range": _positions_out_of_range,
  "not kernels": _not_kernels,
}

@pytest.mark.parametrize("how", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_entry_is_scheduled_again(disk, how):
  n, _ = _damage_each(disk, how)
  assert n >= 1, "a damaged entry is a miss"
  assert disk.run()[0] == 0, "and is written anew"

def test_small_graphs_stay_in_memory(disk, monkeypatch):
  monkeypatch.setattr(schedulestore, "MIN_BASES", 10**6)
  disk.run()
  assert not disk.entries()

# a new process: the schedules from disk, the programs and binaries from their caches, the same bits
PROG = textwrap.dedent("""
  import hashlib, numpy as np
  from tinycore import Tensor
  from tinycore.engine import schedule
  made, orig = [], schedule._create_schedule
  schedule._create_schedule = lambda outs, grouped=True: made.append(1) or orig(outs, grouped)
  rng = np.random.default_rng(0)
  a, w = rng.standard_normal((2, 3, 10, 10)).astype(np.float32), rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
  x = Tensor(a).conv2d(Tensor(w), padding=1)
  for i in range(30): x = (x * 0.9 + 0.1 * i).relu()
  out = x.softmax(1).sum((2, 3))
  got = out.numpy().astype(np.float64)
  p = np.pad(a.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
  r = np.einsum("bchwij,ocij->bohw", np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(2, 3)), w.astype(np.float64))
  for i in range(30): r = np.maximum(r * 0.9 + 0.1 * i, 0)
  e = np.exp(r - r.max(1, keepdims=True))
  print("close", np.allclose(got, (e / e.sum(1, keepdims=True)).sum((2, 3)), rtol=1e-4, atol=1e-4))
  print("bits", hashlib.sha256(out.numpy().tobytes()).hexdigest())
  print("scheduled", len(made))
  """)

def test_a_new_process_schedules_nothing(tmp_path):
  cold, warm = run_fresh(PROG, tmp_path), run_fresh(PROG, tmp_path)
  assert int(cold["scheduled"]) >= 1 and int(warm["scheduled"]) == 0 and warm["bits"] == cold["bits"]

@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="CLANG_MARCH names an x86 level")
def test_another_clang_march_misses(tmp_path):
  run_fresh(PROG, tmp_path, THREADS=1)
  assert int(run_fresh(PROG, tmp_path, THREADS=1, CLANG_MARCH="x86-64-v2")["scheduled"]) >= 1

def test_a_table_that_cannot_be_named_is_no_cache(disk, monkeypatch):
  # (a device whose renderer cannot be looked up, say): the graph is scheduled as without a disk cache, nothing raises
  def fails(key): raise RuntimeError("no renderer")
  monkeypatch.setattr(schedulestore, "table", fails)
  assert disk.run()[0] >= 1 and disk.run()[0] >= 1 and not disk.entries()
