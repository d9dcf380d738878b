// lib/chat/jinja_template against Debian's python3-jinja2 configured as transformers configures it
// (tests/render_jinja.py): every case rendered by both, byte for byte, and where the reference
// fails (a syntax error, raise_exception, an undefined attribute), ours fails too. The cases: the
// language's constructs one by one, the chat templates in ../shared/templates over conversations
// with system prompts, tools, tool calls and results, generation prompts on and off and non-ASCII
// text, and, where LLM42_JINJA_CORPUS names a folder of *.jinja templates (llama.cpp's
// models/templates, say), every template there over the same conversations.
#include "lib/chat/jinja_template.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "lib/engine/session.h"
#include "lib/maker/model_maker.h"
#include "lib/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace llm42::jinja {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

struct Case {
  std::string name;
  std::string source;
  json vars;
};

struct Outcome {
  bool ok = false;
  std::string text;  // the rendering, or the error
};

// The reference is Debian's python3-jinja2, which tools/install-deps.sh pins: where Debian's
// python3 is not there at all (a machine that never ran it) the tests skip, saying so; where it is,
// a missing or broken jinja2 fails them rather than hiding behind a skip.
bool HaveDebianPython() { return !std::string(LLM42_PYTHON3).empty(); }
void ExpectJinja() {
  EXPECT_EQ(std::system((std::string(LLM42_PYTHON3) + " -c 'import jinja2'").c_str()), 0)
      << LLM42_PYTHON3 << " cannot import jinja2: run tools/install-deps.sh (it installs python3-jinja2)";
}

// Every case rendered by the reference in one run.
std::vector<Outcome> Reference(const std::vector<Case>& cases) {
  json in = json::array();
  for (const Case& c : cases) in.push_back({{"template", c.source}, {"vars", c.vars}});
  // Per test and process: ctest runs this binary's test cases as processes side by side.
  const std::string stem = std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "." +
                           std::to_string(::getpid());
  const std::string in_path = testing::TempPath(stem + ".cases.json"), out_path = testing::TempPath(stem + ".results.json");
  std::ofstream(in_path) << in.dump();
  const std::string cmd = std::string(LLM42_PYTHON3) + " " LLM42_SOURCE_DIR "/tests/render_jinja.py < '" + in_path +
                          "' > '" + out_path + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const json results = json::parse(testing::ReadFile(out_path));
  fs::remove(in_path);
  fs::remove(out_path);
  std::vector<Outcome> out;
  for (const json& r : results) {
    out.push_back(r.contains("out") ? Outcome{true, r["out"].get<std::string>()} : Outcome{false, r["error"].get<std::string>()});
  }
  return out;
}

Outcome Ours(const Case& c) {
  absl::StatusOr<Template> t = Template::Parse(c.source);
  if (!t.ok()) return {false, std::string(t.status().message())};
  const Value vars = Value::FromJson(c.vars);
  absl::StatusOr<std::string> r = t->Render(vars.dict());
  if (!r.ok()) return {false, std::string(r.status().message())};
  return {true, *r};
}

// Renders every case both ways; returns how many rendered (not failed) in the reference.
int Compare(const std::vector<Case>& cases) {
  const std::vector<Outcome> reference = Reference(cases);
  EXPECT_EQ(reference.size(), cases.size());
  int rendered = 0;
  for (size_t i = 0; i < cases.size() && i < reference.size(); ++i) {
    const Outcome ours = Ours(cases[i]);
    if (!reference[i].ok) {
      EXPECT_FALSE(ours.ok) << cases[i].name << ": the reference fails (" << reference[i].text << ") but ours rendered:\n"
                            << ours.text;
      continue;
    }
    ++rendered;
    EXPECT_TRUE(ours.ok) << cases[i].name << ": " << ours.text;
    if (ours.ok) {
      EXPECT_EQ(ours.text, reference[i].text) << cases[i].name << "\ntemplate:\n" << cases[i].source;
    }
  }
  return rendered;
}

