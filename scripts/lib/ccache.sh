# Sourced by the extra-build scripts (sanitize.sh, fuzz.sh): sets the array
# `launcher` to CMake's compiler-launcher flags for ccache when it is
# installed (empty otherwise), so the instrumented rebuilds in CI reuse work.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
fi
