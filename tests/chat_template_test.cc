// Built-in chat rendering against the reference Jinja templates in ../shared/templates, rendered
// by python3-jinja2 the way transformers' apply_chat_template renders them.
#include "lib/chat/chat_template.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace llm42 {
namespace {

using Conversation = std::vector<ChatMessage>;

const std::vector<Conversation>& Conversations() {
  static const std::vector<Conversation> c = {
      {{"user", "Hello!"}},
      {{"system", "You are a pirate."}, {"user", "Where is the treasure?"}},
      {{"system", "Answer briefly."}, {"user", "What is 2+2?"}, {"assistant", "4."}, {"user", "And 3+3?"}},
      {{"user", "Hi"}, {"assistant", "Hello! How can I help?"}, {"user", "Tell me a joke."}},
      {{"system", "  Be kind.\n"}, {"user", "  Gr\xC3\xBC\xC3\x9F" "e \xF0\x9F\xA6\x99 \n\n"}},
      {{"user", "Line one\nLine two\n\n- a\n- b"}, {"assistant", "  Noted.  "}, {"user", "{\"json\": true}"}},
  };
  return c;
}

// Debian's python3 with python3-jinja2 (installed by tools/install-deps.sh).
std::string Python() { return LLM42_PYTHON3; }

bool HaveJinja() {
  return !Python().empty() && std::system((Python() + " -c 'import jinja2' 2>/dev/null").c_str()) == 0;
}

std::string RenderWithJinja(const std::string& template_path, const Conversation& conv,
                            const std::string& bos, const std::string& eos) {
  nlohmann::json request = {{"bos_token", bos}, {"eos_token", eos}, {"messages", nlohmann::json::array()}};
  for (const ChatMessage& m : conv) request["messages"].push_back({{"role", m.role}, {"content", m.content}});
  const std::string in = testing::TempPath(std::filesystem::path(template_path).stem().string() + ".json");
  std::ofstream(in) << request.dump();
  const std::string cmd = Python() + " " + LLM42_SOURCE_DIR "/tests/render_chat_template.py '" +
                          template_path + "' < '" + in + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; p != nullptr && (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(p != nullptr ? ::pclose(p) : -1, 0) << cmd;
  return out;
}

struct Reference {
  const char* file;
  const char* bos;
  const char* eos;
};

class ChatTemplateTest : public ::testing::TestWithParam<Reference> {};

TEST_P(ChatTemplateTest, RendersWhatTheJinjaTemplateRenders) {
  LLM42_SHARED_OR_SKIP(path, std::string("templates/") + GetParam().file);
  if (!HaveJinja()) GTEST_SKIP() << "python3 with jinja2 is missing (tools/install-deps.sh installs python3-jinja2)";
  auto t = ChatTemplate::Detect(testing::ReadFile(path), false, false);
  ASSERT_TRUE(t.ok()) << t.status();
  for (const Conversation& conv : Conversations()) {
    auto ours = t->Render(conv, GetParam().bos, GetParam().eos);
    ASSERT_TRUE(ours.ok()) << ours.status();
    const std::string reference = RenderWithJinja(path, conv, GetParam().bos, GetParam().eos);
    ASSERT_FALSE(reference.empty());
    EXPECT_EQ(*ours, reference) << "conversation starting '" << conv[0].content << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(SharedTemplates, ChatTemplateTest,
                         ::testing::Values(Reference{"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
                                           Reference{"Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>"}),
                         [](const ::testing::TestParamInfo<Reference>& info) {
                           return info.param.file[0] == 'm' ? std::string("Llama31") : std::string("Qwen25");
                         });

TEST(ChatTemplate, DetectsFormatsAndRefusesOthers) {
  using F = ChatTemplate::Format;
  EXPECT_EQ(ChatTemplate::Detect("{{ '[INST] ' }}<<SYS>>", false, false)->format, F::kLlama2);
  EXPECT_EQ(ChatTemplate::Detect("{{ '[INST] ' + message['content'] }}", false, false)->format, F::kMistral);
  EXPECT_EQ(ChatTemplate::Detect("", true, false)->format, F::kChatMl);
  EXPECT_EQ(ChatTemplate::Detect("", false, true)->format, F::kLlama3);
  EXPECT_EQ(ChatTemplate::Detect("", false, false).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ChatTemplate::Detect("{{ '<start_of_turn>' }}", false, false).status().code(),
            absl::StatusCode::kUnimplemented);
  auto chatml = ChatTemplate::Detect("<|im_start|>", false, false);
  EXPECT_EQ(chatml->Render({}, "", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chatml->Render(std::vector<ChatMessage>{{"tool", "x"}}, "", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Llama 2's layout, spelled out.
  auto llama2 = ChatTemplate::Detect("[INST] <<SYS>>", false, false);
  EXPECT_EQ(*llama2->Render(std::vector<ChatMessage>{{"system", "S"}, {"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}},
                            "<s>", "</s>"),
            "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]");
}

}  // namespace
}  // namespace llm42
