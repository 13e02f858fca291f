import os
import pytest
from tinycore import Device

@pytest.fixture(params=["CLANG", "PYTHON"])
def device(request):
  """Run a test on both devices issue 2 ships; the default device is restored after."""
  old = Device.DEFAULT
  Device.DEFAULT = request.param
  yield request.param
  Device.DEFAULT = old

@pytest.fixture(params=["CLANG", "PYTHON"])
def dev(request) -> str:
  """The device name, for tests that pass it explicitly (`Tensor(x, device=dev)`)."""
  return request.param

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
  """Under TINYCORE_SETUP_DONE=1 (scripts/test_all.sh, after scripts/setup.sh installed every tool) a test skipped for a
  tool the setup installs (its skip reason names scripts/setup.sh) fails: in CI a missing browser or mpirun is a
  broken setup, not a pass."""
  report = (yield).get_result()
  if report.skipped and os.getenv("TINYCORE_SETUP_DONE") == "1" and "setup.sh" in str(report.longrepr):
    report.outcome = "failed"

@pytest.fixture(autouse=True)
def _keep_dev_env():
  """tinygrad 0.14 (imported by the side-by-side tests) writes the device it picked into os.environ["DEV"] ("CL" when
  OpenCL is present); the subprocesses of later tests in this worker would inherit a device tinycore does not have."""
  old = os.environ.get("DEV")
  yield
  if os.environ.get("DEV") != old:
    if old is None: os.environ.pop("DEV", None)
    else: os.environ["DEV"] = old
