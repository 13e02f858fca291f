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
