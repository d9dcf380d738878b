/* Java: package ai.llm42 (swig -package ai.llm42), JNI library llm42_jni. Classes are
 * AutoCloseable (close() frees the native handle; use try-with-resources), methods lowerCamelCase,
 * strings UTF-8 both ways (not JNI's modified UTF-8), token lists int[], failures
 * ai.llm42.Llm42Exception. */
%module llm42

%{
#include "llm42/llm42.h"

// Llm42Exception with the status; a cancelled request's CANCELLED is Java's own
// java.util.concurrent.CancellationException (what a cancelled Future throws).
static void llm42_java_throw(JNIEnv* jenv, int status, const char* message) {
  if (status == LLM42_CANCELLED) {
    jclass cancelled = jenv->FindClass("java/util/concurrent/CancellationException");
    if (cancelled != nullptr) jenv->ThrowNew(cancelled, message);
    return;
  }
  jclass cls = jenv->FindClass("ai/llm42/Llm42Exception");
  if (cls == nullptr) return;  // NoClassDefFoundError is pending
  jmethodID ctor = jenv->GetMethodID(cls, "<init>", "(ILjava/lang/String;)V");
  jstring msg = jenv->NewStringUTF(message);
  jobject e = jenv->NewObject(cls, ctor, static_cast<jint>(status), msg);
  if (e != nullptr) jenv->Throw(static_cast<jthrowable>(e));
}
#define LLM42_SWIG_RAISE(status, message) llm42_java_throw(jenv, status, message)
%}
#define LLM42_SWIG_ON_ERROR return $null;

%include <enums.swg>
%javaconst(1);

%rename("%(lowercamelcase)s", %$isfunction) "";
%rename("%(regex:/^LLM42_(MODE_|STAT_|RECEIPT_|DECODE_PATH_)?(.*)$/\\2/)s", %$isenumitem) "";

%pragma(java) jniclasscode=%{
  static {
    Llm42NativeLoader.load();
    String problem = llm42.versionProblem();
    if (!problem.isEmpty()) throw new UnsatisfiedLinkError(problem);
  }
%}

/* Seeds: uint64_t as a Java long holding the same 64 bits (read it as unsigned:
 * Long.toUnsignedString, Long.compareUnsigned, Long.parseUnsignedLong). */
%typemap(jni) uint64_t "jlong"
%typemap(jtype) uint64_t "long"
%typemap(jstype) uint64_t "long"
%typemap(javain) uint64_t "$javainput"
%typemap(javaout) uint64_t { return $jnicall; }
%typemap(in) uint64_t %{ $1 = static_cast<uint64_t>($input); %}
%typemap(out) uint64_t %{ $result = static_cast<jlong>($1); %}

/* Strings: UTF-8 bytes across JNI. */
%typemap(jni) const std::string& "jbyteArray"
%typemap(jtype) const std::string& "byte[]"
%typemap(jstype) const std::string& "String"
%typemap(javain) const std::string& "$javainput.getBytes(java.nio.charset.StandardCharsets.UTF_8)"
%typemap(in) const std::string& (std::string temp) {
  if ($input == nullptr) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "null string");
    return $null;
  }
  const jsize n = jenv->GetArrayLength($input);
  temp.resize(static_cast<size_t>(n));
  jenv->GetByteArrayRegion($input, 0, n, reinterpret_cast<jbyte*>(temp.data()));
  $1 = &temp;
}
%typemap(jni) std::string "jbyteArray"
%typemap(jtype) std::string "byte[]"
%typemap(jstype) std::string "String"
%typemap(javaout) std::string { return new String($jnicall, java.nio.charset.StandardCharsets.UTF_8); }
%typemap(out) std::string {
  const std::string& s = $1;
  $result = jenv->NewByteArray(static_cast<jsize>(s.size()));
  jenv->SetByteArrayRegion($result, 0, static_cast<jsize>(s.size()), reinterpret_cast<const jbyte*>(s.data()));
}

/* Streamed text: a String, or null at the end of the stream. */
%typemap(jni) llm42_swig::Text "jbyteArray"
%typemap(jtype) llm42_swig::Text "byte[]"
%typemap(jstype) llm42_swig::Text "String"
%typemap(javaout) llm42_swig::Text {
    byte[] utf8 = $jnicall;
    return utf8 == null ? null : new String(utf8, java.nio.charset.StandardCharsets.UTF_8);
  }
%typemap(out) llm42_swig::Text {
  if ($1.done) {
    $result = nullptr;
  } else {
    const std::string& s = $1.text;
    $result = jenv->NewByteArray(static_cast<jsize>(s.size()));
    jenv->SetByteArrayRegion($result, 0, static_cast<jsize>(s.size()), reinterpret_cast<const jbyte*>(s.data()));
  }
}

