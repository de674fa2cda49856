#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on the GPU machine and that machine lacks (it has no
# Debian -dev packages and no network; see docs/gpu.md) into .gpu-carry/ (ignored by git, named
# in the device tool's `carry`): the files of the Debian packages below, as a relocatable prefix
# (.gpu-carry/sysroot/usr/...: headers, static and shared libraries, CMake configs), and the
# Fashion-MNIST files. Idempotent; about 40 MiB. Beside them:
#   MANIFEST   the packages and versions (a carry with another list is made again);
#   FILES      every system path the carried packages install (what the CPU-only check hides,
#              scripts/gpu_check/isolation.py);
#   REQUIRES   the newest GLIBC_ and GLIBCXX_ symbol versions the carried shared objects need
#              (the GPU machine's C and C++ runtimes must be at least as new; the preflight checks).
# Paths under /lib, /bin and /sbin (merged /usr: links to /usr/...) land under sysroot/usr, so
# one library folder holds every carried shared object.
#
#   scripts/gpu-carry.sh [DIR]     # default .gpu-carry
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-.gpu-carry}"
# The build's libraries beyond libtorch, and what their shared objects need at run time.
readonly packages=(
  libcli11-dev nlohmann-json3-dev libfmt-dev libfmt9 libspdlog-dev libspdlog1.10
  libgtest-dev libgmock-dev libgloo-dev libgloo0 zlib1g-dev zlib1g
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

# /lib/x86_64-linux-gnu/libz.so.1 -> /usr/lib/x86_64-linux-gnu/libz.so.1 where / is merged.
canonical() {
  local top=${1#/}
  top=/${top%%/*}
  if [[ "$top" =~ ^/(lib|lib64|bin|sbin)$ && "$(readlink "$top")" == "usr$top" ]]; then
    echo "/usr$1"
  else
    echo "$1"
  fi
}

rm -rf "$out.tmp"
mkdir -p "$out.tmp/sysroot" "$out.tmp/fashion-mnist"
for pkg in "${packages[@]}"; do
  # Regular files and symlinks, without docs, man pages and sources.
  dpkg -L "$pkg" | grep -v -E '^/usr/(share/(doc|man|lintian)|src)/' | while read -r f; do
    # Not the merged /usr's own links (/lib -> usr/lib), which a package may list.
    if [[ -L "$f" || -f "$f" ]] && [[ ! "$f" =~ ^/(lib|lib64|bin|sbin)$ ]]; then
      dest="$out.tmp/sysroot$(canonical "$f")"
      mkdir -p "$(dirname "$dest")"
      cp -a "$f" "$dest"
      echo "$f" >>"$out.tmp/FILES"
    fi
  done
done
# The prefix must survive being moved: an absolute link would point outside it there.
while read -r link; do
  target=$(readlink "$link")
  if [[ "$target" == /* ]]; then
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$out.tmp/sysroot$(canonical "$target")")" "$link"
  fi
done < <(find "$out.tmp/sysroot" -type l)
dangling=$(find -L "$out.tmp/sysroot" -type l)
[[ -z "$dangling" ]] || {
  echo "gpu-carry: links that point nowhere inside the carry: $dangling" >&2
  exit 1
}
# The newest symbol versions of the C and C++ runtimes that the carried shared objects use.
find "$out.tmp/sysroot" -name '*.so*' -type f -exec objdump -T {} + 2>/dev/null |
  grep -o -E '\b(GLIBC|GLIBCXX)_[0-9.]+\b' | sort -u -V |
  awk -F_ '{newest[$1] = $0} END {for (k in newest) print newest[k]}' | sort >"$out.tmp/REQUIRES"
cp "$data_dir"/*-ubyte.gz "$out.tmp/fashion-mnist/"
echo "$want" >"$out.tmp/MANIFEST"
rm -rf "$out"
mv "$out.tmp" "$out"
echo "gpu-carry: wrote $out ($(du -sh "$out" | cut -f1)): ${#packages[@]} packages and Fashion-MNIST"
