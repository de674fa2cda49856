#!/usr/bin/env bash
# The wheels tried as a user would, on machines that have nothing (docs/packaging.md): bare Debian
# roots (scripts/wheels/make-root.sh: debootstrap minbase, python3 and python3-venv only, no
# compiler, no -dev package) entered with chroot, the wheel installed there by pip from a
# directory (no index), then tests/wheels/in_root.py's checks, as root:
#   bullseye (glibc 2.31, Python 3.9): zeus/zeusd --version, zeus monitor --device sim:v100,
#     zeus simulate (the README's row of the paper's numbers), zeusd serve with upstream Zeus
#     0.16's ZeusdClient on the fake NVML, zeus_cpp.monitor.ZeusMonitor on the fake NVML;
#   bookworm (Python 3.11): the README's Python example under `zeus run --nproc-per-node 2` on
#     simulated GPUs, with PyTorch's wheel as scripts/install-torch.sh installed it in .venv-torch
#     (Python 3.11), mounted read-only and put on the root venv's path (no second download);
#   arm64 (bookworm's arm64 root, no binfmt needed): the aarch64 wheel's zeus --version, zeus
#     simulate, zeus monitor and `import zeus_cpp`, run by qemu-aarch64-static -L ROOT.
#
#   tests/wheels/run.sh [--checks "bullseye bookworm arm64"]
# Wants the wheels in build/wheels/dist (make wheels, or scripts/wheels/build-wheels.sh --arch
# x86_64 --python "3.9 3.11" for the x86_64 checks).
set -euo pipefail
cd "$(dirname "$0")/../.."
root_dir=$PWD

