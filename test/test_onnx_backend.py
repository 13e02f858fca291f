"""ONNX's backend test suite on tinycore (test/onnx_suite.py): the Node, Simple, PyTorchConverted and PyTorchOperator
sets, one pytest test per CPU test. The Real set (the `light` architectures) runs in test_onnx_models.py, where each
model also meets onnxruntime.

A test listed in onnx_excluded.txt still runs: its failure is an expected failure (xfail, with the listed reason), and
its passing is an error, as is an entry that names no test: the list stays current, as the conformance xfails do."""
from __future__ import annotations
import pytest
pytest.importorskip("onnx")
import onnx_suite  # noqa: E402

CASES = [(s, cls, m) for s, cls, m in onnx_suite.cpu_tests(onnx_suite.suite(onnx_suite.backend("tinycore"))) if s != "light (real)"]
EXCLUDED = onnx_suite.excluded()

@pytest.fixture(scope="module", autouse=True)
def _onnx_home():
  with onnx_suite.onnx_home(): yield

@pytest.mark.parametrize("case", CASES, ids=[m for _, _, m in CASES])
def test_onnx_backend(case):
  _, cls, method = case
  status, msg = onnx_suite.run_one(cls, method)
  if method in EXCLUDED:
    if status == "pass": pytest.fail(f"{method} passes now: remove it from onnx_excluded.txt ({EXCLUDED[method]})")
    pytest.xfail(EXCLUDED[method])
  if status == "skip": pytest.skip(msg)
  assert status == "pass", msg

def test_exclusions_name_tests_that_exist():
  names = {m for _, _, m in onnx_suite.cpu_tests(onnx_suite.suite(onnx_suite.backend("tinycore")))}
  assert not (stale := sorted(set(EXCLUDED) - names)), f"onnx_excluded.txt names tests the installed onnx does not have: {stale}"
