#!/usr/bin/env bash
# Remakes docs/img/prometheus-*.png: `zeus monitor --serve` over the fake NVML driven by
# drive_fake_nvml.py, scraped by Prometheus (Debian's) every second for 70 s, and two views of
# Prometheus's graph page taken by headless Chromium (Debian's chromium). Run from the checkout
# after `cmake --build --preset ci`; needs prometheus and chromium installed.
set -euo pipefail
cd "$(dirname "$0")/../../.."
repo=$PWD
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
python3 examples/grafana/screenshot/drive_fake_nvml.py "$work/nvml.json" &
sleep 1
FAKE_NVML_STATE=$work/nvml.json ZEUS_NVML_LIBRARY=$repo/build/ci/tests/fakes/full/libnvidia-ml.so.1 \
  build/ci/apps/zeus/zeus monitor --serve 127.0.0.1:19400 --interval 500ms --duration 300s \
  >/dev/null 2>&1 &
printf 'global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: zeus\n    static_configs:\n      - targets: ["127.0.0.1:19400"]\n' \
  >"$work/prometheus.yml"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address=127.0.0.1:19090 --log.level=warn &
sleep 70
shot() {
  chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1560 \
    --virtual-time-budget=15000 --screenshot="$1" "$2" 2>/dev/null
}
base="http://127.0.0.1:19090/graph?g0.tab=0&g0.range_input=1m&g1.tab=0&g1.range_input=1m"
shot docs/img/prometheus-power-limits.png \
  "$base&g0.expr=zeus_gpu_power_watts&g1.expr=zeus_gpu_power_limit_watts"
shot docs/img/prometheus-temperature-throttle.png \
  "$base&g0.expr=zeus_gpu_temperature_celsius&g1.expr=rate(zeus_gpu_power_throttle_seconds_total%5B5s%5D)"
