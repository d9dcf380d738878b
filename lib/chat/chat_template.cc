#include "lib/chat/chat_template.h"

#include <algorithm>

#include "lib/util/status.h"
#include "nlohmann/json.hpp"

namespace llm42 {
namespace {

// Jinja's |trim (Python str.strip()) for ASCII whitespace.
std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

// Appends pieces (std::string_view: Debian's Abseil has its own string_view, so no StrAppend).
template <typename... Pieces>
void Append(std::string* out, const Pieces&... pieces) {
  (out->append(std::string_view(pieces)), ...);
}

template <typename... Pieces>
std::string Cat(const Pieces&... pieces) {
  std::string s;
  Append(&s, pieces...);
  return s;
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Detect(std::string_view jinja, bool has_im_start,
                                                  bool has_header_tokens) {
  ChatTemplate t;
  if (Contains(jinja, "<|start_header_id|>") || (jinja.empty() && has_header_tokens)) {
    t.format = Format::kLlama3;
    t.llama31_system_block = Contains(jinja, "Cutting Knowledge Date");
  } else if (Contains(jinja, "<start_of_turn>")) {
    t.format = Format::kGemma;
    t.gemma_system_prefix = Contains(jinja, "first_user_prefix");
  } else if (Contains(jinja, "<|user|>") && Contains(jinja, "<|end|>")) {
    t.format = Format::kPhi3;
  } else if (Contains(jinja, "<|im_start|>") || (jinja.empty() && has_im_start)) {
    t.format = Format::kChatMl;
    t.qwen3_thinking = Contains(jinja, "</think>");
    for (const char* system : {"You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
                               "You are a helpful assistant."}) {
      if (Contains(jinja, system)) {
        t.default_system = system;
        break;
      }
    }
  } else if (Contains(jinja, "[INST]")) {
    t.format = Contains(jinja, "<<SYS>>") ? Format::kLlama2 : Format::kMistral;
  } else if (jinja.empty()) {
    return UnsupportedError("the model has no chat template and its vocabulary matches no known "
                            "chat format; send a prompt instead");
  } else {
    return UnsupportedError("the model's chat template is not one llm42 renders (Llama 3, ChatML/"
                            "Qwen, Llama 2, Mistral, Gemma, Phi-3); send a prompt instead");
  }
  return t;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromModel(std::string_view source, bool has_im_start,
                                                     bool has_header_tokens) {
  if (source.empty()) {
    absl::StatusOr<ChatTemplate> builtin = Detect(source, has_im_start, has_header_tokens);
    if (builtin.ok() && builtin->format == Format::kLlama3) builtin->syntax = ChatSyntax::kLlama3;
    if (builtin.ok() && builtin->format == Format::kChatMl) builtin->syntax = ChatSyntax::kHermes;
    return builtin;
  }
  absl::StatusOr<jinja::Template> parsed = jinja::Template::Parse(source);
  if (!parsed.ok()) {
    absl::StatusOr<ChatTemplate> builtin = Detect(source, has_im_start, has_header_tokens);
    if (builtin.ok()) return builtin;
    return InvalidArgument("the model's chat template: ", parsed.status().message());
  }
  ChatTemplate t;
  t.jinja = std::make_shared<const jinja::Template>(*std::move(parsed));
  t.syntax = ChatSyntaxOf(source);
  return t;
}

absl::StatusOr<std::string> ChatTemplate::Apply(const ChatTemplate* model, std::string_view messages_json,
                                                std::string_view options_json, std::string_view bos,
                                                std::string_view eos) {
  using json = nlohmann::ordered_json;
  auto parse = [](std::string_view text, const char* what) -> absl::StatusOr<json> {
    json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      // Where it fails: parse again with exceptions for the byte offset.
      try {
        const json unused = json::parse(text.begin(), text.end());
      } catch (const json::parse_error& e) {
        return InvalidArgument(what, " is not valid JSON (byte ", e.byte, ")");
      }
      return InvalidArgument(what, " is not valid JSON");
    }
    return j;
  };
  LLM42_ASSIGN_OR_RETURN(json messages, parse(messages_json, "messages"));
  if (!messages.is_array() || messages.empty()) return InvalidArgument("messages is not a non-empty JSON array");
  bool plain = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return InvalidArgument("messages[", i, "] is not an object with a string role");
    }
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return InvalidArgument("messages[", i, "].role '", role, "' is not system, user, assistant or tool");
    }
    const json content = m.value("content", json());
    if (!content.is_string() && !content.is_array() && !content.is_null()) {
      return InvalidArgument("messages[", i, "].content is not a string, an array of parts or null");
    }
    plain = plain && content.is_string() && role != "tool" && m.size() == 2;
    // An assistant turn's call arguments as OpenAI's clients send them, a JSON string, go to the
    // template as the mapping they hold (as vLLM and llama.cpp pass them; transformers' templates
    // iterate them: Qwen3.5's `arguments|items`); a string that holds no object stays a string.
    if (role == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array()) {
      for (json& call : messages[i]["tool_calls"]) {
        json* args = call.is_object() && call.contains("function") && call["function"].is_object() &&
                             call["function"].contains("arguments")
                         ? &call["function"]["arguments"]
                         : nullptr;
        if (args == nullptr || !args->is_string()) continue;
        const std::string text = args->get<std::string>();
        json parsed = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
        if (!parsed.is_discarded() && parsed.is_object()) *args = std::move(parsed);
      }
    }
  }
  json options = json::object();
  if (!options_json.empty()) {
    LLM42_ASSIGN_OR_RETURN(options, parse(options_json, "options"));
    if (!options.is_object()) return InvalidArgument("options is not a JSON object");
  }
  for (const auto& [key, value] : options.items()) {
    if (key == "tools" && !value.is_array() && !value.is_null()) return InvalidArgument("options.tools is not an array");
    if (key == "add_generation_prompt" && !value.is_boolean()) return InvalidArgument("options.add_generation_prompt is not a boolean");
    if (key == "template" && !value.is_string()) return InvalidArgument("options.template is not a string");
    if (key == "kwargs" && !value.is_object()) return InvalidArgument("options.kwargs is not an object");
    if (key != "tools" && key != "add_generation_prompt" && key != "template" && key != "kwargs") {
      return InvalidArgument("options.", key, " is not one of tools, add_generation_prompt, template, kwargs");
    }
  }
  std::shared_ptr<const jinja::Template> tmpl = model != nullptr ? model->jinja : nullptr;
  if (options.contains("template")) {
    absl::StatusOr<jinja::Template> parsed = jinja::Template::Parse(options["template"].get<std::string>());
    if (!parsed.ok()) return InvalidArgument("options.template: ", parsed.status().message());
    tmpl = std::make_shared<const jinja::Template>(*std::move(parsed));
  }
  const bool generation = options.value("add_generation_prompt", true);
  const bool tools = options.contains("tools") && !options["tools"].is_null();
  if (tmpl == nullptr) {
    if (model == nullptr || !plain || tools || !generation || options.contains("kwargs")) {
      return absl::FailedPreconditionError(
          "the model has no chat template of its own; its built-in format renders plain role and content strings "
          "with a generation prompt only: pass a template in options.template");
    }
    std::vector<ChatMessage> conv;
    for (const json& m : messages) conv.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    return model->Render(conv, bos, eos);
  }
  jinja::Dict vars;
  vars.Set("messages", jinja::Value::FromJson(messages));
  vars.Set("tools", tools ? jinja::Value::FromJson(options["tools"]) : jinja::Value::None());
  vars.Set("documents", jinja::Value::None());
  vars.Set("add_generation_prompt", jinja::Value::Bool(generation));
  vars.Set("bos_token", jinja::Value::String(std::string(bos)));
  vars.Set("eos_token", jinja::Value::String(std::string(eos)));
  if (options.contains("kwargs")) {
    for (const auto& [key, value] : options["kwargs"].items()) vars.Set(key, jinja::Value::FromJson(value));
  }
  return tmpl->Render(vars, model != nullptr ? model->limits : jinja::Limits());
}

