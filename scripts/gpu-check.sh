#!/usr/bin/env bash
# The GPU check: one prepared call on the GPU machine (docs/gpu.md), also runnable on a CPU
# machine (--cpu-only; CI runs it so that it does not rot). It
#   1. builds zeus-cpp's `cuda` configuration against the machine's torch (/opt/torch/.venv
#      there, .venv-torch here), with the Debian libraries from .gpu-carry/ (scripts/gpu-carry.sh)
#      instead of the system's; with --cpu-only the system's are hidden while it builds
#      (a private mount namespace), so a missing piece fails here first;
#   2. runs the tests that need a GPU (gpu_test) and torch_test;
#   3. trains examples/fashion_mnist for one epoch on cuda:0 with the real NVML in measure-only
#      mode, twice, alternating with the same model trained by the machine's PyTorch in Python
#      (bench/gpu_check/torch_step.py), one process each;
#   4. during the second zeus-cpp epoch samples the GPU with `zeus monitor` and `nvidia-smi`;
#   5. builds the Python package zeus_cpp against the machine's Python (its pybind11 and
#      scikit-build-core; with the carried libraries) into a private directory, and trains
#      examples/python/train.py (ZeusDataLoader) for one epoch on cuda:0 in measure-only mode;
#   6. prints (and writes to OUT/gpu-check.json and .txt) throughput, energy and time per epoch,
#      NVML's energy counter against the integral of its power samples over the same window,
#      NVML's power against nvidia-smi's, and zeus-cpp's step time against PyTorch's.
# It never changes a power limit, clock or persistence mode: everything runs in measure-only
# mode (ZEUS_MEASURE_ONLY=true), and the GPU's limit is read before and after to prove it.
# On a CPU machine the NVML is the fake one (tests/fakes) and training is on the CPU with a
# slice of the data.
#
#   scripts/gpu-check.sh [--cpu-only] [--python PY] [--out DIR] [--jobs N] [--limit-train N]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

cpu_only=0
python=""
out="${OUT:-$root/build/gpu-check/out}"
jobs=$(nproc)
limit_train=0
while (($#)); do
  case "$1" in
    --cpu-only) cpu_only=1; shift ;;
    --python) python="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --limit-train) limit_train="$2"; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

step() { echo "=== gpu-check: $* ($(date +%T))"; }
fail() { echo "gpu-check: FAILED: $*" >&2; exit 1; }

if ((!cpu_only)) && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: nvidia-smi sees no GPU here: running the CPU-only parts (--cpu-only)"
  cpu_only=1
fi
if [[ -z "$python" ]]; then
  for candidate in /opt/torch/.venv/bin/python3 "$root/.venv-torch/bin/python"; do
    [[ -x "$candidate" ]] && python="$candidate" && break
  done
fi
[[ -n "$python" ]] || fail "no Python with torch: pass --python, or run scripts/install-torch.sh"
scripts/install-torch.sh --python "$python" >/dev/null || fail "$python has no usable torch"

carry="$root/.gpu-carry"
if [[ ! -f "$carry/MANIFEST" ]]; then
  command -v dpkg >/dev/null || fail "$carry is missing: run scripts/gpu-carry.sh where Debian's packages are, and carry it"
  scripts/gpu-carry.sh "$carry"
fi
sys="$carry/sysroot/usr"
lib="$sys/lib/x86_64-linux-gnu"
build="$root/build/gpu-check"
mkdir -p "$out"
export ZEUS_MEASURE_ONLY=true
report_args=(--out "$out" --mode "$( ((cpu_only)) && echo cpu || echo gpu)")

# --- 1. build -------------------------------------------------------------------------------
step "configure and build against $("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo torch)"
# Warnings stay warnings here: the GPU machine's compiler is not this one, and a new warning
# must not cost the one run. CMake 4 refuses the old policy versions of Debian's CMake configs
# unless told a minimum.
configure=(cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DZEUS_TORCH_PYTHON="$python" -DZEUS_BUILD_BENCH=OFF -DZEUS_USE_CCACHE=OFF -DZEUS_WERROR=OFF
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5
  -DCMAKE_PREFIX_PATH="$sys" -Dfmt_DIR="$lib/cmake/fmt" -Dspdlog_DIR="$lib/cmake/spdlog"
  -DGTest_DIR="$lib/cmake/GTest" -DCLI11_DIR="$sys/share/cmake/CLI11"
  -Dnlohmann_json_DIR="$sys/share/cmake/nlohmann_json" -DZEUS_GLOO_INCLUDE_DIR="$sys/include"
  -DZLIB_INCLUDE_DIR="$sys/include" -DZLIB_LIBRARY="$lib/libz.so"
  -DJPEG_INCLUDE_DIR="$sys/include" -DJPEG_LIBRARY="$lib/libjpeg.so"
  -DPNG_PNG_INCLUDE_DIR="$sys/include" -DPNG_LIBRARY="$lib/libpng16.so")
