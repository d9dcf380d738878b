import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import ai.llm42.Determinism;
import ai.llm42.FinishReason;
import ai.llm42.Llm42Exception;
import ai.llm42.Mode;
import ai.llm42.ReceiptCheck;
import ai.llm42.ReceiptOutcome;
import ai.llm42.Request;
import ai.llm42.RequestOptions;
import ai.llm42.Session;
import ai.llm42.SessionLoader;
import ai.llm42.SessionOptions;
import ai.llm42.Stat;
import ai.llm42.Status;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import org.junit.AfterClass;
import org.junit.Assume;
import org.junit.BeforeClass;
import org.junit.Test;

/**
 * The Java binding against stories260K: greedy output equal to llama.cpp's (which the C API
 * reproduces), streaming, deterministic requests, cancel, every error path, and no leak over 200
 * create/close cycles. System properties llm42.model and llm42.expected (llama.cpp's greedy ids
 * for "Once upon a time") come from ctest.
 */
public class Llm42Test {
  static final String MODEL = System.getProperty("llm42.model", "");
  static Session session;

  static int[] expected() {
    return Arrays.stream(System.getProperty("llm42.expected", "").trim().split("\\s+"))
        .mapToInt(Integer::parseInt).toArray();
  }

  static Session open(Mode mode, String path) {
    try (SessionOptions so = new SessionOptions(); Determinism policy = new Determinism(mode)) {
      so.setModelPath(path);
      so.setThreads(1);
      so.setKvCacheTokens(1024);
      so.setDeterminism(policy);
      return new Session(so);
    }
  }

  static RequestOptions prompt(int maxTokens) {
    RequestOptions ro = new RequestOptions();
    ro.setPrompt("Once upon a time");
    ro.setMaxTokens(maxTokens);
    return ro;
  }

  static long modelMappings() throws Exception {
    String name = new File(MODEL).getName();
    return Files.readAllLines(Paths.get("/proc/self/maps")).stream().filter(l -> l.contains(name)).count();
  }

  interface Call {
    void run();
  }

  static void assertStatus(Status status, Call call) {
    try {
      call.run();
      fail("expected " + status);
    } catch (Llm42Exception e) {
      assertEquals(status, e.getStatus());
      assertFalse(e.getMessage().isEmpty());
    }
  }

  // An output grammar, logit bias and penalties: the output follows the grammar and ends STOP, a
  // deterministic run repeats, refused grammars and values throw with their status.
  @Test
  public void grammarBiasAndPenalties() {
    String[] texts = new String[2];
    for (int run = 0; run < 2; ++run) {
      try (RequestOptions ro = prompt(120)) {
        ro.setTemperature(0.8f);
        ro.setSeed(5);
        ro.setDeterministic(true);
        ro.setJsonSchema("{\"type\": \"object\", \"properties\": {\"mood\": {\"enum\": [\"happy\", \"sad\"]}},"
            + " \"required\": [\"mood\"]}");
        ro.setLogitBias(100, Float.NEGATIVE_INFINITY);
        ro.setRepetitionPenalty(1.2f, 32);
        ro.setFrequencyPenalty(0.1f);
        ro.setPresencePenalty(0.1f);
        try (Request r = session.submit(ro)) {
          StringBuilder text = new StringBuilder();
          for (String piece; (piece = r.readText(-1)) != null;) text.append(piece);
          assertEquals(FinishReason.STOP, r.finishReason());
          for (int id : r.outputTokens()) assertNotEquals(100, id);
          texts[run] = text.toString();
        }
      }
    }
    assertTrue(texts[0], texts[0].matches("\\{\\s*\"mood\"\\s*:\\s*\"(happy|sad)\"\\s*\\}"));
    assertEquals(texts[0], texts[1]);
    try (RequestOptions ro = new RequestOptions()) {
      assertStatus(Status.INVALID_ARGUMENT, () -> ro.setJsonSchema("{\"type\": \"string\", \"format\": \"email\"}"));
      assertStatus(Status.INVALID_ARGUMENT, () -> ro.setGrammar("root ::= ("));
      assertStatus(Status.OUT_OF_RANGE, () -> ro.setLogitBias(3, Float.NaN));
      assertStatus(Status.OUT_OF_RANGE, () -> ro.setRepetitionPenalty(1.1f, -1));
    }
  }

