"""An example of examples/ runs under the real tinygrad 0.14 after changing the import back: the source is rewritten
(`tinycore` -> `tinygrad`) into a temporary folder and run there with tinygrad's CPU device, so nothing of tinycore can
be imported by accident. conv2d.py is the quick one (one conv, checked against numpy, exit status 1 on a mismatch)."""
import os, pathlib, subprocess, sys
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"

@pytest.mark.parametrize("example", ["conv2d.py"])
def test_example_runs_under_tinygrad(example: str, tmp_path: pathlib.Path):
  src = (EXAMPLES / example).read_text().replace("tinycore", "tinygrad")
  (tmp_path / example).write_text(src)
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DEV")} | {"DEV": "CPU"}
  # -I: isolated mode, so neither the cwd nor PYTHONPATH can put the repository (and tinycore) on the path
  r = subprocess.run([sys.executable, "-I", str(tmp_path / example)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
  assert r.returncode == 0, f"{example} under tinygrad exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
  assert "on CPU" in r.stdout, f"{example} did not run on tinygrad's CPU device: {r.stdout[-500:]}"