targets=(zeus fashion_mnist gpu_test torch_test zeus_test_dist_worker fake_nvml_full)
build_cmd="$(printf '%q ' "${configure[@]}") >'$out/configure.log' 2>&1 && cmake --build '$build' -j $jobs --target ${targets[*]} >'$out/build.log' 2>&1"
# Runs a shell command; with --cpu-only (as root) in a private mount namespace where what the GPU
# machine lacks is hidden: Debian's copies of the carried packages' headers and CMake configs.
isolated() {
  if ((cpu_only)) && [[ $(id -u) -eq 0 ]] && unshare -m true 2>/dev/null; then
    local hide=""
    for d in /usr/include/{CLI,nlohmann,fmt,spdlog,gtest,gmock,gloo} /usr/share/cmake/{CLI11,nlohmann_json,Gloo} \
      /usr/lib/x86_64-linux-gnu/cmake/{fmt,spdlog,GTest}; do
      [[ -d "$d" ]] && hide+="mount -t tmpfs none $d && "
    done
    unshare -m --propagation private sh -c "${hide}$1" && echo "gpu-check: built with Debian's copies hidden: the carried prefix is complete"
  else
    sh -c "$1"
  fi
}
start=$(date +%s)
isolated "$build_cmd" || fail "build (see $out/configure.log, $out/build.log)"
echo "build_s=$(($(date +%s) - start))" >"$out/build.txt"
grep -E "zeus-cpp:" "$out/configure.log" || true

# --- 2. the tests that need a GPU -----------------------------------------------------------
# The carried shared objects (fmt, spdlog, image codecs) before any the machine has; zeus-cpp's
# programs only (the build's own tools ran without them).
run() { LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }
step "gpu_test and torch_test"
run "$build/tests/gpu_test" >"$out/gpu_test.txt" 2>&1 || fail "gpu_test: $(tail -20 "$out/gpu_test.txt")"
run "$build/tests/torch_test" >"$out/torch_test.txt" 2>&1 || fail "torch_test: $(tail -20 "$out/torch_test.txt")"
grep -E "^\[  (PASSED|SKIPPED|FAILED) \]" "$out/gpu_test.txt" "$out/torch_test.txt" || true

# --- 3 and 4. train: zeus-cpp and PyTorch, alternating ----------------------------------------
train_args=(--epochs 1 --target-accuracy 0.99 --measure-only --threads 1
  --data "$carry/fashion-mnist" --job-id gpucheck)
peer_args=(--data "$carry/fashion-mnist")
if ((cpu_only)); then
  # The fake NVML: one H200-like GPU, 700 W limit, drawing 300 W.
  state="$out/fake-nvml.json"
  cat >"$state" <<'EOF'
{"gpus": [{"name": "NVIDIA H200 (fake)", "uuid": "GPU-00000000-0000-0000-0000-0000000000c0",
  "power_mw": 300000, "energy_mj": 0, "limit_mw": 700000, "min_limit_mw": 200000,
  "max_limit_mw": 700000, "default_limit_mw": 700000, "instant_power": true,
  "energy_counter": true}], "faults": {"set_no_permission": true}, "limit_history": []}
EOF
  export ZEUS_NVML_LIBRARY="$build/tests/fakes/full/libnvidia-ml.so.1" FAKE_NVML_STATE="$state"
  ((limit_train > 0)) || limit_train=2048
  train_args+=(--device-type cpu --device nvml)
  peer_args+=(--device cpu)
else
  train_args+=(--device-type cuda --device nvml)
  peer_args+=(--device cuda:0)
  nvidia-smi --query-gpu=name,uuid,power.limit,power.default_limit,enforced.power.limit \
    --format=csv >"$out/limit-before.csv"
fi
if ((limit_train > 0)); then
  train_args+=(--limit-train "$limit_train")
  peer_args+=(--limit-train "$limit_train")
