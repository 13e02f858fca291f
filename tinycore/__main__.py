"""`python -m tinycore devices`: every installed backend, whether it can run here, and why not."""
from __future__ import annotations
import argparse, sys

def devices() -> int:
  from tinycore.backend import DeviceError
  from tinycore.device import Device
  from tinycore.plugin import DEVICE_ALIASES, registry
  try: default = Device.DEFAULT
  except DeviceError as e: default = f"none ({e})"
  rows = []
  for e in registry.all_entries():
    why = e.reason()
    rows.append((e.name, f"{e.plugin} {e.version}", "ok" if why is None else f"broken: {why}" if e.error is not None else f"unavailable: {why}",
                 e.spec.description if e.spec is not None and why is None else ""))
  w0, w1 = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
  for name, plugin, status, desc in rows:
    print(f"{name:{w0}s}  {plugin:{w1}s}  {status}" + (f"  ({desc})" if desc else ""))
  for alias, target in DEVICE_ALIASES.items(): print(f"{alias:{w0}s}  {'':{w1}s}  alias of {target} (tinygrad's name for it)")
  print(f"default device: {default}")
  return 0

def main(argv: list[str] | None = None) -> int:
  p = argparse.ArgumentParser(prog="python -m tinycore", description="tinycore command line")
  sub = p.add_subparsers(dest="cmd", required=True)
  sub.add_parser("devices", help="list installed backends and whether they can run here")
  args = p.parse_args(argv)
  if args.cmd == "devices": return devices()
  return 2

if __name__ == "__main__": sys.exit(main())
