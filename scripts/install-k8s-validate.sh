#!/usr/bin/env bash
# Installs kubernetes-validate (PyPI, pinned with its dependencies: tests/kubernetes/requirements.txt;
# it carries Kubernetes' JSON schemas, so validation needs no network) into the ignored venv
# .venv-k8s/, for the test that validates deploy/kubernetes and examples/kubernetes
# (tests/kubernetes/check_manifests.py). Idempotent. `make test` calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly kVenv=".venv-k8s"
readonly kRequirements="tests/kubernetes/requirements.txt"
readonly kWant="$(grep '^kubernetes-validate==' "$kRequirements" | cut -d= -f3)"

if [[ -x "$kVenv/bin/python" ]] &&
  "$kVenv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('kubernetes-validate') != '$kWant')" 2>/dev/null; then
  echo "install-k8s-validate: $kVenv has kubernetes-validate $kWant"
  exit 0
fi
rm -rf "$kVenv"
/usr/bin/python3 -m venv "$kVenv"
"$kVenv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$kRequirements"
"$kVenv/bin/python" -c "import kubernetes_validate, yaml; print('install-k8s-validate: kubernetes-validate', kubernetes_validate.__version__ if hasattr(kubernetes_validate, '__version__') else '$kWant', 'in $kVenv')"