  @BeforeClass
  public static void openSession() {
    Assume.assumeTrue("stories260K.gguf is missing (../shared/models)", new File(MODEL).exists());
    session = open(Mode.SELECTIVE, MODEL);
  }

  @AfterClass
  public static void closeSession() {
    if (session != null) session.close();
  }

  @Test
  public void greedyMatchesReferenceAndStreams() {
    try (RequestOptions ro = prompt(32); Request r = session.submit(ro)) {
      StringBuilder streamed = new StringBuilder();
      for (String piece; (piece = r.readText(-1)) != null;) streamed.append(piece);
      assertTrue(r.isFinished());
      assertArrayEquals(Arrays.copyOf(expected(), 32), r.outputTokens());
      assertEquals(r.outputText(), streamed.toString());
      assertTrue(streamed.toString().startsWith(", there was a little girl named Lily"));
      assertEquals(Status.OK, r.status());
      assertEquals(FinishReason.LENGTH, r.finishReason());
    }
  }

  @Test
  public void tokenizeRoundTrip() {
    assertArrayEquals(new int[] {1, 403, 407, 261, 378}, session.tokenize("Once upon a time", true));
    assertEquals("Grüße 🦙", session.detokenize(session.tokenize("Grüße 🦙", false)));
  }

  // llm42_session_apply_chat_template: a template passed in the options renders the messages
  // (stories260K has none of its own: without one, FAILED_PRECONDITION).
  @Test
  public void applyChatTemplateRendersJsonMessages() {
    String messages = "[{\"role\": \"user\", \"content\": \"Hi\"}]";
    String options = "{\"template\": \"{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}\"}";
    assertEquals("<user>Hi", session.applyChatTemplate(messages, options));
    assertStatus(Status.FAILED_PRECONDITION, () -> session.applyChatTemplate(messages, ""));
  }

  // llm42_session_parse_chat_output: stories260K's replies are plain text with <think> reasoning.
  @Test
  public void parseChatOutputSplitsReasoning() {
    assertEquals("{\"content\":\"Hi\",\"reasoning_content\":\"hm\",\"tool_calls\":[]}",
                 session.parseChatOutput("<think>hm</think>Hi"));
  }

  int[] deterministic(long seed) {
    try (RequestOptions ro = prompt(24)) {
      ro.setTemperature(0.9f);
      ro.setSeed(seed);
      ro.setDeterministic(true);
      try (Request r = session.submit(ro)) {
        assertTrue(r.waitFor(-1));
        assertEquals(seed, r.effectiveSeed());
        return r.outputTokens();
      }
    }
  }

  RequestOptions turn(String text) {
    RequestOptions ro = prompt(24);
    ro.setPrompt(text);
    ro.setTemperature(0.8f);
    ro.setSeed(5);
    ro.setDeterministic(true);
    return ro;
  }

  // The second turn continues the first (setParent): its history comes from the prefix cache,
  // and it gives the tokens of a request whose prompt is the whole history.
  @Test
  public void conversationContinuesAFinishedRequest() {
    try (RequestOptions ro = turn("Once upon a time"); Request first = session.submit(ro)) {
      assertTrue(first.waitFor(-1));
      try (RequestOptions ro2 = turn(" Then the sun came out.")) {
        ro2.setParent(first);
        try (Request second = session.submit(ro2)) {
          assertTrue(second.waitFor(-1));
          assertTrue(second.stat(Stat.CACHED_PROMPT_TOKENS) >= 16);
          int[] a = session.tokenize("Once upon a time", true), b = first.outputTokens();
          int[] c = session.tokenize(" Then the sun came out.", false);
          int[] history = new int[a.length + b.length + c.length];
          System.arraycopy(a, 0, history, 0, a.length);
          System.arraycopy(b, 0, history, a.length, b.length);
          System.arraycopy(c, 0, history, a.length + b.length, c.length);
          try (RequestOptions whole = turn("Once upon a time")) {
            whole.setPromptTokens(history);
            try (Request r = session.submit(whole)) {
              assertTrue(r.waitFor(-1));
              assertArrayEquals(second.outputTokens(), r.outputTokens());
            }
          }
        }
      }
    }
  }

