// The CUDA search backend (built when GAITWATCH_HAVE_CUDA): the same results
// as the CPU backend (kernels/search.h), computed on one GPU.
#pragma once

#include <memory>
#include <string>

#include "kernels/search.h"

namespace gw::kernels {

// True when a CUDA device can be used; otherwise `why` says why not.
bool cuda_device_available(std::string* why);

// CUDA devices visible to this process; 0 when none is usable.
int cuda_device_count();

// Throws gw::Error when no usable device exists or it cannot be initialised.
std::unique_ptr<SearchBackend> make_cuda_backend(int device = 0, PruningOptions pruning = {});

}  // namespace gw::kernels
