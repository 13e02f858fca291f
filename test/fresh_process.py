"""Running a program in a fresh Python process on a given kernel cache (the knobs that change programs cleared), for the
disk-cache tests: what a new process finds on disk, not what this one holds in memory."""
import os, subprocess, sys

KNOBS = ("DEV", "DEBUG", "NOOPT", "BEAM", "CLANG_MARCH", "CLANG_OPT", "PROFILE")

def run_fresh(prog: str, cache, **env) -> dict[str, str]:
  """Run prog with TINYCORE_CACHE_DIR=cache and no program workers; its stdout lines `key value` as a dict (it must
  print `close True`: its results matched the reference it computed)."""
  e = {k: v for k, v in os.environ.items() if k not in KNOBS}
  e.update({"TINYCORE_CACHE_DIR": str(cache), "PROGRAM_WORKERS": "0"}, **{k: str(v) for k, v in env.items()})
  r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=e, timeout=300)
  assert r.returncode == 0, r.stderr
  out = {key: val for key, _, val in (line.rpartition(" ") for line in r.stdout.splitlines())}
  assert out["close"] == "True", r.stdout
  return out