/* Streamed token ids: int[], or null at the end of the stream. */
%typemap(jni) llm42_swig::Tokens "jintArray"
%typemap(jtype) llm42_swig::Tokens "int[]"
%typemap(jstype) llm42_swig::Tokens "int[]"
%typemap(javaout) llm42_swig::Tokens { return $jnicall; }
%typemap(out) llm42_swig::Tokens {
  if ($1.done) {
    $result = nullptr;
  } else {
    const std::vector<int32_t>& v = $1.ids;
    $result = jenv->NewIntArray(static_cast<jsize>(v.size()));
    jenv->SetIntArrayRegion($result, 0, static_cast<jsize>(v.size()), reinterpret_cast<const jint*>(v.data()));
  }
}

/* Logprobs: float[]. */
%typemap(jni) std::vector<float> "jfloatArray"
%typemap(jtype) std::vector<float> "float[]"
%typemap(jstype) std::vector<float> "float[]"
%typemap(javaout) std::vector<float> { return $jnicall; }
%typemap(out) std::vector<float> {
  const std::vector<float>& v = $1;
  $result = jenv->NewFloatArray(static_cast<jsize>(v.size()));
  jenv->SetFloatArrayRegion($result, 0, static_cast<jsize>(v.size()), v.data());
}

/* Binary data (receipts): byte[] both ways. */
%typemap(jni) llm42_swig::Bytes "jbyteArray"
%typemap(jtype) llm42_swig::Bytes "byte[]"
%typemap(jstype) llm42_swig::Bytes "byte[]"
%typemap(javaout) llm42_swig::Bytes { return $jnicall; }
%typemap(out) llm42_swig::Bytes {
  const std::string& s = $1.data;
  $result = jenv->NewByteArray(static_cast<jsize>(s.size()));
  jenv->SetByteArrayRegion($result, 0, static_cast<jsize>(s.size()), reinterpret_cast<const jbyte*>(s.data()));
}
%typemap(jni) const llm42_swig::Bytes& "jbyteArray"
%typemap(jtype) const llm42_swig::Bytes& "byte[]"
%typemap(jstype) const llm42_swig::Bytes& "byte[]"
%typemap(javain) const llm42_swig::Bytes& "$javainput"
%typemap(in) const llm42_swig::Bytes& (llm42_swig::Bytes temp) {
  if ($input == nullptr) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "null byte array");
    return $null;
  }
  const jsize n = jenv->GetArrayLength($input);
  temp.data.resize(static_cast<size_t>(n));
  jenv->GetByteArrayRegion($input, 0, n, reinterpret_cast<jbyte*>(temp.data.data()));
  $1 = &temp;
}

/* Token lists: int[]. */
%typemap(jni) const std::vector<int32_t>& "jintArray"
%typemap(jtype) const std::vector<int32_t>& "int[]"
%typemap(jstype) const std::vector<int32_t>& "int[]"
%typemap(javain) const std::vector<int32_t>& "$javainput"
%typemap(in) const std::vector<int32_t>& (std::vector<int32_t> temp) {
  if ($input == nullptr) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "null array");
    return $null;
  }
  temp.resize(static_cast<size_t>(jenv->GetArrayLength($input)));
  jenv->GetIntArrayRegion($input, 0, static_cast<jsize>(temp.size()), reinterpret_cast<jint*>(temp.data()));
  $1 = &temp;
}
%typemap(jni) std::vector<int32_t> "jintArray"
%typemap(jtype) std::vector<int32_t> "int[]"
%typemap(jstype) std::vector<int32_t> "int[]"
%typemap(javaout) std::vector<int32_t> { return $jnicall; }
%typemap(out) std::vector<int32_t> {
  const std::vector<int32_t>& v = $1;
  $result = jenv->NewIntArray(static_cast<jsize>(v.size()));
  jenv->SetIntArrayRegion($result, 0, static_cast<jsize>(v.size()), reinterpret_cast<const jint*>(v.data()));
}

/* AutoCloseable: close() frees the native handle (handle_box.h: at once, or when the calls other
 * threads are making with it return; later calls throw FAILED_PRECONDITION). The small native box
 * that held it is freed by a java.lang.ref.Cleaner (not a finalizer, deprecated since Java 9) once
 * the object is unreachable — then no thread can be inside one of its methods, each of which
 * passes `this` to JNI — and the Cleaner also frees the handles of objects collected unclosed;
 * it captures only the pointer. */
