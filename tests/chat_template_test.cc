// Built-in chat rendering against the reference Jinja templates in ../shared/templates, rendered
// by python3-jinja2 the way transformers' apply_chat_template renders them.
#include "lib/chat/chat_template.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include <sys/wait.h>

#include "gtest/gtest.h"
#include "lib/engine/session.h"
#include "lib/maker/model_maker.h"
#include "lib/tokenizer/tokenizer.h"
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
      // A reply that kept its reasoning (Qwen3's template strips it from the history).
      {{"user", "Why?"}, {"assistant", "<think>\nLet me see.\n</think>\n\nBecause."}, {"user", "Sure?"}},
  };
  return c;
}

// Debian's python3 with python3-jinja2 (installed by tools/install-deps.sh).
std::string Python() { return LLM42_PYTHON3; }

bool HaveJinja() {
  return !Python().empty() && std::system((Python() + " -c 'import jinja2' 2>/dev/null").c_str()) == 0;
}

// The rendering, or nullopt where the template refuses the conversation (raise_exception).
std::optional<std::string> RenderWithJinja(const std::string& template_path, const Conversation& conv,
                                           const std::string& bos, const std::string& eos, bool thinking = true) {
  nlohmann::json request = {{"bos_token", bos}, {"eos_token", eos}, {"messages", nlohmann::json::array()}};
  if (!thinking) request["enable_thinking"] = false;
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
  const int status = p != nullptr ? ::pclose(p) : -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) return std::nullopt;
  EXPECT_EQ(status, 0) << cmd;
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
  int rendered = 0;
  for (const Conversation& conv : Conversations()) {
    for (bool thinking : {true, false}) {
      auto ours = t->Render(conv, GetParam().bos, GetParam().eos, thinking);
      const std::optional<std::string> reference = RenderWithJinja(path, conv, GetParam().bos, GetParam().eos, thinking);
      if (!reference.has_value()) {  // the template refuses it (Gemma 2: a system message): so must we
        EXPECT_EQ(ours.status().code(), absl::StatusCode::kInvalidArgument) << "conversation starting '" << conv[0].content << "'";
        continue;
      }
      ASSERT_TRUE(ours.ok()) << ours.status();
      ASSERT_FALSE(reference->empty());
      EXPECT_EQ(*ours, *reference) << "conversation starting '" << conv[0].content << "', thinking " << thinking;
      ++rendered;
    }
  }
  EXPECT_GE(rendered, 4);  // most conversations render: the comparison is not vacuous
}

