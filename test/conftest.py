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
