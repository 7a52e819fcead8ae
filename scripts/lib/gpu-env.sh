# Sourced by the GPU-machine scripts (gpu-run.sh, gpu-ab.sh, ...), from the
# repository root: unpacks the carried
# Debian packages (.offline-deps/, docs/gpu.md) once, exports the paths CMake
# and the binaries need, sets OUT (default ./gpu-out) and BUILD (default
# /tmp/gw-build, configured for sm_90 on first use) and defines
# `gpu_build TARGET...` (logs to $OUT/build.log; prints the errors and
# returns 1 on failure).
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
P=/tmp/p
# Each package once per machine; one added since the last unpack is unpacked
# on the next use of a warm machine.
mkdir -p $P/.unpacked
for f in .offline-deps/*.deb; do
  [ -f "$P/.unpacked/${f##*/}" ] && continue
  dpkg -x "$f" $P && touch "$P/.unpacked/${f##*/}"
done
export CMAKE_PREFIX_PATH=$P/usr
export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
BUILD=${BUILD_DIR:-/tmp/gw-build}
if [ ! -f $BUILD/CMakeCache.txt ]; then
  cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release -DGAITWATCH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
fi
gpu_build() {
  cmake --build $BUILD -j"$(nproc)" --target "$@" >> "$OUT/build.log" 2>&1 ||
    { grep -E "error" -A3 "$OUT/build.log" | head -60; return 1; }
}