fi
for rep in 1 2; do
  step "zeus-cpp epoch, rep $rep"
  if ((rep == 2)); then
    # The same window for NVML (through zeus monitor) and nvidia-smi.
    run "$build/apps/zeus/zeus" monitor --gpus 0 --interval 50ms --duration 6s \
      --out "$out/monitor.csv" >"$out/monitor.txt" 2>&1 &
    monitor_pid=$!
    if ((!cpu_only)); then
      timeout 6 nvidia-smi --query-gpu=timestamp,power.draw,power.draw.instant \
        --format=csv,noheader,nounits -i 0 -lms 100 >"$out/nvidia-smi.csv" 2>&1 &
      smi_pid=$!
    fi
  fi
  set +e
  run "$build/examples/fashion_mnist" "${train_args[@]}" --log-dir "$out/zeus_log_$rep" \
    >"$out/zeus_train_$rep.txt" 2>&1
  rc=$?
  set -e
  # 3: the 0.99 target is not reached in one epoch, as intended (the epoch runs whole).
  [[ $rc -eq 0 || $rc -eq 3 ]] || fail "fashion_mnist exited $rc: $(tail -20 "$out/zeus_train_$rep.txt")"
  if ((rep == 2)); then
    wait "$monitor_pid" || fail "zeus monitor: $(cat "$out/monitor.txt")"
    ((cpu_only)) || wait "$smi_pid" || true
  fi
  step "PyTorch epoch, rep $rep"
  "$python" bench/gpu_check/torch_step.py "${peer_args[@]}" >"$out/torch_train_$rep.json" \
    2>"$out/torch_train_$rep.err" || fail "torch_step.py: $(tail -20 "$out/torch_train_$rep.err")"
done
# --- 5. the Python package on this machine's Python ------------------------------------------
step "Python package: build and one epoch of examples/python/train.py"
# The builder needs pybind11 and scikit-build-core: the machine's Python has them; here, where
# .venv-torch lacks them, Debian's venv builds for the same CPython version.
builder="$python"
if ! "$builder" -c 'import pybind11, scikit_build_core' 2>/dev/null; then
  builder=$(scripts/install-python.sh | tail -1)
fi
pyout="$build/python-target"
rm -rf "$pyout"
py_build=("$builder" -m pip install --quiet --disable-pip-version-check --no-deps
  --no-build-isolation --target "$pyout" "$root/python" --config-settings=build-dir="$build/python")
# The carried packages by their config directories (a CMAKE_PREFIX_PATH would replace the one
# through which scikit-build-core finds pybind11).
for define in ZEUS_WERROR=OFF ZEUS_USE_CCACHE=OFF CMAKE_POLICY_VERSION_MINIMUM=3.5 \
  pybind11_DIR="$("$builder" -c 'import pybind11; print(pybind11.get_cmake_dir())')" \
  fmt_DIR="$lib/cmake/fmt" spdlog_DIR="$lib/cmake/spdlog" \
  nlohmann_json_DIR="$sys/share/cmake/nlohmann_json"; do
  py_build+=(--config-settings=cmake.define.$define)
done
isolated "$(printf '%q ' "${py_build[@]}") >'$out/python-build.log' 2>&1" ||
  fail "Python package build: $(tail -30 "$out/python-build.log")"
py_args=(--zeus --epochs 1 --batch-size 64 --target-accuracy 0.99 --data "$carry/fashion-mnist")
if ((limit_train > 0)); then
  py_args+=(--limit-train "$limit_train" --limit-test "$limit_train")
fi
set +e
run env PYTHONPATH="$pyout" ZEUS_LOG_DIR="$out/py_log" ZEUS_JOB_ID=gpucheck ZEUS_DEVICE=nvml \
  "$python" examples/python/train.py "${py_args[@]}" >"$out/python_train.txt" 2>&1
rc=$?
set -e
[[ $rc -eq 0 ]] || fail "examples/python/train.py exited $rc: $(tail -30 "$out/python_train.txt")"

if ((!cpu_only)); then
  nvidia-smi --query-gpu=name,uuid,power.limit,power.default_limit,enforced.power.limit \
    --format=csv >"$out/limit-after.csv"
  cmp -s "$out/limit-before.csv" "$out/limit-after.csv" ||
    fail "the GPU's power limit changed during the check: $(cat "$out/limit-before.csv" "$out/limit-after.csv")"
else
  "$python" -c "import json,sys; h=json.load(open(sys.argv[1]))['limit_history']; sys.exit(len(h))" \
    "$state" || fail "a power limit was set on the fake NVML in measure-only mode"
fi

# --- 6. the report --------------------------------------------------------------------------
step "report"
"$python" bench/gpu_check/report.py "${report_args[@]}"
