// Streams a deterministic completion through the C# binding: Stream.exe MODEL [PROMPT].
using System;
using Llm42;

class Stream {
  static int Main(string[] args) {
    string prompt = args.Length > 1 ? args[1] : "Once upon a time";
    try {
      using (var options = new SessionOptions()) {
        options.SetModelPath(args[0]);
        using (var session = new Session(options))
        using (var request = new RequestOptions()) {
          request.SetPrompt(prompt);
          request.SetMaxTokens(64);
          request.SetDeterministic(true);
          Console.Write(prompt);
          using (var r = session.Submit(request)) {
            for (string text; (text = r.ReadText(-1)) != null;) Console.Write(text);
          }
          Console.WriteLine();
        }
      }
      return 0;
    } catch (Llm42Exception e) {
      Console.Error.WriteLine("Stream: " + e.Message);
      return 1;
    }
  }
}
