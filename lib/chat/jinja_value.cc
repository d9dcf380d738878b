#include "lib/chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"

namespace llm42::jinja {
namespace {

// Printing a list or dict stops past this many bytes (a template's output is bounded far below it:
// Limits), so that a list of many references to one long string cannot print into gigabytes.
constexpr size_t kMaxPrintBytes = 64 << 20;

}  // namespace

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(std::string key, Value v) {
  for (auto& [k, old] : items_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(v));
}

Value Value::Bool(bool b) {
  Value v(Kind::kBool);
  v.b_ = b;
  v.i_ = b ? 1 : 0;
  return v;
}

Value Value::Int(int64_t i) {
  Value v(Kind::kInt);
  v.i_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v(Kind::kFloat);
  v.d_ = d;
  return v;
}

Value Value::String(std::string s) {
  Value v(Kind::kString);
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::Markup(std::string s) {
  Value v = String(std::move(s));
  v.flavor_ = 3;
  return v;
}

Value Value::MakeList(List items) {
  Value v(Kind::kList);
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::MakeTuple(List items) {
  Value v = MakeList(std::move(items));
  v.flavor_ = 1;
  return v;
}

Value Value::MakeGenerator(List items) {
  Value v = MakeList(std::move(items));
  v.flavor_ = 2;
  return v;
}

Value Value::MakeDict(Dict d) {
  Value v(Kind::kDict);
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::MakeNamespace(Dict d) {
  Value v(Kind::kNamespace);
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::MakeCallable(std::shared_ptr<const Callable> c) {
  Value v(Kind::kCallable);
  v.callable_ = std::move(c);
  return v;
}

Value Value::Undefined(std::string name) {
  Value v(Kind::kUndefined);
  v.s_ = std::make_shared<const std::string>(std::move(name));
  return v;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return d_ != 0;
    case Kind::kString: return !s_->empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return dict_->size() > 0;
    case Kind::kNamespace:
    case Kind::kCallable: return true;
  }
  return false;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // The shortest digits that round-trip, then Python's layout: positional for exponents in
  // [-4, 16), else d.ddde+XX.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  // (Built by appends: GCC 12 at -O3 takes "x" + temporary for an overlapping copy.)
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out.append("0.").append(static_cast<size_t>(-exponent - 1), '0').append(digits);
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out.append(digits).append(static_cast<size_t>(exponent) + 1 - digits.size(), '0').append(".0");
    } else {
      const auto point = static_cast<size_t>(exponent) + 1;
      out.append(digits, 0, point).append(".").append(digits, point, std::string::npos);
    }
  } else {
    out.append(digits, 0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1, std::string::npos);
    char exp[16];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out.append(exp);
  }
  return out;
}

namespace {

// Python's repr of a str: single quotes unless the text holds ' and no ", escapes for \\, the
// quote, \n \r \t and other control characters; other characters (non-ASCII included) as they are.
std::string StringRepr(const std::string& s) {
  const bool double_quotes = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = double_quotes ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(q)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

}  // namespace

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kString: return StringRepr(*s_);
    case Kind::kList: {
      if (flavor_ == 2) return "<generator object>";
      const bool tuple = flavor_ == 1;
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < list_->size() && out.size() <= kMaxPrintBytes; ++i) {
        absl::StrAppend(&out, i ? ", " : "", (*list_)[i].Repr());
      }
      return out + (tuple ? (list_->size() == 1 ? ",)" : ")") : "]");
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items()) {
        if (out.size() > kMaxPrintBytes) break;
        absl::StrAppend(&out, first ? "" : ", ", StringRepr(k), ": ", v.Repr());
        first = false;
      }
      return out + "}";
    }
    default: return Str();
  }
}

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return FloatRepr(d_);
    case Kind::kString: return *s_;
    case Kind::kList:
    case Kind::kDict: return Repr();
    case Kind::kNamespace: return "<Namespace>";
    case Kind::kCallable: return "<function " + callable_->name + ">";
  }
  return "";
}

bool Value::Equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kFloat || o.kind_ == Kind::kFloat) return float_value() == o.float_value();
    return i_ == o.i_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return *s_ == *o.s_;
    case Kind::kList:
      if (flavor_ != o.flavor_ || flavor_ == 2 || list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].Equals((*o.list_)[i])) return false;
      }
      return true;
    case Kind::kDict: {
      if (dict_->size() != o.dict_->size()) return false;
      for (const auto& [k, v] : dict_->items()) {
        const Value* w = o.dict_->Find(k);
        if (w == nullptr || !v.Equals(*w)) return false;
      }
      return true;
    }
    case Kind::kNamespace: return dict_ == o.dict_;
    case Kind::kCallable: return callable_ == o.callable_;
    default: return false;
  }
}

namespace {

// json.dumps's string encoding with ensure_ascii=False.
void JsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

absl::Status Dump(const Value& v, int indent, bool sort_keys, int depth, std::string* out) {
  if (depth > 512) return absl::InvalidArgumentError("tojson: the value nests too deeply");
  if (out->size() > kMaxPrintBytes) return absl::ResourceExhaustedError("tojson: the JSON grows past 64 MiB");
  const std::string item_sep = indent < 0 ? ", " : ",";
  auto newline = [&](int level) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * level), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kNone: *out += "null"; return absl::OkStatus();
    case Value::Kind::kBool: *out += v.bool_value() ? "true" : "false"; return absl::OkStatus();
    case Value::Kind::kInt: *out += std::to_string(v.int_value()); return absl::OkStatus();
    case Value::Kind::kFloat: {
      const double d = v.float_value();
      *out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : FloatRepr(d);
      return absl::OkStatus();
    }
    case Value::Kind::kString: JsonString(v.string_value(), out); return absl::OkStatus();
    case Value::Kind::kList: {
      if (v.is_generator()) return absl::InvalidArgumentError("tojson: a generator is not JSON serializable (add | list)");
      if (v.list().empty()) {
        *out += "[]";
        return absl::OkStatus();
      }
      out->push_back('[');
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(depth + 1);
        if (absl::Status s = Dump(v.list()[i], indent, sort_keys, depth + 1, out); !s.ok()) return s;
      }
      newline(depth);
      out->push_back(']');
      return absl::OkStatus();
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict().items()) items.push_back(&kv);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      if (items.empty()) {
        *out += "{}";
        return absl::OkStatus();
      }
      out->push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(depth + 1);
        JsonString(items[i]->first, out);
        *out += ": ";
        if (absl::Status s = Dump(items[i]->second, indent, sort_keys, depth + 1, out); !s.ok()) return s;
      }
      newline(depth);
      out->push_back('}');
      return absl::OkStatus();
    }
    case Value::Kind::kUndefined:
    case Value::Kind::kCallable:
      return absl::InvalidArgumentError(absl::StrCat("tojson: ", v.is_undefined() ? "an undefined value" : "a function",
                                                     " is not JSON serializable"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> Value::ToJson(int indent, bool sort_keys) const {
  std::string out;
  if (absl::Status s = Dump(*this, indent, sort_keys, 0, &out); !s.ok()) return s;
  return out;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return None();
    case nlohmann::ordered_json::value_t::boolean: return Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Int(static_cast<int64_t>(u)) : Float(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(FromJson(e));
      return MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.Set(k, FromJson(e));
      return MakeDict(std::move(d));
    }
    default: return None();
  }
}

}  // namespace llm42::jinja
