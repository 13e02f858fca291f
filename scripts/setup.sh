#!/usr/bin/env bash
# Sets up a development checkout: system packages (when root), .venv, and every distribution of the repo in editable mode.
# Safe to rerun; a second run skips what is already there.
set -euo pipefail

# Debian packages the project uses. Later issues append here; a name the archive lacks is skipped with a note.
APT_PACKAGES=(clang pocl-opencl-icd ocl-icd-opencl-dev graphviz
              clang-19 lld-19 llvm-19   # clang-19's amdgcn target for tinygrad-amd and clang++-19 for tinygrad-metal's syntax check
              mesa-vulkan-drivers       # lavapipe: the software Vulkan driver wgpu finds for tinygrad-webgpu where no GPU is
              openmpi-bin libopenmpi-dev  # Open MPI: mpirun and libmpi for mpi4py (tinycore.nn.distributed); -dev: mpicc, to build it from source
              chromium chromium-driver)   # headless Chromium and its WebDriver: the VIZ page's browser test (test/test_viz_browser.py, selenium)

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
# Debian's own python3 ships venv without ensurepip; python3-venv completes it
if ! "$PYTHON" -c "import ensurepip" 2>/dev/null; then APT_PACKAGES+=(python3-venv); fi

# no `| grep -q` here: grep exits early, the writer gets SIGPIPE, and pipefail turns a match into a failure
installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == *"install ok installed"* ]]; }
has_candidate() { [[ $(apt-cache policy "$1" 2>/dev/null) == *"Candidate: "[^\(]* ]]; }

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null && command -v dpkg-query >/dev/null; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
  if (( ${#missing[@]} )); then
    export DEBIAN_FRONTEND=noninteractive
    echo "[setup] apt-get update (missing: ${missing[*]})"
    apt-get -o DPkg::Lock::Timeout=300 update -qq
    available=()
    # a package without an install candidate would make apt-get fail for all of them
    for p in "${missing[@]}"; do
      if has_candidate "$p"; then available+=("$p"); else echo "[setup] note: apt has no package $p, skipping it"; fi
    done
    if (( ${#available[@]} )); then
      echo "[setup] apt-get install ${available[*]}"
      apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${available[@]}" >/dev/null
    fi
  else
    echo "[setup] system packages present: ${APT_PACKAGES[*]}"
  fi
else
  echo "[setup] not root or no apt-get: not installing system packages (${APT_PACKAGES[*]}); install them yourself if needed"
fi

cc_found=$(command -v clang || command -v cc || command -v gcc || true)
echo "[setup] C compiler for the CLANG device: ${cc_found:-none found (only the PYTHON device will work)}"

if [[ ! -x .venv/bin/python ]]; then
  echo "[setup] creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check)
echo "[setup] upgrading pip"
"${PIP[@]}" install -qq --upgrade pip

# one pip call for everything: a single dependency resolution, and plugins find the editable core already chosen
targets=(-e '.[test]')
# plugins whose toolchains come from PyPI install the exact set verified here
declare -A EXTRAS=([tinygrad-cuda]="[verified]" [tinygrad-nv]="[verified]")
for d in plugins/*/ conformance/; do
  d=${d%/}
  if [[ -f "$d/pyproject.toml" ]]; then targets+=(-e "$d${EXTRAS[$(basename "$d")]:-}"); fi
done
echo "[setup] pip install ${targets[*]}"
# setuptools warns about every flat-layout editable install; that warning is expected here
PYTHONWARNINGS=ignore::UserWarning "${PIP[@]}" install -qq "${targets[@]}"
# ONNX: the parser (the extra tinycore[onnx]) and onnxruntime, the reference test/test_onnx*.py compare with
echo "[setup] pip install onnx onnxruntime (tinycore.nn.onnx and its tests)"
"${PIP[@]}" install -qq onnx onnxruntime
# mpi4py for tinycore.nn.distributed: its PyPI wheel carries no MPI of its own; at import it loads the system's libmpi
# (Open MPI's libmpi.so.40 here), the same Open MPI that mpirun starts. Skipped with a note where Open MPI is missing.
if command -v mpirun >/dev/null; then
  echo "[setup] pip install mpi4py (for $(mpirun --version 2>&1 | head -1))"
  "${PIP[@]}" install -qq 'mpi4py>=4.1'
else
  echo "[setup] note: no mpirun (Debian's openmpi-bin): not installing mpi4py; tinycore.nn.distributed and its tests are skipped"
fi
echo "[setup] done: $(.venv/bin/python -c 'import sys; print(sys.version.split()[0])') in $(pwd)/.venv"