  // Request is a Flow.Publisher<String>: the chunks arrive in order, then onComplete; a
  // subscriber that cancels cancels the request.
  @Test
  public void publishesItsTextAndCancelsWithItsSubscriber() throws Exception {
    try (RequestOptions ro = prompt(16); Request r = session.submit(ro)) {
      StringBuilder streamed = new StringBuilder();
      java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
      r.publisher().subscribe(new java.util.concurrent.Flow.Subscriber<String>() {
        public void onSubscribe(java.util.concurrent.Flow.Subscription s) { s.request(Long.MAX_VALUE); }
        public void onNext(String chunk) { streamed.append(chunk); }
        public void onError(Throwable e) { fail(e.toString()); }
        public void onComplete() { done.countDown(); }
      });
      assertTrue(done.await(60, java.util.concurrent.TimeUnit.SECONDS));
      assertEquals(r.outputText(), streamed.toString());
    }
    try (RequestOptions ro = prompt(2000)) {
      ro.setIgnoreEos(true);
      try (Request r = session.submit(ro)) {
        r.publisher().subscribe(new java.util.concurrent.Flow.Subscriber<String>() {
          java.util.concurrent.Flow.Subscription subscription;
          public void onSubscribe(java.util.concurrent.Flow.Subscription s) { (subscription = s).request(1); }
          public void onNext(String chunk) { subscription.cancel(); }
          public void onError(Throwable e) {}
          public void onComplete() {}
        });
        assertTrue(r.waitFor(60000));
        assertEquals(FinishReason.CANCELLED, r.finishReason());
      }
    }
  }

  // 64 concurrent publishers and completion futures on one session are served by one dispatcher
  // thread (which ends with the last stream) and delivered on the executor given; every stream has
  // llama.cpp's greedy tokens. The old publisher and completion() fail it: they blocked a reader
  // thread per stream (supplyAsync's pool) and had no dispatcher.
  @Test
  public void oneDispatcherThreadServes64Streams() throws Exception {
    java.util.concurrent.ExecutorService executor = java.util.concurrent.Executors.newFixedThreadPool(2, task -> {
      Thread t = new Thread(task, "test-executor");
      t.setDaemon(true);
      return t;
    });
    int before = Thread.activeCount() + 2;  // the executor's two
    java.util.List<Request> requests = new java.util.ArrayList<>();
    java.util.Map<Integer, StringBuilder> texts = new java.util.concurrent.ConcurrentHashMap<>();
    java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(64);
    java.util.Set<String> deliveredOn = java.util.concurrent.ConcurrentHashMap.newKeySet();
    // 32 tokens each, and the threads sampled before the first wait: 8-token streams could all end
    // before the first sample on a fast machine, leaving no dispatcher to see (1 run in 5).
    try (RequestOptions ro = prompt(32)) {
      ro.setIgnoreEos(true);
      for (int i = 0; i < 64; ++i) requests.add(session.submit(ro));
      for (int i = 0; i < 64; ++i) {
        final int index = i;
        final StringBuilder text = new StringBuilder();
        texts.put(i, text);
        if (i < 48) {
          requests.get(i).publisher(executor).subscribe(new java.util.concurrent.Flow.Subscriber<String>() {
            public void onSubscribe(java.util.concurrent.Flow.Subscription s) { s.request(Long.MAX_VALUE); }
            public void onNext(String chunk) {
              deliveredOn.add(Thread.currentThread().getName());
              synchronized (text) { text.append(chunk); }
            }
            public void onError(Throwable e) { fail(index + ": " + e); }
            public void onComplete() { done.countDown(); }
          });
        } else {
          requests.get(i).completion(executor).thenAccept(r -> {
            deliveredOn.add(Thread.currentThread().getName());
            synchronized (text) { text.append(r.outputText()); }
            done.countDown();
          });
        }
      }
      int peak = 0;
      java.util.Set<Long> dispatchers = new java.util.HashSet<>();
      do {
        peak = Math.max(peak, Thread.activeCount());
        for (Thread t : Thread.getAllStackTraces().keySet()) {
          if (t.getName().equals("llm42-dispatcher")) dispatchers.add(t.getId());
        }
      } while (!done.await(2, java.util.concurrent.TimeUnit.MILLISECONDS));
      assertEquals(1, dispatchers.size());  // one thread served them all (it ends with the last stream)
      assertTrue("threads grew by " + (peak - before), peak - before <= 1);
      assertEquals(java.util.Set.of("test-executor"), deliveredOn);
      int[] want = Arrays.copyOf(expected(), 32);
      for (int i = 0; i < 64; ++i) {
        assertArrayEquals(want, requests.get(i).outputTokens());
        synchronized (texts.get(i)) { assertEquals(requests.get(i).outputText(), texts.get(i).toString()); }
      }
    } finally {
      for (Request r : requests) r.close();
      executor.shutdown();
    }
  }

