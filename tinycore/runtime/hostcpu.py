"""The host CPU as the backends that compile for it (CLANG, LLVM) describe it: its model name and one core's L2 cache,
read from Linux's /proc and sysfs, with defaults elsewhere. What the vector ISA is each backend reads from its own
compiler (predefined macros, LLVM's host features): that is what its code may use."""
from __future__ import annotations
import functools, os, platform

@functools.cache
def cpu_model() -> str:
  """The CPU's model name with its family/model/stepping numbers (Linux /proc/cpuinfo: virtual machines often name only
  "Intel(R) Xeon(R) Processor"), or the platform's processor string."""
  info: dict[str, str] = {}
  try:
    with open("/proc/cpuinfo") as f:
      for ln in f:
        if not ln.strip(): break  # the first CPU only
        k, _, v = ln.partition(":")
        info.setdefault(k.strip(), v.strip())
  except OSError: pass
  name = info.get("model name") or info.get("Hardware") or platform.processor() or platform.machine() or "unknown CPU"
  ids = " ".join(f"{k.split()[-1]} {info[k]}" for k in ("cpu family", "model", "stepping", "CPU implementer", "CPU part") if info.get(k))
  return f"{name} ({ids})" if ids else name

@functools.cache
def l2_bytes() -> int:
  """One core's L2 cache in bytes (sysfs), else 1 MiB."""
  try:
    base = "/sys/devices/system/cpu/cpu0/cache"
    for idx in sorted(os.listdir(base)):
      with open(f"{base}/{idx}/level") as f: level = f.read().strip()
      if level == "2":
        with open(f"{base}/{idx}/size") as f: size = f.read().strip()
        return int(size[:-1]) * {"K": 1 << 10, "M": 1 << 20}[size[-1]] if size[-1] in "KM" else int(size)
  except (OSError, ValueError, KeyError): pass
  return 1 << 20
