"""Run the tinycore conformance suite against this plugin, up to the level reached so far (raise it as you go)."""
import os, subprocess, sys

LEVEL = os.environ.get("CONFORMANCE_LEVEL", "1")

def test_conformance():
  args = [sys.executable, "-m", "tinycore_conformance", "MYACCEL", "--level", LEVEL]
  if os.environ.get("CONFORMANCE_COMPILE_ONLY"): args.append("--compile-only")
  proc = subprocess.run(args, capture_output=True, text=True)
  assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
