// `llm42 bench-template --template FILE`: what rendering a chat template costs (issue 58's bound:
// a 20-turn conversation with 10 tools in 1 ms). The conversation: a system message, --turns
// user/assistant turns (every third assistant turn a tool call answered by a tool message), and
// --tools tools of three parameters each, rendered with the generation prompt --rounds times
// through ChatTemplate::Apply (the parse of the messages and options included, as
// llm42_session_apply_chat_template pays it); prints the median and the slowest render.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "lib/chat/chat_template.h"
#include "nlohmann/json.hpp"
#include "tools/llm42/commands.h"

ABSL_DECLARE_FLAG(int32_t, turns);
ABSL_FLAG(std::string, template_file, "", "bench-template: a Jinja chat template");
ABSL_FLAG(int32_t, tools, 10, "bench-template: tools offered");
ABSL_FLAG(int32_t, render_rounds, 200, "bench-template: renders timed");

namespace llm42::cli {

int BenchTemplate() {
  const std::string path = absl::GetFlag(FLAGS_template_file);
  const std::optional<std::string> bytes_in = path.empty() ? std::nullopt : ReadFileBytes(path);
  if (!bytes_in) {
    std::cerr << "llm42 bench-template: --template_file FILE (a readable Jinja chat template) is required\n";
    return 2;
  }
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromModel(*bytes_in, false, false);
  if (!t.ok()) {
    std::cerr << "llm42 bench-template: " << t.status().message() << "\n";
    return 1;
  }
  using Json = nlohmann::ordered_json;
  Json messages = Json::array({{{"role", "system"}, {"content", "You are the innkeeper of a small village. Be brief."}}});
  for (int i = 0; i < absl::GetFlag(FLAGS_turns); ++i) {
    messages.push_back({{"role", "user"}, {"content", "Traveller's question number " + std::to_string(i) + ": what now?"}});
    if (i % 3 == 2) {
      const std::string id = "call_" + std::to_string(i);
      messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", Json::array({{{"id", id}, {"type", "function"},
        {"function", {{"name", "tool_0"}, {"arguments", R"({"place": "tower", "count": 2, "urgent": true})"}}}}})}});
      messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", R"({"ok": true, "eta": "2 hours"})"}});
    } else {
      messages.push_back({{"role", "assistant"}, {"content", "A reply of a sentence or two, number " + std::to_string(i) + "."}});
    }
  }
  Json tools = Json::array();
  for (int i = 0; i < absl::GetFlag(FLAGS_tools); ++i) {
    tools.push_back({{"type", "function"}, {"function", {{"name", "tool_" + std::to_string(i)}, {"description", "Does thing " + std::to_string(i)},
      {"parameters", {{"type", "object"}, {"properties", {{"place", {{"type", "string"}, {"description", "where"}}},
        {"count", {{"type", "integer"}}}, {"urgent", {{"type", "boolean"}}}}}, {"required", Json::array({"place"})}}}}}});
  }
  const std::string m = messages.dump(), o = Json{{"tools", tools}, {"add_generation_prompt", true}}.dump();
  std::vector<double> ms;
  size_t bytes = 0;
  for (int r = 0; r < absl::GetFlag(FLAGS_render_rounds); ++r) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> out = ChatTemplate::Apply(&*t, m, o, "<s>", "</s>");
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (!out.ok()) {
      std::cerr << "llm42 bench-template: " << out.status().message() << "\n";
      return 1;
    }
    bytes = out->size();
  }
  std::sort(ms.begin(), ms.end());
  std::printf("| template | turns | tools | output bytes | median ms | slowest ms |\n|---|---|---|---|---|---|\n");
  std::printf("| %s | %d | %d | %zu | %.3f | %.3f |\n", path.substr(path.find_last_of("/\\") + 1).c_str(),
              absl::GetFlag(FLAGS_turns), absl::GetFlag(FLAGS_tools), bytes, ms[ms.size() / 2], ms.back());
  return 0;
}

}  // namespace llm42::cli
