/* C#: namespace Llm42 (swig -namespace Llm42), native library llm42_csharp. Classes are
 * IDisposable (Dispose frees the native handle; the finalizer frees what Dispose leaves), methods
 * PascalCase, strings explicitly marshalled as UTF-8 both ways (whatever the platform's default
 * string marshalling), token lists int[], failures Llm42.Llm42Exception. */
%module llm42

%{
#include <string>
#include <vector>

// A failed call's status and message wait in thread-local storage until the C# side takes them
// (SWIGPendingException below, after each call): no call ever goes from native code into C#,
// so there is no reverse P/Invoke for Unity's IL2CPP to refuse (built with SWIG's own exception
// and string helpers, which register C# delegates, turned off: bindings/CMakeLists.txt).
namespace {
struct Llm42CsPending {
  bool set = false;
  int status = 0;  // an llm42_status, or -1 for a null argument (ArgumentNullException)
  std::string message;
};
thread_local Llm42CsPending llm42_cs_pending;
void llm42_cs_raise(int status, const char* message) {
  llm42_cs_pending.set = true;
  llm42_cs_pending.status = status;
  llm42_cs_pending.message = message;
}
}  // namespace

extern "C" {
SWIGEXPORT int SWIGSTDCALL llm42_cs_has_pending() { return llm42_cs_pending.set ? 1 : 0; }
// Takes the pending failure: its status, and its message as a heap string (Llm42Native.TakeString).
SWIGEXPORT int SWIGSTDCALL llm42_cs_take_pending(void** message) {
  llm42_cs_pending.set = false;
  *message = new std::string(std::move(llm42_cs_pending.message));
  return llm42_cs_pending.status;
}
// Results handed to C# as heap objects it reads and frees (Llm42Native.TakeString/TakeInts).
SWIGEXPORT int SWIGSTDCALL llm42_cs_string_size(void* s) { return static_cast<int>(static_cast<std::string*>(s)->size()); }
SWIGEXPORT const char* SWIGSTDCALL llm42_cs_string_data(void* s) { return static_cast<std::string*>(s)->data(); }
SWIGEXPORT void SWIGSTDCALL llm42_cs_string_free(void* s) { delete static_cast<std::string*>(s); }
SWIGEXPORT int SWIGSTDCALL llm42_cs_ints_size(void* v) { return static_cast<int>(static_cast<std::vector<int32_t>*>(v)->size()); }
SWIGEXPORT const int32_t* SWIGSTDCALL llm42_cs_ints_data(void* v) { return static_cast<std::vector<int32_t>*>(v)->data(); }
SWIGEXPORT void SWIGSTDCALL llm42_cs_ints_free(void* v) { delete static_cast<std::vector<int32_t>*>(v); }
SWIGEXPORT int SWIGSTDCALL llm42_cs_floats_size(void* v) { return static_cast<int>(static_cast<std::vector<float>*>(v)->size()); }
SWIGEXPORT const float* SWIGSTDCALL llm42_cs_floats_data(void* v) { return static_cast<std::vector<float>*>(v)->data(); }
SWIGEXPORT void SWIGSTDCALL llm42_cs_floats_free(void* v) { delete static_cast<std::vector<float>*>(v); }
}

#define LLM42_SWIG_RAISE(status, message) llm42_cs_raise(status, message)
%}
#define LLM42_SWIG_ON_ERROR return $null;

%rename("%(camelcase)s", %$isfunction) "";
%rename("%(regex:/^LLM42_(MODE_|STAT_|RECEIPT_|DECODE_PATH_)?(.*)$/\\2/)s", %$isenumitem) "";
/* Dispose() is the close: it frees the native handle (handle_box.h: at once, or when the calls
 * other threads are making with it return; later calls throw FAILED_PRECONDITION). The small
 * native box that held it goes with the finalizer, which runs only once the object is unreachable
 * (each call passes a HandleRef to it), so no thread can hold the box's pointer then. */
