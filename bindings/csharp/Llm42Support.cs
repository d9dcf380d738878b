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

}  // namespace Llm42