checks="bullseye bookworm arm64"
while (($#)); do
  case "$1" in
    --checks) checks="${2:?--checks needs bullseye, bookworm and/or arm64}"; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "wheels-test: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
((EUID == 0)) || {
  echo "wheels-test: run as root (debootstrap, chroot and mount need it)" >&2
  exit 1
}
version=$(head -n1 VERSION)
dist=build/wheels/dist
roots=build/chroots
fake=build/wheels/x86_64/build/fakes/libnvidia-ml.so.1
# The paper's v100/cifar100 row as the README shows it (the source build's output).
expect_row=$(grep -E '^v100 +cifar100 ' README.md | head -n1)
[[ -n $expect_row ]] || { echo "wheels-test: no v100 cifar100 row in README.md" >&2; exit 1; }

mounted=()
cleanup() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    m=${mounted[i]}
    umount -R "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}
trap cleanup EXIT

# wheel_for TAG ARCH: the one wheel of that CPython and architecture, or a clear failure.
wheel_for() {
  local w
  w=$(compgen -G "$dist/zeus_cpp-$version-$1-$1-manylinux_2_28_$2.whl" | head -n1) || true
  [[ -n $w ]] || {
    echo "wheels-test: no $1 $2 wheel of $version in $dist: make wheels (or" \
      "scripts/wheels/build-wheels.sh --arch $2 --python 3.${1#cp3})" >&2
    exit 1
  }
  echo "$w"
}

# prepare SUITE ARCH TAG: the root, fresh test files and the wheel in /opt/zeus-test
prepare() {
  local suite=$1 arch=$2 tag=$3 dir=$roots/$1-$2 wheel_arch
  [[ $arch == arm64 ]] && wheel_arch=aarch64 || wheel_arch=x86_64
  scripts/wheels/make-root.sh "$suite" "$arch" "$root_dir/$dir"
  local t=$dir/opt/zeus-test
  rm -rf "$t" "$dir/opt/zeus-venv" "$dir/opt/zeus016-venv" "$dir/tmp/zeus-readme-train"
  mkdir -p "$t/wheels" "$t/fake" "$t/zeus016" "$t/torch"
  cp "$(wheel_for "$tag" "$wheel_arch")" "$t/wheels/"
  cp tests/wheels/in_root.py tests/wheels/readme_train.py tests/wheels/zeus016-py39.txt \
    tests/zeusd_upstream/upstream_client.py "$t/"
  [[ $arch == arm64 ]] || cp "$fake" "$t/fake/"
  echo "$root_dir/$dir"
}

# enter DIR: /proc and /dev inside the root, undone on exit
enter() {
  mount -t proc proc "$1/proc"
  mounted+=("$1/proc")
  mount --rbind /dev "$1/dev"
  mount --make-rslave "$1/dev"
  mounted+=("$1/dev")
}

in_root() {
  local dir=$1
  shift
  chroot "$dir" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
    /usr/bin/python3 /opt/zeus-test/in_root.py --version "$version" "$@"
}

for check in $checks; do
  start=$(date +%s)
  case $check in
    bullseye)
      [[ -f $fake ]] || { echo "wheels-test: $fake is missing: build the x86_64 wheels" >&2; exit 1; }
      dir=$(prepare bullseye amd64 cp39)
      # Upstream Zeus 0.16's client for Python 3.9 (pure-Python wheels; pip's cache serves them).
      "$root_dir/.venv-wheels/bin/pip" download -q --disable-pip-version-check --no-deps \
        --only-binary=:all: --python-version 3.9 --platform any -d build/wheels/zeus016 \
        -r tests/wheels/zeus016-py39.txt
      cp build/wheels/zeus016/*.whl "$dir/opt/zeus-test/zeus016/"
      enter "$dir"
      in_root "$dir" --mode basic --arch x86_64 --expect-row "$expect_row"
      ;;
    bookworm)
      [[ -f $fake ]] || { echo "wheels-test: $fake is missing: build the x86_64 wheels" >&2; exit 1; }
      dir=$(prepare bookworm amd64 cp311)
      # PyTorch's wheel as scripts/install-torch.sh installed it (torch 2.15.0 for Python 3.11,
      # bookworm's), seen read-only in the root's venv: no second download, and no second 5 GB
      # install, which a CI machine's disk does not hold beside the rest.
      site=$root_dir/.venv-torch/lib/python3.11/site-packages
      [[ -d $site/torch ]] || {
        echo "wheels-test: the bookworm check needs .venv-torch with torch for Python 3.11" \
          "(bookworm's): run scripts/install-torch.sh" >&2
        exit 1
      }
      mount --bind "$site" "$dir/opt/zeus-test/torch"
      mounted+=("$dir/opt/zeus-test/torch")
      mount -o remount,ro,bind "$dir/opt/zeus-test/torch"
      enter "$dir"
      in_root "$dir" --mode train --arch x86_64
      ;;
    arm64)
      dir=$(prepare bookworm arm64 cp311)
      # No binfmt in a sandbox: pip (the host's) unpacks the aarch64 wheel into the root, and
      # qemu runs what is there with the root as its library prefix.
      "$root_dir/.venv-wheels/bin/pip" install -q --disable-pip-version-check --no-index \
        --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64 --python-version 3.11 \
        --implementation cp --target "$dir/opt/zeus-arm" "$dir"/opt/zeus-test/wheels/*.whl
      qemu=(qemu-aarch64-static -L "$dir")
      bin=$dir/opt/zeus-arm/bin
      out=$("${qemu[@]}" "$bin/zeus" --version)
      [[ $(head -n1 <<<"$out") == "zeus $version" && $out == *"manylinux_2_28 aarch64"* ]] || {
        echo "wheels-test: arm64 zeus --version said: $out" >&2
        exit 1
      }
      echo "wheels-test: arm64: ok: zeus --version says zeus $version (aarch64)"
      # pip --target keeps the wheel's data (share/zeus/zeus-traces) beside bin/.
      got=$(ZEUS_TRACE_DIR= "${qemu[@]}" "$bin/zeus" simulate --gpu v100 --workload cifar100 |
        grep -E '^v100 ' | tr -s ' ')
      [[ $got == "$(tr -s ' ' <<<"$expect_row")" ]] || {
        echo "wheels-test: arm64 zeus simulate gave '$got', the README has '$expect_row'" >&2
        exit 1
      }
      echo "wheels-test: arm64: ok: zeus simulate gives the README's v100/cifar100 row"
      out=$("${qemu[@]}" "$bin/zeus" monitor --device sim:v100 --duration 2s 2>&1)
      [[ $out == *J* ]] || { echo "wheels-test: arm64 zeus monitor said: $out" >&2; exit 1; }
      echo "wheels-test: arm64: ok: zeus monitor --device sim:v100 for 2 s"
      got=$(PYTHONPATH=/opt/zeus-arm "${qemu[@]}" "$dir/usr/bin/python3" -c \
        'import platform, zeus_cpp; print(platform.machine(), zeus_cpp.__version__)')
      [[ $got == "aarch64 $version" ]] || {
        echo "wheels-test: arm64 import zeus_cpp said: $got" >&2
        exit 1
      }
      echo "wheels-test: arm64: ok: import zeus_cpp ($got)"
      ;;
    *) echo "wheels-test: unknown check '$check' (bullseye, bookworm, arm64)" >&2; exit 2 ;;
  esac
  cleanup
  mounted=()
  echo "wheels-test: $check passed in $(($(date +%s) - start)) s"
done
