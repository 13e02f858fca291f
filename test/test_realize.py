"""Running kernels: the on-disk compile cache, DEBUG output, GRAPH pictures."""
import os, subprocess, sys, textwrap
import pytest

PROG = "from tinycore import Tensor; import numpy as np; print((Tensor(np.arange(7, dtype=np.float32)) * 3 + 1).numpy().tolist())"

def run(code: str, **env) -> subprocess.CompletedProcess:
  e = {k: v for k, v in os.environ.items() if k not in ("DEV", "DEBUG")}
  e.update({k: str(v) for k, v in env.items()})
  return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e, timeout=180)

COUNT_COMPILES = textwrap.dedent("""
  import tinygrad_clang
  calls = []
  orig = tinygrad_clang.ClangCompiler.compile
  def counting(self, src): calls.append(src); return orig(self, src)
  tinygrad_clang.ClangCompiler.compile = counting
  """) + PROG + "\nprint('compiles', len(calls))"

def test_compile_cache_survives_restart(tmp_path):
  first = run(COUNT_COMPILES, TINYCORE_CACHE_DIR=tmp_path)
  second = run(COUNT_COMPILES, TINYCORE_CACHE_DIR=tmp_path)
  assert first.returncode == 0, first.stderr
  assert "[1.0, 4.0, 7.0, 10.0, 13.0, 16.0, 19.0]" in second.stdout
  assert int(first.stdout.split("compiles")[1]) >= 1 and int(second.stdout.split("compiles")[1]) == 0
  assert any(tmp_path.iterdir()), "binaries are stored in the per-user cache directory"

def test_compile_cache_can_be_turned_off(tmp_path):
  run(COUNT_COMPILES, TINYCORE_CACHE_DIR=tmp_path)
  off = run(COUNT_COMPILES, TINYCORE_CACHE_DIR=tmp_path, DISABLE_COMPILER_CACHE=1)
  assert int(off.stdout.split("compiles")[1]) >= 1

def test_toolchain_change_misses_the_cache(tmp_path):
  run(COUNT_COMPILES, TINYCORE_CACHE_DIR=tmp_path)
  changed = run("import tinygrad_clang; tinygrad_clang.CFLAGS.append('-DCHANGED')\n" + COUNT_COMPILES, TINYCORE_CACHE_DIR=tmp_path)
  assert int(changed.stdout.split("compiles")[1]) >= 1, "a different compiler identity must not reuse old binaries"