absl::StatusOr<std::string> ChatTemplate::Render(std::span<const ChatMessage> messages,
                                                 std::string_view bos, std::string_view eos, bool thinking) const {
  if (messages.empty()) return InvalidArgument("the conversation has no messages");
  if (jinja != nullptr) {
    jinja::List list;
    for (const ChatMessage& m : messages) {
      jinja::Dict d;
      d.Set("role", jinja::Value::String(m.role));
      d.Set("content", jinja::Value::String(m.content));
      list.push_back(jinja::Value::MakeDict(std::move(d)));
    }
    jinja::Dict vars;
    vars.Set("messages", jinja::Value::MakeList(std::move(list)));
    vars.Set("bos_token", jinja::Value::String(std::string(bos)));
    vars.Set("eos_token", jinja::Value::String(std::string(eos)));
    vars.Set("add_generation_prompt", jinja::Value::Bool(true));
    vars.Set("tools", jinja::Value::None());
    vars.Set("documents", jinja::Value::None());
    if (!thinking) vars.Set("enable_thinking", jinja::Value::Bool(false));
    return jinja->Render(vars, limits);
  }
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return InvalidArgument("chat role '", m.role, "' is not system, user or assistant");
    }
  }
  const bool has_system = messages[0].role == "system";
  std::string out;
  switch (format) {
    case Format::kLlama3: {
      out = std::string(bos);
      std::span<const ChatMessage> rest = messages;
      if (llama31_system_block) {
        const std::string_view system = has_system ? Trim(messages[0].content) : std::string_view();
        if (has_system) rest = messages.subspan(1);
        Append(&out, "<|start_header_id|>system<|end_header_id|>\n\n",
                        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n", system,
                        "<|eot_id|>");
      }
      for (const ChatMessage& m : rest) {
        Append(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n", Trim(m.content),
                        "<|eot_id|>");
      }
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    }
    case Format::kChatMl: {
      std::span<const ChatMessage> rest = messages;
      if (has_system) {
        Append(&out, "<|im_start|>system\n", messages[0].content, "<|im_end|>\n");
        rest = messages.subspan(1);
      } else if (!default_system.empty()) {
        Append(&out, "<|im_start|>system\n", default_system, "<|im_end|>\n");
      }
      // Qwen3: the last user turn's index; assistant turns before it lose their reasoning.
      size_t last_query = rest.size();
      for (size_t i = rest.size(); qwen3_thinking && i-- > 0;) {
        if (rest[i].role == "user") {
          last_query = i;
          break;
        }
      }
      for (size_t i = 0; i < rest.size(); ++i) {
        const ChatMessage& m = rest[i];
        std::string_view content = m.content;
        if (qwen3_thinking && m.role == "assistant") {
          if (const size_t end = content.rfind("</think>"); end != std::string_view::npos) {
            content = content.substr(end + 8);
            content.remove_prefix(std::min(content.find_first_not_of('\n'), content.size()));
          }
          // (Turns after the last query keep their reasoning in the template; a conversation
          // sent for a reply ends with its query, so there are none.)
          if (i > last_query) content = m.content;
          Append(&out, "<|im_start|>assistant\n", content, "<|im_end|>\n");
          continue;
        }
        Append(&out, "<|im_start|>", m.role, "\n", content, "<|im_end|>\n");
      }
      out += "<|im_start|>assistant\n";
      if (qwen3_thinking && !thinking) out += "<think>\n\n</think>\n\n";
      return out;
    }
    case Format::kGemma: {
      out = std::string(bos);
      std::span<const ChatMessage> rest = messages;
      std::string prefix;
      if (has_system) {
        if (!gemma_system_prefix) return InvalidArgument("this Gemma chat template has no system role");
        prefix = Cat(messages[0].content, "\n\n");
        rest = messages.subspan(1);
      }
      for (size_t i = 0; i < rest.size(); ++i) {
        if ((rest[i].role == "user") != (i % 2 == 0)) {
          return InvalidArgument("Gemma's turns must alternate user, assistant, user, ... from a user turn");
        }
        Append(&out, "<start_of_turn>", rest[i].role == "assistant" ? "model" : "user", "\n", i == 0 ? prefix : "",
               Trim(rest[i].content), "<end_of_turn>\n");
      }
      out += "<start_of_turn>model\n";
      return out;
    }
    case Format::kPhi3: {
      for (const ChatMessage& m : messages) {
        if (m.role == "system" && m.content.empty()) continue;
        Append(&out, "<|", m.role, "|>\n", m.content, "<|end|>\n");
      }
      out += "<|assistant|>\n";
      return out;
    }
    case Format::kLlama2:
    case Format::kMistral: {
      const std::string_view system = has_system ? std::string_view(messages[0].content) : std::string_view();
      bool first_user = true;
      for (const ChatMessage& m : messages.subspan(has_system ? 1 : 0)) {
        if (m.role == "system") return InvalidArgument("only the first chat message may be a system message");
        if (m.role == "user") {
          std::string content = m.content;
          if (first_user && has_system) {
            content = format == Format::kLlama2 ? Cat("<<SYS>>\n", system, "\n<</SYS>>\n\n", content)
                                                : Cat(system, "\n\n", content);
          }
          first_user = false;
          if (format == Format::kLlama2) {
            Append(&out, bos, "[INST] ", Trim(content), " [/INST]");
          } else {
            Append(&out, out.empty() ? bos : "", "[INST] ", content, " [/INST]");
          }
        } else if (format == Format::kLlama2) {
          Append(&out, " ", Trim(m.content), " ", eos);
        } else {
          Append(&out, m.content, eos);
        }
      }
      return out;
    }
  }
  return out;
}

}  // namespace llm42