%rename(CloseHandle) close;
%csmethodmodifiers close "internal";
%typemap(csdispose) SWIGTYPE %{
  ~$csclassname() {
    Dispose(false);
  }

  public void Dispose() {
    Dispose(true);
  }
%}
%typemap(csdisposing, methodname="Dispose", methodmodifiers="protected", parameters="bool disposing") SWIGTYPE {
    lock(this) {
      if (swigCPtr.Handle != global::System.IntPtr.Zero) {
        if (disposing) {
          CloseHandle();
        } else {
          if (swigCMemOwn) {
            swigCMemOwn = false;
            $imcall;
          }
          swigCPtr = new global::System.Runtime.InteropServices.HandleRef(null, global::System.IntPtr.Zero);
        }
      }
    }
  }
// Constants are C# consts: no getter call (a string one would need SWIG's string callback).
%csconst(1);

%pragma(csharp) imclasscode=%{
  // The generated wrappers ask after each call whether it failed and take the failure.
  public class SWIGPendingException {
    [global::System.Runtime.InteropServices.DllImport("llm42_csharp", EntryPoint = "llm42_cs_has_pending")]
    static extern int HasPending();
    [global::System.Runtime.InteropServices.DllImport("llm42_csharp", EntryPoint = "llm42_cs_take_pending")]
    static extern int TakePending(out global::System.IntPtr message);
    public static bool Pending {
      get { return HasPending() != 0; }
    }
    public static global::System.Exception Retrieve() {
      if (HasPending() == 0) return null;
      global::System.IntPtr message;
      int status = TakePending(out message);
      string text = Llm42Native.TakeString(message);
      if (status < 0) return new global::System.ArgumentNullException(null, text);
      if (status == (int)Status.CANCELLED) return new global::System.OperationCanceledException(text);
      return new Llm42Exception((Status)status, text);
    }
  }
  // The loaded libllm42 must suit these bindings (llm42.i's VersionProblem), checked once.
#pragma warning disable 414
  static readonly bool llm42VersionChecked = CheckLlm42Version();
#pragma warning restore 414
  static bool CheckLlm42Version() {
    string problem = llm42.VersionProblem();
    if (problem != "") throw new global::System.InvalidOperationException(problem);
    return true;
  }
%}

/* Strings in: NUL-terminated UTF-8 bytes. */
%typemap(ctype) const std::string& "char*"
%typemap(imtype) const std::string& "byte[]"
%typemap(cstype) const std::string& "string"
%typemap(csin) const std::string& "Llm42Native.ToUtf8Z($csinput)"
%typemap(in, canthrow=1) const std::string& (std::string temp) {
  if ($input == nullptr) {
    llm42_cs_raise(-1, "null string");
    return $null;
  }
  temp = $input;
  $1 = &temp;
}
/* Strings out: a heap std::string that C# decodes and frees. */
%typemap(ctype) std::string "void*"
%typemap(imtype) std::string "global::System.IntPtr"
%typemap(cstype) std::string "string"
%typemap(out) std::string %{ $result = new std::string(static_cast<const std::string&>($1)); %}
%typemap(csout, excode=SWIGEXCODE) std::string {
    global::System.IntPtr p = $imcall;$excode
    return Llm42Native.TakeString(p);
  }
/* Streamed text: a string, or null at the end of the stream. */
%typemap(ctype) llm42_swig::Text "void*"
%typemap(imtype) llm42_swig::Text "global::System.IntPtr"
%typemap(cstype) llm42_swig::Text "string"
%typemap(out) llm42_swig::Text %{ $result = $1.done ? nullptr : new std::string($1.text); %}
%typemap(csout, excode=SWIGEXCODE) llm42_swig::Text {
    global::System.IntPtr p = $imcall;$excode
    return Llm42Native.TakeString(p);
  }
/* Streamed token ids: int[], or null at the end of the stream. */
%typemap(ctype) llm42_swig::Tokens "void*"
%typemap(imtype) llm42_swig::Tokens "global::System.IntPtr"
%typemap(cstype) llm42_swig::Tokens "int[]"
%typemap(out) llm42_swig::Tokens %{ $result = $1.done ? nullptr : new std::vector<int32_t>($1.ids); %}
%typemap(csout, excode=SWIGEXCODE) llm42_swig::Tokens {
    global::System.IntPtr p = $imcall;$excode
    return Llm42Native.TakeInts(p);
  }
