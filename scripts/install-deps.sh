#!/usr/bin/env bash
# Installs every Debian (bookworm) package that zeus-cpp's build, tests, examples and
# benchmarks need. Idempotent: packages already installed are skipped, and `apt-get update`
# runs once, only when something is missing. Uses sudo when not root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  libtorch-dev libopenblas0 libgloo-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev dataset-fashion-mnist libjpeg62-turbo-dev libpng-dev
  python3-torch slurm-wlm munge
  libmicrohttpd-dev libssl-dev libcurl4-openssl-dev libtomlplusplus-dev python3-venv
  libgrpc++-dev protobuf-compiler protobuf-compiler-grpc
  libsqlite3-dev libpq-dev postgresql-15 prometheus prometheus-pushgateway etcd-server
  debootstrap qemu-user-static tcl
)

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || {
    echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  }
  sudo=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
