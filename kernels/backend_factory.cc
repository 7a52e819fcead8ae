// Backend selection by name: "cpu", "cuda", or "auto" (CUDA when it was built
// and a GPU is usable, else CPU, with the reason in `note`); on several GPUs,
// one backend over all of them.
#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/worker_pool.h"
#include "kernels/multi_device_backend.h"
#include "kernels/search.h"
#if defined(GW_HAVE_CUDA_BACKEND)
#include "kernels/cuda_backend.h"
#endif

namespace gw::kernels {

#if defined(GW_HAVE_CUDA_BACKEND)
namespace {

// One CUDA backend per chosen device; several behind one multi-device backend.
std::unique_ptr<SearchBackend> make_cuda_on(const std::vector<int>& devices, std::string* device_note) {
  const int visible = cuda_device_count();
  std::vector<int> chosen = devices;
  if (chosen.empty())
    for (int d = 0; d < visible; ++d) chosen.push_back(d);
  for (const int d : chosen)
    if (d < 0 || d >= visible)
      throw Error("search.devices: GPU " + std::to_string(d) + " is not visible (" +
                  std::to_string(visible) + " visible: 0.." + std::to_string(visible - 1) + ")");
  if (chosen.size() == 1) {
    *device_note = "GPU " + std::to_string(chosen[0]);
    return make_cuda_backend(chosen[0]);
  }
  std::vector<SearchMember> members;
  std::string list;
  for (const int d : chosen) {
    members.push_back({make_cuda_backend(d), "GPU " + std::to_string(d)});
    list += (list.empty() ? "" : ", ") + std::to_string(d);
  }
  *device_note = "GPUs " + list + ", streams partitioned";
  // A quarter of the cores, 2..8, copy batches to the parts and matches back.
  const int copy_threads = std::clamp(worker_count(0) / 4, 2, 8);
  return make_multi_device_backend(std::move(members), copy_threads);
}

}  // namespace
#endif

std::unique_ptr<SearchBackend> make_backend(const std::string& kind, int threads,
                                            std::string* note) {
  return make_backend(kind, threads, {0}, note);
}

std::unique_ptr<SearchBackend> make_backend(const std::string& kind, int threads,
                                            const std::vector<int>& devices, std::string* note) {
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
    std::string device_note;
    auto backend = make_cuda_on(devices, &device_note);
    set_note("using CUDA backend " + backend->name() + " (" + device_note + ")");
    return backend;
  }
  if (kind == "cuda") throw Error("search backend \"cuda\": " + why);
  set_note(why + "; using CPU backend with " + std::to_string(cpu_threads) + " threads");
  return make_cpu_backend(cpu_threads);
#else
  (void)devices;
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
