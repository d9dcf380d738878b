#ifndef LLM42_CHAT_JINJA_VALUE_H_
#define LLM42_CHAT_JINJA_VALUE_H_

// The values a chat template computes with (lib/chat/jinja_template.h): Jinja's data model as
// transformers' sandboxed environment presents it to a template — Python's None, bool, int,
// float, str, list and dict (string keys, insertion order), Jinja's Undefined, namespaces, macros
// and built-in callables — with Python's printing (str() and repr()) and json.dumps, which
// templates' output depends on byte for byte.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace llm42::jinja {

class Value;
using List = std::vector<Value>;

class Dict;
struct Callable;

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() = default;  // undefined
  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  // jinja2's Markup (what `safe` returns): adding a plain str to it HTML-escapes that str.
  static Value Markup(std::string s);
  static Value MakeList(List items);
  // A tuple: a list that prints as Python's tuple and never equals a list.
  static Value MakeTuple(List items);
  // What jinja2's lazy filters (map, select, reject, selectattr, rejectattr, unique, items, batch)
  // return: a generator, which iterates like a list but has no length, no index and no JSON form.
  static Value MakeGenerator(List items);
  static Value MakeDict(Dict d);
  // A namespace(): a dict whose attributes `set ns.x = ...` may assign, shared by reference.
  static Value MakeNamespace(Dict d);
  static Value MakeCallable(std::shared_ptr<const Callable> c);
  // An undefined value that remembers the name it was looked up by (for error messages).
  static Value Undefined(std::string name);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && flavor_ == 3; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && flavor_ == 1; }
  bool is_generator() const { return kind_ == Kind::kList && flavor_ == 2; }
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return i_; }
  double float_value() const { return kind_ == Kind::kFloat ? d_ : static_cast<double>(i_); }
  const std::string& string_value() const { return *s_; }
  const List& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& mutable_namespace() const { return *dict_; }
  const Callable& callable() const { return *callable_; }
  const std::string& undefined_name() const { return *s_; }

  // Python's truth value (Undefined is false).
  bool Truthy() const;
  // Python's str() of the value ("None", "True", "[1, 'a']", "{'k': 1.0}"; Undefined: "").
  std::string Str() const;
  // Python's repr().
  std::string Repr() const;
  // Python's ==.
  bool Equals(const Value& other) const;
  // json.dumps(value, ensure_ascii=False, indent=indent (< 0: None), separators as Python's
  // defaults for that indent, sort_keys); INVALID_ARGUMENT for what JSON cannot hold.
  absl::StatusOr<std::string> ToJson(int indent, bool sort_keys) const;

  // From parsed JSON: objects to dicts (key order kept), arrays to lists, numbers with a fraction or
  // exponent to floats.
  static Value FromJson(const nlohmann::ordered_json& j);

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  uint8_t flavor_ = 0;  // lists: 0 a list, 1 a tuple, 2 a generator; strings: 3 Markup
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Callable> callable_;
};

// A dict: string keys in insertion order.
class Dict {
 public:
  const Value* Find(std::string_view key) const;
  // Inserts or replaces.
  void Set(std::string key, Value v);
  // Building a dict of keys known to be new (a loop's `loop`): room for n, then appends.
  void Reserve(size_t n) { items_.reserve(n); }
  void AppendNew(std::string key, Value v) { items_.emplace_back(std::move(key), std::move(v)); }
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> items_;
};

// A call's arguments: positional, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  const Value* Keyword(std::string_view name) const {
    for (const auto& [k, v] : keywords) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

// A built-in function, a bound method or a macro.
struct Callable {
  std::string name;
  std::function<absl::StatusOr<Value>(const CallArgs&)> fn;
};

// Python's repr of a float ("1.0", "0.1", "1e+16", "inf", "nan").
std::string FloatRepr(double d);

}  // namespace llm42::jinja

#endif  // LLM42_CHAT_JINJA_VALUE_H_
