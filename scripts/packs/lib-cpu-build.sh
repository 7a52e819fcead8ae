# Sourced by the pack comparison scripts on the GPU machine: with WORK_OUT set
# (the scratch folder for results), makes $OUT that folder and $FINAL where
# the results tarball goes, unpacks the carried .offline-deps packages, builds
# the CPU-only gaitwatch CLI into /tmp/gw-cpu and sets G to it.
FINAL=${OUT:-$PWD/build/packs-out}; OUT=$WORK_OUT; rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL"
P=/tmp/p
if [ ! -d $P/usr ]; then mkdir -p $P; for f in .offline-deps/*.deb; do dpkg -x "$f" $P; done; fi
export CMAKE_PREFIX_PATH=$P/usr LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu
B=/tmp/gw-cpu
T0=$SECONDS
[ -f $B/CMakeCache.txt ] || cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DGAITWATCH_CUDA=OFF > "$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
cmake --build $B -j"$(nproc)" --target gaitwatch > "$OUT/build.log" 2>&1 || { grep -A3 error "$OUT/build.log" | head -40; exit 1; }
echo "built in $((SECONDS-T0)) s"
G=$B/daemon/gaitwatch
