#!/bin/sh
# The trivial worker of bench/launcher/run.py's "start" measure: records (Unix time) when the
# launcher got it running, before any library is loaded.
date +%s.%N > "${PROBE_DIR:-.}/start.$RANK"
