#!/usr/bin/env bash
# Configures and builds into build/ (override with BUILD_DIR). Extra arguments
# go to cmake's configure step, e.g. -DGAITWATCH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