%typemap(javainterfaces) SWIGTYPE "AutoCloseable"
%typemap(javafinalize) SWIGTYPE ""
%typemap(javabody) SWIGTYPE %{
  private transient long swigCPtr;
  protected transient boolean swigCMemOwn;
  private transient java.lang.ref.Cleaner.Cleanable swigCleanable;

  protected $javaclassname(long cPtr, boolean cMemoryOwn) {
    swigCMemOwn = cMemoryOwn;
    swigCPtr = cPtr;
    if (cMemoryOwn && cPtr != 0) {
      final long ptr = cPtr;
      swigCleanable = Llm42Cleaner.CLEANER.register(this, () -> $imclassname.delete_$javaclassname(ptr));
    }
  }

  protected static long getCPtr($javaclassname obj) {
    return (obj == null) ? 0 : obj.swigCPtr;
  }
%}
/* SWIG's delete(), private: freeing the box while another thread may hold its pointer is what
 * the Cleaner avoids. */
%typemap(javadestruct, methodname="delete", methodmodifiers="private synchronized") SWIGTYPE {
    if (swigCPtr != 0) {
      if (swigCMemOwn) {
        swigCMemOwn = false;
        swigCleanable.clean();  // deletes exactly once, now
      }
      swigCPtr = 0;
    }
  }
%typemap(javacode) SWIGTYPE %{
  @Override
  public void close() {
    closeHandle();
  }
%}
%rename(closeHandle) close;
%javamethodmodifiers close "private";

/* Session: its asynchronous streams share one dispatcher (Llm42Dispatcher), whose thread runs
 * while any of them is open. */
%rename(submitNative) llm42_swig_session::submit;
%javamethodmodifiers llm42_swig_session::submit "private";
%rename(waitForNews) llm42_swig_watcher::wait;
%typemap(javacode) llm42_swig_session %{
  private Llm42Dispatcher dispatcher;

  synchronized Llm42Dispatcher dispatcher() {
    if (dispatcher == null) dispatcher = new Llm42Dispatcher();
    return dispatcher;
  }

  /** Queues a request (llm42_request_submit); its async forms are served by this session. */
  public Request submit(RequestOptions options) {
    Request request = submitNative(options);
    request.session = this;
    return request;
  }

  @Override
  public void close() {
    closeHandle();
  }
%}

/* Request streams as an Iterable<String> (readText(-1) until null) or a Flow.Publisher<String>,
 * and completes as a CompletableFuture; the async forms are served by the session's dispatcher
 * thread and deliver on the caller's Executor (the common pool when none is given). */
