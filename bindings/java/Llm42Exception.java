package ai.llm42;

/** An llm42 call failed; {@link #getStatus()} says how, {@link #getMessage()} why. */
public class Llm42Exception extends RuntimeException {
  private final int code;

  public Llm42Exception(int code, String message) {
    super(name(code) + ": " + message);
    this.code = code;
  }

  /** The status, or null for a code newer than these bindings ({@link #getCode()} has it). */
  public Status getStatus() {
    try {
      return Status.swigToEnum(code);
    } catch (IllegalArgumentException unknown) {
      return null;
    }
  }

  public int getCode() {
    return code;
  }

  private static String name(int code) {
    try {
      return Status.swigToEnum(code).toString();
    } catch (IllegalArgumentException unknown) {
      return "status " + code;
    }
  }
}
