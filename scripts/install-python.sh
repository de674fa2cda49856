#!/usr/bin/env bash
# Builds the Python package zeus_cpp (python/) once, as a wheel in build/python-dist/, and installs
# it: by default into the ignored virtual environment .venv-py/, made from Debian's python3 with
# its site packages visible, so that the package is tested against Debian's python3-torch (1.13).
# The extension has no libtorch in it, so the same wheel serves any other PyTorch: --target puts
# it (and pytest) into a directory for another interpreter's PYTHONPATH, leaving that
# environment untouched (`make test-cuda` tests it so with PyTorch 2.x). The build tools
# (pybind11, scikit-build-core) and pytest are pinned, from PyPI. For your own environment,
# `pip install ./python` is all it takes.
#
#   scripts/install-python.sh                         # into .venv-py (idempotent)
#   scripts/install-python.sh --python PY --target DIR
#       # for PY: then PYTHONPATH=DIR PY -m pytest python/tests
#
# Prints the interpreter to use on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/pypi-pins.sh

readonly kBuildPython="/usr/bin/python3"
readonly kBuildVenv=".venv-py"
readonly kDist="build/python-dist"

python=""
target=""
while (($#)); do
  case "$1" in
    --python)
      python="${2:?--python needs an interpreter}"
      shift 2
      ;;
    --target)
      target="${2:?--target needs a directory}"
      shift 2
      ;;
    -h | --help)
      sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "install-python: unknown argument '$1' (try --help)" >&2
      exit 2
      ;;
  esac
done
if [[ -n "$python" && -z "$target" || -z "$python" && -n "$target" ]]; then
  echo "install-python: --python and --target go together (try --help)" >&2
  exit 2
fi

# A virtual environment with the pinned tools ($1: dir, $2: interpreter to make it from).
ensure_venv() {
  local dir=$1 from=$2
  if [[ ! -x "$dir/bin/python" ]]; then
    command -v "$from" >/dev/null || {
      echo "install-python: '$from' is not an interpreter here (scripts/install-deps.sh" \
        "installs Debian's python3 and python3-torch)" >&2
      exit 2
    }
    "$from" -m venv --system-site-packages "$dir"
  fi
  "$dir/bin/python" -c 'import torch' 2>/dev/null || {
    echo "install-python: '$dir' cannot import torch; run scripts/install-deps.sh (Debian's" \
      "python3-torch) or give --python an interpreter that has PyTorch" >&2
    exit 2
  }
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
    "pybind11==$kPybind11Pin" "scikit-build-core==$kScikitBuildCorePin" "pytest==$kPytestPin"
}

# The wheel, built by the Debian venv's pinned tools without build isolation (no download), with
# warnings as errors and unity batches as in the ci preset (`pip install ./python` has neither).
ensure_venv "$kBuildVenv" "$kBuildPython"
rm -rf "$kDist"
"$kBuildVenv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-build-isolation \
  --no-deps -w "$kDist" --config-settings=build-dir="$PWD/build/python" \
  --config-settings=cmake.define.ZEUS_WERROR=ON --config-settings=cmake.define.ZEUS_UNITY=ON \
  ./python
wheel=$(ls "$kDist"/zeus_cpp-*.whl)

if [[ -z "$target" ]]; then
  py="$kBuildVenv/bin/python"
  "$py" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$wheel"
  env=()
else
  py="$python"
  "$py" -c 'import torch' 2>/dev/null || {
    echo "install-python: '$py' cannot import torch" >&2
    exit 2
  }
  # The wheel is built by Debian's CPython; another CPython version needs its own build.
  want=$("$kBuildVenv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  have=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [[ "$want" != "$have" ]]; then
    echo "install-python: '$py' is Python $have, the wheel is for $want; build it with that" \
      "Python: pip install ./python there (or scripts/gpu-check.sh's gpu_check.build_python)" >&2
    exit 2
  fi
  rm -rf "$target"
  "$py" -m pip install --quiet --disable-pip-version-check --target "$target" "$wheel" \
    "pytest==$kPytestPin"
  env=(env "PYTHONPATH=$target")
fi
"${env[@]}" "$py" -c 'import zeus_cpp, torch; print("install-python: zeus_cpp", zeus_cpp.__version__,
  "with torch", torch.__version__, "at", zeus_cpp.__file__)' >&2
echo "$py"
