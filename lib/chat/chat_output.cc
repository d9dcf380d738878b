#include "lib/chat/chat_output.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace llm42 {
namespace {

using Json = nlohmann::ordered_json;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Invalid UTF-8 in a string (text a caller passed) replaced by U+FFFD rather than thrown.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::optional<Json> ParseJson(std::string_view s) {
  Json j = Json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// The reasoning a reply opens with: between an optional `open` and `close` (the generation
// prompt may have opened it); a reply cut inside it is all reasoning. Returns the rest.
std::string_view TakeReasoning(std::string_view text, std::string_view open, std::string_view close, ChatOutput& out) {
  const std::string_view trimmed = Trim(text);
  const size_t end = text.find(close);
  if (end == std::string_view::npos) {
    if (!StartsWith(trimmed, open)) return text;
    out.reasoning = std::string(Trim(trimmed.substr(open.size())));
    return {};
  }
  std::string_view before = Trim(text.substr(0, end));
  if (StartsWith(before, open)) before = Trim(before.substr(open.size()));
  out.reasoning = std::string(before);
  return text.substr(end + close.size());
}

absl::Status Malformed(size_t call, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tool call ", call + 1, ": ", std::string(what)));
}

// A call's {"name", "arguments"} (arguments an object, or a string holding one; Llama 3 says
// "parameters").
absl::Status AddJsonCall(const Json& j, ChatOutput& out) {
  const size_t n = out.tool_calls.size();
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
    return Malformed(n, "not an object with a string \"name\"");
  }
  Json args = Json::object();
  for (const char* key : {"arguments", "parameters"}) {
    if (!j.contains(key)) continue;
    args = j[key];
    if (args.is_string()) {
      std::optional<Json> inner = ParseJson(args.get<std::string>());
      if (!inner) return Malformed(n, "its arguments string is not JSON");
      args = *inner;
    }
    break;
  }
  if (!args.is_object()) return Malformed(n, "its arguments are not a JSON object");
  ParsedToolCall call{j["name"].get<std::string>(), Dump(args), ""};
  if (j.contains("id") && j["id"].is_string()) call.id = j["id"].get<std::string>();
  out.tool_calls.push_back(std::move(call));
  return absl::OkStatus();
}

// Where the JSON value starting at text[at] ends (brackets balanced outside strings), or npos.
size_t JsonValueEnd(std::string_view text, size_t at) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = at; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// Every `open` ... `close` block through `parse_call`, the text outside them the content.
// Where a call's JSON body (an object or array after whitespace) ends, so that its closing tag
// is looked for after it (its strings may hold the tag); 0 when there is none to skip.
size_t JsonBodyEnd(std::string_view text) {
  const size_t at = text.find_first_not_of(" \t\r\n");
  if (at == std::string_view::npos || (text[at] != '{' && text[at] != '[')) return 0;
  const size_t end = JsonValueEnd(text, at);
  return end == std::string_view::npos ? 0 : end;
}

template <typename F>
absl::Status TaggedCalls(std::string_view text, std::string_view open, std::string_view close, ChatOutput& out,
                         F parse_call, bool json_body = false) {
  std::string content;
  while (true) {
    const size_t start = text.find(open);
    if (start == std::string_view::npos) break;
    content.append(text.substr(0, start));
    text.remove_prefix(start + open.size());
    // A JSON body closes after its value: its strings may hold the closing tag.
    const size_t end = text.find(close, json_body ? JsonBodyEnd(text) : 0);
    if (end == std::string_view::npos) {
      return Malformed(out.tool_calls.size(), absl::StrCat("opened by ", std::string(open), " but never closed by ", std::string(close)));
    }
    if (absl::Status st = parse_call(text.substr(0, end)); !st.ok()) return st;
    text.remove_prefix(end + close.size());
  }
  content.append(text);
  out.content = std::string(Trim(content));
  return absl::OkStatus();
}

// A value written as text (Qwen's <parameter>, GLM's <arg_value>): templates write mappings,
// sequences and numbers as JSON, strings as they are.
// `as_text`: the tool's schema types the parameter as a string (ParseChatOutput's tools_json), so
// that "42" stays a string.
Json TextValue(std::string_view value, bool as_text = false) {
  std::optional<Json> parsed = as_text ? std::nullopt : ParseJson(value);
  return parsed ? *parsed : Json(std::string(value));
}

// The (tool, parameter) pairs whose schemas make the parameter a string (type "string", or an enum
// or const of strings), from OpenAI tool objects (or their functions); empty for tools that do not
// parse.
using TextParameters = std::set<std::pair<std::string, std::string>>;
TextParameters TextParametersOf(std::string_view tools_json) {
  TextParameters out;
  if (tools_json.empty()) return out;
  std::optional<Json> tools = ParseJson(tools_json);
  if (!tools || !tools->is_array()) return out;
  for (const Json& t : *tools) {
    const Json& f = t.is_object() && t.contains("function") ? t["function"] : t;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("parameters")) continue;
    const Json& params = f["parameters"];
    if (!params.is_object() || !params.contains("properties") || !params["properties"].is_object()) continue;
    for (const auto& [key, schema] : params["properties"].items()) {
      if (!schema.is_object()) continue;
      auto strings = [](const Json& values) {
        return values.is_array() && !values.empty() &&
               std::all_of(values.begin(), values.end(), [](const Json& v) { return v.is_string(); });
      };
      const bool text = (schema.contains("type") && schema["type"] == "string") ||
                        (schema.contains("enum") && strings(schema["enum"])) ||
                        (schema.contains("const") && schema["const"].is_string());
      if (text) out.insert({f["name"], key});
    }
  }
  return out;
}

