// Backend selection by name.
//
// Where the CUDA backend plugs in: when kernels/CMakeLists.txt builds it
// (GAITWATCH_HAVE_CUDA), it defines GW_HAVE_CUDA_BACKEND for this file, which
// then includes kernels/cuda_backend.h and, under #if GW_HAVE_CUDA_BACKEND,
//   "cuda": make_cuda_backend(), or gw::Error with cuda_device_available()'s
//           reason when no device can be used;
//   "auto": make_cuda_backend() when cuda_device_available(), otherwise the CPU
//           backend with a note that names the reason.
// Until then "cuda" throws and "auto" means CPU.
#include <algorithm>
#include <string>
#include <thread>

#include "common/error.h"
#include "kernels/search.h"

namespace gw::kernels {
namespace {

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

std::unique_ptr<SearchBackend> make_backend(const std::string& kind, int threads,
                                            std::string* note) {
  const int cpu_threads = resolve_threads(threads);
  auto set_note = [&](const std::string& text) {
    if (note != nullptr) *note = text;
  };
  if (kind == "cpu") {
    set_note("using CPU backend with " + std::to_string(cpu_threads) + " threads");
    return make_cpu_backend(cpu_threads);
  }
  if (kind == "cuda") {
    throw Error(
        "search backend \"cuda\": CUDA backend not built (configure with "
        "-DGAITWATCH_CUDA=ON on a machine with the CUDA toolkit), use \"cpu\" or \"auto\"");
  }
  if (kind == "auto") {
    set_note("CUDA backend not built; using CPU backend with " + std::to_string(cpu_threads) +
             " threads");
    return make_cpu_backend(cpu_threads);
  }
  throw Error("search backend \"" + kind + "\" unknown; expected \"cpu\", \"cuda\" or \"auto\"");
}

}  // namespace gw::kernels
