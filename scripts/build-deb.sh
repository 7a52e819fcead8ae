#!/usr/bin/env bash
# Builds the Debian package from a Release build in build-release/ (only the
# two programs: no tests, no benchmarks) and lists its contents.
#   bash scripts/build-deb.sh [BUILD_DIR]
# The package installs under /usr with the config in /etc/gaitwatch, the unit
# and sysusers entry under /usr/lib, stripped binaries, and library
# dependencies from dpkg-shlibdeps (dpkg-dev). CPU backend only unless
# GAITWATCH_CUDA=AUTO|ON is given (a CUDA build needs the NVIDIA driver on the
# machines it is installed on).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-release}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGAITWATCH_TESTS=OFF -DGAITWATCH_BENCH=OFF \
  -DGAITWATCH_CUDA="${GAITWATCH_CUDA:-OFF}" ${CMAKE_EXTRA_ARGS:-} >/dev/null
cmake --build "$build" -j"${JOBS:-2}" --target gaitwatchd gaitwatch
(cd "$build" && cpack -G DEB)
deb=$(ls -t "$build"/gaitwatch_*.deb | head -1)
dpkg-deb --info "$deb"
contents=$(dpkg-deb --contents "$deb")
echo "$contents"
# The files the service needs, where systemd and the unit look for them.
for f in ./usr/bin/gaitwatchd ./usr/bin/gaitwatch ./etc/gaitwatch/gaitwatch.yaml \
         ./usr/lib/systemd/system/gaitwatchd.service ./usr/lib/sysusers.d/gaitwatch.conf; do
  grep -q " $f\$" <<<"$contents" || { echo "build-deb: $deb lacks $f" >&2; exit 1; }
done
ls -l "$deb"
