#!/usr/bin/env bash
# ctest's kubernetes_manifests: check_manifests.py in .venv-k8s (scripts/install-k8s-validate.sh).
# Skips (77) saying why where the venv or kubectl is missing; in CI (CI=true) that is a failure.
set -uo pipefail
src="$1"
missing=""
[[ -x "$src/.venv-k8s/bin/python" ]] || missing="$src/.venv-k8s (run scripts/install-k8s-validate.sh)"
command -v kubectl >/dev/null || missing="kubectl (kustomize renders the manifests)"
if [[ -n "$missing" ]]; then
  echo "kubernetes_manifests: missing $missing"
  [[ "${CI:-}" == "true" ]] && exit 1
  exit 77
fi
exec "$src/.venv-k8s/bin/python" "$src/tests/kubernetes/check_manifests.py" "$src"
