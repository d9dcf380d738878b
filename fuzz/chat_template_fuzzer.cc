// Arbitrary bytes as a chat template and a conversation: the first part is the Jinja text a model
// carries (its first byte also picks the special-token hints), parsed and rendered by llm42's
// Jinja renderer (lib/chat/jinja_template.h) or recognised as a built-in format, the rest
// alternate role and content. Every accepted template renders every conversation without a crash
// and within the renderer's bounds (small ones here, so that a runaway template ends fast); what
// it refuses it refuses with a status. The last part is a reply, parsed by every tool-call
// syntax (lib/chat/chat_output.h) into JSON or refused with a status.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_parts.h"
#include "lib/chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = llm42::fuzz::SplitParts(data, size, 9);
  const unsigned hints = parts[0].empty() ? 0 : static_cast<unsigned char>(parts[0][0]);
  for (int syntax = 0; syntax <= static_cast<int>(llm42::ChatSyntax::kGlm); ++syntax) {
    auto parsed = llm42::ParseChatOutput(static_cast<llm42::ChatSyntax>(syntax), parts.back());
    if (parsed.ok()) (void)parsed->ToJson();
  }
  auto tmpl = llm42::ChatTemplate::FromModel(parts[0], (hints & 1) != 0, (hints & 2) != 0);
  if (!tmpl.ok()) return 0;
  tmpl->limits.max_steps = 200'000;
  tmpl->limits.max_output_bytes = 1 << 20;
  tmpl->limits.max_seconds = 2.0;
  std::vector<llm42::ChatMessage> messages;
  for (size_t i = 1; i + 1 < parts.size(); i += 2) {
    if (parts[i].empty() && parts[i + 1].empty()) break;
    messages.push_back({parts[i], parts[i + 1]});
  }
  (void)tmpl->Render(messages, "<s>", "</s>");
  return 0;
}
