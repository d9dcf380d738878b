// The C# binding against stories260K (NUnit 2.6): greedy output equal to llama.cpp's (which the C
// API reproduces), streaming, deterministic requests, cancel, every error path, and no leak over
// 200 create/dispose cycles. LLM42_TEST_MODEL and LLM42_TEST_EXPECTED (llama.cpp's greedy ids
// for "Once upon a time") come from ctest.
using System;
using System.IO;
using System.Linq;
using System.Threading;
using Llm42;
using NUnit.Framework;

[TestFixture]
public class Llm42Tests {
  static readonly string Model = Environment.GetEnvironmentVariable("LLM42_TEST_MODEL") ?? "";
  Session session;

  static int[] Expected() {
    return (Environment.GetEnvironmentVariable("LLM42_TEST_EXPECTED") ?? "")
        .Split(new[] {' '}, StringSplitOptions.RemoveEmptyEntries).Select(int.Parse).ToArray();
  }

  static Session Open(Mode mode, string path) {
    using (var so = new SessionOptions())
    using (var policy = new Determinism(mode)) {
      so.SetModelPath(path);
      so.SetThreads(1);
      so.SetKvCacheTokens(1024);
      so.SetDeterminism(policy);
      return new Session(so);
    }
  }

  static RequestOptions Prompt(int maxTokens) {
    var ro = new RequestOptions();
    ro.SetPrompt("Once upon a time");
    ro.SetMaxTokens(maxTokens);
    return ro;
  }

  static int ModelMappings() {
    string name = Path.GetFileName(Model);
    return File.ReadAllLines("/proc/self/maps").Count(l => l.Contains(name));
  }

  static void AssertStatus(Status status, Action call) {
    var e = Assert.Throws<Llm42Exception>(() => call());
    Assert.AreEqual(status, e.Status);
    Assert.IsNotEmpty(e.Message);
  }

  [TestFixtureSetUp]
  public void OpenSession() {
    if (!File.Exists(Model)) Assert.Ignore("stories260K.gguf is missing (../shared/models)");
    session = Open(Mode.SELECTIVE, Model);
  }

  [TestFixtureTearDown]
  public void CloseSession() {
    if (session != null) session.Dispose();
  }

  // An output grammar, logit bias and penalties: the output follows the grammar and ends STOP, a
  // deterministic run repeats, refused grammars and values throw with their status.
  [Test]
  public void GrammarBiasAndPenalties() {
    var texts = new string[2];
    for (int run = 0; run < 2; ++run) {
      using (var ro = Prompt(120)) {
        ro.SetTemperature(0.8f);
        ro.SetSeed(5);
        ro.SetDeterministic(true);
        ro.SetJsonSchema("{\"type\": \"object\", \"properties\": {\"mood\": {\"enum\": [\"happy\", \"sad\"]}}, \"required\": [\"mood\"]}");
        ro.SetLogitBias(100, float.NegativeInfinity);
        ro.SetRepetitionPenalty(1.2f, 32);
        ro.SetFrequencyPenalty(0.1f);
        ro.SetPresencePenalty(0.1f);
        using (var r = session.Submit(ro)) {
          string text = "";
          for (string piece; (piece = r.ReadText(-1)) != null;) text += piece;
          Assert.AreEqual(FinishReason.STOP, r.FinishReason());
          CollectionAssert.DoesNotContain(r.OutputTokens(), 100);
          texts[run] = text;
        }
      }
    }
    StringAssert.IsMatch("^\\{\\s*\"mood\"\\s*:\\s*\"(happy|sad)\"\\s*\\}$", texts[0]);
    Assert.AreEqual(texts[0], texts[1]);
    using (var ro = new RequestOptions()) {
      AssertStatus(Status.INVALID_ARGUMENT, () => ro.SetJsonSchema("{\"type\": \"string\", \"format\": \"email\"}"));
      AssertStatus(Status.INVALID_ARGUMENT, () => ro.SetGrammar("root ::= ("));
      AssertStatus(Status.OUT_OF_RANGE, () => ro.SetLogitBias(3, float.NaN));
      AssertStatus(Status.OUT_OF_RANGE, () => ro.SetRepetitionPenalty(1.1f, -1));
    }
  }