  // A SessionLoader creates a session without blocking: polled, its progress never goes back and
  // ends at 1, and the session it gives generates llama.cpp's greedy tokens.
  @Test
  public void aSessionLoadsWithoutBlocking() throws Exception {
    try (SessionOptions so = new SessionOptions()) {
      so.setModelPath(MODEL);
      so.setThreads(1);
      try (SessionLoader loader = new SessionLoader(so)) {
        float last = 0;
        while (!loader.waitFor(0)) {
          float now = loader.progress();
          assertTrue(now >= last && now < 1);
          last = now;
          Thread.sleep(1);
        }
        assertEquals(1f, loader.progress(), 0f);
        try (Session loaded = loader.take(); RequestOptions ro = prompt(8)) {
          ro.setIgnoreEos(true);
          try (Request r = loaded.submit(ro)) {
            assertTrue(r.waitFor(60000));
            assertArrayEquals(Arrays.copyOf(expected(), 8), r.outputTokens());
          }
        }
      }
    }
  }

  // Request is an Iterable<String> over the streamed text, and completes as a future.
  @Test
  public void iteratesAndCompletes() throws Exception {
    try (RequestOptions ro = prompt(16); Request r = session.submit(ro)) {
      StringBuilder streamed = new StringBuilder();
      for (String piece : r) streamed.append(piece);
      assertEquals(r.outputText(), streamed.toString());
      assertTrue(r.completion().get().isFinished());
    }
  }

  @Test
  public void logGoesToTheHost() {
    ai.llm42.llm42.setLogLevel(1);  // info
    ai.llm42.llm42.captureLog(true);
    try {
      while (ai.llm42.llm42.logMessageLevel() >= 0) ai.llm42.llm42.takeLogMessage();
      open(Mode.SELECTIVE, MODEL).close();
      boolean loaded = false;
      for (int level; (level = ai.llm42.llm42.logMessageLevel()) >= 0;) {
        String text = ai.llm42.llm42.takeLogMessage();
        loaded |= level == 1 && text.contains("loaded");
      }
      assertTrue(loaded);
    } finally {
      ai.llm42.llm42.captureLog(false);
      ai.llm42.llm42.setLogLevel(2);
    }
  }

  @Test
  public void libraryFunctionsAndReadTokens() {
    assertEquals(2, ai.llm42.llm42.versionString().chars().filter(c -> c == '.').count());
    assertEquals("LLM42_NOT_FOUND", ai.llm42.llm42.statusName(Status.NOT_FOUND));
    ai.llm42.llm42.setLogLevel(2);
    try (Determinism policy = new Determinism(Mode.SELECTIVE)) {
      policy.setDecodePath(ai.llm42.DecodePath.FIXED);
    }
    try (RequestOptions ro = prompt(12); Request r = session.submit(ro)) {
      java.util.List<Integer> ids = new java.util.ArrayList<>();
      for (int[] chunk; (chunk = r.readTokens(0)) != null;) for (int id : chunk) ids.add(id);
      assertArrayEquals(r.outputTokens(), ids.stream().mapToInt(Integer::intValue).toArray());
      assertEquals(null, r.readTokens(-1));
    }
  }

  // Three most likely tokens per position, most likely first.
  @Test
  public void logprobsAndTopLogprobs() {
    try (RequestOptions ro = turn("Once upon a time")) {
      ro.setLogprobs(true);
      ro.setTopLogprobs(3);
      ro.setPromptLogprobs(true);
      try (Request r = session.submit(ro)) {
        assertTrue(r.waitFor(-1));
        assertEquals(session.tokenize("Once upon a time", true).length - 1, r.promptLogprobs().length);
        int[] tokens = r.outputTokens();
        float[] logprobs = r.logprobs();
        int[] ids = r.topLogprobTokens();
        float[] values = r.topLogprobValues();
        assertEquals(tokens.length, logprobs.length);
        assertEquals(3 * tokens.length, ids.length);
        assertEquals(3 * tokens.length, values.length);
        for (int i = 0; i < tokens.length; ++i) {
          assertTrue(values[3 * i] >= values[3 * i + 1] && values[3 * i + 1] >= values[3 * i + 2]);
        }
      }
    }
    try (RequestOptions ro = prompt(4)) {
      ro.setTopLogprobs(21);
      fail("21 top logprobs were accepted");
    } catch (Llm42Exception e) {
      assertEquals(Status.OUT_OF_RANGE, e.getStatus());
    }
  }