absl::Status ParseQwenXmlCall(std::string_view body, const TextParameters& text_parameters, ChatOutput& out) {
  const size_t n = out.tool_calls.size();
  const size_t f = body.find("<function=");
  const size_t name_end = f == std::string_view::npos ? f : body.find('>', f);
  if (name_end == std::string_view::npos) return Malformed(n, "no <function=NAME>");
  ParsedToolCall call{std::string(Trim(body.substr(f + 10, name_end - f - 10))), "", ""};
  Json args = Json::object();
  std::string_view rest = body.substr(name_end + 1);
  for (size_t p; (p = rest.find("<parameter=")) != std::string_view::npos;) {
    const size_t key_end = rest.find('>', p);
    const size_t close = key_end == std::string_view::npos ? key_end : rest.find("</parameter>", key_end);
    if (close == std::string_view::npos) return Malformed(n, "a <parameter=...> without </parameter>");
    const std::string key(Trim(rest.substr(p + 11, key_end - p - 11)));
    std::string_view value = rest.substr(key_end + 1, close - key_end - 1);
    if (StartsWith(value, "\n")) value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    args[key] = TextValue(value, text_parameters.count({call.name, key}) > 0);
    rest.remove_prefix(close + 12);
  }
  call.arguments_json = Dump(args);
  out.tool_calls.push_back(std::move(call));
  return absl::OkStatus();
}

// GLM 4.5 - 4.7: NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>...
absl::Status ParseGlmCall(std::string_view body, const TextParameters& text_parameters, ChatOutput& out) {
  const size_t n = out.tool_calls.size();
  const size_t first = body.find("<arg_key>");
  ParsedToolCall call{std::string(Trim(body.substr(0, first))), "", ""};
  if (call.name.empty()) return Malformed(n, "no function name");
  Json args = Json::object();
  std::string_view rest = first == std::string_view::npos ? std::string_view() : body.substr(first);
  for (size_t p; (p = rest.find("<arg_key>")) != std::string_view::npos;) {
    const size_t key_end = rest.find("</arg_key>", p);
    const size_t value = key_end == std::string_view::npos ? key_end : rest.find("<arg_value>", key_end);
    const size_t value_end = value == std::string_view::npos ? value : rest.find("</arg_value>", value);
    if (value_end == std::string_view::npos) return Malformed(n, "an <arg_key> without its <arg_value>");
    const std::string key(Trim(rest.substr(p + 9, key_end - p - 9)));
    args[key] = TextValue(rest.substr(value + 11, value_end - value - 11), text_parameters.count({call.name, key}) > 0);
    rest.remove_prefix(value_end + 12);
  }
  call.arguments_json = Dump(args);
  out.tool_calls.push_back(std::move(call));
  return absl::OkStatus();
}

