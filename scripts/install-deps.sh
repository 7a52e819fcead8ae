#!/usr/bin/env bash
# Installs everything gaitwatch needs to build and test on Debian 12.
# CUDA is optional and not installed here (the CUDA backend builds when nvcc is found).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
packages=(
  build-essential cmake pkg-config
  libboost-dev libzmq3-dev cppzmq-dev libsqlite3-dev sqlite3 libyaml-cpp-dev
  catch2 nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev zlib1g-dev libsystemd-dev libsodium-dev
  libhowardhinnant-date-dev
  libjemalloc-dev  # gaitwatchd's allocator (GAITWATCH_JEMALLOC; brings libjemalloc2)
  libmosquitto-dev  # the MQTT bridge
  libssl-dev  # the console's TLS (OpenSSL through Asio)
  # The console's browser test: headless Chromium driven by Selenium, and
  # the YAML module it writes the daemon's config with.
  chromium chromium-driver python3-selenium python3-yaml
  mosquitto  # the broker the bridge's tests start on loopback
  libnats-dev nats-server  # the JetStream gateway (NATS C client) and the server its tests start
  tzdata  # the time zone database libdate-tz reads (site.time_zone, messages' times)
  gnuplot-nox  # gaitwatch plot draws with it (an external process, no library link)
  # promtool (test_metrics_process checks /metrics with `promtool check
  # metrics`); the package also brings the Prometheus server, unused here.
  prometheus
  # Reliability stages (docs/reliability.md): clang + its runtimes for the
  # libFuzzer targets (scripts/fuzz.sh), llvm for llvm-symbolizer (readable
  # sanitizer stacks), ccache for the extra sanitizer builds.
  clang libclang-rt-14-dev llvm ccache
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