  [Test]
  public void GreedyMatchesReferenceAndStreams() {
    using (var ro = Prompt(32))
    using (var r = session.Submit(ro)) {
      string streamed = "";
      for (string piece; (piece = r.ReadText(-1)) != null;) streamed += piece;
      Assert.IsTrue(r.IsFinished());
      CollectionAssert.AreEqual(Expected().Take(32).ToArray(), r.OutputTokens());
      Assert.AreEqual(r.OutputText(), streamed);
      StringAssert.StartsWith(", there was a little girl named Lily", streamed);
      Assert.AreEqual(Status.OK, r.Status());
      Assert.AreEqual(FinishReason.LENGTH, r.FinishReason());
    }
  }

  [Test]
  public void TokenizeRoundTrip() {
    CollectionAssert.AreEqual(new[] {1, 403, 407, 261, 378}, session.Tokenize("Once upon a time", true));
    Assert.AreEqual("Grüße 🦙", session.Detokenize(session.Tokenize("Grüße 🦙", false)));
  }

  // llm42_session_apply_chat_template: a template passed in the options renders the messages
  // (stories260K has none of its own: without one, FAILED_PRECONDITION).
  [Test]
  public void ApplyChatTemplateRendersJsonMessages() {
    string messages = "[{\"role\": \"user\", \"content\": \"Hi\"}]";
    string options = "{\"template\": \"{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}\"}";
    Assert.AreEqual("<user>Hi", session.ApplyChatTemplate(messages, options));
    AssertStatus(Status.FAILED_PRECONDITION, () => session.ApplyChatTemplate(messages, ""));
  }

  // llm42_session_parse_chat_output: stories260K's replies are plain text with <think> reasoning.
  [Test]
  public void ParseChatOutputSplitsReasoning() {
    Assert.AreEqual("{\"content\":\"Hi\",\"reasoning_content\":\"hm\",\"tool_calls\":[]}",
                    session.ParseChatOutput("<think>hm</think>Hi"));
  }

  int[] Deterministic(ulong seed) {
    using (var ro = Prompt(24)) {
      ro.SetTemperature(0.9f);
      ro.SetSeed(seed);
      ro.SetDeterministic(true);
      using (var r = session.Submit(ro)) {
        Assert.IsTrue(r.WaitFor(-1));
        Assert.AreEqual(seed, r.EffectiveSeed());
        return r.OutputTokens();
      }
    }
  }

  static RequestOptions Turn(string text) {
    var ro = Prompt(24);
    ro.SetPrompt(text);
    ro.SetTemperature(0.8f);
    ro.SetSeed(5);
    ro.SetDeterministic(true);
    return ro;
  }

  // The second turn continues the first (SetParent): its history comes from the prefix cache,
  // and it gives the tokens of a request whose prompt is the whole history.
  [Test]
  public void ConversationContinuesAFinishedRequest() {
    using (var ro = Turn("Once upon a time"))
    using (var first = session.Submit(ro)) {
      Assert.IsTrue(first.WaitFor(-1));
      using (var ro2 = Turn(" Then the sun came out.")) {
        ro2.SetParent(first);
        using (var second = session.Submit(ro2)) {
          Assert.IsTrue(second.WaitFor(-1));
          Assert.GreaterOrEqual(second.Stat(Stat.CACHED_PROMPT_TOKENS), 16);
          int[] history = session.Tokenize("Once upon a time", true).Concat(first.OutputTokens())
              .Concat(session.Tokenize(" Then the sun came out.", false)).ToArray();
          using (var whole = Turn("Once upon a time")) {
            whole.SetPromptTokens(history);
            using (var r = session.Submit(whole)) {
              Assert.IsTrue(r.WaitFor(-1));
              CollectionAssert.AreEqual(second.OutputTokens(), r.OutputTokens());
            }
          }
        }
      }
    }
  }

  // Nothing in the binding is called from native code (no delegate crosses to C: Unity's IL2CPP
  // refuses reverse P/Invoke into methods without [MonoPInvokeCallback]); failures still arrive
  // as exceptions, a null string as ArgumentNullException. Before, SWIG's exception and string
  // helpers and llm42's own exception callback registered five delegate types.
  [Test]
  public void NoCallbacksFromNativeCodeAndFailuresStillThrow() {
    var delegates = typeof(llm42).Assembly.GetTypes()
        .Where(t => typeof(Delegate).IsAssignableFrom(t)).Select(t => t.FullName).ToArray();
    Assert.AreEqual(0, delegates.Length, string.Join(", ", delegates));
    using (var ro = new RequestOptions()) {
      Assert.Throws<ArgumentNullException>(() => ro.SetPrompt(null));
      var e = Assert.Throws<Llm42Exception>(() => ro.SetMaxTokens(0));
      Assert.AreEqual(Status.OUT_OF_RANGE, e.Status);
      ro.SetMaxTokens(4);  // nothing left pending after a failure
    }
  }