/* Logprobs out: float[]. */
%typemap(ctype) std::vector<float> "void*"
%typemap(imtype) std::vector<float> "global::System.IntPtr"
%typemap(cstype) std::vector<float> "float[]"
%typemap(out) std::vector<float> %{ $result = new std::vector<float>(static_cast<const std::vector<float>&>($1)); %}
%typemap(csout, excode=SWIGEXCODE) std::vector<float> {
    global::System.IntPtr p = $imcall;$excode
    return Llm42Native.TakeFloats(p);
  }
/* Binary data (receipts) out: a heap std::string that C# copies and frees. */
%typemap(ctype) llm42_swig::Bytes "void*"
%typemap(imtype) llm42_swig::Bytes "global::System.IntPtr"
%typemap(cstype) llm42_swig::Bytes "byte[]"
%typemap(out) llm42_swig::Bytes %{ $result = new std::string($1.data); %}
%typemap(csout, excode=SWIGEXCODE) llm42_swig::Bytes {
    global::System.IntPtr p = $imcall;$excode
    return Llm42Native.TakeBytes(p);
  }
/* Binary data in: byte[] with its length prepended as 4 little-endian bytes. */
%typemap(ctype) const llm42_swig::Bytes& "uint8_t*"
%typemap(imtype) const llm42_swig::Bytes& "byte[]"
%typemap(cstype) const llm42_swig::Bytes& "byte[]"
%typemap(csin) const llm42_swig::Bytes& "Llm42Native.BytesWithLength($csinput)"
%typemap(in, canthrow=1) const llm42_swig::Bytes& (llm42_swig::Bytes temp) {
  if ($input == nullptr) {
    llm42_cs_raise(-1, "null byte array");
    return $null;
  }
  const uint32_t n = static_cast<uint32_t>($input[0]) | static_cast<uint32_t>($input[1]) << 8 |
                     static_cast<uint32_t>($input[2]) << 16 | static_cast<uint32_t>($input[3]) << 24;
  temp.data.assign(reinterpret_cast<const char*>($input) + 4, n);
  $1 = &temp;
}
/* Token lists in: int[] with its length prepended (the native side cannot know it otherwise). */
%typemap(ctype) const std::vector<int32_t>& "int32_t*"
%typemap(imtype) const std::vector<int32_t>& "int[]"
%typemap(cstype) const std::vector<int32_t>& "int[]"
%typemap(csin) const std::vector<int32_t>& "Llm42Native.WithLength($csinput)"
%typemap(in, canthrow=1) const std::vector<int32_t>& (std::vector<int32_t> temp) {
  if ($input == nullptr) {
    llm42_cs_raise(-1, "null array");
    return $null;
  }
  temp.assign($input + 1, $input + 1 + $input[0]);
  $1 = &temp;
}
/* Token lists out. */
%typemap(ctype) std::vector<int32_t> "void*"
%typemap(imtype) std::vector<int32_t> "global::System.IntPtr"
%typemap(cstype) std::vector<int32_t> "int[]"
%typemap(out) std::vector<int32_t> %{ $result = new std::vector<int32_t>(static_cast<const std::vector<int32_t>&>($1)); %}
%typemap(csout, excode=SWIGEXCODE) std::vector<int32_t> {
    global::System.IntPtr p = $imcall;$excode
    return Llm42Native.TakeInts(p);
  }

/* Request: `foreach` over the streamed text, `await foreach` (an IAsyncEnumerable<string> whose
 * CancellationToken cancels the request), and the async forms ReadTextAsync/CompletionAsync.
 * Written in C# 7 so that Mono's mcs and Unity compile it: the async enumerator is a class, not
 * an async iterator. IAsyncEnumerable comes with .NET Core 3+, Mono 6 and netstandard2.1 (and,
 * for netstandard2.0 hosts, Microsoft.Bcl.AsyncInterfaces). */
