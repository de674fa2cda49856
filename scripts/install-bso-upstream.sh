#!/usr/bin/env bash
# Installs upstream Zeus 0.16 with its batch-size server's stack (PyPI, pinned:
# tests/bso_upstream/requirements.txt, --no-deps) into the ignored venv .venv-bso-zeus016/, for
# the test in which upstream's own BatchSizeOptimizer client drives zeus bso-server, and for
# bench/bso_server. Idempotent: a venv that already imports upstream's client and server is kept.
# `make test` calls it; the tests that need it skip, saying so, where it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly kVenv=".venv-bso-zeus016"
readonly kRequirements="tests/bso_upstream/requirements.txt"
readonly kCheck='import zeus, zeus.optimizer.batch_size.client, zeus.optimizer.batch_size.server.router, sys; sys.exit(zeus.__version__ != "0.16.0")'

if [[ -x "$kVenv/bin/python" ]] && "$kVenv/bin/python" -c "$kCheck" 2>/dev/null; then
  echo "install-bso-upstream: $kVenv has zeus 0.16.0 with its batch-size client and server"
  exit 0
fi
rm -rf "$kVenv"
/usr/bin/python3 -m venv "$kVenv"
"$kVenv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$kRequirements"
ZEUS_BSO_DATABASE_URL=sqlite+aiosqlite:///:memory: "$kVenv/bin/python" -c "$kCheck"
echo "install-bso-upstream: zeus 0.16.0 with its batch-size client and server in $kVenv"