  // foreach over the text; the async reads; a CancellationToken cancels the request.
  [Test]
  public void EnumeratesAwaitsAndCancels() {
    using (var ro = Prompt(16))
    using (var r = session.Submit(ro)) {
      var streamed = new System.Text.StringBuilder();
      foreach (string chunk in r) streamed.Append(chunk);
      Assert.AreEqual(r.OutputText(), streamed.ToString());
    }
    using (var ro = Prompt(16))
    using (var r = session.Submit(ro)) {
      var streamed = new System.Text.StringBuilder();
      for (string chunk; (chunk = r.ReadTextAsync().Result) != null;) streamed.Append(chunk);
      Assert.AreEqual(r.OutputText(), streamed.ToString());
      Assert.IsTrue(r.CompletionAsync().Result.IsFinished());
    }
    // IAsyncEnumerable<string>, stepped by hand as `await foreach` would (mcs has no C# 8).
    using (var ro = Prompt(16))
    using (var r = session.Submit(ro)) {
      var streamed = new System.Text.StringBuilder();
      var chunks = ((System.Collections.Generic.IAsyncEnumerable<string>)r).GetAsyncEnumerator();
      while (chunks.MoveNextAsync().AsTask().Result) streamed.Append(chunks.Current);
      chunks.DisposeAsync().AsTask().Wait();
      Assert.AreEqual(r.OutputText(), streamed.ToString());
    }
    using (var ro = Prompt(2000)) {
      ro.SetIgnoreEos(true);
      using (var r = session.Submit(ro))
      using (var cts = new CancellationTokenSource()) {
        var chunks = r.GetAsyncEnumerator(cts.Token);
        Assert.IsTrue(chunks.MoveNextAsync().AsTask().Result);
        cts.Cancel();  // cancels the request; the next step ends the enumeration with the cancellation
        var e = Assert.Throws<AggregateException>(() => {
          while (chunks.MoveNextAsync().AsTask().Result) {}
        });
        Assert.IsInstanceOf<OperationCanceledException>(e.InnerException);
        Assert.IsTrue(r.WaitFor(60000));
        Assert.AreEqual(FinishReason.CANCELLED, r.FinishReason());
      }
    }
    using (var ro = Prompt(2000)) {
      ro.SetIgnoreEos(true);
      using (var r = session.Submit(ro))
      using (var cts = new CancellationTokenSource()) {
        var done = r.CompletionAsync(cts.Token);
        cts.Cancel();
        var e = Assert.Throws<AggregateException>(() => done.Wait(60000));
        Assert.IsInstanceOf<OperationCanceledException>(e.InnerException);
        Assert.IsTrue(r.WaitFor(60000));
        Assert.AreEqual(FinishReason.CANCELLED, r.FinishReason());
      }
    }
  }

  // A cancelled request's stream ends with OperationCanceledException (foreach, ReadTokens,
  // CompletionAsync); Status() is PENDING while it runs; breaking out of foreach cancels. Checked
  // to fail with the SWIG layer's CheckEnded removed (the enumeration then ends normally).
  [Test]
  public void ACancelledStreamThrowsAtItsEnd() {
    using (var ro = Prompt(1900)) {
      ro.SetIgnoreEos(true);
      using (var r = session.Submit(ro)) {
        Assert.AreEqual(Status.PENDING, r.Status());
        Assert.IsNotNull(r.ReadText(-1));
        r.Cancel();
        Assert.Throws<OperationCanceledException>(() => {
          foreach (string chunk in r) Assert.IsNotNull(chunk);
        });
        Assert.Throws<OperationCanceledException>(() => {
          while (true) r.ReadTokens(0);  // after the tokens ReadTokens has not given yet
        });
        Assert.AreEqual(Status.CANCELLED, r.Status());
        var e = Assert.Throws<AggregateException>(() => r.CompletionAsync().Wait(60000));
        Assert.IsInstanceOf<OperationCanceledException>(e.InnerException);
      }
      using (var r = session.Submit(ro)) {
        foreach (string chunk in r) break;  // leaving the loop cancels the request
        Assert.IsTrue(r.WaitFor(60000));
        Assert.AreEqual(Status.CANCELLED, r.Status());
      }
    }
  }

