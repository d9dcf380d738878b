// The bindings' handle box (bindings/swig/handle_box.h) against the real C ABI: a Java, C# or
// Python object closed or disposed while another thread is inside a call with its handle must not
// free the handle under that call.
//
// Shown to fail on a broken build: with Box::End destroying the handle whatever users_ says (the
// bindings before the box), ASan reports a heap-use-after-free in
// ClosingWhileACallUsesTheHandleDefersTheDestroy and in ReadersRacingACloseNeverTouchFreedMemory.
// Deleting the box itself (the host object's destructor) happens only where no other thread can
// still hold its pointer: the bindings route close()/Dispose to Close() and leave Delete() to the
// garbage collector (llm42_java.i, llm42_csharp.i).
#include "handle_box.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace {

struct RequestBox : llm42_swig::Box<llm42_request> {
  using Box::Box;
};
struct SessionBox : llm42_swig::Box<llm42_session> {
  using Box::Box;
};

llm42_session* OpenSession(const std::string& model) {
  llm42_session_options* options = nullptr;
  EXPECT_EQ(llm42_session_options_create(&options), LLM42_OK);
  EXPECT_EQ(llm42_session_options_set_model_path(options, model.c_str()), LLM42_OK);
  EXPECT_EQ(llm42_session_options_set_threads(options, 1), LLM42_OK);
  llm42_session* session = nullptr;
  EXPECT_EQ(llm42_session_create(options, &session), LLM42_OK) << llm42_last_error();
  llm42_session_options_destroy(options);
  return session;
}

llm42_request* Submit(llm42_session* session, int32_t max_tokens) {
  llm42_request_options* options = nullptr;
  EXPECT_EQ(llm42_request_options_create(&options), LLM42_OK);
  const std::string prompt = "Once upon a time";
  EXPECT_EQ(llm42_request_options_set_prompt(options, prompt.data(), prompt.size()), LLM42_OK);
  EXPECT_EQ(llm42_request_options_set_max_tokens(options, max_tokens), LLM42_OK);
  EXPECT_EQ(llm42_request_options_set_ignore_eos(options, 1), LLM42_OK);
  llm42_request* request = nullptr;
  EXPECT_EQ(llm42_request_submit(session, options, &request), LLM42_OK) << llm42_last_error();
  llm42_request_options_destroy(options);
  return request;
}

// Reads with timeout -1 through the box until the end of the stream; returns the chunks read.
int ReadToEnd(llm42_request* r) {
  char buf[256];
  int chunks = 0;
  for (;;) {
    size_t n = 0;
    const llm42_status s = llm42_request_read_text(r, buf, sizeof(buf), &n, -1);
    if (s != LLM42_OK && s != LLM42_OUT_OF_RANGE) return chunks;
    if (s == LLM42_OK && n == 0) return chunks;
    ++chunks;
  }
}

TEST(HandleBox, CallsAfterCloseFailWithFailedPrecondition) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  auto* session = new SessionBox(OpenSession(model));
  auto* request = new RequestBox(Submit(llm42_swig::Handle(session, "Session"), 4));
  EXPECT_EQ(llm42_request_wait(llm42_swig::Handle(request, "Request"), -1), LLM42_OK);
  request->Close();
  try {
    llm42_request_is_finished(llm42_swig::Handle(request, "Request"));
    ADD_FAILURE() << "a closed request was used";
  } catch (const llm42_swig::Error& e) {
    EXPECT_EQ(e.status, LLM42_FAILED_PRECONDITION);
    EXPECT_EQ(e.message, "Request is closed");
  }
  RequestBox* disposed = nullptr;  // what a disposed C# object passes
  EXPECT_THROW(llm42_swig::Handle(disposed, "Request"), llm42_swig::Error);
  request->Close();  // twice is harmless
  request->Delete();
  session->Delete();
}

TEST(HandleBox, ClosingWhileACallUsesTheHandleDefersTheDestroy) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  auto* session = new SessionBox(OpenSession(model));
  auto* request = new RequestBox(Submit(llm42_swig::Handle(session, "Session"), 400));
  {
    const auto in_flight = llm42_swig::Handle(request, "Request");  // another thread's call
    request->Delete();  // the host object is collected or disposed meanwhile
    // The call goes on with a live handle; the close cancelled the request, so it ends.
    ReadToEnd(in_flight);
    EXPECT_EQ(llm42_request_finish_reason(in_flight), LLM42_FINISH_CANCELLED);
    EXPECT_NE(llm42_request_is_finished(in_flight), 0);
  }  // the last use: handle and box go now (LeakSanitizer checks both are freed)
  {
    const auto in_flight = llm42_swig::Handle(session, "Session");
    session->Close();
    EXPECT_EQ(llm42_session_vocab_size(in_flight), 512);
  }
  EXPECT_THROW(llm42_swig::Handle(session, "Session"), llm42_swig::Error);
  session->Delete();
}

TEST(HandleBox, ReadersRacingACloseNeverTouchFreedMemory) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  auto* session = new SessionBox(OpenSession(model));
  int closed_while_reading = 0;
  for (int i = 0; i < 24; ++i) {
    auto* request = new RequestBox(Submit(llm42_swig::Handle(session, "Session"), 200));
    std::atomic<bool> reading{false};
    std::thread reader([&] {
      // A host-language read loop: each call takes the handle anew, as each binding method does.
      for (;;) {
        try {
          const auto use = llm42_swig::Handle(request, "Request");
          reading = true;
          char buf[64];
          size_t n = 0;
          const llm42_status s = llm42_request_read_text(use, buf, sizeof(buf), &n, -1);
          if (s == LLM42_OK && n == 0) return;  // the end of the stream
        } catch (const llm42_swig::Error& e) {
          EXPECT_EQ(e.status, LLM42_FAILED_PRECONDITION);
          return;  // closed under us: the loop ends, nothing was freed under the call
        }
      }
    });
    while (!reading) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (i % 8)));
    closed_while_reading += llm42_request_is_finished(llm42_swig::Handle(request, "Request")) == 0;
    request->Close();  // close(), C#'s Dispose: the object lives on, closed
    reader.join();
    request->Delete();  // the Cleaner, finalizer or __del__: no thread holds the object now
  }
  // The race is real: most closes land while the request is still generating.
  EXPECT_GT(closed_while_reading, 0);
  session->Delete();
}

}  // namespace
