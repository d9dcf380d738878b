package ai.llm42;

/** An llm42 call failed; {@link #getStatus()} says how, {@link #getMessage()} why. */
public class Llm42Exception extends RuntimeException {
  private final int code;

  public Llm42Exception(int code, String message) {
    super(Status.swigToEnum(code) + ": " + message);
    this.code = code;
  }

  public Status getStatus() {
    return Status.swigToEnum(code);
  }

  public int getCode() {
    return code;
  }
}