  // 64 concurrent ReadTextAsync loops and CompletionAsync awaits on one session, served by the
  // session's dispatcher thread: every stream has llama.cpp's greedy tokens.
  [Test]
  public void OneDispatcherThreadServes64Streams() {
    var requests = new System.Collections.Generic.List<Request>();
    try {
      using (var ro = Prompt(8)) {
        ro.SetIgnoreEos(true);
        for (int i = 0; i < 64; ++i) requests.Add(session.Submit(ro));
      }
      var streams = new System.Threading.Tasks.Task<string>[64];
      for (int i = 0; i < 64; ++i) {
        Request r = requests[i];
        streams[i] = i < 48 ? ReadAllAsync(r) : r.CompletionAsync().ContinueWith(t => t.Result.OutputText());
      }
      Assert.IsTrue(System.Threading.Tasks.Task.WaitAll(streams, 60000));
      int[] want = Expected().Take(8).ToArray();
      for (int i = 0; i < 64; ++i) {
        Assert.AreEqual(want, requests[i].OutputTokens());
        Assert.AreEqual(requests[i].OutputText(), streams[i].Result);
      }
    } finally {
      foreach (var r in requests) r.Dispose();
    }
  }

  // Pending async reads hold no thread: 64 ReadTextAsync and CompletionAsync calls on requests
  // queued behind a long one (one running request at a time) leave a thread pool capped at the
  // processor count free to run other work. Checked to fail with ReadTextAsync and CompletionAsync
  // waiting on the thread pool (the marker task never ran: every pool thread sat in a read).
  [Test]
  public void PendingAsyncReadsHoldNoThread() {
    int maxWorkers, maxIo, minWorkers, minIo;
    System.Threading.ThreadPool.GetMaxThreads(out maxWorkers, out maxIo);
    System.Threading.ThreadPool.GetMinThreads(out minWorkers, out minIo);
    var requests = new System.Collections.Generic.List<Request>();
    Session one;
    using (var so = new SessionOptions()) {
      so.SetModelPath(Model);
      so.SetThreads(1);
      so.SetMaxRunningRequests(1);
      one = new Session(so);
    }
    try {
      Request first;
      using (var ro = Prompt(1900)) {
        ro.SetIgnoreEos(true);
        first = one.Submit(ro);  // runs alone for a while: the others wait in the queue
        requests.Add(first);
        for (int i = 0; i < 64; ++i) requests.Add(one.Submit(ro));
      }
      Assert.IsTrue(System.Threading.ThreadPool.SetMaxThreads(Math.Max(minWorkers, Environment.ProcessorCount), maxIo));
      var pending = new System.Collections.Generic.List<System.Threading.Tasks.Task>();
      for (int i = 1; i <= 64; ++i) {
        pending.Add(i % 2 == 0 ? (System.Threading.Tasks.Task)requests[i].ReadTextAsync() : requests[i].CompletionAsync());
      }
      var marker = System.Threading.Tasks.Task.Run(() => 42);
      Assert.IsTrue(marker.Wait(10000), "the thread pool is held by pending reads");
      Assert.IsFalse(pending.Any(t => t.IsCompleted));  // still queued behind the first request
    } finally {
      System.Threading.ThreadPool.SetMaxThreads(maxWorkers, maxIo);
      foreach (var r in requests) r.Dispose();
      one.Dispose();
    }
  }

  static async System.Threading.Tasks.Task<string> ReadAllAsync(Request r) {
    var text = new System.Text.StringBuilder();
    for (string chunk; (chunk = await r.ReadTextAsync().ConfigureAwait(false)) != null;) text.Append(chunk);
    return text.ToString();
  }

  sealed class Recorder : IProgress<float> {
    internal readonly System.Collections.Generic.List<float> Seen = new System.Collections.Generic.List<float>();
    public void Report(float value) {
      lock (Seen) Seen.Add(value);
    }
  }