  // A deterministic request's receipt (byte[]) is reproduced by another session; a damaged one
  // throws FORMAT_ERROR; another KV type is another schedule, with a reason.
  @Test
  public void receiptsReplayAndRefuseDamage() {
    assertEquals(64, session.fingerprint().length());
    byte[] receipt;
    try (RequestOptions ro = turn("Once upon a time"); Request r = session.submit(ro)) {
      assertTrue(r.waitFor(-1));
      receipt = r.receipt();
    }
    try (Session other = open(Mode.SELECTIVE, MODEL)) {
      try (ReceiptCheck check = other.verifyReceipt(receipt)) {
        assertTrue(check.reproduced());
        assertEquals(ReceiptOutcome.REPRODUCED, check.outcome());
        assertEquals(-1, check.firstDifference());
      }
      byte[] damaged = receipt.clone();
      damaged[damaged.length / 2] ^= 4;
      try {
        other.verifyReceipt(damaged);
        fail("a damaged receipt was accepted");
      } catch (Llm42Exception e) {
        assertEquals(Status.FORMAT_ERROR, e.getStatus());
      }
    }
    try (SessionOptions so = new SessionOptions()) {
      so.setModelPath(MODEL);
      so.setThreads(1);
      so.setKvDtype("f16");
      so.setKvPrefault(true);  // resident KV changes no output: the KV type alone differs
      try (Session f16 = new Session(so); ReceiptCheck check = f16.verifyReceipt(receipt)) {
        assertEquals(ReceiptOutcome.OTHER_SCHEDULE, check.outcome());
        assertTrue(check.detail().contains("KV type"));
      }
    }
  }

  // A newer libllm42 may add statuses: the exception keeps the code instead of throwing.
  @Test
  public void unknownStatusCodesDoNotBreakTheException() {
    Llm42Exception e = new Llm42Exception(999, "from the future");
    assertEquals(null, e.getStatus());
    assertEquals(999, e.getCode());
    assertTrue(e.getMessage().contains("999"));
    assertEquals(Status.UNSUPPORTED, new Llm42Exception(5, "x").getStatus());
  }

  // A cancelled request's stream ends by throwing CancellationException (iteration, readTokens,
  // completion()), and status() is PENDING while it runs. Checked to fail with the SWIG layer's
  // CheckEnded removed (the iteration then ends normally).
  @Test
  public void aCancelledStreamThrowsAtItsEnd() throws Exception {
    try (RequestOptions ro = prompt(1900)) {
      ro.setIgnoreEos(true);
      try (Request r = session.submit(ro)) {
        assertEquals(Status.PENDING, r.status());
        assertTrue(r.readText(-1) != null);
        r.cancel();
        assertThrows(java.util.concurrent.CancellationException.class, () -> {
          for (String chunk : r) assertTrue(chunk != null);
        });
        assertThrows(java.util.concurrent.CancellationException.class, () -> {
          while (true) r.readTokens(0);  // after the tokens readTokens has not given yet
        });
        assertEquals(Status.CANCELLED, r.status());
        java.util.concurrent.ExecutionException e =
            assertThrows(java.util.concurrent.ExecutionException.class, () -> r.completion().get());
        assertTrue(e.getCause() instanceof java.util.concurrent.CancellationException);
      }
    }
  }

