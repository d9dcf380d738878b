#include "lib/chat/tool_call_grammar.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/grammar/grammar.h"
#include "lib/grammar/json_schema.h"
#include "nlohmann/json.hpp"
#include "lib/util/status.h"

namespace llm42 {
namespace {

using Json = nlohmann::ordered_json;

// A GBNF literal of `text`'s bytes: printable ASCII as it is (quote and backslash escaped), every
// other byte as \xHH (the grammar matches UTF-8 bytes either way).
std::string Literal(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += absl::StrFormat("\\x%02X", c);
    }
  }
  return out + "\"";
}

struct Tool {
  std::string name, schema;
};

absl::StatusOr<std::vector<Tool>> ReadTools(std::string_view tools_json) {
  Json tools;
  try {
    tools = Json::parse(tools_json.begin(), tools_json.end());
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("tools: not JSON (", e.what(), ")"));
  }
  if (!tools.is_array() || tools.empty()) return absl::InvalidArgumentError("tools: not a non-empty array of tool objects");
  std::vector<Tool> out;
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const Json* f = t.is_object() && t.contains("function") ? &t["function"] : &t;
    if (!f->is_object() || !f->contains("name") || !(*f)["name"].is_string() || (*f)["name"].get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("tools[", i, "]: no function name"));
    }
    Tool tool{(*f)["name"].get<std::string>(), R"({"type": "object"})"};
    if (!names.insert(tool.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("tools[", i, "]: a second tool named '", tool.name, "'"));
    }
    if (f->contains("parameters")) tool.schema = (*f)["parameters"].dump();
    out.push_back(std::move(tool));
  }
  return out;
}

// How a syntax writes calls: `open` begins them (the trigger of kAuto's free text; `lead` comes
// before it from a reply's start otherwise), then `calls` (a GBNF expression over the rules
// call-I, one per tool, and `call` their alternation; `one` for a single call), each call-I
// `head` NAME `middle` ARGS `tail` (NAME and the JSON around it literal). `bare_names`: NAME
// stands outside any quotes, ended by what follows it.
struct CallSyntax {
  std::string open, calls, one, head, middle, tail;
  std::string lead = "ws";
  bool bare_names = false;
  bool xml_args = false;  // ARGS as XmlParameterRules writes them, not a JSON object
};

// A bare name or key (harmony's NAME, Qwen's <function=NAME> and <parameter=KEY>): printable ASCII
// without a space, '<' or '>', which end it.
bool BareName(std::string_view name) {
  return !name.empty() &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f && c != '<' && c != '>'; });
}

// Whether a property's schema is a plain string (its value written raw): type "string" with at
// most length bounds and annotations.
bool PlainString(const Json& p) {
  static const std::set<std::string> kAllowed = {"type", "minLength", "maxLength", "description", "title", "default",
                                                 "examples", "$comment", "deprecated", "readOnly", "writeOnly"};
  if (!p.is_object() || !p.contains("type") || p["type"] != "string") return false;
  for (const auto& [k, v] : p.items()) {
    if (kAllowed.count(k) == 0) return false;
  }
  return true;
}

