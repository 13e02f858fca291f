"""Device memory of the mock CUDA driver: tinycore's emulated device memory (alloc -> 256-aligned fake address, free,
buffer(addr) -> (uint8 array of the allocation, offset), DeviceMemoryError for freed or foreign addresses). The PTX
interpreter (ptx.py, run_ptx(..., mem)) and the host-source executor both work against this interface."""
from tinycore.runtime.devicememory import DeviceMemory, DeviceMemoryError

__all__ = ["DeviceMemory", "DeviceMemoryError"]
