#!/usr/bin/env bash
# A bare Debian root filesystem for the wheels' tests (tests/wheels/run.sh): debootstrap's minbase
# (no compiler, no -dev package) with python3 and python3-venv only, from Debian's archive.
#   scripts/wheels/make-root.sh SUITE ARCH DIR     (bullseye|bookworm, amd64|arm64)
# A foreign architecture is unpacked only (--foreign: its second stage would need binfmt, which a
# sandbox may not register); tests/wheels/run.sh runs its programs with qemu-aarch64-static -L DIR.
# A root made before (DIR/.zeus-root-ready) is kept. Needs root (debootstrap, chroot).
set -euo pipefail
suite=${1:?suite: bullseye or bookworm} arch=${2:?arch: amd64 or arm64} dir=${3:?target directory}
if [[ -f $dir/.zeus-root-ready ]]; then
  exit 0
fi
command -v debootstrap >/dev/null || {
  echo "make-root: debootstrap is missing: run scripts/install-deps.sh" >&2
  exit 1
}
rm -rf "$dir" && mkdir -p "$(dirname "$dir")"
log=$dir.debootstrap.log
foreign=()
[[ $arch == "$(dpkg --print-architecture)" ]] || foreign=(--foreign)
if ! debootstrap --variant=minbase --arch="$arch" "${foreign[@]}" --include=python3,python3-venv \
  "$suite" "$dir" http://deb.debian.org/debian >"$log" 2>&1; then
  echo "make-root: debootstrap $suite/$arch failed (log: $log):" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
if ((${#foreign[@]})); then
  # The first stage unpacks only the essential packages; the rest it fetched wait in the
  # archive cache: unpack them too (no maintainer scripts run: none is needed to run python3).
  for deb in "$dir"/var/cache/apt/archives/*.deb; do
    # Into the root's merged /usr: its /bin, /lib links stay links.
    dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink -C "$dir"
  done
fi
touch "$dir/.zeus-root-ready"