  // Requests made to fail after 3 tokens (the C testing hook, TestingHooks): iteration, the
  // publisher and completion() end with Llm42Exception(INTERNAL) and the failure's message.
  // Checked to fail with the SWIG layer's CheckEnded emptied (the streams then end quietly).
  @Test
  public void aFailedStreamThrowsAtItsEnd() throws Throwable {
    assertEquals(0, TestingHooks.failRequestsAfter(3));
    try (RequestOptions ro = prompt(32)) {
      ro.setIgnoreEos(true);
      try (Request r = session.submit(ro)) {
        Llm42Exception e = assertThrows(Llm42Exception.class, () -> {
          for (String chunk : r) assertTrue(chunk != null);
        });
        assertEquals(Status.INTERNAL, e.getStatus());
        assertTrue(e.getMessage(), e.getMessage().contains("injected failure"));
        assertEquals(FinishReason.ERROR, r.finishReason());
      }
      try (Request r = session.submit(ro)) {
        java.util.concurrent.CompletableFuture<Throwable> error = new java.util.concurrent.CompletableFuture<>();
        r.publisher().subscribe(new java.util.concurrent.Flow.Subscriber<String>() {
          public void onSubscribe(java.util.concurrent.Flow.Subscription s) { s.request(Long.MAX_VALUE); }
          public void onNext(String chunk) {}
          public void onError(Throwable t) { error.complete(t); }
          public void onComplete() { error.complete(null); }
        });
        Throwable t = error.get(60, java.util.concurrent.TimeUnit.SECONDS);
        assertTrue(String.valueOf(t), t instanceof Llm42Exception);
        assertEquals(Status.INTERNAL, ((Llm42Exception) t).getStatus());
      }
      try (Request r = session.submit(ro)) {
        java.util.concurrent.ExecutionException e =
            assertThrows(java.util.concurrent.ExecutionException.class, () -> r.completion().get(60, java.util.concurrent.TimeUnit.SECONDS));
        assertTrue(String.valueOf(e.getCause()), e.getCause() instanceof Llm42Exception);
        assertEquals(Status.INTERNAL, ((Llm42Exception) e.getCause()).getStatus());
      }
    } finally {
      TestingHooks.failRequestsAfter(0);
    }
  }

  // Cancelling completion()'s future cancels the request.
  @Test
  public void cancellingTheFutureCancelsTheRequest() throws Exception {
    try (RequestOptions ro = prompt(1900)) {
      ro.setIgnoreEos(true);
      try (Request r = session.submit(ro)) {
        assertTrue(r.completion().cancel(true));
        assertTrue(r.waitFor(60000));
        assertEquals(Status.CANCELLED, r.status());
      }
    }
  }

  // Seeds are unsigned 64-bit in a long: one above 2^63 (negative as a signed long) round-trips.
  @Test
  public void seedsTakeAll64Bits() {
    long high = Long.parseUnsignedLong("18446744073709551611");  // 2^64 - 5
    try (RequestOptions ro = prompt(4)) {
      ro.setTemperature(0.9f);
      ro.setSeed(high);
      try (Request r = session.submit(ro)) {
        assertEquals("18446744073709551611", Long.toUnsignedString(r.effectiveSeed()));
      }
    }
  }

  // Session.generate is the streamed text in one call; what submit refuses throws.
  @Test
  public void generateIsTheStreamedText() {
    try (RequestOptions ro = prompt(24)) {
      String streamed;
      try (Request r = session.submit(ro)) {
        StringBuilder b = new StringBuilder();
        for (String piece : r) b.append(piece);
        streamed = b.toString();
      }
      assertEquals(streamed, session.generate(ro));
    }
    try (RequestOptions empty = new RequestOptions()) {
      assertStatus(Status.INVALID_ARGUMENT, () -> session.generate(empty));
    }
  }

  @Test
  public void deterministicRequestsRepeatAndSeedMatters() {
    int[] first = deterministic(7);
    assertArrayEquals(first, deterministic(7));
    assertFalse(Arrays.equals(first, deterministic(8)));  // sensitivity control
  }

  @Test
  public void cancelFromAnotherThread() throws Exception {
    try (RequestOptions ro = prompt(1000)) {
      ro.setIgnoreEos(true);
      try (Request r = session.submit(ro)) {
        Thread t = new Thread(r::cancel);
        t.start();
        assertTrue(r.waitFor(-1));
        t.join();
        assertEquals(Status.CANCELLED, r.status());
        assertEquals(FinishReason.CANCELLED, r.finishReason());
        assertTrue(r.outputTokens().length < 1000);
      }
    }
  }