// Gemma 4's values: <|"|>string<|"|>, true, false, numbers, {key:value,...} (keys bare or quoted),
// [value,...]; anything else bare text.
class GemmaValueParser {
 public:
  explicit GemmaValueParser(std::string_view s) : s_(s) {}
  std::optional<Json> Value() {
    if (Eat(kQuote)) {
      const size_t end = s_.find(kQuote, at_);
      if (end == std::string_view::npos) return std::nullopt;
      Json v = std::string(s_.substr(at_, end - at_));
      at_ = end + kQuote.size();
      return v;
    }
    if (Eat("{")) return Object();
    if (Eat("[")) {
      Json a = Json::array();
      if (Eat("]")) return a;
      while (true) {
        std::optional<Json> v = Value();
        if (!v) return std::nullopt;
        a.push_back(std::move(*v));
        if (Eat("]")) return a;
        if (!Eat(",")) return std::nullopt;
      }
    }
    const size_t start = at_;
    while (at_ < s_.size() && s_[at_] != ',' && s_[at_] != '}' && s_[at_] != ']') ++at_;
    const std::string_view word = s_.substr(start, at_ - start);
    if (word == "true" || word == "false") return Json(word == "true");
    if (std::optional<Json> number = ParseJson(word); number && number->is_number()) return number;
    return Json(std::string(word));
  }
  // After the opening brace.
  std::optional<Json> Object() {
    Json o = Json::object();
    if (Eat("}")) return o;
    while (true) {
      std::string key;
      if (Eat(kQuote)) {
        const size_t end = s_.find(kQuote, at_);
        if (end == std::string_view::npos) return std::nullopt;
        key = s_.substr(at_, end - at_);
        at_ = end + kQuote.size();
      } else {
        const size_t colon = s_.find(':', at_);
        if (colon == std::string_view::npos) return std::nullopt;
        key = s_.substr(at_, colon - at_);
        at_ = colon;
      }
      if (!Eat(":")) return std::nullopt;
      std::optional<Json> v = Value();
      if (!v) return std::nullopt;
      o[key] = std::move(*v);
      if (Eat("}")) return o;
      if (!Eat(",")) return std::nullopt;
    }
  }
  bool done() const { return at_ == s_.size(); }

 private:
  static constexpr std::string_view kQuote = "<|\"|>";
  bool Eat(std::string_view t) {
    if (s_.substr(at_, t.size()) != t) return false;
    at_ += t.size();
    return true;
  }
  std::string_view s_;
  size_t at_ = 0;
};

absl::Status ParseGemmaCall(std::string_view body, ChatOutput& out) {
  const size_t n = out.tool_calls.size();
  if (!StartsWith(body, "call:")) return Malformed(n, "not call:NAME{...}");
  const size_t brace = body.find('{');
  if (brace == std::string_view::npos) return Malformed(n, "no arguments in braces");
  GemmaValueParser p(body.substr(brace + 1));
  std::optional<Json> args = p.Object();
  if (!args || !p.done()) return Malformed(n, "its arguments do not parse");
  out.tool_calls.push_back({std::string(body.substr(5, brace - 5)), Dump(*args), ""});
  return absl::OkStatus();
}

absl::Status ParseMistral(std::string_view text, ChatOutput& out) {
  text = TakeReasoning(text, "[THINK]", "[/THINK]", out);
  constexpr std::string_view kCalls = "[TOOL_CALLS]";
  const size_t first = text.find(kCalls);
  out.content = std::string(Trim(text.substr(0, first)));
  if (first == std::string_view::npos) return absl::OkStatus();
  std::string_view rest = text.substr(first);
  while (StartsWith(rest, kCalls)) {
    rest = Trim(rest.substr(kCalls.size()));
    const size_t n = out.tool_calls.size();
    if (StartsWith(rest, "[")) {  // [{"name": ..., "arguments": ...}, ...]
      const size_t end = JsonValueEnd(rest, 0);
      std::optional<Json> calls = end == std::string_view::npos ? std::nullopt : ParseJson(rest.substr(0, end));
      if (!calls || !calls->is_array()) return Malformed(n, "[TOOL_CALLS] not followed by a JSON array");
      for (const Json& c : *calls) {
        if (absl::Status st = AddJsonCall(c, out); !st.ok()) return st;
      }
      rest = Trim(rest.substr(end));
      continue;
    }
    const size_t args = rest.find("[ARGS]");
    if (args == std::string_view::npos) return Malformed(n, "[TOOL_CALLS]NAME without [ARGS]");
    std::string name(Trim(rest.substr(0, args)));
    std::string id;
    if (const size_t id_at = name.find("[CALL_ID]"); id_at != std::string::npos) {
      id = name.substr(id_at + 9);
      name.resize(id_at);
    }
    rest.remove_prefix(args + 6);
    const size_t end = JsonValueEnd(rest, 0);
    std::optional<Json> a = end == std::string_view::npos ? std::nullopt : ParseJson(rest.substr(0, end));
    if (!a || !a->is_object()) return Malformed(n, "[ARGS] not followed by a JSON object");
    out.tool_calls.push_back({name, Dump(*a), id});
    rest = Trim(rest.substr(end));
  }
  return absl::OkStatus();
}