%typemap(csinterfaces) llm42_swig_request "global::System.IDisposable, global::System.Collections.Generic.IEnumerable<string>, global::System.Collections.Generic.IAsyncEnumerable<string>"
%typemap(cscode) llm42_swig_request %{
  /// <summary>The committed text chunk by chunk, each as soon as it is verified, until the request ends;
  /// a cancelled request's ends with OperationCanceledException, a failed one's with Llm42Exception.
  /// Breaking out of the loop cancels the request.</summary>
  public global::System.Collections.Generic.IEnumerator<string> GetEnumerator() {
    try {
      for (string chunk; (chunk = ReadText(-1)) != null;) yield return chunk;
    } finally {
      CancelUnlessFinished();
    }
  }
  void CancelUnlessFinished() {
    try {
      if (!IsFinished()) Cancel();
    } catch (Llm42Exception) {
      // disposed meanwhile: disposing cancelled it
    }
  }
  global::System.Collections.IEnumerator global::System.Collections.IEnumerable.GetEnumerator() {
    return GetEnumerator();
  }

  /// <summary>The committed text for <c>await foreach (string chunk in request.WithCancellation(ct))</c>,
  /// served by the session's dispatcher thread (ReadTextAsync). Cancelling the token cancels the
  /// request, and the next MoveNextAsync throws OperationCanceledException, as it does at the end
  /// of a request cancelled otherwise. Leaving the loop early (the enumerator disposed) cancels the
  /// request too.</summary>
  public global::System.Collections.Generic.IAsyncEnumerator<string> GetAsyncEnumerator(
      global::System.Threading.CancellationToken cancel = default(global::System.Threading.CancellationToken)) {
    return new AsyncChunks(this, cancel);
  }

  sealed class AsyncChunks : global::System.Collections.Generic.IAsyncEnumerator<string> {
    readonly Request request;
    readonly global::System.Threading.CancellationToken cancel;
    string current;
    internal AsyncChunks(Request request, global::System.Threading.CancellationToken cancel) {
      this.request = request;
      this.cancel = cancel;
    }
    public string Current {
      get { return current; }
    }
    public global::System.Threading.Tasks.ValueTask<bool> MoveNextAsync() {
      return new global::System.Threading.Tasks.ValueTask<bool>(Next());
    }
    async global::System.Threading.Tasks.Task<bool> Next() {
      current = await request.ReadTextAsync(cancel).ConfigureAwait(false);
      return current != null;
    }
    public global::System.Threading.Tasks.ValueTask DisposeAsync() {
      request.CancelUnlessFinished();
      return default(global::System.Threading.Tasks.ValueTask);
    }
  }

  // The session whose dispatcher serves the async forms (set by Session.Submit).
  internal Session session;
  // One task per async stream, done when the stream has read to its end: Dispose cancels the
  // request and waits for them before it frees the handle, so their awaiters see the (cancelled)
  // stream's end rather than a disposed request. Guarded by lock (asyncStreams).
  readonly global::System.Collections.Generic.List<global::System.Threading.Tasks.Task> asyncStreams =
      new global::System.Collections.Generic.List<global::System.Threading.Tasks.Task>();
  TextChannel text;  // the text as ReadTextAsync reads it; made by its first call

  // Serves onNews from the session's dispatcher thread until it returns true (or throws).
  // Under lock (this), as Dispose is, so no stream starts on a request being disposed.
  void Serve(global::System.Func<bool> onNews) {
    lock (this) {
      if (session == null) throw new Llm42Exception(global::Llm42.Status.FAILED_PRECONDITION, "this request's session is unknown");
      var ended = new global::System.Threading.Tasks.TaskCompletionSource<bool>();
      lock (asyncStreams) asyncStreams.Add(ended.Task);
      global::System.Func<bool> stream = () => {
        bool done = true;
        try {
          done = onNews();
        } finally {
          if (done) {
            lock (asyncStreams) asyncStreams.Remove(ended.Task);
            ended.TrySetResult(true);
          }
        }
        return done;
      };
      try {
        session.Dispatcher().Open(this, stream);
      } catch (global::System.Exception) {
        lock (asyncStreams) asyncStreams.Remove(ended.Task);
        throw;
      }
    }
  }

  // Dispose's first step, under lock (this): cancels and waits out the async streams.
  void EndAsyncStreams() {
    global::System.Threading.Tasks.Task[] streams;
    lock (asyncStreams) streams = asyncStreams.ToArray();
    if (streams.Length == 0) return;
    CancelUnlessFinished();
    global::System.Threading.Tasks.Task.WaitAll(streams);
  }

  // Chunks the dispatcher read, waiting for ReadTextAsync; or the one ReadTextAsync waiting for them.
  sealed class TextChannel {
    readonly global::System.Collections.Generic.Queue<string> chunks = new global::System.Collections.Generic.Queue<string>();
    bool ended;
    global::System.Exception failure;
    global::System.Threading.Tasks.TaskCompletionSource<string> waiting;

    // On the dispatcher thread: reads what the request has; true once the stream ended.
    internal bool Read(Request request) {
      try {
        for (;;) {
          string chunk = request.ReadText(0);
          if (chunk == "") return false;  // nothing more yet: the next commit is news again
          Hand(chunk, null);
          if (chunk == null) return true;
        }
      } catch (global::System.Exception e) {  // the end of a cancelled or failed request
        Hand(null, e);
        return true;
      }
    }

    void Hand(string chunk, global::System.Exception error) {
      global::System.Threading.Tasks.TaskCompletionSource<string> w;
      lock (this) {
        if (chunk == null) {
          ended = true;
          failure = error;
        }
        w = waiting;
        waiting = null;
        if (w == null && chunk != null) chunks.Enqueue(chunk);
      }
      if (w == null) return;
      if (error != null) {
        w.TrySetException(error);
      } else {
        w.TrySetResult(chunk);
      }
    }

    internal global::System.Threading.Tasks.Task<string> Next(Request request, global::System.Threading.CancellationToken cancel) {
      global::System.Threading.Tasks.TaskCompletionSource<string> w;
      lock (this) {
        if (chunks.Count > 0) return global::System.Threading.Tasks.Task.FromResult(chunks.Dequeue());
        if (ended) {
          return failure != null ? global::System.Threading.Tasks.Task.FromException<string>(failure)
                                 : global::System.Threading.Tasks.Task.FromResult<string>(null);
        }
        if (waiting != null) {
          return global::System.Threading.Tasks.Task.FromException<string>(
              new global::System.InvalidOperationException("a request's text is read by one ReadTextAsync at a time"));
        }
        w = waiting = new global::System.Threading.Tasks.TaskCompletionSource<string>(
            global::System.Threading.Tasks.TaskCreationOptions.RunContinuationsAsynchronously);
      }
      if (cancel.CanBeCanceled) {
        var registration = cancel.Register(() => {
          request.CancelUnlessFinished();
          lock (this) {
            if (waiting == w) waiting = null;
          }
          w.TrySetCanceled(cancel);
        });
        w.Task.ContinueWith(t => registration.Dispose(), global::System.Threading.Tasks.TaskContinuationOptions.ExecuteSynchronously);
      }
      return w.Task;
    }
  }

  /// <summary>The next chunk, or null at the end of the stream, from the session's dispatcher
  /// thread (no thread waits per stream). Cancelling the token cancels the request; the task then
  /// ends in OperationCanceledException. Disposing the request cancels it too. One call at a time
  /// per request.</summary>
  public global::System.Threading.Tasks.Task<string> ReadTextAsync(
      global::System.Threading.CancellationToken cancel = default(global::System.Threading.CancellationToken)) {
    if (cancel.IsCancellationRequested) {
      CancelUnlessFinished();
      return global::System.Threading.Tasks.Task.FromCanceled<string>(cancel);
    }
    TextChannel channel;
    try {
      lock (this) {
        if (text == null) {
          var made = new TextChannel();
          Serve(() => made.Read(this));
          text = made;
        }
        channel = text;
      }
    } catch (global::System.Exception e) {
      return global::System.Threading.Tasks.Task.FromException<string>(e);
    }
    return channel.Next(this, cancel);
  }

  /// <summary>Completes with this request once it has finished well; ends in OperationCanceledException
  /// or Llm42Exception when it was cancelled or failed. The session's dispatcher thread watches for
  /// the end (no thread waits per request). Cancelling the token cancels the request.</summary>
  public global::System.Threading.Tasks.Task<Request> CompletionAsync(
      global::System.Threading.CancellationToken cancel = default(global::System.Threading.CancellationToken)) {
    var done = new global::System.Threading.Tasks.TaskCompletionSource<Request>(
        global::System.Threading.Tasks.TaskCreationOptions.RunContinuationsAsynchronously);
    if (cancel.CanBeCanceled) {
      var registration = cancel.Register(() => {
        CancelUnlessFinished();
        done.TrySetCanceled(cancel);
      });
      done.Task.ContinueWith(t => registration.Dispose(), global::System.Threading.Tasks.TaskContinuationOptions.ExecuteSynchronously);
    }
    try {
      Serve(() => {
        if (!IsFinished()) return false;
        try {
          CheckStatus();
          done.TrySetResult(this);
        } catch (global::System.Exception e) {
          done.TrySetException(e);
        }
        return true;
      });
    } catch (global::System.Exception e) {
      done.TrySetException(e);
    }
    return done.Task;
  }
%}
/* Dispose cancels and waits out the request's async streams first (EndAsyncStreams). */
%typemap(csdisposing, methodname="Dispose", methodmodifiers="protected", parameters="bool disposing") llm42_swig_request {
    lock(this) {
      if (swigCPtr.Handle != global::System.IntPtr.Zero) {
        if (disposing) {
          EndAsyncStreams();
          CloseHandle();
        } else {
          if (swigCMemOwn) {
            swigCMemOwn = false;
            $imcall;
          }
          swigCPtr = new global::System.Runtime.InteropServices.HandleRef(null, global::System.IntPtr.Zero);
        }
      }
    }
  }