#define LLM42_JINJA_OR_SKIP()                                                                                     \
  if (!HaveDebianPython()) {                                                                                       \
    GTEST_SKIP() << "Debian's python3 (/usr/bin/python3, for python3-jinja2, the reference) was not found at configure " \
                    "time: run tools/install-deps.sh and configure again";                                        \
  }                                                                                                                \
  ExpectJinja();                                                                                                   \
  if (::testing::Test::HasFailure()) return

TEST(Jinja, ConstructsRenderAsJinja2RendersThem) {
  LLM42_JINJA_OR_SKIP();
  const json data = json::parse(R"({
    "s": "  Hello, World \n", "n": 3, "f": 2.5, "big": 1e20, "small": 0.0001, "t": true, "nil": null,
    "list": [3, 1, 2], "words": ["b", "a", "c"], "d": {"b": 1, "a": [1, 2.0, "x", null, true]},
    "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "x": 1},
             {"role": "user", "content": "bye"}],
    "uni": "Grüße 🦙 \"q\" 'a' \\ \t"
  })");
  const std::vector<std::pair<const char*, const char*>> templates = {
      {"text", "plain text"},
      {"emit", "{{ n }} {{ f }} {{ big }} {{ small }} {{ t }} {{ nil }} {{ list }} {{ d }} {{ words }}"},
      {"undefined prints empty", "[{{ missing }}]"},
      {"string repr", "{{ [uni] }} {{ {'k': uni} }}"},
      {"whitespace control", "a  {{- n -}}  b\n  {%- if t %}  c  {% endif -%}\n d"},
      {"trim and lstrip", "x\n    {% if t %}\n    yes\n    {% endif %}\n  {# c #}\ny\n"},
      {"plus keeps", "x\n    {%+ if t %}\nyes\n{%+ endif +%}\nz"},
      {"if elif else", "{% for i in range(5) %}{% if i == 0 %}z{% elif i is odd %}o{% else %}e{% endif %}{% endfor %}"},
      {"for loop vars",
       "{% for m in msgs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.first }}/{{ loop.last }}/"
       "{{ loop.length }}/{{ loop.previtem.role if loop.previtem is defined }}/{{ loop.cycle('a','b') }};{% endfor %}"},
      {"for else and filter", "{% for x in list if x > 5 %}{{ x }}{% else %}none{% endfor %}|{% for x in list if x > 1 %}{{ x }}{% endfor %}"},
      {"for over dict and items", "{% for k in d %}{{ k }}{% endfor %}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"},
      {"for over string", "{% for c in 'aé🦙' %}[{{ c }}]{% endfor %}"},
      {"break continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"},
      {"loop scope", "{% set x = 1 %}{% for i in list %}{% set x = i %}{% endfor %}{{ x }}"},
      {"namespace", "{% set ns = namespace(found=false, n=0) %}{% for m in msgs %}{% if m.role == 'assistant' %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.found }} {{ ns.n }}"},
      {"set tuple and block", "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set blk %}  in {{ n }} {% endset %}[{{ blk }}]{% set t2 | trim %}  x  {% endset %}[{{ t2 }}]"},
      {"macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}"},
      {"macro varargs kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}"},
      {"call block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ n }}{% endcall %}"},
      {"call block args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each(list) %}<{{ v }}>{% endcall %}"},
      {"filter block", "{% filter upper %}shout {{ n }}{% endfilter %}"},
      {"arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 - 4 }} {{ 1.5 + 1 }} {{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ n ~ 'x' ~ nil }}"},
      {"comparisons", "{{ 1 < 2 }} {{ 'a' < 'b' }} {{ 2 >= 2.0 }} {{ 1 == 1.0 }} {{ 'a' in 'cat' }} {{ 2 in list }} {{ 'a' in d }} {{ 'z' not in d }} {{ [1, 2] == [1, 2] }}"},
      {"logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ nil or [] }} {{ not t }} {{ 'a' if t else 'b' }} {{ 'c' if not t else 'd' }} [{{ 'e' if false }}]"},
      {"tests", "{{ n is number }} {{ s is string }} {{ d is mapping }} {{ list is iterable }} {{ nil is none }} {{ missing is defined }} {{ missing is undefined }} {{ t is true }} {{ t is boolean }} {{ n is even }} {{ n is divisibleby 3 }} {{ list is sequence }} {{ 'x' is in 'xy' }} {{ n is integer }} {{ f is float }} {{ n is not string }}"},
      {"string filters", "[{{ s | trim }}] {{ s | upper }} {{ s | lower }} {{ 'hello world' | title }} {{ 'hELLO' | capitalize }} {{ s | replace('l', 'L') }} {{ s | length }} {{ uni | length }} {{ 'a,b,,c' | wordcount }}"},
      {"string methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'a b  c'.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ s.startswith('  He') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'hello'.find('l') }}|{{ 'hello'.count('l') }}|{{ '{} and {}'.format(1, 'two') }}|{{ '-'.join(words) }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'x y'.title() }}"},
      {"list filters", "{{ list | first }} {{ list | last }} {{ list | sort }} {{ words | sort(reverse=true) }} {{ list | reverse | list }} {{ list | sum }} {{ list | min }} {{ list | max }} {{ list | join(', ') }} {{ [1, 1, 2] | unique | list }} {{ list | length }} {{ list | batch(2) | list }}"},
      {"select map", "{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ msgs | rejectattr('x', 'defined') | list | length }} {{ list | select('odd') | list }} {{ list | reject('odd') | list }} {{ msgs | map(attribute='role') | join(',') }} {{ ['1', '2'] | map('int') | list }}"},
      {"dict filters", "{{ d | items | list }} {{ d | dictsort }} {{ d.get('b') }} {{ d.get('z', 'dflt') }} {{ d['a'][1] }} {{ d.a[2] }} {{ d.keys() | list }} {{ d.values() | list | length }}"},
      {"default", "{{ missing | default('dflt') }} {{ nil | default('x') }} {{ '' | default('y', true) }} {{ n | d(5) }}"},
      {"tojson", "{{ d | tojson }} {{ msgs | tojson }} {{ uni | tojson }} {{ d | tojson(indent=2) }} {{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }} {{ [1.0, 0.5, 1e-7, 1e22] | tojson }}"},
      {"slicing", "{{ list[1:] }} {{ list[:-1] }} {{ list[::-1] }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[::2] }} {{ uni[-3:] }} {{ list[-1] }} {{ 'abc'[1] }} {{ msgs[1:] | length }}"},
      {"indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(4, true) }}|{{ 'x\\n\\ny' | indent(2, false, true) }}"},
      {"numbers", "{{ 10 / 4 }} {{ 3.0 }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ '42' | int + 1 }} {{ '2.5' | float }} {{ -3 | abs }} {{ 1_000 }} {{ 12345678901234567 * 10.0 }}"},
      {"string literals", "{{ 'it\\'s' }} {{ \"say \\\"hi\\\"\" }} {{ 'tab\\there' }} {{ 'a' 'b' }} {{ '\\u00e9\\x41' }}"},
      {"escape and safe", "{{ '<a href=\"x\">' | e }} {{ 'x' | safe }}"},
      {"raw", "{% raw %}{{ not rendered }} {% if %}{% endraw %}!"},
      {"generation", "{% generation %}gen {{ n }}{% endgeneration %}"},
      {"comment trims", "a\n{# comment #}\nb  {#- c -#}  c"},
      {"raise", "{{ raise_exception('refused: ' ~ n) }}"},
      {"undefined attribute fails", "{{ missing.attr }}"},
      {"unknown filter fails", "{{ n | nosuchfilter }}"},
      {"syntax error", "{% if t %}unclosed"},
      {"syntax error 2", "{{ 1 + }}"},
      {"list append is unsafe", "{% set l = [] %}{{ l.append(1) }}"},
      {"none attribute", "[{{ nil.x }}]"},
      {"nested data", "{% for m in msgs %}{{ m['role'] }}:{{ m.content | trim }}{% if not loop.last %}, {% endif %}{% endfor %}"},
      {"trailing newline dropped", "line\n"},
      {"crlf", "a\r\n{% if t %}\r\nb\r\n{% endif %}\r\nc"},
      {"strftime", "{{ strftime_now('%Y') | length }}"},
  };
  std::vector<Case> cases;
  for (const auto& [name, source] : templates) cases.push_back({name, source, data});
  EXPECT_GE(Compare(cases), 40);
}

