#!/usr/bin/env bash
# Installs the training frameworks the Python suite drives the optimizer's callbacks with
# (HuggingFace transformers and Lightning, pinned with what they import beyond torch:
# python/tests/frameworks/requirements.txt) into a directory for an interpreter that has torch
# 2.x, with --no-deps so that its torch is never touched; the suite finds them on PYTHONPATH.
# Idempotent: a directory that already holds the pinned transformers and lightning is kept.
# `make test-cuda` calls it for .venv-torch.
#
#   scripts/install-frameworks.sh --python PY --target DIR
set -euo pipefail
cd "$(dirname "$0")/.."
readonly kRequirements="python/tests/frameworks/requirements.txt"

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
      sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "install-frameworks: unknown argument '$1' (try --help)" >&2
      exit 2
      ;;
  esac
done
if [[ -z "$python" || -z "$target" ]]; then
  echo "install-frameworks: give --python PY and --target DIR (try --help)" >&2
  exit 2
fi
# Absolute, as the modules' __file__ that the check below compares with it.
target=$(realpath -m -- "$target")
"$python" -c 'import torch' 2>/dev/null || {
  echo "install-frameworks: '$python' has no torch; the frameworks need the environment's own" >&2
  exit 1
}

want() { sed -n "s/^$1==//p" "$kRequirements"; }
if PYTHONPATH="$target" "$python" -c "
import sys, transformers, lightning
here = all(m.__file__.startswith('$target') for m in (transformers, lightning))
sys.exit(not here or transformers.__version__ != '$(want transformers)' or lightning.__version__ != '$(want lightning)')
" 2>/dev/null; then
  echo "install-frameworks: $target has transformers $(want transformers), lightning $(want lightning)"
  exit 0
fi
rm -rf "$target"
start=$(date +%s)
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$target" \
  -r "$kRequirements"
PYTHONPATH="$target" "$python" -c "import transformers, lightning, accelerate" 2>/dev/null || {
  echo "install-frameworks: the frameworks in $target do not import with $python's torch" >&2
  PYTHONPATH="$target" "$python" -c "import transformers, lightning, accelerate"
  exit 1
}
echo "install-frameworks: transformers $(want transformers), lightning $(want lightning) in" \
  "$target ($(($(date +%s) - start)) s)"
