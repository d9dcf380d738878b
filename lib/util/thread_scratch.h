#ifndef LLM42_UTIL_THREAD_SCRATCH_H_
#define LLM42_UTIL_THREAD_SCRATCH_H_

#include "lib/util/platform.h"

namespace llm42 {

// A default-constructed T that belongs to the calling thread, one per Tag: the kernels' panels,
// scores and staging rows, reused from call to call and freed when the thread ends.
//
//   std::vector<float>& scores = ThreadScratch<std::vector<float>, struct AttentionScores>();
//
// Not a function-local `thread_local T`: under MinGW-w64's emulated TLS a thread's TLS block can
// be freed before its thread_local destructors run (GCC bug 80816), and the destructor then frees
// garbage. Here the thread_local is a plain pointer, with nothing to destroy, and the object is
// deleted by platform::AtThreadExit.
template <typename T, typename Tag>
T& ThreadScratch() {
  thread_local T* t = nullptr;
  if (t == nullptr) [[unlikely]] {
    t = new T();
    platform::AtThreadExit([](void* p) { delete static_cast<T*>(p); }, t);
  }
  return *t;
}

}  // namespace llm42

#endif  // LLM42_UTIL_THREAD_SCRATCH_H_
