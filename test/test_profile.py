"""PROFILE=1: the trace follows Chrome's trace-event format and holds every kernel, copy, compile and JIT replay of a
small training step; its kernel durations add up to the kernel time the run measured."""
import collections, json, subprocess, sys
import numpy as np
from tinycore import Tensor, TinyJit, Context, GlobalCounters, nn, profile

def _step_model(seed: int):
  # odd sizes no other test uses: the kernels are new to this process, so they compile here (and show as compile spans)
  rng = np.random.default_rng(seed)
  l1, l2 = nn.Linear(13, 29), nn.Linear(29, 7)
  opt = nn.optim.SGD([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.01)
  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = (l2(l1(x).relu()) - y).square().mean()
      loss.backward()
      opt.step()
      return loss
  data = [(rng.standard_normal((11, 13), dtype=np.float32), rng.standard_normal((11, 7), dtype=np.float32)) for _ in range(4)]
  return step, data

def _check_format(trace: dict) -> list[dict]:
  """Every event is a well-formed "M" or "X" event; every track is named; start times never go back on a track.
  Returns the "X" events."""
  assert set(trace) >= {"traceEvents"} and isinstance(trace["traceEvents"], list)
  named_pids = {e["pid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
  named_tids = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
  spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
  assert {e["ph"] for e in trace["traceEvents"]} <= {"M", "X"}
  last: dict[tuple, float] = {}
  for e in spans:
    assert isinstance(e["name"], str) and e["name"] and isinstance(e["cat"], str)
    assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["pid"] in named_pids and (e["pid"], e["tid"]) in named_tids
    assert isinstance(e["ts"], float) and isinstance(e["dur"], float) and e["dur"] >= 0 and isinstance(e["args"], dict)
    assert e["ts"] >= last.get((e["pid"], e["tid"]), -1.0), f"{e['name']} starts before the event before it on its track"
    last[(e["pid"], e["tid"])] = e["ts"]
  json.dumps(trace)  # plain JSON values only
  return spans

def test_trace_of_a_training_step():
  step, data = _step_model(0)
  with Context(PROFILE=1):
    profile.events.clear()
    GlobalCounters.reset()
    for x, y in data: step(Tensor(x), Tensor(y)).numpy()
    kernels_run, kernel_time = GlobalCounters.kernel_count, GlobalCounters.time_sum_s
    trace = profile.trace()
  spans = _check_format(trace)
  lanes = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
  by_cat = collections.defaultdict(list)
  for e in spans: by_cat[e["cat"]].append(e)
  # every kernel launch is there, named as the captured kernels are, with its sizes and cost
  assert len(by_cat["kernels"]) == kernels_run
  captured = {r.p.name for r, _ in step.jit_cache}
  replayed = [e for e in by_cat["kernels"] if e["args"]["jit"]]
  assert len(replayed) == 2 * len(step.jit_cache) and {e["name"] for e in replayed} == captured
  for e in by_cat["kernels"]: assert len(e["args"]["global_size"]) == 3 and e["args"]["bytes"] > 0 and e["args"]["flops"] >= 0
  # the two replays (calls 3 and 4), each a span around its kernels on the jit lane
  assert len(by_cat["jit"]) == 2 and all(lanes[e["tid"]] == "jit" for e in by_cat["jit"])
  for j in by_cat["jit"]: assert sum(j["ts"] <= k["ts"] <= j["ts"] + j["dur"] for k in replayed) == len(step.jit_cache)
  # compiles (the kernels are new), copies in (the inputs) and out (the losses)
  assert by_cat["compile"] and {e["name"] for e in by_cat["compile"]} <= {e["name"] for e in by_cat["kernels"]}
  assert sum(e["name"] == "copy out to the host" for e in by_cat["copies"]) >= len(data)
  assert sum(e["name"] == "copy in from the host" for e in by_cat["copies"]) >= 2 * len(data)
  # the kernel durations add up to the kernel time the run measured (within 10%)
  total = sum(e["dur"] for e in by_cat["kernels"]) / 1e6
  assert abs(total - kernel_time) <= 0.1 * kernel_time, (total, kernel_time)

def test_trace_written_at_exit(tmp_path):
  path = tmp_path / "trace.json"
  code = "from tinycore import Tensor; print((Tensor([1.0, 2.0]) * 3).sum().item())"
  out = subprocess.run([sys.executable, "-c", code], env={**__import__("os").environ, "PROFILE": "1", "PROFILE_PATH": str(path)},
                       capture_output=True, text=True, check=True).stdout
  assert f"written to {path}" in out
  spans = _check_format(json.loads(path.read_text()))
  assert any(e["cat"] == "kernels" for e in spans)

def test_off_records_nothing():
  profile.events.clear()
  with Context(PROFILE=0): (Tensor([1.0, 2.0, 3.0]) + 1).numpy()
  assert profile.events == []
