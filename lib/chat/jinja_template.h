#ifndef LLM42_CHAT_JINJA_TEMPLATE_H_
#define LLM42_CHAT_JINJA_TEMPLATE_H_

// A Jinja template as the hub's chat templates use the language, rendered as transformers'
// apply_chat_template renders it: an ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, the loop-controls extension, `tojson` as json.dumps(ensure_ascii=False), the
// globals raise_exception and strftime_now. Written here because no Jinja implementation for C++
// is packaged in Debian (the Python one is the reference the tests compare against).
//
// What it reads: text, {{ expressions }}, {% statements %} and {# comments #} with whitespace
// control (- and +); if/elif/else, for (tuple targets, `if` filter, else, loop.*), set (names,
// tuples, namespace attributes, blocks), macro and call blocks, filter blocks, break/continue,
// generation blocks (rendered as their body), raw; literals, arithmetic, comparisons, `in`, `is`
// tests, filters, conditional expressions, slicing, attribute and item access, and the string,
// list and dict methods templates call. A template is untrusted input (it comes from a model
// file): nothing outside this data model can be reached, and rendering is bounded in output
// size, steps, nesting and time (Limits).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/chat/jinja_value.h"

namespace llm42::jinja {

struct Node;

struct Limits {
  size_t max_output_bytes = 16 << 20;
  // Statements executed, loop iterations, expressions evaluated; also the longest list a template
  // may build (range, repetition). The hub's templates take thousands.
  int64_t max_steps = 2'000'000;
  int max_depth = 200;             // nested macro calls and expressions
  double max_seconds = 10.0;
};

class Template {
 public:
  // INVALID_ARGUMENT "template line L, column C: ..." for a template that does not parse.
  static absl::StatusOr<Template> Parse(std::string_view source);

  // Renders with `variables` (a dict: messages, tools, add_generation_prompt, bos_token, ...).
  // INVALID_ARGUMENT for an error the template makes or raises (raise_exception's message, with
  // its line), RESOURCE_EXHAUSTED past a limit.
  absl::StatusOr<std::string> Render(const Dict& variables, const Limits& limits = Limits()) const;

  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;
  ~Template();

 private:
  Template();
  std::unique_ptr<Node> root_;
};

}  // namespace llm42::jinja

#endif  // LLM42_CHAT_JINJA_TEMPLATE_H_