  @Test
  public void closeWhileAnotherThreadReads() throws Exception {
    // close() lands while a reader thread is inside readText(-1): the request is cancelled, its
    // handle freed once the reader's call returns, and the reader's loop ends with the stream's
    // end or FAILED_PRECONDITION (bindings/swig/handle_box.h). Bindings that destroyed the handle
    // at once crashed the JVM here.
    for (int attempt = 0; attempt < 12; ++attempt) {
      Request r;
      try (RequestOptions ro = prompt(900)) {
        ro.setIgnoreEos(true);
        r = session.submit(ro);
      }
      java.util.concurrent.atomic.AtomicReference<Object> ended = new java.util.concurrent.atomic.AtomicReference<>();
      Thread reader = new Thread(() -> {
        try {
          for (String chunk : r) {
            assertTrue(chunk != null);
          }
          ended.set("end");
        } catch (Llm42Exception e) {
          ended.set(e.getStatus());
        } catch (java.util.concurrent.CancellationException e) {  // closing cancels the request
          ended.set(Status.CANCELLED);
        }
      });
      reader.start();
      Thread.sleep(attempt % 4);
      r.close();
      reader.join(60000);
      assertFalse(reader.isAlive());
      assertTrue(String.valueOf(ended.get()), "end".equals(ended.get()) || ended.get() == Status.CANCELLED
                                                  || ended.get() == Status.FAILED_PRECONDITION);
      assertStatus(Status.FAILED_PRECONDITION, r::isFinished);
    }
  }

  @Test
  public void readTextWithZeroTimeoutNeverBlocks() {
    try (RequestOptions ro = prompt(4); Request r = session.submit(ro)) {
      // A zero-timeout frame loop: "" is a quiet frame, null the end; nothing is lost.
      StringBuilder streamed = new StringBuilder();
      for (String piece; (piece = r.readText(0)) != null;) streamed.append(piece);
      assertEquals(r.outputText(), streamed.toString());
      assertEquals(null, r.readText(0));
      assertEquals(null, r.readText(-1));
    }
  }

  @Test
  public void errorPathsThrowTheirStatus() {
    assertStatus(Status.NOT_FOUND, () -> open(Mode.SELECTIVE, MODEL + ".missing"));
    try (SessionOptions so = new SessionOptions()) {
      assertStatus(Status.OUT_OF_RANGE, () -> so.setThreads(-1));
    }
    try (Determinism d = new Determinism(Mode.SELECTIVE)) {
      assertStatus(Status.OUT_OF_RANGE, () -> d.setWindow(0));
    }
    try (RequestOptions ro = new RequestOptions()) {
      assertStatus(Status.OUT_OF_RANGE, () -> ro.setMaxTokens(0));
      ro.setPromptTokens(new int[] {1, 999999});
      assertStatus(Status.INVALID_ARGUMENT, () -> session.submit(ro));
    }
    try (RequestOptions ro = new RequestOptions()) {
      ro.addMessage("user", "Hi");  // stories260K has no chat format
      assertStatus(Status.UNSUPPORTED, () -> session.submit(ro));
    }
    try (Session off = open(Mode.OFF, MODEL); RequestOptions ro = prompt(4)) {
      ro.setDeterministic(true);
      assertStatus(Status.UNSUPPORTED, () -> off.submit(ro));
    }
    Session closed = open(Mode.SELECTIVE, MODEL);
    closed.close();
    assertStatus(Status.FAILED_PRECONDITION, () -> closed.tokenize("x", false));
    closed.close();  // twice is harmless
  }

  @Test
  public void unclosedSessionsAreFreedWhenCollected() throws Exception {
    long baseline = modelMappings();
    for (int i = 0; i < 20; ++i) open(Mode.SELECTIVE, MODEL);  // never closed
    assertTrue(modelMappings() >= baseline + 20);
    for (int i = 0; i < 100 && modelMappings() > baseline; ++i) {
      System.gc();
      Thread.sleep(50);
    }
    assertEquals(baseline, modelMappings());
  }

  @Test
  public void noLeakOver200CreateCloseCycles() throws Exception {
    long baseline = modelMappings();
    int threads = new File("/proc/self/task").list().length;
    for (int i = 0; i < 200; ++i) {
      try (Session s = open(Mode.SELECTIVE, MODEL); RequestOptions ro = prompt(2); Request r = s.submit(ro)) {
        assertTrue(r.waitFor(-1));
      }
    }
    assertEquals(baseline, modelMappings());
    assertTrue(new File("/proc/self/task").list().length <= threads + 2);
  }
}
