#ifndef LLM42_CHAT_JINJA_AST_H_
#define LLM42_CHAT_JINJA_AST_H_

// The parsed form of a Jinja template (jinja_parser.cc makes it, jinja_template.cc renders it).
// Internal to lib/chat.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/chat/jinja_value.h"

namespace llm42::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // items
    kTuple,     // items (a list when evaluated)
    kDict,      // items: key, value, key, value, ...
    kAttr,      // items[0].name
    kItem,      // items[0][items[1]]
    kSlice,     // items[0][items[1]:items[2]:items[3]] (null parts absent)
    kCall,      // items[0](items[1..], kwargs)
    kFilter,    // items[0] | name(items[1..], kwargs)
    kTest,      // items[0] is [not: negate] name(items[1..])
    kUnary,     // name ("-", "+", "not") items[0]
    kBinary,    // items[0] name items[1]: + - * / // % ** ~ == != < <= > >= in "not in" and or
    kCond,      // items[0] if items[1] else items[2] (absent: undefined)
  };
  Kind kind;
  int line = 0, column = 0;
  Value value;
  std::string name;
  bool negate = false;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kText,         // text
    kEmit,         // {{ expr }}
    kIf,           // conditions[i] -> bodies[i]; a last body without condition is else
    kFor,          // for targets in expr [if filter] body [else else_body]
    kSet,          // set targets = expr; or set targets[0] (a name or name.attr) as a block's output
    kMacro,        // macro name(params = defaults) body
    kCallBlock,    // call(params) expr: body is `caller`
    kFilterBlock,  // filter (expr: a kFilter chain over a placeholder) body
    kBreak,
    kContinue,
    kBlock,        // body (generation blocks, the root)
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;           // emit, for's iterable, set's value, call's call, filter chain
  ExprPtr filter;         // for's `if`
  std::vector<std::string> targets;  // for/set names ("ns.attr" for namespace attributes)
  std::vector<ExprPtr> conditions;   // if
  std::vector<Body> bodies;          // if branches
  Body body, else_body;
  // macro / call block parameters, with defaults (null: none).
  std::vector<std::pair<std::string, ExprPtr>> params;
  bool set_block = false;
};

// The template's root (a kBlock); INVALID_ARGUMENT "template line L, column C: ..." where it does
// not parse (jinja_parser.cc).
absl::StatusOr<NodePtr> ParseTemplate(std::string_view source);

}  // namespace llm42::jinja

#endif  // LLM42_CHAT_JINJA_AST_H_