INSTANTIATE_TEST_SUITE_P(SharedTemplates, ChatTemplateTest,
                         ::testing::Values(Reference{"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
                                           Reference{"Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>"},
                                           Reference{"Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>"},
                                           Reference{"google-gemma-2-2b-it.jinja", "<bos>", "<eos>"},
                                           Reference{"microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>"}),
                         [](const ::testing::TestParamInfo<Reference>& info) {
                           std::string name;
                           for (const char* c = info.param.file; *c != '\0' && std::string_view(c) != ".jinja"; ++c) {
                             if (std::isalnum(static_cast<unsigned char>(*c))) name += *c;
                           }
                           return name;
                         });

// RequestOptions::thinking reaches the template: a chat request to a model with Qwen3's template
// renders the empty think block with thinking off and not by default (the prompt's text).
TEST(ChatTemplate, ARequestTurnsThinkingOff) {
  LLM42_SHARED_OR_SKIP(jinja, "templates/Qwen-Qwen3-0.6B.jinja");
  LLM42_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-gpt-2.gguf");
  const std::string model = testing::TempPath("qwen3-chat.gguf");
  const ModelPreset* preset = nullptr;
  for (const ModelPreset& p : ModelPresets()) {
    if (p.name == "tiny-qwen3") preset = &p;
  }
  ASSERT_NE(preset, nullptr);
  ASSERT_TRUE(MakeModel(*preset, GgmlType::kF32, vocab, 1, model, testing::ReadFile(jinja)).ok());
  SessionOptions o;
  o.model_path = model;
  o.context_length = 256;
  auto session = Session::Create(o);
  ASSERT_TRUE(session.ok()) << session.status();
  for (bool thinking : {true, false}) {
    RequestOptions r;
    r.messages = {{"user", "Hi"}};
    r.max_tokens = 1;
    r.thinking = thinking;
    auto request = (*session)->Submit(r, nullptr);
    ASSERT_TRUE(request.ok()) << request.status();
    (*request)->Wait(-1);
    const std::string prompt = (*session)->tokenizer().Decode((*request)->prompt());
    EXPECT_EQ(prompt.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"), !thinking) << prompt;
    EXPECT_TRUE(prompt.ends_with("<|im_start|>assistant\n") == thinking) << prompt;
  }
}

// OpenAI's clients send an assistant turn's call arguments as a JSON string; the templates iterate
// them as a mapping (Qwen3.5's `arguments|items`, which fails on a string): Apply hands them over
// parsed, as vLLM does, so a string and the mapping render alike, and a string that holds no
// object stays a string.
TEST(ChatTemplate, CallArgumentsGivenAsJsonTextRenderAsTheirMapping) {
  const std::string tmpl = R"({% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.name }}(
{%- for k, v in c.function.arguments|items %}{{ k }}={{ v }};{% endfor %}){% endfor %}{% endfor %})";
  auto render = [&](const std::string& arguments) {
    const std::string messages = R"([{"role": "user", "content": "go"}, {"role": "assistant", "content": "",
        "tool_calls": [{"id": "1", "type": "function", "function": {"name": "move", "arguments": )" + arguments + "}}]}]";
    nlohmann::json options = {{"template", tmpl}};
    return ChatTemplate::Apply(nullptr, messages, options.dump(), "", "");
  };
  const auto as_text = render(R"("{\"x\": 1, \"to\": \"tower\"}")");
  const auto as_mapping = render(R"({"x": 1, "to": "tower"})");
  ASSERT_TRUE(as_text.ok()) << as_text.status();
  ASSERT_TRUE(as_mapping.ok()) << as_mapping.status();
  EXPECT_EQ(*as_text, "move(x=1;to=tower;)");
  EXPECT_EQ(*as_text, *as_mapping);
  EXPECT_FALSE(render(R"("not an object")").ok());  // a string stays one: `items` refuses it
}

TEST(ChatTemplate, DetectsFormatsAndRefusesOthers) {
  using F = ChatTemplate::Format;
  EXPECT_EQ(ChatTemplate::Detect("{{ '[INST] ' }}<<SYS>>", false, false)->format, F::kLlama2);
  EXPECT_EQ(ChatTemplate::Detect("{{ '[INST] ' + message['content'] }}", false, false)->format, F::kMistral);
  EXPECT_EQ(ChatTemplate::Detect("", true, false)->format, F::kChatMl);
  EXPECT_EQ(ChatTemplate::Detect("", false, true)->format, F::kLlama3);
  EXPECT_EQ(ChatTemplate::Detect("", false, false).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ChatTemplate::Detect("{{ '<start_of_turn>' }}", false, false)->format, F::kGemma);
  EXPECT_EQ(ChatTemplate::Detect("{{ '<|user|>' + m + '<|end|>' }}", false, false)->format, F::kPhi3);
  EXPECT_EQ(ChatTemplate::Detect("{{ '<|system|>' }}", false, false).status().code(), absl::StatusCode::kUnimplemented);
  // Gemma 3's system message: its template's first_user_prefix, spelled out.
  auto gemma3 = ChatTemplate::Detect("<start_of_turn>{% set first_user_prefix = '' %}", false, false);
  EXPECT_EQ(*gemma3->Render(std::vector<ChatMessage>{{"system", "S"}, {"user", " U "}}, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\n");
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
