#!/usr/bin/env bash
# Installs the second supported libtorch: the one inside PyTorch's wheel on PyPI (CUDA + NCCL),
# into the ignored virtual environment .venv-torch/ of this checkout, with nvidia-nvml-dev (the
# real nvml.h, for the test that checks zeus-cpp's NVML declarations against it). The CMake
# preset `cuda` builds against it; `make test-cuda` calls this script first.
#
#   scripts/install-torch.sh                 # .venv-torch with the pinned torch (idempotent)
#   scripts/install-torch.sh --python PY     # check PY's torch instead (>= 2.11; installs nothing)
#   scripts/install-torch.sh --gpu-machine   # .venv-gpu-check: what the GPU machine has (its
#                                            # torch, Python 3.12 where there is one) and the
#                                            # oldest pybind11 and scikit-build-core that
#                                            # python/pyproject.toml accepts; for gpu-check.sh
#
# Prints the interpreter to give CMake as ZEUS_TORCH_PYTHON on its last line. pip's cache
# (~/.cache/pip) makes a second install in a fresh clone take seconds instead of a 3 GB download.
set -euo pipefail
cd "$(dirname "$0")/.."

readonly kTorchPin="2.15.0"
readonly kNvmlDevPin="13.2.86"
readonly kMinTorch="2.11"
readonly kVenv=".venv-torch"
# The GPU machine's image (../shared/docs/spec-gpu.md): torch 2.11.0+cu130 (PyPI's 2.11.0 is the
# CUDA 13.0 build) under Python 3.12.
readonly kGpuMachineTorch="2.11.0"
readonly kGpuMachineVenv=".venv-gpu-check"

python=""
gpu_machine=0
while (($#)); do
  case "$1" in
    --gpu-machine)
      gpu_machine=1
      shift
      ;;
    --python)
      python="${2:?--python needs the interpreter of an environment that has torch}"
      shift 2
      ;;
    -h | --help)
      sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "install-torch: unknown argument '$1' (try --help)" >&2
      exit 2
      ;;
  esac
done

# The torch version an interpreter imports, without importing torch (that loads CUDA).
torch_version() {
  "$1" - <<'EOF' 2>/dev/null
import importlib.util, pathlib, re
spec = importlib.util.find_spec("torch")
if spec is None or not spec.submodule_search_locations:
    raise SystemExit(1)
text = (pathlib.Path(spec.submodule_search_locations[0]) / "version.py").read_text()
print(re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text).group(1))
EOF
}

if [[ -n "$python" ]]; then
  command -v "$python" >/dev/null || {
    echo "install-torch: '$python' is not an interpreter here" >&2
    exit 2
  }
  version=$(torch_version "$python") || {
    echo "install-torch: '$python' has no torch; pip install torch>=$kMinTorch there, or run" \
      "this script without --python to make $kVenv" >&2
    exit 2
  }
  if ! printf '%s\n%s\n' "$kMinTorch" "${version%%+*}" | sort -V -C; then
    echo "install-torch: '$python' has torch $version; zeus-cpp's CUDA build needs >= $kMinTorch" >&2
    exit 2
  fi
  echo "install-torch: using torch $version from $python"
  command -v "$python"
  exit 0
fi

# The lower bound of a build requirement in python/pyproject.toml ("name>=X" -> X).
floor_of() {
  grep -o -E "\"$1>=[0-9.]+" python/pyproject.toml | head -1 | sed 's/.*>=//'
}

if ((gpu_machine)); then
  pybind11=$(floor_of pybind11)
  skbuild=$(floor_of scikit-build-core)
  [[ -n "$pybind11" && -n "$skbuild" ]] || {
    echo "install-torch: python/pyproject.toml names no pybind11>= or scikit-build-core>= floor" >&2
    exit 1
  }
  want="torch==$kGpuMachineTorch pybind11==$pybind11 scikit-build-core==$skbuild"
  if [[ -f "$kGpuMachineVenv/.pins" && "$(cat "$kGpuMachineVenv/.pins")" == "$want" ]]; then
    echo "install-torch: $kGpuMachineVenv has $want"
    echo "$PWD/$kGpuMachineVenv/bin/python"
    exit 0
  fi
  # A pyenv shim answers `command -v` for versions it will not run: each candidate is run.
  base=""
  for candidate in python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import venv, ensurepip' 2>/dev/null; then
      base=$(command -v "$candidate")
      break
    fi
  done
  [[ -n "$base" ]] || {
    echo "install-torch: no Python 3 with venv and ensurepip found; install python3-venv" >&2
    exit 1
  }
  echo "install-torch: making $kGpuMachineVenv with $base ($("$base" --version 2>&1)): $want"
  rm -rf "$kGpuMachineVenv"
  "$base" -m venv "$kGpuMachineVenv"
  # shellcheck disable=SC2086  # $want is the list of pins
  "$kGpuMachineVenv/bin/python" -m pip install -q --disable-pip-version-check $want
  echo "$want" >"$kGpuMachineVenv/.pins"
  echo "$PWD/$kGpuMachineVenv/bin/python"
  exit 0
fi

if [[ -x "$kVenv/bin/python" ]] && [[ "$(torch_version "$kVenv/bin/python" || true)" == "$kTorchPin"* ]] &&
  [[ -f "$(ls -d "$kVenv"/lib/python3*/site-packages/nvidia/cu13/include/nvml.h 2>/dev/null | head -1)" ]]; then
  echo "install-torch: $kVenv has torch $(torch_version "$kVenv/bin/python")"
  echo "$PWD/$kVenv/bin/python"
  exit 0
fi

base=""
for candidate in python3.11 python3.12 python3.13 python3.10 python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import venv, ensurepip' 2>/dev/null; then
    base=$(command -v "$candidate")
    break
  fi
done
[[ -n "$base" ]] || {
  echo "install-torch: no Python 3.10-3.13 with venv and ensurepip found; install python3-venv" >&2
  exit 1
}

echo "install-torch: making $kVenv with $base ($("$base" --version 2>&1)), torch==$kTorchPin"
rm -rf "$kVenv"
"$base" -m venv "$kVenv"
start=$(date +%s)
"$kVenv/bin/python" -m pip install -q --disable-pip-version-check \
  "torch==$kTorchPin" "nvidia-nvml-dev==$kNvmlDevPin"
echo "install-torch: torch $(torch_version "$kVenv/bin/python") in $(($(date +%s) - start)) s," \
  "$(du -sh "$kVenv" | cut -f1)"
echo "$PWD/$kVenv/bin/python"
