package ai.llm42;

/** The Cleaner that frees native handles of llm42 objects garbage-collected without close(). */
final class Llm42Cleaner {
  static final java.lang.ref.Cleaner CLEANER = java.lang.ref.Cleaner.create();

  private Llm42Cleaner() {}
}
