// Backend selection by name: "cpu", "cuda", or "auto" (CUDA when it was built
// and a GPU is usable, else CPU, with the reason in `note`).
#include <string>

#include "common/error.h"
#include "kernels/search.h"
#include "common/worker_pool.h"
#if defined(GW_HAVE_CUDA_BACKEND)
#include "kernels/cuda_backend.h"
#endif

namespace gw::kernels {

std::unique_ptr<SearchBackend> make_backend(const std::string& kind, int threads,
                                            std::string* note) {
  const int cpu_threads = worker_count(threads);
  auto set_note = [&](const std::string& text) {
    if (note != nullptr) *note = text;
  };
  if (kind != "cpu" && kind != "cuda" && kind != "auto")
    throw Error("search backend \"" + kind + "\" unknown; expected \"cpu\", \"cuda\" or \"auto\"");
  if (kind == "cpu") {
    set_note("using CPU backend with " + std::to_string(cpu_threads) + " threads");
    return make_cpu_backend(cpu_threads);
  }
#if defined(GW_HAVE_CUDA_BACKEND)
  std::string why;
  if (cuda_device_available(&why)) {
    auto backend = make_cuda_backend(0);
    set_note("using CUDA backend " + backend->name());
    return backend;
  }
  if (kind == "cuda") throw Error("search backend \"cuda\": " + why);
  set_note(why + "; using CPU backend with " + std::to_string(cpu_threads) + " threads");
  return make_cpu_backend(cpu_threads);
#else
  if (kind == "cuda") {
    throw Error(
        "search backend \"cuda\": CUDA backend not built (configure with "
        "-DGAITWATCH_CUDA=ON on a machine with the CUDA toolkit), use \"cpu\" or \"auto\"");
  }
  set_note("CUDA backend not built; using CPU backend with " + std::to_string(cpu_threads) +
           " threads");
  return make_cpu_backend(cpu_threads);
#endif
}

}  // namespace gw::kernels