// Conversations in OpenAI's form, as transformers passes them to a template (tools and documents
// None when absent).
std::vector<json> Conversations() {
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "give_item", "description": "Give the player an item.",
      "parameters": {"type": "object", "properties": {"player": {"type": "string"}, "item": {"type": "string",
      "enum": ["sword", "shield"]}}, "required": ["player", "item"]}}},
    {"type": "function", "function": {"name": "get_weather", "description": "Weather at a place.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
      "required": ["city"]}}}])");
  const json call = json::parse(R"([{"id": "call_1", "type": "function", "function": {"name": "give_item",
      "arguments": {"player": "Ann", "item": "sword"}}}])");
  std::vector<json> messages = {
      json::parse(R"([{"role": "user", "content": "Hello!"}])"),
      json::parse(R"([{"role": "system", "content": "You are a pirate."}, {"role": "user", "content": "Where is the treasure?"}])"),
      json::parse(R"([{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2+2?"},
                      {"role": "assistant", "content": "4."}, {"role": "user", "content": "And 3+3?"}])"),
      json::parse(R"([{"role": "user", "content": "  Grüße 🦙 \n\n"}, {"role": "assistant", "content": "  Noted.  "},
                      {"role": "user", "content": "{\"json\": true}"}])"),
      json::parse(R"([{"role": "user", "content": "Why?"}, {"role": "assistant", "content": "<think>\nLet me see.\n</think>\n\nBecause."},
                      {"role": "user", "content": "Sure?"}])"),
      json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "Parts "}, {"type": "text", "text": "joined"}]}])"),
  };
  std::vector<json> out;
  for (const json& m : messages) {
    for (bool gen : {true, false}) {
      out.push_back({{"messages", m}, {"add_generation_prompt", gen}, {"tools", nullptr}, {"documents", nullptr}});
    }
  }
  // With tools, a call and its result.
  json with_call = json::array();
  with_call.push_back({{"role", "system"}, {"content", "You run a shop."}});
  with_call.push_back({{"role", "user"}, {"content", "Give Ann a sword."}});
  with_call.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", call}});
  with_call.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"name", "give_item"}, {"content", "{\"ok\": true}"}});
  out.push_back({{"messages", json::parse(R"([{"role": "user", "content": "Give Ann a sword."}])")},
                 {"add_generation_prompt", true}, {"tools", tools}, {"documents", nullptr}});
  out.push_back({{"messages", with_call}, {"add_generation_prompt", true}, {"tools", tools}, {"documents", nullptr}});
  out.push_back({{"messages", with_call}, {"add_generation_prompt", false}, {"tools", tools}, {"documents", nullptr},
                 {"enable_thinking", false}});
  return out;
}

