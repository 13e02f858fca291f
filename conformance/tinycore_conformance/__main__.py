"""python -m tinycore_conformance NAME [--compile-only] [--level N] [--report FILE] [--xfails FILE] [--repro] [pytest args...]

Runs the suite's pytest package against device NAME, prints the tables and the verdict; the exit code is non-zero when
any test fails. Arguments it does not know (for example -k EXPR, -x, -v, --tb=long) are passed on to pytest."""
from __future__ import annotations
import argparse, os, pathlib, sys

PKG_DIR = pathlib.Path(__file__).resolve().parent

def _known(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
  ap = argparse.ArgumentParser(prog="python -m tinycore_conformance", description=__doc__.split("\n\n")[1] if __doc__ else None)
  ap.add_argument("device", help="the tinycore device to prove, e.g. CLANG, OPENCL, OPENCL:1, PYTHON")
  ap.add_argument("--compile-only", action="store_true", help="render and compile every kernel of every layer, run nothing")
  ap.add_argument("--level", type=int, default=7, help="run levels 1..N only (default 7)")
  ap.add_argument("--report", metavar="FILE", help="write the report to FILE.md and FILE.json")
  ap.add_argument("--xfails", metavar="FILE", help="expected failures: one test id (or glob) and its reason per line")
  ap.add_argument("--repro", action="store_true", help="print a standalone reproduction of every failing test")
  return ap.parse_known_args(argv)

def pytest_args(argv: list[str] | None = None) -> list[str]:
  args, rest = _known(argv)
  out = [str(PKG_DIR), "-c", str(PKG_DIR / "pytest.ini"), "--rootdir", str(PKG_DIR), "--device", args.device, "--level", str(args.level)]
  if args.compile_only: out.append("--compile-only")
  if args.report: out += ["--report", os.path.abspath(args.report)]
  if args.xfails: out += ["--xfails", os.path.abspath(args.xfails)]
  if args.repro: out.append("--repro")
  out.append("--progress")
  if not any(a.startswith("--tb") for a in rest): out.append("--tb=short")
  if not any(a.startswith("-v") or a == "-q" for a in rest): out.append("-q")
  return out + rest

def device_problem(device: str, compile_only: bool) -> str | None:
  """One line saying why the suite cannot run against device here, or None. An unknown name is always a problem; a
  device that does not open (no driver, no GPU) only when its kernels are to run."""
  from tinycore.backend import DeviceError
  from tinycore.device import Device
  from tinycore.plugin import registry
  try: name = Device.canonicalize(device).split(":")[0]
  except DeviceError as e: return str(e)
  if name not in registry.device_names(): return f"unknown device {device!r}: installed devices are {', '.join(registry.device_names())}"
  if compile_only or any(e.name == name for e in registry.failed): return None  # a broken plugin: level 1 says what is wrong
  try: Device[device]
  except Exception as e:  # noqa: BLE001  a driver may fail in its own way: the reason is the message
    return f"device unavailable here: {str(e).splitlines()[0] if str(e) else type(e).__name__}; use --compile-only to render and compile only"
  return None

def main(argv: list[str] | None = None) -> int:
  import pytest
  args = pytest_args(argv)
  opts, _ = _known(argv)
  if (why := device_problem(opts.device, opts.compile_only)) is not None:
    print(f"tinycore_conformance: {why}", file=sys.stderr)
    return 2
  if opts.xfails and not os.path.isfile(opts.xfails):
    print(f"tinycore_conformance: --xfails {opts.xfails}: no such file", file=sys.stderr)
    return 2
  plugins = []
  if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):  # the pytest11 entry point is not loaded then: register it by hand
    from tinycore_conformance import plugin
    plugins.append(plugin)
  return int(pytest.main(args, plugins=plugins))

if __name__ == "__main__":
  sys.exit(main())