  // Session.OpenAsync polls a SessionLoader: the progress it reports never goes back and ends at
  // 1, the session gives llama.cpp's greedy tokens, and a cancelled token ends the task in
  // OperationCanceledException.
  [Test]
  public void ASessionLoadsWithoutBlocking() {
    var progress = new Recorder();
    using (var so = new SessionOptions()) {
      so.SetModelPath(Model);
      so.SetThreads(1);
      using (Session loaded = Session.OpenAsync(so, progress).Result)
      using (var ro = Prompt(8)) {
        ro.SetIgnoreEos(true);
        using (var r = loaded.Submit(ro)) {
          Assert.IsTrue(r.WaitFor(60000));
          Assert.AreEqual(Expected().Take(8).ToArray(), r.OutputTokens());
        }
      }
      CollectionAssert.IsOrdered(progress.Seen);
      Assert.AreEqual(1f, progress.Seen.Last());
      using (var cts = new CancellationTokenSource()) {
        cts.Cancel();
        var e = Assert.Throws<AggregateException>(() => Session.OpenAsync(so, null, cts.Token).Wait());
        Assert.IsInstanceOf<OperationCanceledException>(e.InnerException);
      }
    }
  }

  // The C testing hook (llm42_testing.h), called directly: the library is already loaded.
  [System.Runtime.InteropServices.DllImport("libllm42.so.0", EntryPoint = "llm42_testing_fail_requests_after")]
  static extern int FailRequestsAfter(int tokens);

  // Requests made to fail after 3 tokens: foreach, ReadTextAsync and CompletionAsync end with
  // Llm42Exception(INTERNAL) and the failure's message. Checked to fail with the SWIG layer's
  // CheckEnded emptied (the streams then end quietly).
  [Test]
  public void AFailedStreamThrowsAtItsEnd() {
    Assert.AreEqual(0, FailRequestsAfter(3));
    try {
      using (var ro = Prompt(32)) {
        ro.SetIgnoreEos(true);
        using (var r = session.Submit(ro)) {
          var e = Assert.Throws<Llm42Exception>(() => {
            foreach (string chunk in r) Assert.IsNotNull(chunk);
          });
          Assert.AreEqual(Status.INTERNAL, e.Status);
          StringAssert.Contains("injected failure", e.Message);
          Assert.AreEqual(FinishReason.ERROR, r.FinishReason());
        }
        using (var r = session.Submit(ro)) {
          var e = Assert.Throws<AggregateException>(() => ReadAllAsync(r).Wait(60000));
          Assert.AreEqual(Status.INTERNAL, ((Llm42Exception)e.InnerException).Status);
        }
        using (var r = session.Submit(ro)) {
          var e = Assert.Throws<AggregateException>(() => r.CompletionAsync().Wait(60000));
          Assert.AreEqual(Status.INTERNAL, ((Llm42Exception)e.InnerException).Status);
        }
      }
    } finally {
      FailRequestsAfter(0);
    }
  }

  // Seeds are ulong: one above 2^63 round-trips.
  [Test]
  public void SeedsTakeAll64Bits() {
    const ulong high = 18446744073709551611UL;  // 2^64 - 5
    using (var ro = Prompt(4)) {
      ro.SetTemperature(0.9f);
      ro.SetSeed(high);
      using (var r = session.Submit(ro)) Assert.AreEqual(high, r.EffectiveSeed());
    }
  }

  // Session.Generate is the streamed text in one call; what submit refuses throws.
  [Test]
  public void GenerateIsTheStreamedText() {
    using (var ro = Prompt(24)) {
      string streamed;
      using (var r = session.Submit(ro)) streamed = string.Concat(r);
      Assert.AreEqual(streamed, session.Generate(ro));
    }
    using (var empty = new RequestOptions()) AssertStatus(Status.INVALID_ARGUMENT, () => session.Generate(empty));
  }

