package ai.llm42;

/**
 * Serves every asynchronous stream of one session (Request.publisher, Request.completion) from
 * one thread, which runs while any stream is open: it waits on a Watcher for the requests with news and runs their streams, which read
 * without waiting and hand the results to the caller's Executor. So a thousand publishers cost one
 * thread, and neither an llm42 thread nor this one runs the caller's code.
 */
final class Llm42Dispatcher {
  /** One stream's reaction to news of its request, on the dispatcher thread; true once it ended. */
  interface Stream {
    boolean onNews();
  }

  private static final class Entry {
    final Request request;
    final java.util.List<Stream> streams = new java.util.ArrayList<>();

    Entry(Request request) {
      this.request = request;
    }
  }

  private final Watcher watcher = new Watcher();
  private final Object lock = new Object();
  private final java.util.IdentityHashMap<Request, Integer> tags = new java.util.IdentityHashMap<>();
  private final java.util.HashMap<Integer, Entry> entries = new java.util.HashMap<>();
  private int nextTag;
  private boolean running;  // a thread serves the streams; it ends when the last one has ended

  /** Runs `stream` at each news of `request` (at once when it has some already) until it ends. */
  void open(Request request, Stream stream) {
    int tag;
    synchronized (lock) {
      Integer known = tags.get(request);
      if (known == null) {
        known = nextTag;
        nextTag = (nextTag + 1) & 0x7FFFFFFF;
        tags.put(request, known);
        entries.put(known, new Entry(request));
      }
      entries.get(known).streams.add(stream);
      tag = known;
      if (!running) {
        running = true;
        Thread thread = new Thread(this::run, "llm42-dispatcher");
        thread.setDaemon(true);
        thread.start();
      }
    }
    try {
      watcher.add(request, tag);
    } catch (RuntimeException e) {  // the request was closed meanwhile
      ended(tag, stream);
      throw e;
    }
  }

  private void ended(int tag, Stream stream) {
    Request done = null;
    synchronized (lock) {
      Entry entry = entries.get(tag);
      if (entry == null) return;
      entry.streams.remove(stream);
      if (entry.streams.isEmpty()) {
        entries.remove(tag);
        tags.remove(entry.request);
        done = entry.request;
      }
    }
    if (done == null) return;
    try {
      watcher.remove(done);
    } catch (Llm42Exception e) {
      // the request was closed: it reports to nobody now
    }
  }

  private void run() {
    for (;;) {
      int[] tags;
      try {
        tags = watcher.waitForNews(-1);
      } catch (Llm42Exception e) {  // the watcher is gone (the dispatcher was collected)
        return;
      }
      for (int tag : tags) {
        java.util.List<Stream> streams;
        synchronized (lock) {
          Entry entry = entries.get(tag);
          streams = entry == null ? java.util.List.of() : new java.util.ArrayList<>(entry.streams);
        }
        for (Stream stream : streams) {
          boolean ended = true;
          try {
            ended = stream.onNews();
          } catch (RuntimeException e) {
            // a stream's failure ends that stream only
          }
          if (ended) ended(tag, stream);
        }
      }
      synchronized (lock) {
        if (entries.isEmpty()) {
          running = false;
          return;
        }
      }
    }
  }
}