// Every template in `dir` over the conversations (`only`: those of these indices).
std::vector<Case> TemplateCases(const fs::path& dir, const std::vector<size_t>& only = {}) {
  std::vector<Case> cases;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".jinja") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const std::string source = testing::ReadFile(f.string());
    const std::vector<json> conversations = Conversations();
    for (size_t k = 0; k < conversations.size(); ++k) {
      if (!only.empty() && std::find(only.begin(), only.end(), k) == only.end()) continue;
      json vars = conversations[k];
      vars["bos_token"] = "<s>";
      vars["eos_token"] = "</s>";
      cases.push_back({f.filename().string() + " #" + std::to_string(k), source, vars});
    }
  }
  return cases;
}

TEST(Jinja, SharedChatTemplatesRenderAsTransformersRendersThem) {
  LLM42_JINJA_OR_SKIP();
  LLM42_SHARED_OR_SKIP(dir, "templates");
  const std::vector<Case> cases = TemplateCases(dir);
  ASSERT_GE(cases.size(), 5 * Conversations().size());
  EXPECT_GE(Compare(cases), static_cast<int>(cases.size()) / 2);
}

// The corpus: LLM42_JINJA_CORPUS, else llama.cpp's test templates where tools/bench-llamacpp.sh and
// tools/make-llamacpp-references.sh build llama.cpp (its source tree, in the project's cache). An
// asset outside the repository: skipped where neither is there, saying so.
std::string CorpusDir() {
  if (const char* dir = std::getenv("LLM42_JINJA_CORPUS")) return dir;
  const std::string llamacpp = testing::LlamaCppSourceDir();
  return llamacpp.empty() ? std::string() : llamacpp + "/models/templates";
}

