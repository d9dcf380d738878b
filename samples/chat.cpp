// A chat REPL through the C++ RAII wrapper: `chat_cpp MODEL [SYSTEM]`, one user message per
// line of stdin; every answer streams as it is verified. Each turn continues the previous one
// (SetParent), so the conversation's history is taken from the prefix cache, not prefilled again.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "llm42/llm42.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " MODEL [SYSTEM]\n";
    return 2;
  }
  try {
    llm42::api::SessionOptions options;
    options.SetModelPath(argv[1]);
    llm42::api::Session session(options);
    std::unique_ptr<llm42::api::Request> last;  // the conversation so far
    for (std::string line; std::getline(std::cin, line);) {
      llm42::api::RequestOptions request;
      if (last) {
        request.SetParent(*last);
      } else if (argc > 2) {
        request.AddMessage("system", argv[2]);
      }
      request.AddMessage("user", line).SetMaxTokens(64).SetDeterministic(true);
      auto r = std::make_unique<llm42::api::Request>(session.Submit(request));
      while (std::optional<std::string> piece = r->ReadText(-1)) std::cout << *piece << std::flush;
      std::cout << "\n";
      last = std::move(r);
    }
    return 0;
  } catch (const llm42::api::Error& e) {
    std::cerr << "chat_cpp: " << e.what() << "\n";
    return 1;
  }
}
