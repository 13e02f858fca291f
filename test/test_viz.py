"""VIZ: what the rewrite engine, the optimizer and the runtime note for each kernel, and the page built from it
(the page in a real browser: test_viz_browser.py)."""
import os, re, subprocess, sys
import numpy as np
from tinycore import Tensor, Context, nn
from tinycore.uop import graph_rewrite
from tinycore.uop.symbolic import symbolic
from tinycore.uop.uop import UOp
from tinycore.dtype import dtypes
from tinycore.viz import record

def _train_step(seed: int) -> None:
  rng = np.random.default_rng(seed)
  # sizes no other test uses: the kernels are built here, under VIZ, rather than found in this process's runner cache
  l1 = nn.Linear(17, 23)
  opt = nn.optim.SGD([l1.weight, l1.bias], lr=0.1)
  x, y = Tensor(rng.standard_normal((9, 17), dtype=np.float32)), Tensor(rng.standard_normal((9, 23), dtype=np.float32))
  with Tensor.train():
    opt.zero_grad()
    loss = (l1(x).relu() - y).square().mean()
    loss.backward()
    opt.step()
  loss.numpy()

def _clear() -> None:
  record.kernels.clear()
  record.schedules.clear()

def test_records_each_kernels_journey():
  from tinycore.engine.realize import method_cache
  _clear()
  built_before = {(dev, ast) for dev, ast, _, _ in method_cache}  # (a kernel built before VIZ was on is not noted again)
  with Context(VIZ=1, PROFILE=1): _train_step(0)
  kernels = [k for k in record.kernels if k.program is not None]
  assert kernels and record.schedules
  # every kernel of every realize was noted, with its program
  noted = {(k.device, k.ast) for k in kernels}
  sinks = [(dev, ast) for s in record.schedules for ast, dev, _, _ in s.items if ast.op.name == "SINK"]
  assert sinks and all(s in noted or s in built_before for s in sinks)
  for k in kernels:
    assert k.opts_by and k.program.src and k.program.uops
    named = [p for p in k.passes if p.after is not None]
    assert len(named) == 1 and named[0].name.startswith("symbolic")
    # the pass's output is the graph the program was linearized from (before the division guards and the parameters)
    assert {u.op for u in named[0].after.toposort()} >= {u.op for u in k.program.uops if u.op.name in ("STORE", "LOAD")}
  # rules fired somewhere: the index simplifications while lowering and the symbolic pass
  assert any(p.fired for k in kernels for p in k.passes)

def test_named_pass_keeps_graphs_and_rules():
  _clear()
  record.kernel(None, "TEST")
  record._current.lowering = True  # as realize does after the optimizations are chosen
  x = UOp.variable("x", 0, 10)
  with Context(VIZ=1): out = graph_rewrite((x + 0) * 1, symbolic, name="fold")
  assert out is x
  ps = record.kernels[-1].passes[-1]
  assert ps.name == "fold" and ps.after is x and sum(ps.fired.values()) >= 2
  assert all(re.match(r"symbolic\.py:\d+ ", r) for r in ps.fired)  # a rule is named by where it is written
  record._current = None
  _clear()

def test_off_notes_nothing():
  _clear()
  with Context(VIZ=0): _train_step(1)
  assert record.kernels == [] and record.schedules == []
  x = UOp.variable("x", 0, 10)
  record.kernel(None, "TEST")
  record._current.lowering = True
  with Context(VIZ=0): graph_rewrite(x + UOp.const(dtypes.int32, 0), symbolic)
  assert record.kernels[-1].passes == []
  record._current = None
  _clear()

def test_page_shows_every_kernel():
  from tinycore.viz.page import render_page
  _clear()
  with Context(VIZ=1, PROFILE=1): _train_step(2)
  page = render_page()
  kernels = [k for k in record.kernels if k.program is not None]
  for i, k in enumerate(kernels):
    assert f'id="k{i}"' in page and k.program.name in page
  assert page.count('class="rewrite-step"') >= len(kernels) and page.count("<svg") >= len(kernels) + len(record.schedules) + 1
  assert "http://" not in page.replace('xmlns="http://www.w3.org', "").replace('"http://www.w3.org/1999/xlink', "")  # nothing fetched
  _clear()

def test_viz_file_at_exit(tmp_path):
  path = tmp_path / "viz.html"
  code = "from tinycore import Tensor; print((Tensor([1.0, 2.0, 3.0]).exp() * 3).sum().item())"
  # DEV named: a device chosen by an earlier test of this worker's environment (one left DEV naming "CL") is not this test's
  env = {**os.environ, "DEV": "CLANG", "VIZ": "file", "VIZ_PATH": str(path), "PROFILE_PATH": str(tmp_path / "t.json")}
  run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
  assert run.returncode == 0, f"exit status {run.returncode}:\n{run.stdout}\n{run.stderr}"
  assert f"written to {path}" in run.stdout
  page = path.read_text()
  assert page.startswith("<!DOCTYPE html>") and 'class="kernel-link"' in page and 'class="source"' in page and "<svg" in page

def test_beam_candidates_noted():
  from tinycore.viz.page import render_page
  _clear()
  # no disk cache (CACHELEVEL=0): the search runs here, whatever an earlier run chose
  with Context(VIZ=1, PROFILE=1, BEAM=1, CACHELEVEL=0): (Tensor(np.arange(37 * 3, dtype=np.float32).reshape(37, 3)).sum(axis=1) * 2).numpy()
  searched = [k for k in record.kernels if k.program is not None and k.opts_by == "BEAM=1"]
  assert searched and all(k.candidates for k in searched)
  assert any(opts == k.opts for k in searched for opts, _ in k.candidates)  # the choice is one of the candidates timed
  assert "candidates timed" in render_page()
  _clear()
