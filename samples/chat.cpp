// A chat REPL through the C++ RAII wrapper: `chat_cpp MODEL [SYSTEM]`, one user message per
// line of stdin; the conversation is kept and every answer streams as it is verified.
#include <iostream>
#include <string>
#include <utility>
#include <vector>

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
    std::vector<std::pair<std::string, std::string>> conversation;
    if (argc > 2) conversation.emplace_back("system", argv[2]);
    for (std::string line; std::getline(std::cin, line);) {
      conversation.emplace_back("user", line);
      llm42::api::RequestOptions request;
      for (const auto& [role, content] : conversation) request.AddMessage(role, content);
      request.SetMaxTokens(64).SetDeterministic(true);
      llm42::api::Request r = session.Submit(request);
      std::string answer;
      for (std::string piece; !(piece = r.ReadText(-1)).empty();) {
        answer += piece;
        std::cout << piece << std::flush;
      }
      std::cout << "\n";
      conversation.emplace_back("assistant", answer);
    }
    return 0;
  } catch (const llm42::api::Error& e) {
    std::cerr << "chat_cpp: " << e.what() << "\n";
    return 1;
  }
}
