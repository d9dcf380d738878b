// handle_box.h — the box each binding object holds its C handle in, so that a host language can
// never make llm42 touch freed memory.
//
// Java, C# and Python objects are used from several threads: one thread blocks in
// request.read_text(-1) while another closes or disposes the request (a UI's cancel button, a
// `using` block ending, a finalizer). The C ABI forbids destroying a handle that another call is
// using (include/llm42/llm42.h, its conventions), so the box counts the calls in flight: close() (and the host object's
// destructor) marks the box closed at once, so later calls fail with FAILED_PRECONDITION, and
// the handle is destroyed when the last call using it returns. A request closed while a call
// waits on it is cancelled first, so a reader blocked with timeout -1 returns promptly.
//
// Header-only because the SWIG wrapper (llm42.i) and its unit test both compile it.
#ifndef LLM42_BINDINGS_SWIG_HANDLE_BOX_H_
#define LLM42_BINDINGS_SWIG_HANDLE_BOX_H_

#include <mutex>
#include <string>

#include "llm42/llm42.h"

namespace llm42_swig {

// What a binding method throws; each language's %exception turns it into its Llm42Exception.
struct Error {
  llm42_status status;
  std::string message;
};

inline void DestroyHandle(llm42_determinism* h) { llm42_determinism_destroy(h); }
inline void DestroyHandle(llm42_session_options* h) { llm42_session_options_destroy(h); }
inline void DestroyHandle(llm42_session* h) { llm42_session_destroy(h); }
inline void DestroyHandle(llm42_request_options* h) { llm42_request_options_destroy(h); }
inline void DestroyHandle(llm42_request* h) { llm42_request_destroy(h); }
inline void DestroyHandle(llm42_watcher* h) { llm42_watcher_destroy(h); }
inline void DestroyHandle(llm42_session_loader* h) { llm42_session_loader_destroy(h); }

// Makes the calls using a handle that is being closed return soon: a request is cancelled (as
// destroying it would), a watcher's wait is woken, a session's load is cancelled; the other
// handles' calls never wait.
template <typename H>
void WakeUsers(H*) {}
inline void WakeUsers(llm42_request* h) { llm42_request_cancel(h); }
inline void WakeUsers(llm42_watcher* h) { llm42_watcher_wake(h); }
inline void WakeUsers(llm42_session_loader* h) { llm42_session_loader_cancel(h); }

template <typename B>
class Use;

template <typename H>
class Box {
 public:
  using Handle = H;

  explicit Box(H* h) : h_(h) {}
  Box(const Box&) = delete;
  Box& operator=(const Box&) = delete;
  virtual ~Box() = default;

  // close(): later calls fail; the handle is destroyed now, or by the last call using it.
  void Close() { End(false); }
  // The host object's destructor: as Close(), and the box itself goes with the handle (so
  // `this` may be gone when it returns).
  void Delete() { End(true); }

 private:
  template <typename B>
  friend class Use;

  H* Acquire(const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) throw Error{LLM42_FAILED_PRECONDITION, std::string(what) + " is closed"};
    ++users_;
    return h_;
  }
  void Release() {
    std::unique_lock<std::mutex> lock(mu_);
    --users_;
    Finish(lock);
  }
  void End(bool deleting) {
    std::unique_lock<std::mutex> lock(mu_);
    deleting_ = deleting_ || deleting;
    if (!closed_ && users_ > 0) WakeUsers(h_);
    closed_ = true;
    Finish(lock);
  }
  // With the lock held: once closed and unused, destroys the handle (and the box when the host
  // object is gone) outside the lock.
  void Finish(std::unique_lock<std::mutex>& lock) {
    if (!closed_ || users_ > 0) return;
    H* const h = h_;
    h_ = nullptr;
    const bool self = deleting_;
    lock.unlock();
    if (h != nullptr) DestroyHandle(h);
    if (self) delete this;
  }

  std::mutex mu_;
  H* h_;
  int users_ = 0;
  bool closed_ = false;
  bool deleting_ = false;
};

// One call's use of a box's handle: the handle stays valid until the Use is gone. Converts to
// the C handle, so `llm42_x(Handle(box, "X"), ...)` keeps it for the whole expression.
template <typename B>
class Use {
 public:
  using H = typename B::Handle;

  // Throws FAILED_PRECONDITION when `box` is null (a disposed C# object passes null) or closed.
  Use(B* box, const char* what) : box_(box) {
    if (box == nullptr) throw Error{LLM42_FAILED_PRECONDITION, std::string(what) + " is closed"};
    h_ = box->Acquire(what);
  }
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  ~Use() { box_->Release(); }

  H* get() const { return h_; }
  operator H*() const { return h_; }  // NOLINT: reads like the handle it guards

 private:
  Box<H>* box_;
  H* h_ = nullptr;
};

template <typename B>
Use<B> Handle(B* box, const char* what) {
  return Use<B>(box, what);
}

}  // namespace llm42_swig

#endif  // LLM42_BINDINGS_SWIG_HANDLE_BOX_H_