  // Dispose lands while a ReadTextAsync task is inside ReadText(-1) on the thread pool: the
  // request is cancelled, its handle freed once the read returns, and the task ends with the
  // stream's end or FAILED_PRECONDITION (bindings/swig/handle_box.h). Bindings that destroyed the
  // handle at once crashed the runtime here.
  [Test]
  public void DisposeWhileAnotherThreadReads() {
    for (int attempt = 0; attempt < 12; ++attempt) {
      Request r;
      using (var ro = Prompt(900)) {
        ro.SetIgnoreEos(true);
        r = session.Submit(ro);
      }
      var reading = System.Threading.Tasks.Task.Run(() => {
        try {
          for (string chunk; (chunk = r.ReadTextAsync().Result) != null;) {}
          return "end";
        } catch (AggregateException e) {
          if (e.InnerException is OperationCanceledException) return "cancelled";  // disposing cancels
          var failed = (Llm42Exception)e.InnerException;
          return failed.Status.ToString();
        }
      });
      Thread.Sleep(attempt % 4);
      r.Dispose();
      Assert.IsTrue(reading.Wait(60000));
      Assert.That(reading.Result, Is.EqualTo("end").Or.EqualTo("cancelled").Or.EqualTo(Status.FAILED_PRECONDITION.ToString()));
      AssertStatus(Status.FAILED_PRECONDITION, () => r.IsFinished());
    }
  }

  [Test]
  public void LogGoesToTheHost() {
    llm42.SetLogLevel(1);  // info
    llm42.CaptureLog(true);
    try {
      while (llm42.LogMessageLevel() >= 0) llm42.TakeLogMessage();
      Open(Mode.SELECTIVE, Model).Dispose();
      bool loaded = false;
      for (int level; (level = llm42.LogMessageLevel()) >= 0;) {
        string text = llm42.TakeLogMessage();
        loaded |= level == 1 && text.Contains("loaded");
      }
      Assert.IsTrue(loaded);
    } finally {
      llm42.CaptureLog(false);
      llm42.SetLogLevel(2);
    }
  }

  [Test]
  public void LibraryFunctionsAndReadTokens() {
    Assert.AreEqual(2, llm42.VersionString().Count(c => c == '.'));
    Assert.AreEqual("LLM42_NOT_FOUND", llm42.StatusName(Status.NOT_FOUND));
    llm42.SetLogLevel(2);
    using (var policy = new Determinism(Mode.SELECTIVE)) {
      policy.SetDecodePath(DecodePath.FIXED);
    }
    using (var ro = Prompt(12))
    using (var r = session.Submit(ro)) {
      var ids = new System.Collections.Generic.List<int>();
      for (int[] chunk; (chunk = r.ReadTokens(0)) != null;) ids.AddRange(chunk);
      CollectionAssert.AreEqual(r.OutputTokens(), ids.ToArray());
      Assert.IsNull(r.ReadTokens(-1));
    }
  }

  // Three most likely tokens per position, most likely first.
  [Test]
  public void LogprobsAndTopLogprobs() {
    using (var ro = Turn("Once upon a time")) {
      ro.SetLogprobs(true);
      ro.SetTopLogprobs(3);
      ro.SetPromptLogprobs(true);
      using (var r = session.Submit(ro)) {
        Assert.IsTrue(r.WaitFor(-1));
        Assert.AreEqual(session.Tokenize("Once upon a time", true).Length - 1, r.PromptLogprobs().Length);
        int[] tokens = r.OutputTokens();
        float[] logprobs = r.Logprobs();
        int[] ids = r.TopLogprobTokens();
        float[] values = r.TopLogprobValues();
        Assert.AreEqual(tokens.Length, logprobs.Length);
        Assert.AreEqual(3 * tokens.Length, ids.Length);
        Assert.AreEqual(3 * tokens.Length, values.Length);
        for (int i = 0; i < tokens.Length; ++i) {
          Assert.IsTrue(values[3 * i] >= values[3 * i + 1] && values[3 * i + 1] >= values[3 * i + 2]);
        }
      }
    }
    using (var ro = Prompt(4)) {
      AssertStatus(Status.OUT_OF_RANGE, () => ro.SetTopLogprobs(21));
    }
  }