absl::Status ParseDeepSeek(std::string_view text, ChatOutput& out) {
  text = TakeReasoning(text, "<think>", "</think>", out);
  constexpr std::string_view kBegin = "<｜tool▁calls▁begin｜>", kCall = "<｜tool▁call▁begin｜>",
                             kSep = "<｜tool▁sep｜>", kEnd = "<｜tool▁call▁end｜>";
  const size_t first = text.find(kBegin);
  out.content = std::string(Trim(text.substr(0, first)));
  if (first == std::string_view::npos) return absl::OkStatus();
  std::string_view rest = text.substr(first + kBegin.size());
  for (size_t at; (at = rest.find(kCall)) != std::string_view::npos;) {
    const size_t n = out.tool_calls.size();
    rest.remove_prefix(at + kCall.size());
    const size_t sep = rest.find(kSep), end = rest.find(kEnd);
    if (sep == std::string_view::npos || end == std::string_view::npos || sep > end) {
      return Malformed(n, "a call without its separator or end");
    }
    // R1: function<｜tool▁sep｜>NAME\n```json\nARGS\n```; V3.1 on: NAME<｜tool▁sep｜>ARGS.
    const std::string_view before = Trim(rest.substr(0, sep));
    std::string_view body = rest.substr(sep + kSep.size(), end - sep - kSep.size());
    std::string name(before);
    std::string_view args = Trim(body);
    if (before == "function") {
      const size_t newline = body.find('\n');
      name = std::string(Trim(body.substr(0, newline)));
      args = newline == std::string_view::npos ? std::string_view() : Trim(body.substr(newline));
    }
    if (StartsWith(args, "```json")) args.remove_prefix(7);
    if (StartsWith(args, "```")) args.remove_prefix(3);
    if (args.size() >= 3 && args.substr(args.size() - 3) == "```") args.remove_suffix(3);
    std::optional<Json> a = ParseJson(Trim(args));
    if (!a || !a->is_object()) return Malformed(n, "its arguments are not a JSON object");
    out.tool_calls.push_back({name, Dump(*a), ""});
    rest.remove_prefix(end + kEnd.size());
  }
  return absl::OkStatus();
}

// gpt-oss's harmony: messages of a channel each (<|channel|>NAME ... <|message|>BODY, ended by
// <|end|>, <|call|>, <|return|> or the next <|start|>); analysis is reasoning, final (and
// commentary to no function) content, commentary to=functions.NAME a call.
absl::Status ParseHarmony(std::string_view text, ChatOutput& out) {
  if (text.find("<|channel|>") == std::string_view::npos && text.find("<|message|>") == std::string_view::npos) {
    out.content = std::string(Trim(text));
    return absl::OkStatus();
  }
  std::string reasoning, content;
  bool has_reasoning = false;
  size_t at = 0;
  while (at < text.size()) {
    const size_t message = text.find("<|message|>", at);
    if (message == std::string_view::npos) break;
    const std::string_view header = text.substr(at, message - at);
    size_t end = text.size();
    for (std::string_view stop : {"<|end|>", "<|call|>", "<|return|>", "<|start|>"}) {
      end = std::min(end, text.find(stop, message));
    }
    const std::string_view body = text.substr(message + 11, end - message - 11);
    const size_t to = header.find("to=functions.");
    if (to != std::string_view::npos) {
      size_t name_end = to + 13;
      while (name_end < header.size() && !std::isspace(static_cast<unsigned char>(header[name_end])) &&
             header[name_end] != '<') {
        ++name_end;
      }
      std::optional<Json> a = ParseJson(Trim(body));
      if (!a || !a->is_object()) return Malformed(out.tool_calls.size(), "its arguments are not a JSON object");
      out.tool_calls.push_back({std::string(header.substr(to + 13, name_end - to - 13)), Dump(*a), ""});
    } else if (header.find("analysis") != std::string_view::npos) {
      reasoning.append(body);
      has_reasoning = true;
    } else {
      content.append(body);
    }
    at = end;
    for (std::string_view stop : {"<|end|>", "<|call|>", "<|return|>"}) {
      if (text.substr(at, stop.size()) == stop) at += stop.size();
    }
  }
  if (has_reasoning) out.reasoning = std::string(Trim(reasoning));
  out.content = std::string(Trim(content));
  return absl::OkStatus();
}

}  // namespace