def test_two_processes_compiling_at_once(tmp_path):
  env = {**os.environ, "TINYCORE_CACHE_DIR": str(tmp_path)}
  env.pop("DEV", None)
  procs = [subprocess.Popen([sys.executable, "-c", PROG], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
  outs = [p.communicate(timeout=180) for p in procs]
  assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
  assert all("[1.0, 4.0, 7.0, 10.0, 13.0, 16.0, 19.0]" in o[0] for o in outs)
  assert "[1.0, 4.0, 7.0, 10.0, 13.0, 16.0, 19.0]" in run(PROG, TINYCORE_CACHE_DIR=tmp_path).stdout

def _entries(root) -> list:
  return [p for p in root.rglob("*") if p.is_file()]

@pytest.mark.parametrize("damage", ["truncate", "empty", "corrupt"])
def test_damaged_cache_entry_is_rebuilt(tmp_path, damage):
  """Every entry (the compiled .so, the pickled program) damaged on disk: the next run warns naming the entry, discards
  it and compiles again, with the right answer; the run after that is clean (issue 11: once SIGBUS / OSError forever)."""
  first = run(COUNT_COMPILES, TINYCORE_CACHE_DIR=tmp_path)
  assert first.returncode == 0, first.stderr
  entries = _entries(tmp_path)
  assert entries
  for p in entries:
    raw = p.read_bytes()
    if damage == "truncate": p.write_bytes(raw[:len(raw) // 2])
    elif damage == "empty": p.write_bytes(b"")
    else: p.write_bytes(raw[:-40] + bytes(b ^ 0x5A for b in raw[-40:]))  # the payload's tail: a pickle's or a .so's bytes
  second = run("import warnings; warnings.simplefilter('always')\n" + COUNT_COMPILES, TINYCORE_CACHE_DIR=tmp_path)
  assert second.returncode == 0, second.stderr
  assert "[1.0, 4.0, 7.0, 10.0, 13.0, 16.0, 19.0]" in second.stdout and int(second.stdout.split("compiles")[1]) >= 1
  assert "damaged" in second.stderr and "it will be rebuilt" in second.stderr and str(entries[0].parent.parent) in second.stderr
  third = run(COUNT_COMPILES, TINYCORE_CACHE_DIR=tmp_path)
  assert "damaged" not in third.stderr and int(third.stdout.split("compiles")[1]) == 0

def test_cache_folders_are_private(tmp_path):
  root = tmp_path / "c"
  assert run(PROG, TINYCORE_CACHE_DIR=root).returncode == 0
  for p in [root, *root.rglob("*")]:
    mode = p.stat().st_mode & 0o777
    assert mode & 0o077 == 0, f"{p} is {oct(mode)}: the cache holds code this process runs, only its owner may write it"

@pytest.mark.parametrize("dev", ["CLANG", "PYTHON"])
def test_debug_levels(dev):
  d2 = run(PROG, DEBUG=2, DEV=dev).stdout
  lines = [x for x in d2.splitlines() if x.startswith("***")]
  assert len(lines) == 1 and "GFLOPS" in lines[0] and "GB/s" in lines[0] and dev in lines[0]
  d3 = run(PROG, DEBUG=3, DEV=dev).stdout
  assert "Ops.STORE" in d3 and "applied opts:" in d3
  d4 = run(PROG, DEBUG=4, DEV=dev).stdout
  assert ("void E_" in d4) if dev == "CLANG" else ("program E_" in d4)
  d5 = run(PROG, DEBUG=5, DEV=dev).stdout
  assert "Ops.DEFINE_GLOBAL" in d5 and "Ops.STORE" in d5

def test_graph_pictures(tmp_path):
  r = run(PROG, GRAPH=1, GRAPHUOPS=1, GRAPHPATH=tmp_path)
  assert r.returncode == 0, r.stderr
  assert (tmp_path / "net.dot").exists() and any(p.name.startswith("net.uops.") for p in tmp_path.iterdir())
  assert "digraph" in (tmp_path / "net.dot").read_text()

POOL_PROG = textwrap.dedent("""
  import numpy as np
  from tinycore import Tensor
  from tinycore.engine import programpool
  replies = []
  orig = programpool._Worker.build
  def spy(self, job): r = orig(self, job); replies.append(r is not None and r[3] is None); return r
  programpool._Worker.build = spy
  x = np.random.default_rng(0).standard_normal((24, 40)).astype(np.float32)
  t = Tensor(x)
  outs = [(t + 1).sum(0), (t * 2).max(1), t.exp(), t @ t.T, (t - 3).relu().sum(1)]
  Tensor.realize(*outs)
  x64 = x.astype(np.float64)
  refs = [(x64 + 1).sum(0), (x64 * 2).max(1), np.exp(x64), x64 @ x64.T, np.maximum(x64 - 3, 0).sum(1)]
  print("close", all(np.allclose(o.numpy(), r, rtol=1e-4, atol=1e-4) for o, r in zip(outs, refs)))
  print("worker replies", sum(replies))
  """)

def test_cold_schedule_built_in_worker_processes(tmp_path):
  # the programs a cold schedule lacks are built by worker processes as well as this one (engine/programpool.py)
  out = run(POOL_PROG, TINYCORE_CACHE_DIR=tmp_path, PROGRAM_WORKERS=1)
  assert out.returncode == 0, out.stderr
  assert "close True" in out.stdout and int(out.stdout.split("worker replies")[1]) >= 1, out.stdout
  # without workers (and warm: nothing to build) the results are the same
  for env in ({"PROGRAM_WORKERS": 0}, {}):
    again = run(POOL_PROG, TINYCORE_CACHE_DIR=tmp_path, **env)
    assert "close True" in again.stdout and int(again.stdout.split("worker replies")[1]) == 0, again.stdout + again.stderr

def test_worker_reply_for_another_renderer_is_dropped(monkeypatch):
  monkeypatch.setenv("PROGRAM_WORKERS", "1")
  # a program a worker built for another program table (a renderer changed in this process) is built again here
  from tinycore.engine import programpool
  jobs = [("D", i) for i in range(6)]
  class Fake:
    def build(self, job): return ("other table", f"worker {job[1]}", b"lib", None)
  old = programpool._workers[:]
  programpool._workers[:] = [Fake()]
  try: out = programpool.build_all(jobs, lambda dev: "this table", lambda dev, i: f"local {i}", "unused:builder")
  finally: programpool._workers[:] = old
  assert out == [(f"local {i}", None) for i in range(6)]