%typemap(javainterfaces) llm42_swig_request "AutoCloseable, Iterable<String>"
%typemap(javacode) llm42_swig_request %{
  // The session whose dispatcher serves the async forms (set by Session.submit).
  Session session;
  // One per async stream, done when the stream has read to its end: close() cancels the request
  // and waits for them before it frees the handle, so their consumers see the (cancelled)
  // stream's end rather than a closed request.
  private final java.util.Set<java.util.concurrent.CompletableFuture<Void>> streams =
      java.util.concurrent.ConcurrentHashMap.newKeySet();
  private final java.util.concurrent.atomic.AtomicBoolean published = new java.util.concurrent.atomic.AtomicBoolean();

  // Serves onNews from the session's dispatcher thread until it returns true (or throws).
  private synchronized void serve(Llm42Dispatcher.Stream onNews) {
    if (session == null) throw new Llm42Exception(Status.FAILED_PRECONDITION.swigValue(), "this request's session is unknown");
    java.util.concurrent.CompletableFuture<Void> ended = new java.util.concurrent.CompletableFuture<>();
    streams.add(ended);
    session.dispatcher().open(this, () -> {
      boolean done = true;
      try {
        done = onNews.onNews();
      } finally {
        if (done) {
          streams.remove(ended);
          ended.complete(null);
        }
      }
      return done;
    });
  }

  // Synchronized, as serve() is, so that no stream starts on a request being closed.
  @Override
  public synchronized void close() {
    if (!streams.isEmpty()) {
      cancel();
      for (java.util.concurrent.CompletableFuture<Void> f : new java.util.ArrayList<>(streams)) f.join();
    }
    closeHandle();
  }

  /** The committed text chunk by chunk, each as soon as it is verified, until the request ends. */
  @Override
  public java.util.Iterator<String> iterator() {
    return new java.util.Iterator<String>() {
      private String next;
      private boolean fetched;

      @Override
      public boolean hasNext() {
        if (!fetched) {
          next = readText(-1);
          fetched = true;
        }
        return next != null;
      }

      @Override
      public String next() {
        if (!hasNext()) throw new java.util.NoSuchElementException();
        fetched = false;
        return next;
      }
    };
  }

  // A subscription to the text: chunks queue here (from the dispatcher thread, which never
  // blocks on a slow subscriber) and are delivered on the executor, one task at a time, as the
  // subscriber's demand allows; then onComplete, or onError with what ended the stream.
  private static final class TextSubscription implements java.util.concurrent.Flow.Subscription {
    private final Request request;
    private final java.util.concurrent.Flow.Subscriber<? super String> subscriber;
    private final java.util.concurrent.Executor executor;
    private final java.util.concurrent.ConcurrentLinkedQueue<String> chunks = new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final java.util.concurrent.atomic.AtomicLong demand = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicInteger work = new java.util.concurrent.atomic.AtomicInteger();
    private volatile boolean ended;
    private volatile Throwable failure;
    private volatile boolean cancelled;
    private boolean subscribed;  // touched only by the serialized delivery
    private boolean terminated;

    TextSubscription(Request request, java.util.concurrent.Flow.Subscriber<? super String> subscriber,
                     java.util.concurrent.Executor executor) {
      this.request = request;
      this.subscriber = subscriber;
      this.executor = executor;
    }

    void push(String chunk) {
      if (cancelled) return;
      chunks.add(chunk);
      schedule();
    }

    void end(Throwable why) {
      failure = why;
      ended = true;
      schedule();
    }

    @Override
    public void request(long n) {
      if (n <= 0) {
        end(new IllegalArgumentException("Flow.Subscription.request(" + n + "): demand must be positive"));
        cancel();
        return;
      }
      demand.getAndAccumulate(n, (a, b) -> a + b < 0 ? Long.MAX_VALUE : a + b);
      schedule();
    }

    @Override
    public void cancel() {
      cancelled = true;
      request.cancel();
    }

    void schedule() {
      if (work.getAndIncrement() == 0) executor.execute(this::deliver);
    }

    private void deliver() {
      int missed = 1;
      do {
        if (!subscribed) {
          subscribed = true;
          subscriber.onSubscribe(this);
        }
        while (!cancelled && demand.get() > 0 && !chunks.isEmpty()) {
          demand.decrementAndGet();
          subscriber.onNext(chunks.poll());
        }
        if (ended && chunks.isEmpty() && !terminated && !cancelled) {
          terminated = true;
          if (failure == null) {
            subscriber.onComplete();
          } else {
            subscriber.onError(failure);
          }
        }
        missed = work.addAndGet(-missed);
      } while (missed != 0);
    }
  }

  /** publisher(ForkJoinPool.commonPool()). */
  public java.util.concurrent.Flow.Publisher<String> publisher() {
    return publisher(java.util.concurrent.ForkJoinPool.commonPool());
  }

  /**
   * The committed text as a reactive stream: the session's dispatcher thread reads each chunk as
   * it is committed and the subscriber receives it on `executor`, with back-pressure (chunks
   * wait in memory for demand), then onComplete, or onError with the CancellationException or
   * Llm42Exception that ended the stream. Reading consumes the stream: one subscriber (a second
   * gets onError). A subscriber that cancels cancels the request; closing the request cancels
   * it and waits for the stream to end.
   */
  public java.util.concurrent.Flow.Publisher<String> publisher(java.util.concurrent.Executor executor) {
    return subscriber -> {
      TextSubscription subscription = new TextSubscription(this, subscriber, executor);
      if (!published.compareAndSet(false, true)) {
        subscription.end(new IllegalStateException("a request's text can be subscribed to once"));
        return;
      }
      subscription.schedule();  // onSubscribe
      serve(() -> {
        try {
          for (String chunk; (chunk = readText(0)) != null;) {
            if (chunk.isEmpty()) return false;  // nothing more yet: the next commit is news again
            subscription.push(chunk);
          }
          subscription.end(null);
        } catch (RuntimeException e) {
          subscription.end(e);
        }
        return true;
      });
    };
  }

  /** completion(ForkJoinPool.commonPool()). */
  public java.util.concurrent.CompletableFuture<Request> completion() {
    return completion(java.util.concurrent.ForkJoinPool.commonPool());
  }

  /**
   * Completes on `executor` with this request once it has finished well, or exceptionally with
   * the CancellationException or Llm42Exception it ended with; the session's dispatcher thread
   * watches for the end, so no thread waits per request. Cancelling the future cancels the
   * request. The text stays readable (outputText, or the stream).
   */
  public java.util.concurrent.CompletableFuture<Request> completion(java.util.concurrent.Executor executor) {
    java.util.concurrent.CompletableFuture<Request> f = new java.util.concurrent.CompletableFuture<>();
    f.whenComplete((v, e) -> {
      if (f.isCancelled()) cancel();
    });
    serve(() -> {
      if (!isFinished()) return false;
      RuntimeException failure = null;
      try {
        checkStatus();
      } catch (RuntimeException e) {
        failure = e;
      }
      // Wrapped, so that get() throws ExecutionException with it as the cause (a bare
      // CancellationException would read as the future itself cancelled).
      final RuntimeException why = failure == null ? null : new java.util.concurrent.CompletionException(failure);
      executor.execute(() -> {
        if (why == null) {
          f.complete(this);
        } else {
          f.completeExceptionally(why);
        }
      });
      return true;
    });
    return f;
  }
%}

%include "../swig/llm42.i"