ChatSyntax ChatSyntaxOf(std::string_view t) {
  auto has = [&](std::string_view marker) { return t.find(marker) != std::string_view::npos; };
  if (has("<|tool_call>call:")) return ChatSyntax::kGemma4;
  if (has("<|channel|>") && has("functions.")) return ChatSyntax::kHarmony;
  // Syntaxes llm42 does not parse that share the markers below (MiniMax's <invoke>, Apriel's
  // <tool_calls> array, functionary's <function=NAME>{json}): plain.
  if (has("<invoke name=") || has("<tool_calls>[")) return ChatSyntax::kPlain;
  if (has("<function=")) return has("<parameter=") ? ChatSyntax::kQwenXml : ChatSyntax::kPlain;
  if (has("<arg_key>")) return ChatSyntax::kGlm;
  if (has("<tool_call>")) return ChatSyntax::kHermes;
  if (has("[TOOL_CALLS]")) return ChatSyntax::kMistral;
  if (has("tool▁calls▁begin")) return ChatSyntax::kDeepSeekR1;
  if (has("<|start_header_id|>") && has("\"parameters\"")) return ChatSyntax::kLlama3;
  return ChatSyntax::kPlain;
}

const char* ChatSyntaxName(ChatSyntax syntax) {
  switch (syntax) {
    case ChatSyntax::kPlain: return "plain";
    case ChatSyntax::kHermes: return "hermes";
    case ChatSyntax::kQwenXml: return "qwen-xml";
    case ChatSyntax::kMistral: return "mistral";
    case ChatSyntax::kLlama3: return "llama3";
    case ChatSyntax::kGemma4: return "gemma-4";
    case ChatSyntax::kDeepSeekR1: return "deepseek-r1";
    case ChatSyntax::kHarmony: return "harmony";
    case ChatSyntax::kGlm: return "glm";
  }
  return "plain";
}

absl::StatusOr<ChatOutput> ParseChatOutput(ChatSyntax syntax, std::string_view text, std::string_view tools_json) {
  ChatOutput out;
  absl::Status st;
  const TextParameters text_parameters = TextParametersOf(tools_json);
  switch (syntax) {
    case ChatSyntax::kPlain:
      out.content = std::string(Trim(TakeReasoning(text, "<think>", "</think>", out)));
      break;
    case ChatSyntax::kHermes:
      st = TaggedCalls(TakeReasoning(text, "<think>", "</think>", out), "<tool_call>", "</tool_call>", out,
                       [&](std::string_view body) {
                         std::optional<Json> j = ParseJson(Trim(body));
                         if (!j) return Malformed(out.tool_calls.size(), "its body is not JSON");
                         return AddJsonCall(*j, out);
                       },
                       /*json_body=*/true);
      break;
    case ChatSyntax::kQwenXml:
      st = TaggedCalls(TakeReasoning(text, "<think>", "</think>", out), "<tool_call>", "</tool_call>", out,
                       [&](std::string_view body) { return ParseQwenXmlCall(body, text_parameters, out); });
      break;
    case ChatSyntax::kGemma4:
      st = TaggedCalls(TakeReasoning(text, "<|channel>thought", "<channel|>", out), "<|tool_call>", "<tool_call|>",
                       out, [&](std::string_view body) { return ParseGemmaCall(body, out); });
      break;
    case ChatSyntax::kGlm:
      st = TaggedCalls(TakeReasoning(text, "<think>", "</think>", out), "<tool_call>", "</tool_call>", out,
                       [&](std::string_view body) { return ParseGlmCall(body, text_parameters, out); });
      break;
    case ChatSyntax::kMistral: st = ParseMistral(text, out); break;
    case ChatSyntax::kDeepSeekR1: st = ParseDeepSeek(text, out); break;
    case ChatSyntax::kHarmony: st = ParseHarmony(text, out); break;
    case ChatSyntax::kLlama3: {
      std::string_view body = Trim(text);
      if (StartsWith(body, "<|python_tag|>")) body = Trim(body.substr(14));
      std::optional<Json> j = StartsWith(body, "{") ? ParseJson(body) : std::nullopt;
      if (j && j->is_object() && j->contains("name") && (j->contains("parameters") || j->contains("arguments"))) {
        st = AddJsonCall(*j, out);
      } else {
        out.content = std::string(Trim(text));
      }
      break;
    }
  }
  if (!st.ok()) return st;
  return out;
}

std::string ChatOutput::ToJson() const {
  Json j = Json::object();
  j["content"] = content;
  j["reasoning_content"] = reasoning ? Json(*reasoning) : Json(nullptr);
  j["tool_calls"] = Json::array();
  for (const ParsedToolCall& c : tool_calls) {
    Json call = {{"name", c.name}, {"arguments", Json::parse(c.arguments_json)}};
    if (!c.id.empty()) call["id"] = c.id;
    j["tool_calls"].push_back(std::move(call));
  }
  return Dump(j);
}

}  // namespace llm42
