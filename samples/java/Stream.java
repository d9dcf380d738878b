import ai.llm42.*;

/** Streams a deterministic completion through the Java binding: Stream MODEL [PROMPT]. */
public class Stream {
  public static void main(String[] args) {
    String prompt = args.length > 1 ? args[1] : "Once upon a time";
    try (SessionOptions options = new SessionOptions()) {
      options.setModelPath(args[0]);
      try (Session session = new Session(options); RequestOptions request = new RequestOptions()) {
        request.setPrompt(prompt);
        request.setMaxTokens(64);
        request.setDeterministic(true);
        System.out.print(prompt);
        try (Request r = session.submit(request)) {
          for (String text : r) System.out.print(text);
        }
        System.out.println();
      }
    } catch (Llm42Exception e) {
      System.err.println("Stream: " + e.getMessage());
      System.exit(1);
    }
  }
}