// Qwen3.5 / Qwen3-Coder's arguments (their templates' rendering): rule `name` for an object
// schema's properties as "<parameter=KEY>\nVALUE\n</parameter>\n" each, in the schema's order, the
// required ones always and the others optional. A plain string's VALUE is its text raw, without
// '<' (so that no </parameter> can stand in it), within its length bounds where they are at most
// kMaxGbnfRepetition; a string enum's or const's its values raw; any other VALUE JSON under its
// schema (numbers, booleans as JSON's true and false, objects and arrays), as ParseChatOutput reads
// them back with the tools. INVALID_ARGUMENT for a schema that is no object's, or a key the
// syntax cannot write.
absl::StatusOr<std::string> XmlParameterRules(std::string_view schema_json, const std::string& name) {
  const Json schema = Json::parse(schema_json.begin(), schema_json.end(), nullptr, false);
  if (!schema.is_object() || (schema.contains("type") && schema["type"] != "object") ||
      (schema.contains("properties") && !schema["properties"].is_object())) {
    return absl::InvalidArgumentError("the qwen-xml syntax writes an object's properties: not an object schema");
  }
  std::set<std::string> required;
  if (schema.contains("required") && schema["required"].is_array()) {
    for (const Json& r : schema["required"]) {
      if (r.is_string()) required.insert(r.get<std::string>());
    }
  }
  std::string rules;
  std::vector<std::string> parts;
  const Json properties = schema.value("properties", Json::object());
  int j = 0;
  for (const auto& [key, p] : properties.items()) {
    if (!BareName(key)) {
      return absl::InvalidArgumentError(absl::StrCat("property '", key, "': a key the qwen-xml syntax cannot write"));
    }
    const std::string value = absl::StrCat(name, "-p", j++);
    std::vector<std::string> raw;  // a string enum's or const's values
    if (p.is_object() && p.contains("enum") && p["enum"].is_array() && !p["enum"].empty()) {
      for (const Json& e : p["enum"]) raw.push_back(e.is_string() ? Literal(e.get<std::string>()) : "");
    } else if (p.is_object() && p.contains("const") && p["const"].is_string()) {
      raw.push_back(Literal(p["const"].get<std::string>()));
    }
    if (!raw.empty() && std::find(raw.begin(), raw.end(), "") == raw.end()) {
      absl::StrAppend(&rules, value, " ::= ", absl::StrJoin(raw, " | "), "\n");
    } else if (PlainString(p)) {
      const int64_t lo = p.value("minLength", int64_t{0}), hi = p.value("maxLength", int64_t{-1});
      std::string repeat = "*";
      if (hi >= 0 && hi <= kMaxGbnfRepetition && lo <= hi) {
        repeat = absl::StrCat("{", lo, ",", hi, "}");
      } else if (lo > 0 && lo <= kMaxGbnfRepetition) {
        repeat = absl::StrCat("{", lo, ",}");
      }
      absl::StrAppend(&rules, value, " ::= [^<]", repeat, "\n");
    } else {
      absl::StatusOr<std::string> json = JsonSchemaToGbnfRules(p.dump(), value);
      if (!json.ok()) return absl::InvalidArgumentError(absl::StrCat("property '", key, "': ", json.status().message()));
      rules += *json;
    }
    const std::string element = absl::StrCat(Literal(absl::StrCat("<parameter=", key, ">\n")), " ", value, " ",
                                             Literal("\n</parameter>\n"));
    parts.push_back(required.count(key) > 0 ? element : absl::StrCat("( ", element, " )?"));
  }
  absl::StrAppend(&rules, name, " ::= ", parts.empty() ? "\"\"" : absl::StrJoin(parts, " "), "\n");
  return rules;
}

absl::StatusOr<CallSyntax> SyntaxOf(ChatSyntax syntax) {
  switch (syntax) {
    case ChatSyntax::kHermes:
      return CallSyntax{"<tool_call>", R"(ws call ws "</tool_call>" ( ws "<tool_call>" ws call ws "</tool_call>" )*)",
                        R"(ws call ws "</tool_call>")", R"("{" ws "\"name\"" ws ":" ws "\"")",
                        R"("\"" ws "," ws "\"arguments\"" ws ":" ws)", R"(ws "}")"};
    case ChatSyntax::kMistral:
      return CallSyntax{"[TOOL_CALLS]", R"("[" ws call ( ws "," ws call )* ws "]")", R"("[" ws call ws "]")",
                        R"("{" ws "\"name\"" ws ":" ws "\"")", R"("\"" ws "," ws "\"arguments\"" ws ":" ws)", R"(ws "}")"};
    case ChatSyntax::kLlama3:
      return CallSyntax{"{\"name\": \"", "call", "call", "", R"("\"" ws "," ws "\"parameters\"" ws ":" ws)", R"(ws "}")"};
    case ChatSyntax::kHarmony: {
      // As gpt-oss's template writes a call, the recipient in the role's header after the
      // generation prompt's <|start|>assistant: " to=functions.NAME<|channel|>commentary
      // json<|message|>ARGS", then <|call|> (an end of generation) ends the turn: one call a reply.
      // Before it, under kAuto, whole messages (analysis, commentary, final) as free text.
      CallSyntax h{"to=functions.", "call", "call", "", R"("<|channel|>commentary json<|message|>")", ""};
      h.lead = R"(" ")";
      h.bare_names = true;
      return h;
    }
    case ChatSyntax::kQwenXml: {
      // Qwen3.5's and Qwen3-Coder's: <tool_call>\n<function=NAME>\n PARAMETERS </function>\n</tool_call>.
      CallSyntax x{"<tool_call>", R"(ws call ws "</tool_call>" ( ws "<tool_call>" ws call ws "</tool_call>" )*)",
                   R"(ws call ws "</tool_call>")", R"("<function=")", R"(">\n")", R"("</function>")"};
      x.bare_names = true;
      x.xml_args = true;
      return x;
    }
    case ChatSyntax::kPlain:
      return absl::UnimplementedError("the model's chat template writes no tool calls");
    default:
      return absl::UnimplementedError(absl::StrCat("tool calls in the ", ChatSyntaxName(syntax),
                                                   " syntax are parsed but not yet generated under a grammar"));
  }
}

// Rules free-K (K bytes of `open` matched) for a text that never contains `open` (its KMP
// automaton), each able to end; completing `open` goes on with `then`.
std::string FreeText(std::string_view open, std::string_view then) {
  const size_t n = open.size();
  std::set<unsigned char> chars(open.begin(), open.end());
  auto next = [&](size_t k, unsigned char c) {  // the longest prefix of open ending text[0..k) + c
    std::string seen = std::string(open.substr(0, k)) + static_cast<char>(c);
    for (size_t len = std::min(n, seen.size()); len > 0; --len) {
      if (seen.compare(seen.size() - len, len, open.substr(0, len)) == 0) return len;
    }
    return size_t{0};
  };
  std::string others = "[^";
  for (unsigned char c : chars) absl::StrAppend(&others, absl::StrFormat("\\x%02X", c));
  others += "]";
  std::string rules;
  for (size_t k = 0; k < n; ++k) {
    std::vector<std::string> alts = {absl::StrCat(others, " free-0")};
    for (unsigned char c : chars) {
      const size_t to = next(k, c);
      const std::string lit = Literal(std::string(1, static_cast<char>(c)));
      alts.push_back(to == n ? absl::StrCat(lit, " ", std::string(then)) : absl::StrCat(lit, " free-", to));
    }
    absl::StrAppend(&rules, "free-", k, " ::= | ", absl::StrJoin(alts, " | "), "\n");
  }
  return rules;
}

}  // namespace