/* Session: its async streams share one dispatcher (Llm42Dispatcher), whose thread runs while any
 * of them is open. */
%rename(SubmitNative) llm42_swig_session::submit;
%csmethodmodifiers llm42_swig_session::submit "internal";
%typemap(cscode) llm42_swig_session %{
  Llm42Dispatcher dispatcher;

  internal Llm42Dispatcher Dispatcher() {
    lock (this) {
      if (dispatcher == null) dispatcher = new Llm42Dispatcher();
      return dispatcher;
    }
  }

  /// <summary>Creates a session without blocking: llm42 loads it on a thread of its own and this
  /// polls it (SessionLoader) from the caller's context (in Unity the main thread, as IL2CPP asks),
  /// reporting the progress (0..1, ending with 1) to <paramref name="progress"/>. Cancelling the
  /// token cancels the load; the task then ends in OperationCanceledException.</summary>
  public static async global::System.Threading.Tasks.Task<Session> OpenAsync(SessionOptions options,
      global::System.IProgress<float> progress = null,
      global::System.Threading.CancellationToken cancel = default(global::System.Threading.CancellationToken)) {
    using (var loader = new SessionLoader(options)) {
      cancel.ThrowIfCancellationRequested();  // disposing the loader cancels the load
      float last = -1f;
      while (!loader.WaitFor(0)) {
        float fraction = loader.Progress();
        if (progress != null && fraction > last) {
          progress.Report(fraction);
          last = fraction;
        }
        await global::System.Threading.Tasks.Task.Delay(20, cancel).ConfigureAwait(true);
      }
      Session session = loader.Take();
      if (progress != null) progress.Report(1f);
      return session;
    }
  }

  /// <summary>Queues a request (llm42_request_submit); its async forms are served by this session.</summary>
  public Request Submit(RequestOptions options) {
    Request request = SubmitNative(options);
    request.session = this;
    return request;
  }
%}

%include "../swig/llm42.i"