// Templates the renderer refuses where the reference renders, each with why; everything else in
// the corpus must match.
const std::vector<std::pair<std::string, std::string>>& KnownUnsupported() {
  static const auto* known = new std::vector<std::pair<std::string, std::string>>{
      {"ByteDance-Seed-OSS.jinja", "dict keys must be strings"},  // a dict literal with integer keys
  };
  return *known;
}

TEST(Jinja, CorpusRendersAsTransformersRendersIt) {
  LLM42_JINJA_OR_SKIP();
  const std::string corpus = CorpusDir();
  if (corpus.empty() || !fs::is_directory(corpus)) {
    GTEST_SKIP() << "no corpus of chat templates at '" << corpus << "': set LLM42_JINJA_CORPUS to a folder of *.jinja "
                 << "files, or build llama.cpp once with tools/bench-llamacpp.sh (its models/templates)";
  }
  // Five conversations a template (a system prompt, several turns, non-ASCII, tools with a call and
  // its result), so that the suite stays well under a minute under the sanitizers.
  std::vector<Case> cases, unsupported;
  for (Case& c : TemplateCases(corpus, {2, 7, 12, 13, 14})) {
    bool known = false;
    for (const auto& [file, why] : KnownUnsupported()) known |= c.name.starts_with(file + " #");
    (known ? unsupported : cases).push_back(std::move(c));
  }
  const int rendered = Compare(cases);
  ::testing::Test::RecordProperty("rendered", rendered);
  EXPECT_GT(rendered, static_cast<int>(cases.size()) / 2);
  // The known gaps fail with their reason (so that one that starts rendering is noticed and
  // compared instead).
  for (const Case& c : unsupported) {
    const Outcome ours = Ours(c);
    EXPECT_FALSE(ours.ok) << c.name << " renders now: take it off KnownUnsupported";
    bool reason = false;
    for (const auto& [file, why] : KnownUnsupported()) reason |= ours.text.find(why) != std::string::npos;
    EXPECT_TRUE(reason) << c.name << ": " << ours.text;
  }
}

