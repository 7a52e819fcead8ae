// Whether this test binary runs under a sanitizer (ASan+UBSan or TSan,
// scripts/sanitize.sh), and a smaller workload for it.
//
// Instrumented code runs 5-20 times slower. The sanitizer stages look for
// memory and threading faults, which the same code paths show on less data;
// the full workloads (many wearers, long recordings, every walk) run in the
// normal suite. A test that scales down under a sanitizer still asserts
// everything it asserts in the normal suite.
#pragma once

#include <cstddef>

namespace gw::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// `full` in the normal suite, `sanitized` under a sanitizer.
template <typename T>
constexpr T unless_sanitized(T full, T sanitized) {
  return kSanitized ? sanitized : full;
}

}  // namespace gw::test
