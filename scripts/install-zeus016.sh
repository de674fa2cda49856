#!/usr/bin/env bash
# Installs upstream Zeus 0.16 (PyPI's zeus==0.16.0, pinned with the few packages its zeusd client
# imports: tests/zeusd_upstream/requirements.txt) into the ignored venv .venv-zeus016/, for the
# test in which upstream's own client talks to zeus-cpp's zeusd as an unprivileged user. Debian's
# python3 makes the venv: an interpreter under /root (pyenv) is out of that user's reach.
# Idempotent: a venv that already imports zeus 0.16.0 is kept. `make test` calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly kVenv=".venv-zeus016"
readonly kRequirements="tests/zeusd_upstream/requirements.txt"

if [[ -x "$kVenv/bin/python" ]] &&
  "$kVenv/bin/python" -c 'import zeus, sys; sys.exit(zeus.__version__ != "0.16.0")' 2>/dev/null; then
  echo "install-zeus016: $kVenv has zeus 0.16.0"
  exit 0
fi
rm -rf "$kVenv"
/usr/bin/python3 -m venv "$kVenv"
"$kVenv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$kRequirements"
"$kVenv/bin/python" -c 'import zeus.utils.zeusd, zeus.device.exception; print("install-zeus016: zeus", __import__("zeus").__version__, "in '"$kVenv"'")'
