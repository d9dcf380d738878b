// The C testing hooks (include/llm42/llm42_testing.h), which the Java binding does not wrap,
// called directly through JDK 17's foreign linker (jdk.incubator.foreign): the library is already
// loaded with the binding's JNI library, whose dependencies the loader lookup searches. Compiled
// apart from the tests (the incubator module draws a warning), run with
// --add-modules jdk.incubator.foreign --enable-native-access=ALL-UNNAMED.
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodType;
import jdk.incubator.foreign.CLinker;
import jdk.incubator.foreign.FunctionDescriptor;
import jdk.incubator.foreign.SymbolLookup;

public final class TestingHooks {
  private TestingHooks() {}

  // llm42_testing_fail_requests_after: requests fail with INTERNAL after `tokens` tokens (0: off).
  public static int failRequestsAfter(int tokens) throws Throwable {
    MethodHandle h = CLinker.getInstance().downcallHandle(
        SymbolLookup.loaderLookup().lookup("llm42_testing_fail_requests_after").orElseThrow(),
        MethodType.methodType(int.class, int.class), FunctionDescriptor.of(CLinker.C_INT, CLinker.C_INT));
    return (int) h.invokeExact(tokens);
  }
}