absl::StatusOr<ToolChoice> ParseToolChoice(std::string_view text) {
  if (text == "none") return ToolChoice{ToolChoice::Kind::kNone, ""};
  if (text == "auto" || text.empty()) return ToolChoice{ToolChoice::Kind::kAuto, ""};
  if (text == "required") return ToolChoice{ToolChoice::Kind::kRequired, ""};
  if (text.front() != '{') return ToolChoice{ToolChoice::Kind::kNamed, std::string(text)};
  Json j;
  try {
    j = Json::parse(text.begin(), text.end());
  } catch (const Json::exception&) {
    return absl::InvalidArgumentError("tool_choice: not JSON");
  }
  if (!j.is_object() || !j.contains("function") || !j["function"].is_object() || !j["function"].contains("name") ||
      !j["function"]["name"].is_string()) {
    return absl::InvalidArgumentError(R"(tool_choice: none, auto, required, a tool's name, or {"type": "function", "function": {"name": ...}})");
  }
  return ToolChoice{ToolChoice::Kind::kNamed, j["function"]["name"].get<std::string>()};
}

absl::StatusOr<std::string> ToolCallGrammar(ChatSyntax syntax, std::string_view tools_json, const ToolChoice& choice) {
  if (choice.kind == ToolChoice::Kind::kNone) return std::string();
  LLM42_ASSIGN_OR_RETURN(const std::vector<Tool> tools, ReadTools(tools_json));
  LLM42_ASSIGN_OR_RETURN(const CallSyntax s, SyntaxOf(syntax));
  std::string rules;
  std::vector<std::string> calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (choice.kind == ToolChoice::Kind::kNamed && tools[i].name != choice.name) continue;
    const std::string args = absl::StrCat("args-", i);
    absl::StatusOr<std::string> schema =
        s.xml_args ? XmlParameterRules(tools[i].schema, args) : JsonSchemaToGbnfRules(tools[i].schema, args);
    if (!schema.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("tool '", tools[i].name, "': its parameters: ", schema.status().message()));
    }
    // The name as a JSON string's content (its quotes are the syntax's), or bare: then a name the
    // syntax could not end (BareName) is refused.
    std::string name = Json(tools[i].name).dump();
    name = name.substr(1, name.size() - 2);
    if (s.bare_names && !BareName(name)) {
      return absl::InvalidArgumentError(absl::StrCat("tool '", tools[i].name, "': a name the ", ChatSyntaxName(syntax),
                                                     " syntax cannot write (a space, '<', '>' or a character beyond ASCII)"));
    }
    absl::StrAppend(&rules, "call-", i, " ::= ", s.head, s.head.empty() ? "" : " ", Literal(name), " ", s.middle, " ",
                    args, " ", s.tail, "\n", *schema);
    calls.push_back(absl::StrCat("call-", i));
  }
  if (calls.empty()) return absl::InvalidArgumentError(absl::StrCat("tool_choice names '", choice.name, "', which is no tool"));
  absl::StrAppend(&rules, "call ::= ", absl::StrJoin(calls, " | "), "\n");
  absl::StrAppend(&rules, "calls ::= ", choice.parallel ? s.calls : s.one, "\n");
  if (choice.kind == ToolChoice::Kind::kAuto) {
    absl::StrAppend(&rules, "root ::= free-0\n", FreeText(s.open, "calls"));
  } else {
    absl::StrAppend(&rules, "root ::= ", s.lead, " ", Literal(s.open), " calls\n");
  }
  return absl::StrCat(rules, std::string(JsonGbnfHelpers()));
}

}  // namespace llm42
