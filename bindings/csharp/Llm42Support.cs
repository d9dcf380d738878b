// Hand-written support for the SWIG-generated C# binding: the exception type and the explicit
// UTF-8 / array marshalling the typemaps in llm42_csharp.i call.
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Llm42 {

/// <summary>An llm42 call failed: <see cref="Status"/> says how, Message why.</summary>
public class Llm42Exception : Exception {
  public Llm42Exception(Status status, string message) : base(status + ": " + message) {
    Status = status;
  }

  public Status Status { get; }
}

internal static class Llm42Native {
  const string Lib = "llm42_csharp";
  [DllImport(Lib)] static extern int llm42_cs_string_size(IntPtr s);
  [DllImport(Lib)] static extern IntPtr llm42_cs_string_data(IntPtr s);
  [DllImport(Lib)] static extern void llm42_cs_string_free(IntPtr s);
  [DllImport(Lib)] static extern int llm42_cs_ints_size(IntPtr v);
  [DllImport(Lib)] static extern IntPtr llm42_cs_ints_data(IntPtr v);
  [DllImport(Lib)] static extern void llm42_cs_ints_free(IntPtr v);
  [DllImport(Lib)] static extern int llm42_cs_floats_size(IntPtr v);
  [DllImport(Lib)] static extern IntPtr llm42_cs_floats_data(IntPtr v);
  [DllImport(Lib)] static extern void llm42_cs_floats_free(IntPtr v);

  internal static byte[] ToUtf8Z(string s) {
    if (s == null) return null;
    byte[] bytes = new byte[Encoding.UTF8.GetByteCount(s) + 1];
    Encoding.UTF8.GetBytes(s, 0, s.Length, bytes, 0);
    return bytes;
  }

  internal static string TakeString(IntPtr s) {
    if (s == IntPtr.Zero) return null;
    try {
      byte[] bytes = new byte[llm42_cs_string_size(s)];
      Marshal.Copy(llm42_cs_string_data(s), bytes, 0, bytes.Length);
      return Encoding.UTF8.GetString(bytes);
    } finally {
      llm42_cs_string_free(s);
    }
  }

  internal static byte[] TakeBytes(IntPtr s) {
    if (s == IntPtr.Zero) return null;
    try {
      byte[] bytes = new byte[llm42_cs_string_size(s)];
      Marshal.Copy(llm42_cs_string_data(s), bytes, 0, bytes.Length);
      return bytes;
    } finally {
      llm42_cs_string_free(s);
    }
  }

  internal static byte[] BytesWithLength(byte[] a) {
    if (a == null) return null;
    byte[] r = new byte[a.Length + 4];
    r[0] = (byte)a.Length;
    r[1] = (byte)(a.Length >> 8);
    r[2] = (byte)(a.Length >> 16);
    r[3] = (byte)(a.Length >> 24);
    Array.Copy(a, 0, r, 4, a.Length);
    return r;
  }

  internal static int[] WithLength(int[] a) {
    if (a == null) return null;
    int[] r = new int[a.Length + 1];
    r[0] = a.Length;
    Array.Copy(a, 0, r, 1, a.Length);
    return r;
  }

  internal static float[] TakeFloats(IntPtr v) {
    if (v == IntPtr.Zero) return null;
    try {
      float[] a = new float[llm42_cs_floats_size(v)];
      if (a.Length > 0) Marshal.Copy(llm42_cs_floats_data(v), a, 0, a.Length);
      return a;
    } finally {
      llm42_cs_floats_free(v);
    }
  }

  internal static int[] TakeInts(IntPtr v) {
    if (v == IntPtr.Zero) return null;
    try {
      int[] a = new int[llm42_cs_ints_size(v)];
      if (a.Length > 0) Marshal.Copy(llm42_cs_ints_data(v), a, 0, a.Length);
      return a;
    } finally {
      llm42_cs_ints_free(v);
    }
  }
}

/// <summary>Serves every asynchronous stream of one session (ReadTextAsync, await foreach,
/// CompletionAsync) from one thread, which runs while any stream is open: it waits on a Watcher for the requests with news and runs
/// their streams, which read without waiting and complete TaskCompletionSources whose
/// continuations run asynchronously. So a thousand awaited streams cost one thread, and neither an
/// llm42 thread nor this one runs the caller's code (Unity's IL2CPP asks for that).</summary>
internal sealed class Llm42Dispatcher {
  sealed class Entry {
    internal readonly Request Request;
    internal readonly System.Collections.Generic.List<Func<bool>> Streams = new System.Collections.Generic.List<Func<bool>>();
    internal Entry(Request request) { Request = request; }
  }

  readonly Watcher watcher = new Watcher();
  readonly object gate = new object();
  readonly System.Collections.Generic.Dictionary<Request, int> tags = new System.Collections.Generic.Dictionary<Request, int>();
  readonly System.Collections.Generic.Dictionary<int, Entry> entries = new System.Collections.Generic.Dictionary<int, Entry>();
  int nextTag;
  bool running;  // a thread serves the streams; it ends when the last one has ended

  /// <summary>Runs <paramref name="stream"/> at each news of the request (at once when it has some
  /// already) until it returns true.</summary>
  internal void Open(Request request, Func<bool> stream) {
    int tag;
    lock (gate) {
      if (!tags.TryGetValue(request, out tag)) {
        tag = nextTag;
        nextTag = (nextTag + 1) & 0x7FFFFFFF;
        tags[request] = tag;
        entries[tag] = new Entry(request);
      }
      entries[tag].Streams.Add(stream);
      if (!running) {
        running = true;
        var thread = new System.Threading.Thread(Run);
        thread.IsBackground = true;
        thread.Name = "llm42-dispatcher";
        thread.Start();
      }
    }
    try {
      watcher.Add(request, tag);
    } catch (Exception) {  // the request was disposed meanwhile
      Ended(tag, stream);
      throw;
    }
  }

  void Ended(int tag, Func<bool> stream) {
    Request done = null;
    lock (gate) {
      Entry entry;
      if (!entries.TryGetValue(tag, out entry)) return;
      entry.Streams.Remove(stream);
      if (entry.Streams.Count == 0) {
        entries.Remove(tag);
        tags.Remove(entry.Request);
        done = entry.Request;
      }
    }
    if (done == null) return;
    try {
      watcher.Remove(done);
    } catch (Llm42Exception) {
      // the request was disposed: it reports to nobody now
    }
  }

  void Run() {
    for (;;) {
      int[] tags;
      try {
        // Not -1: a thread inside a native call holds up Mono's exit, background or not; this
        // one returns to managed code at least every 200 ms.
        tags = watcher.Wait(200);
      } catch (Exception) {  // the watcher is gone (the dispatcher was collected)
        return;
      }
      foreach (int tag in tags) {
        Func<bool>[] streams;
        lock (gate) {
          Entry entry;
          streams = entries.TryGetValue(tag, out entry) ? entry.Streams.ToArray() : new Func<bool>[0];
        }
        foreach (var stream in streams) {
          bool ended = true;
          try {
            ended = stream();
          } catch (Exception) {
            // a stream's failure ends that stream only
          }
          if (ended) Ended(tag, stream);
        }
      }
      lock (gate) {
        if (entries.Count == 0) {
          running = false;
          return;
        }
      }
    }
  }
}

}  // namespace Llm42
