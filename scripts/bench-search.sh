#!/usr/bin/env bash
# The search benchmarks of the CUDA backend issue, in one run (JSON lines on
# stdout): the unpruned kernel against the fp32 bound, the W1 window-mode sweep
# on the GPU, the CPU backend on all cores for the ratio, and streaming mode.
#   bash scripts/bench-search.sh BUILD_DIR
set -uo pipefail
B=${1:-build}/bench/search_bench
$B --backend cuda --kernel-bound
# Window mode twice: ticks one by one, and pipelined (--overlap: the upload of
# tick k+1 runs beside the search of tick k, as SearchBackend::prepare allows).
$B --backend cuda --mode window --sweep-wearers ${GPU_WEARERS:-1000,2000,4000,6000,8000,10000,12000,16000}
$B --backend cuda --mode window --overlap --sweep-wearers ${GPU_WEARERS:-1000,2000,4000,6000,8000,10000,12000,16000}
$B --backend cpu --mode window --sweep-wearers ${CPU_WEARERS:-4,16,32,64}
$B --backend cuda --mode streaming --sweep-wearers ${GPU_STREAMING_WEARERS:-250,500,1000,1500,2000}
$B --backend cpu --mode streaming --sweep-wearers ${CPU_STREAMING_WEARERS:-1,2,4,8}