// A session renders OpenAI-form JSON (tools, a tool call and its result, kwargs) with the model's own
// template as transformers would: a tiny model carrying Qwen 2.5's template (which writes tools
// and tool calls), against the reference with the vocabulary's BOS and EOS.
TEST(Jinja, SessionAppliesTheModelsOwnTemplateToJson) {
  LLM42_JINJA_OR_SKIP();
  LLM42_SHARED_OR_SKIP(tmpl, "templates/Qwen-Qwen2.5-7B-Instruct.jinja");
  LLM42_SHARED_OR_SKIP(vocab, "models/stories260K.gguf");
  const std::string model = testing::TempPath("qwen25-template.gguf");
  ModelPreset tiny = ModelPresets()[0];
  tiny.n_layer = 1;
  ASSERT_TRUE(MakeModel(tiny, GgmlType::kF32, vocab, 1, model, testing::ReadFile(tmpl)).ok());
  SessionOptions o;
  o.model_path = model;
  o.threads = 1;
  auto session = Session::Create(o);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::vector<json> conversations = Conversations();
  const json& with_call = conversations[conversations.size() - 2];
  const std::string options = json{{"tools", with_call["tools"]}, {"add_generation_prompt", true},
                                   {"kwargs", {{"extra", "x"}}}}.dump();
  absl::StatusOr<std::string> ours = (*session)->ApplyChatTemplate(with_call["messages"].dump(), options);
  ASSERT_TRUE(ours.ok()) << ours.status();
  json vars = with_call;
  const Vocab& v = (*session)->tokenizer().vocab();
  vars["bos_token"] = v.bos() >= 0 ? v.text(v.bos()) : "";
  vars["eos_token"] = v.eos() >= 0 ? v.text(v.eos()) : "";
  vars["extra"] = "x";
  const std::vector<Outcome> reference = Reference({Case{"qwen2.5 with tools", testing::ReadFile(tmpl), vars}});
  ASSERT_TRUE(reference[0].ok) << reference[0].text;
  EXPECT_EQ(*ours, reference[0].text);
  EXPECT_NE(ours->find("give_item"), std::string::npos);  // the tools and the call are in it
  std::filesystem::remove(model);
}

// Bounds: a template is untrusted input.
TEST(Jinja, LimitsStopRunawayTemplates) {
  Dict none;
  auto loop = Template::Parse("{% for i in range(1000000) %}{% for j in range(1000000) %}x{% endfor %}{% endfor %}");
  ASSERT_TRUE(loop.ok());
  Limits small;
  small.max_steps = 100000;
  absl::StatusOr<std::string> r = loop->Render(none, small);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  auto big = Template::Parse("{% set s = 'x' * 1000 %}{% for i in range(100000) %}{{ s }}{% endfor %}");
  ASSERT_TRUE(big.ok());
  Limits output;
  output.max_output_bytes = 1 << 20;
  r = big->Render(none, output);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  auto recursion = Template::Parse("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(recursion.ok());
  r = recursion->Render(none);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  // Found by chat_template_fuzzer: 64-bit arithmetic that would overflow is an error (Python's ints
  // would grow; a chat template never needs that), not undefined behaviour.
  for (const char* overflow : {"{{ 333 * 3333333333333333333 }}", "{{ 9223372036854775807 + 1 }}", "{{ 3 ** 99 }}",
                               "{{ -(-9223372036854775807 - 1) }}", "{{ (-9223372036854775807 - 1) // -1 }}",
                               "{{ 1e300 | int }}"}) {
    auto t = Template::Parse(overflow);
    ASSERT_TRUE(t.ok()) << overflow;
    EXPECT_EQ(t->Render(none).status().code(), absl::StatusCode::kInvalidArgument) << overflow;
  }
  // Trees too deep to walk on a small stack are refused when parsed.
  EXPECT_EQ(Template::Parse("{{ " + std::string(100000, '-') + "1 }}").status().code(), absl::StatusCode::kInvalidArgument);
  std::string sum = "{{ 1";
  for (int i = 0; i < 5000; ++i) sum += " + 1";
  EXPECT_EQ(Template::Parse(sum + " }}").status().code(), absl::StatusCode::kInvalidArgument);
  std::string nested;
  for (int i = 0; i < 500; ++i) nested += "{% if true %}";
  EXPECT_EQ(Template::Parse(nested).status().code(), absl::StatusCode::kInvalidArgument);
  // A string doubled in a loop stops at the output limit, before it can exhaust memory.
  auto doubling = Template::Parse("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  ASSERT_TRUE(doubling.ok());
  EXPECT_FALSE(doubling->Render(none, output).ok());
  auto bad = Template::Parse("line one\n{% for x in %}");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("line 2, column"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace llm42::jinja
