package ai.llm42;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Loads llm42's native libraries. The jar carries them under ai/llm42/natives/PLATFORM/ (with
 * libs.txt naming them in load order: libllm42 before the JNI library that needs it); they are
 * extracted to a temporary folder and loaded from there, so the jar alone is the dependency.
 * A jar built without them, or for another platform, falls back to java.library.path.
 */
final class Llm42NativeLoader {
  private Llm42NativeLoader() {}

  static String platform() {
    String os = System.getProperty("os.name", "").toLowerCase(java.util.Locale.ROOT);
    String arch = System.getProperty("os.arch", "").toLowerCase(java.util.Locale.ROOT);
    if (arch.equals("amd64") || arch.equals("x86_64")) arch = "x86_64";
    if (arch.equals("arm64")) arch = "aarch64";
    if (os.startsWith("linux")) os = "linux";
    if (os.startsWith("windows")) os = "windows";  // "Windows 10", "Windows 11", "Windows Server 2022"
    return os.replace(' ', '_') + "-" + arch;
  }

  static void load() {
    String dir = "/ai/llm42/natives/" + platform() + "/";
    List<String> libs = new ArrayList<>();
    try (InputStream index = Llm42NativeLoader.class.getResourceAsStream(dir + "libs.txt")) {
      if (index == null) {
        System.loadLibrary("llm42_jni");
        return;
      }
      BufferedReader reader = new BufferedReader(new InputStreamReader(index, StandardCharsets.UTF_8));
      for (String line; (line = reader.readLine()) != null;) {
        if (!line.isBlank()) libs.add(line.trim());
      }
    } catch (IOException e) {
      throw new UnsatisfiedLinkError("cannot read llm42's native library index: " + e);
    }
    try {
      Path tmp = Files.createTempDirectory("llm42-natives");
      tmp.toFile().deleteOnExit();
      for (String lib : libs) {
        Path file = tmp.resolve(lib);
        try (InputStream in = Llm42NativeLoader.class.getResourceAsStream(dir + lib)) {
          if (in == null) throw new UnsatisfiedLinkError("the jar lacks " + dir + lib);
          Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
        }
        file.toFile().deleteOnExit();
        System.load(file.toAbsolutePath().toString());
      }
    } catch (IOException e) {
      throw new UnsatisfiedLinkError("cannot extract llm42's native libraries: " + e);
    }
  }
}