  // A deterministic request's receipt (byte[]) is reproduced by another session; a damaged one
  // throws FORMAT_ERROR; another KV type is another schedule, with a reason.
  [Test]
  public void ReceiptsReplayAndRefuseDamage() {
    Assert.AreEqual(64, session.Fingerprint().Length);
    byte[] receipt;
    using (var ro = Turn("Once upon a time"))
    using (var r = session.Submit(ro)) {
      Assert.IsTrue(r.WaitFor(-1));
      receipt = r.Receipt();
    }
    using (var other = Open(Mode.SELECTIVE, Model)) {
      using (var check = other.VerifyReceipt(receipt)) {
        Assert.IsTrue(check.Reproduced());
        Assert.AreEqual(ReceiptOutcome.REPRODUCED, check.Outcome());
        Assert.AreEqual(-1, check.FirstDifference());
      }
      var damaged = (byte[])receipt.Clone();
      damaged[damaged.Length / 2] ^= 4;
      AssertStatus(Status.FORMAT_ERROR, () => other.VerifyReceipt(damaged));
    }
    using (var so = new SessionOptions()) {
      so.SetModelPath(Model);
      so.SetThreads(1);
      so.SetKvDtype("f16");
      so.SetKvPrefault(true);  // resident KV changes no output: the KV type alone differs
      using (var f16 = new Session(so))
      using (var check = f16.VerifyReceipt(receipt)) {
        Assert.AreEqual(ReceiptOutcome.OTHER_SCHEDULE, check.Outcome());
        StringAssert.Contains("KV type", check.Detail());
      }
    }
  }

  [Test]
  public void DeterministicRequestsRepeatAndSeedMatters() {
    int[] first = Deterministic(7);
    CollectionAssert.AreEqual(first, Deterministic(7));
    CollectionAssert.AreNotEqual(first, Deterministic(8));  // sensitivity control
  }

  [Test]
  public void CancelFromAnotherThread() {
    using (var ro = Prompt(1000)) {
      ro.SetIgnoreEos(true);
      using (var r = session.Submit(ro)) {
        var t = new Thread(() => r.Cancel());
        t.Start();
        Assert.IsTrue(r.WaitFor(-1));
        t.Join();
        Assert.AreEqual(Status.CANCELLED, r.Status());
        Assert.AreEqual(FinishReason.CANCELLED, r.FinishReason());
        Assert.Less(r.OutputTokens().Length, 1000);
      }
    }
  }

  [Test]
  public void ReadTextWithZeroTimeoutNeverBlocks() {
    using (var ro = Prompt(4))
    using (var r = session.Submit(ro)) {
      // A zero-timeout frame loop: "" is a quiet frame, null the end; nothing is lost.
      string streamed = "";
      for (string piece; (piece = r.ReadText(0)) != null;) streamed += piece;
      Assert.AreEqual(r.OutputText(), streamed);
      Assert.IsNull(r.ReadText(0));
      Assert.IsNull(r.ReadText(-1));
    }
  }

  [Test]
  public void ErrorPathsThrowTheirStatus() {
    AssertStatus(Status.NOT_FOUND, () => Open(Mode.SELECTIVE, Model + ".missing"));
    using (var so = new SessionOptions()) AssertStatus(Status.OUT_OF_RANGE, () => so.SetThreads(-1));
    using (var d = new Determinism(Mode.SELECTIVE)) AssertStatus(Status.OUT_OF_RANGE, () => d.SetWindow(0));
    using (var ro = new RequestOptions()) {
      AssertStatus(Status.OUT_OF_RANGE, () => ro.SetMaxTokens(0));
      ro.SetPromptTokens(new[] {1, 999999});
      AssertStatus(Status.INVALID_ARGUMENT, () => session.Submit(ro));
    }
    using (var ro = new RequestOptions()) {
      ro.AddMessage("user", "Hi");  // stories260K has no chat format
      AssertStatus(Status.UNSUPPORTED, () => session.Submit(ro));
    }
    using (var off = Open(Mode.OFF, Model))
    using (var ro = Prompt(4)) {
      ro.SetDeterministic(true);
      AssertStatus(Status.UNSUPPORTED, () => off.Submit(ro));
    }
    var closed = Open(Mode.SELECTIVE, Model);
    closed.Dispose();
    AssertStatus(Status.FAILED_PRECONDITION, () => closed.Tokenize("x", false));
    closed.Dispose();  // twice is harmless
  }

  [Test]
  public void NoLeakOver200CreateDisposeCycles() {
    int baseline = ModelMappings();
    for (int i = 0; i < 200; ++i) {
      using (var s = Open(Mode.SELECTIVE, Model))
      using (var ro = Prompt(2))
      using (var r = s.Submit(ro)) {
        Assert.IsTrue(r.WaitFor(-1));
      }
    }
    Assert.AreEqual(baseline, ModelMappings());
  }
}
