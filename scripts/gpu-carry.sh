#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on the GPU machine and that machine lacks (it has no
# Debian -dev packages and no network; see docs/gpu.md) into .gpu-carry/ (ignored by git, named
# in the device tool's `carry`): the files of the Debian packages below, as a relocatable prefix
# (.gpu-carry/sysroot/usr/...: headers, static and shared libraries, CMake configs), and the
# Fashion-MNIST files. Idempotent; about 40 MiB.
#
#   scripts/gpu-carry.sh [DIR]     # default .gpu-carry
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-.gpu-carry}"
# The build's libraries beyond libtorch, and what their shared objects need at run time.
readonly packages=(
  libcli11-dev nlohmann-json3-dev libfmt-dev libfmt9 libspdlog-dev libspdlog1.10
  libgtest-dev libgmock-dev libgloo-dev zlib1g-dev zlib1g
  libjpeg62-turbo-dev libjpeg62-turbo libpng-dev libpng16-16
)
readonly data_dir=/usr/share/datasets/fashion-mnist

missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "gpu-carry: missing Debian packages: ${missing[*]} (run scripts/install-deps.sh)" >&2
  exit 1
fi
[[ -f "$data_dir/train-images-idx3-ubyte.gz" ]] || {
  echo "gpu-carry: $data_dir is missing (apt install dataset-fashion-mnist)" >&2
  exit 1
}

stamp="$out/MANIFEST"
want=$(for pkg in "${packages[@]}"; do dpkg-query -W -f='${Package} ${Version}\n' "$pkg"; done)
if [[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$want" ]]; then
  echo "gpu-carry: $out is up to date ($(du -sh "$out" | cut -f1))"
  exit 0
fi

rm -rf "$out.tmp"
mkdir -p "$out.tmp/sysroot" "$out.tmp/fashion-mnist"
for pkg in "${packages[@]}"; do
  # Regular files and symlinks, without docs, man pages and sources.
  dpkg -L "$pkg" | grep -v -E '^/usr/(share/(doc|man|lintian)|src)/' | while read -r f; do
    if [[ -L "$f" || -f "$f" ]]; then
      mkdir -p "$out.tmp/sysroot$(dirname "$f")"
      cp -a "$f" "$out.tmp/sysroot$f"
    fi
  done
done
# The prefix must survive being moved: an absolute link would point outside it there.
while read -r link; do
  target=$(readlink "$link")
  if [[ "$target" == /* ]]; then
    ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$out.tmp/sysroot$target")" "$link"
  fi
done < <(find "$out.tmp/sysroot" -type l)
cp "$data_dir"/*-ubyte.gz "$out.tmp/fashion-mnist/"
echo "$want" >"$out.tmp/MANIFEST"
rm -rf "$out"
mv "$out.tmp" "$out"
echo "gpu-carry: wrote $out ($(du -sh "$out" | cut -f1)): ${#packages[@]} packages and Fashion-MNIST"
