#include "lib/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/grammar/grammar.h"
#include "nlohmann/json.hpp"
#include "lib/util/status.h"

namespace llm42 {
namespace {

using Json = nlohmann::ordered_json;

// Rules every converted schema may use (names without a '-': the generated ones have one).
constexpr std::string_view kHelpers = R"(ws ::= | " " | "\n" [ \t]{0,20}
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt]
number ::= integer ( "." [0-9]+ )? ( [eE] [-+]? [0-9]{1,2} )?
integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
boolean ::= "true" | "false"
null ::= "null"
date ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )
time ::= ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
date-string ::= "\"" date "\""
time-string ::= "\"" time "\""
date-time-string ::= "\"" date "T" time "\""
uuid-string ::= "\"" [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12} "\""
)";

constexpr int64_t kMaxIntegerBound = 1000000000000000000;  // 1e18
constexpr int kMaxDigits = 18;

const std::set<std::string>& Annotations() {
  static const auto* s = new std::set<std::string>{"$schema", "$id", "$comment", "title", "description", "default",
                                                    "examples", "deprecated", "readOnly", "writeOnly", "$defs",
                                                    "definitions"};
  return *s;
}

const std::set<std::string>& Constraints() {
  static const auto* s = new std::set<std::string>{
      "type",      "properties", "required",  "additionalProperties", "items",     "prefixItems",
      "minItems",  "maxItems",   "enum",      "const",                "anyOf",     "oneOf",
      "$ref",      "minLength",  "maxLength", "minimum",              "maximum",   "exclusiveMinimum",
      "exclusiveMaximum",        "pattern",   "format"};
  return *s;
}

// A GBNF literal for the bytes.
std::string Literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7F) {
      out += absl::StrFormat("\\x%02X", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Repeat(const std::string& item, int64_t lo, std::optional<int64_t> hi) {
  if (hi && *hi == 0) return "\"\"";
  if (lo == 0 && !hi) return absl::StrCat("( ", item, " )*");
  if (lo == 1 && !hi) return absl::StrCat("( ", item, " )+");
  if (!hi) return absl::StrCat("( ", item, " ){", lo, ",}");
  if (lo == *hi) return absl::StrCat("( ", item, " ){", lo, "}");
  return absl::StrCat("( ", item, " ){", lo, ",", *hi, "}");
}

// Digit strings s..t of one length, s <= t (inner positions may start with 0).
std::string SameLength(const std::string& s, const std::string& t) {
  if (s.size() == 1) return s == t ? Literal(s) : absl::StrCat("[", s, "-", t, "]");
  if (s[0] == t[0]) return absl::StrCat(Literal(s.substr(0, 1)), " ", SameLength(s.substr(1), t.substr(1)));
  const size_t rest = s.size() - 1;
  std::vector<std::string> alts;
  alts.push_back(absl::StrCat(Literal(s.substr(0, 1)), " ", SameLength(s.substr(1), std::string(rest, '9'))));
  if (t[0] - s[0] > 1) {
    alts.push_back(absl::StrCat("[", std::string(1, static_cast<char>(s[0] + 1)), "-",
                                std::string(1, static_cast<char>(t[0] - 1)), "] [0-9]{", rest, "}"));
  }
  alts.push_back(absl::StrCat(Literal(t.substr(0, 1)), " ", SameLength(std::string(rest, '0'), t.substr(1))));
  return absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
}

// Decimal numbers a..b without leading zeros, 0 <= a <= b (b < 0: unbounded, to kMaxDigits digits).
std::string NaturalRange(int64_t a, int64_t b) {
  const std::string sa = std::to_string(a), sb = b >= 0 ? std::to_string(b) : std::string();
  const size_t top_len = b >= 0 ? sb.size() : static_cast<size_t>(kMaxDigits);
  if (b >= 0 && sa.size() == top_len) return SameLength(sa, sb);
  std::vector<std::string> alts;
  alts.push_back(SameLength(sa, std::string(sa.size(), '9')));
  for (size_t len = sa.size() + 1; len < top_len; ++len) alts.push_back(absl::StrCat("[1-9] [0-9]{", len - 1, "}"));
  if (b >= 0) {
    alts.push_back(SameLength("1" + std::string(top_len - 1, '0'), sb));
  } else if (sa.size() < top_len) {
    alts.push_back(absl::StrCat("[1-9] [0-9]{", top_len - 1, "}"));
  }
  return absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
}

// One code point as a class range bound.
std::string CodePoint(uint32_t cp) { return absl::StrFormat("\\U%08X", cp); }

// ECMA-262 regular expressions (the subset json_schema.h names) to GBNF expressions for a JSON
// string's contents.
class PatternConverter {
 public:
  explicit PatternConverter(std::string_view p) : p_(p) {}

  absl::StatusOr<std::string> Convert() {
    if (!p_.empty() && p_[0] == '^') ++i_;
    LLM42_ASSIGN_OR_RETURN(std::string e, Alternation());
    if (i_ < p_.size() && p_[i_] == '$' && i_ + 1 == p_.size()) ++i_;
    if (i_ < p_.size()) return Error(p_[i_] == ')' ? "unbalanced ')'" : "'$' or '^' inside the pattern");
    return e;
  }

 private:
  using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("pattern at offset ", i_, ": ", std::string(what)));
  }

  absl::StatusOr<std::string> Alternation() {
    std::vector<std::string> alts;
    for (;;) {
      LLM42_ASSIGN_OR_RETURN(std::string s, Sequence());
      alts.push_back(s.empty() ? "\"\"" : s);
      if (i_ < p_.size() && p_[i_] == '|') {
        ++i_;
        continue;
      }
      break;
    }
    return alts.size() == 1 ? alts[0] : absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
  }

  absl::StatusOr<std::string> Sequence() {
    std::string out;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')' && !(p_[i_] == '$' && i_ + 1 == p_.size())) {
      LLM42_ASSIGN_OR_RETURN(std::string atom, Atom());
      LLM42_ASSIGN_OR_RETURN(std::string q, Quantifier());
      absl::StrAppend(&out, out.empty() ? "" : " ", q.empty() ? atom : absl::StrCat("( ", atom, " )", q));
    }
    return out;
  }

  absl::StatusOr<std::string> Quantifier() {
    if (i_ >= p_.size()) return std::string();
    std::string q;
    const char c = p_[i_];
    if (c == '?' || c == '*' || c == '+') {
      q = std::string(1, c);
      ++i_;
    } else if (c == '{') {
      const size_t close = p_.find('}', i_);
      if (close == std::string_view::npos) return Error("'{' without '}'");
      const std::string_view body = p_.substr(i_ + 1, close - i_ - 1);
      if (body.empty() || body.find_first_not_of("0123456789,") != std::string_view::npos ||
          body[0] == ',' || std::count(body.begin(), body.end(), ',') > 1) {
        return Error("a malformed {m,n} quantifier");
      }
      for (size_t at = 0, digits = 0; at <= body.size(); ++at) {  // each bound within the grammar's
        if (at < body.size() && body[at] != ',') {
          ++digits;
          continue;
        }
        if (digits > 4 || (digits > 0 && std::stoi(std::string(body.substr(at - digits, digits))) > kMaxGbnfRepetition)) {
          return Error(absl::StrCat("a repetition count above ", kMaxGbnfRepetition));
        }
        digits = 0;
      }
      q = absl::StrCat("{", std::string(body), "}");
      i_ = close + 1;
    } else {
      return std::string();
    }
    if (i_ < p_.size() && p_[i_] == '?') return Error("lazy quantifiers are not supported");
    if (i_ < p_.size() && (p_[i_] == '*' || p_[i_] == '+' || p_[i_] == '{')) return Error("a quantifier follows a quantifier");
    return q;
  }

  absl::StatusOr<std::string> Atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (p_.substr(i_, 2) == "?:") {
        i_ += 2;
      } else if (i_ < p_.size() && p_[i_] == '?') {
        return Error("lookaround and named groups are not supported");
      }
      LLM42_ASSIGN_OR_RETURN(std::string e, Alternation());
      if (i_ >= p_.size() || p_[i_] != ')') return Error("unbalanced '('");
      ++i_;
      return absl::StrCat("( ", e, " )");
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return Error("a quantifier with nothing to repeat");
    if (c == '^') return Error("'$' or '^' inside the pattern");
    Ranges set;
    if (c == '[') {
      LLM42_RETURN_IF_ERROR(Class(&set));
    } else if (c == '.') {
      ++i_;
      set = Complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});
    } else if (c == '\\') {
      LLM42_RETURN_IF_ERROR(Escape(&set, /*in_class=*/false));
    } else {
      LLM42_ASSIGN_OR_RETURN(uint32_t cp, Utf8());
      set = {{cp, cp}};
    }
    return JsonChars(set);
  }

  absl::StatusOr<uint32_t> Utf8() {
    const auto b = static_cast<unsigned char>(p_[i_]);
    const int n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    if (i_ + static_cast<size_t>(n) > p_.size()) return Error("malformed UTF-8");
    uint32_t cp = n == 1 ? b : b & (0x7Fu >> n);
    for (int k = 1; k < n; ++k) cp = cp << 6 | (static_cast<unsigned char>(p_[i_ + static_cast<size_t>(k)]) & 0x3Fu);
    i_ += static_cast<size_t>(n);
    return cp;
  }

  static Ranges Complement(Ranges r) {
    std::sort(r.begin(), r.end());
    Ranges out;
    uint32_t next = 0;
    for (const auto& [lo, hi] : r) {
      if (lo > next) out.push_back({next, lo - 1});
      next = std::max(next, hi + 1);
    }
    if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
    return out;
  }

  static Ranges Space() {
    return {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
            {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  }

  // After a backslash: appends what the escape matches.
  absl::Status Escape(Ranges* set, bool in_class) {
    ++i_;
    if (i_ >= p_.size()) return Error("a pattern ends with '\\'");
    const char e = p_[i_++];
    const Ranges digit = {{'0', '9'}}, word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    auto add = [&](const Ranges& r) { set->insert(set->end(), r.begin(), r.end()); };
    switch (e) {
      case 'd': add(digit); break;
      case 'D': add(Complement(digit)); break;
      case 'w': add(word); break;
      case 'W': add(Complement(word)); break;
      case 's': add(Space()); break;
      case 'S': add(Complement(Space())); break;
      case 'n': add({{'\n', '\n'}}); break;
      case 'r': add({{'\r', '\r'}}); break;
      case 't': add({{'\t', '\t'}}); break;
      case 'f': add({{'\f', '\f'}}); break;
      case 'v': add({{'\v', '\v'}}); break;
      case 'u': {
        if (i_ + 4 > p_.size()) return Error("\\u needs four hex digits");
        uint32_t cp = 0;
        for (int k = 0; k < 4; ++k) {
          const char h = p_[i_++];
          const int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (v < 0) return Error("\\u needs four hex digits");
          cp = cp << 4 | static_cast<uint32_t>(v);
        }
        add({{cp, cp}});
        break;
      }
      case 'b':
        if (in_class) {
          add({{'\b', '\b'}});
          break;
        }
        return Error("word boundaries are not supported");
      default:
        if ((e >= '0' && e <= '9') || e == 'k') return Error("backreferences are not supported");
        if (e == 'B') return Error("word boundaries are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) return Error(absl::StrCat("the escape \\", std::string(1, e), " is not supported"));
        add({{static_cast<uint32_t>(static_cast<unsigned char>(e)), static_cast<uint32_t>(static_cast<unsigned char>(e))}});
    }
    return absl::OkStatus();
  }

  absl::Status Class(Ranges* set) {
    ++i_;  // '['
    const bool negated = i_ < p_.size() && p_[i_] == '^';
    if (negated) ++i_;
    Ranges r;
    bool first = true;
    while (i_ < p_.size() && (p_[i_] != ']' || first)) {
      first = false;
      Ranges one;
      if (p_[i_] == '\\') {
        LLM42_RETURN_IF_ERROR(Escape(&one, /*in_class=*/true));
      } else {
        LLM42_ASSIGN_OR_RETURN(uint32_t cp, Utf8());
        one = {{cp, cp}};
      }
      if (one.size() == 1 && one[0].first == one[0].second && i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        Ranges hi;
        if (p_[i_] == '\\') {
          LLM42_RETURN_IF_ERROR(Escape(&hi, /*in_class=*/true));
        } else {
          LLM42_ASSIGN_OR_RETURN(uint32_t cp, Utf8());
          hi = {{cp, cp}};
        }
        if (hi.size() != 1 || hi[0].first != hi[0].second || hi[0].first < one[0].first) return Error("a bad class range");
        one[0].second = hi[0].first;
      }
      r.insert(r.end(), one.begin(), one.end());
    }
    if (i_ >= p_.size()) return Error("'[' without ']'");
    ++i_;
    *set = negated ? Complement(r) : r;
    return absl::OkStatus();
  }

  // The JSON string text for one character of `set`: itself, escaped where JSON requires.
  static std::string JsonChars(Ranges set) {
    std::sort(set.begin(), set.end());
    bool quote = false, backslash = false;
    Ranges plain;
    for (auto [lo, hi] : set) {
      lo = std::max<uint32_t>(lo, 0x20);  // control characters are never generated
      if (lo > hi) continue;
      // Surrogates are no code points.
      if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800) plain.push_back({lo, 0xD7FF});
        lo = 0xE000;
        if (lo > hi) continue;
      }
      for (uint32_t special : {uint32_t{'"'}, uint32_t{'\\'}}) {
        if (lo <= special && special <= hi) {
          (special == '"' ? quote : backslash) = true;
          if (lo < special) plain.push_back({lo, special - 1});
          lo = special + 1;
        }
      }
      if (lo <= hi) plain.push_back({lo, hi});
    }
    std::vector<std::string> alts;
    if (!plain.empty()) {
      std::string cls = "[";
      for (const auto& [lo, hi] : plain) absl::StrAppend(&cls, CodePoint(lo), lo == hi ? "" : "-", lo == hi ? "" : CodePoint(hi));
      alts.push_back(cls + "]");
    }
    if (quote) alts.push_back(Literal("\\\""));
    if (backslash) alts.push_back(Literal("\\\\"));
    if (alts.empty()) return "[^\\U00000000-\\U0010FFFF]";  // matches nothing
    return alts.size() == 1 ? alts[0] : absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
  }

  std::string_view p_;
  size_t i_ = 0;
};

class SchemaConverter {
 public:
  // Rules it adds are named `prefix` and a number.
  explicit SchemaConverter(const Json& root, std::string prefix = "g-") : root_(root), prefix_(std::move(prefix)) {}

  // `name ::= ...` for the schema's sentences, then the rules it adds (not the helpers).
  absl::StatusOr<std::string> Rules(std::string_view name) {
    LLM42_ASSIGN_OR_RETURN(std::string root, Visit(root_, ""));
    return absl::StrCat(std::string(name), " ::= ", root, "\n", rules_);
  }
  absl::StatusOr<std::string> Convert() {
    LLM42_ASSIGN_OR_RETURN(std::string rules, Rules("root"));
    return absl::StrCat(rules, std::string(kHelpers));
  }

 private:
  template <typename... Args>
  static absl::Status Error(const std::string& pointer, const Args&... args) {
    return absl::InvalidArgumentError(absl::StrCat("at '", pointer.empty() ? "" : pointer, "' (JSON pointer): ", args...));
  }

  static std::string Escape(const std::string& key) {
    std::string out;
    for (char c : key) {
      if (c == '~') {
        out += "~0";
      } else if (c == '/') {
        out += "~1";
      } else {
        out += c;
      }
    }
    return out;
  }

  std::string NewRule(const std::string& body) {
    const std::string name = absl::StrCat(prefix_, ++n_rules_);
    Define(name, body);
    return name;
  }
  void Define(const std::string& name, const std::string& body) { absl::StrAppend(&rules_, name, " ::= ", body, "\n"); }

  absl::StatusOr<std::string> Visit(const Json& s, const std::string& ptr) {
    if (++depth_ > 64) return Error(ptr, "the schema nests deeper than 64 levels");
    absl::StatusOr<std::string> e = VisitSchema(s, ptr);
    --depth_;
    return e;
  }

  absl::StatusOr<std::string> VisitSchema(const Json& s, const std::string& ptr) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return std::string("value");
      return Error(ptr, "the schema 'false' allows no value");
    }
    if (!s.is_object()) return Error(ptr, "a schema is an object or a boolean");
    std::set<std::string> present;
    for (const auto& [key, value] : s.items()) {
      if (Annotations().count(key)) continue;
      if (!Constraints().count(key)) return Error(ptr, "the keyword '", key, "' is not supported");
      present.insert(key);
    }
    for (const char* defs : {"$defs", "definitions"}) {
      if (s.contains(defs) && !s[defs].is_object()) return Error(absl::StrCat(ptr, "/", defs), "not an object");
    }
    if (present.empty()) return std::string("value");
    auto only = [&](std::initializer_list<const char*> keys, const char* what) -> absl::Status {
      for (const std::string& k : present) {
        if (std::find_if(keys.begin(), keys.end(), [&](const char* x) { return k == x; }) == keys.end()) {
          return Error(ptr, "'", k, "' beside ", what, " is not supported");
        }
      }
      return absl::OkStatus();
    };
    if (present.count("$ref")) {
      LLM42_RETURN_IF_ERROR(only({"$ref"}, "'$ref'"));
      return Ref(s["$ref"], ptr + "/$ref");
    }
    if (present.count("const")) {
      LLM42_RETURN_IF_ERROR(only({"const", "type"}, "'const'"));
      return Literal(s["const"].dump());
    }
    if (present.count("enum")) {
      LLM42_RETURN_IF_ERROR(only({"enum", "type"}, "'enum'"));
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) return Error(ptr + "/enum", "'enum' is a non-empty array");
      std::vector<std::string> alts;
      for (const Json& v : e) alts.push_back(Literal(v.dump()));
      return absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!present.count(key)) continue;
      LLM42_RETURN_IF_ERROR(only({key}, absl::StrCat("'", key, "'").c_str()));
      const Json& list = s[key];
      const std::string p = absl::StrCat(ptr, "/", key);
      if (!list.is_array() || list.empty()) return Error(p, "'", key, "' is a non-empty array of schemas");
      std::vector<std::string> alts;
      for (size_t i = 0; i < list.size(); ++i) {
        LLM42_ASSIGN_OR_RETURN(std::string a, Visit(list[i], absl::StrCat(p, "/", i)));
        alts.push_back(a);
      }
      return absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& x : t) {
          if (!x.is_string()) return Error(ptr + "/type", "a type is a string");
          types.push_back(x.get<std::string>());
        }
      } else {
        return Error(ptr + "/type", "'type' is a string or a non-empty array of strings");
      }
    } else if (present.count("properties") || present.count("required") || present.count("additionalProperties")) {
      types.push_back("object");
    } else if (present.count("items") || present.count("prefixItems") || present.count("minItems") || present.count("maxItems")) {
      types.push_back("array");
    } else if (present.count("pattern") || present.count("format") || present.count("minLength") || present.count("maxLength")) {
      types.push_back("string");
    } else {
      return Error(ptr, "'minimum' and 'maximum' need \"type\": \"integer\"");
    }
    std::vector<std::string> alts;
    for (const std::string& type : types) {
      LLM42_ASSIGN_OR_RETURN(std::string a, OfType(s, type, present, ptr));
      alts.push_back(a);
    }
    return alts.size() == 1 ? alts[0] : absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
  }

  absl::StatusOr<std::string> Ref(const Json& ref, const std::string& ptr) {
    if (!ref.is_string()) return Error(ptr, "'$ref' is a string");
    const std::string r = ref.get<std::string>();
    auto known = refs_.find(r);
    if (known != refs_.end()) return known->second;
    if (r == "#") {  // the whole schema: recursion through the root
      const std::string rule = absl::StrCat(prefix_, ++n_rules_);
      refs_[r] = rule;
      LLM42_ASSIGN_OR_RETURN(std::string body, Visit(root_, ""));
      Define(rule, body);
      return rule;
    }
    std::string section, name;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (r.rfind(prefix, 0) == 0) {
        section = std::string(prefix).substr(2, std::string(prefix).size() - 3);
        name = r.substr(std::string(prefix).size());
      }
    }
    if (section.empty() || name.empty() || name.find('/') != std::string::npos) {
      return Error(ptr, "'", r, "': only references to #, #/$defs/NAME or #/definitions/NAME are supported");
    }
    std::string key;
    for (size_t i = 0; i < name.size(); ++i) {  // JSON pointer unescaping
      if (name[i] == '~' && i + 1 < name.size() && (name[i + 1] == '0' || name[i + 1] == '1')) {
        key += name[++i] == '0' ? '~' : '/';
      } else {
        key += name[i];
      }
    }
    if (!root_.contains(section) || !root_[section].is_object() || !root_[section].contains(key)) {
      return Error(ptr, "'", r, "' names no definition");
    }
    const std::string rule = absl::StrCat(prefix_, ++n_rules_);
    refs_[r] = rule;  // before the visit: a definition may refer to itself
    LLM42_ASSIGN_OR_RETURN(std::string body, Visit(root_[section][key], absl::StrCat("/", section, "/", Escape(key))));
    Define(rule, body);
    return rule;
  }

  static absl::StatusOr<int64_t> Count(const Json& s, const char* key, const std::string& ptr) {
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxGbnfRepetition) {
      return Error(absl::StrCat(ptr, "/", key), "'", key, "' is an integer in 0..", kMaxGbnfRepetition,
                   " (the grammar's repetition bound)");
    }
    return v.get<int64_t>();
  }

  // minLength/maxLength or minItems/maxItems: (at least, at most; absent: unbounded).
  static absl::StatusOr<std::pair<int64_t, std::optional<int64_t>>> Counts(const Json& s, const char* min_key,
                                                                           const char* max_key, const std::string& ptr) {
    std::pair<int64_t, std::optional<int64_t>> c{0, std::nullopt};
    if (s.contains(min_key)) {
      LLM42_ASSIGN_OR_RETURN(c.first, Count(s, min_key, ptr));
    }
    if (s.contains(max_key)) {
      LLM42_ASSIGN_OR_RETURN(c.second, Count(s, max_key, ptr));
    }
    return c;
  }

  absl::StatusOr<std::string> OfType(const Json& s, const std::string& type, const std::set<std::string>& present,
                                     const std::string& ptr) {
    auto allow = [&](std::initializer_list<const char*> keys) -> absl::Status {
      for (const std::string& k : present) {
        if (k == "type") continue;
        if (std::find_if(keys.begin(), keys.end(), [&](const char* x) { return k == x; }) == keys.end()) {
          return Error(ptr, "'", k, "' does not apply to type '", type, "' (or is not supported there)");
        }
      }
      return absl::OkStatus();
    };
    if (type == "null" || type == "boolean" || type == "number") {
      LLM42_RETURN_IF_ERROR(allow({}));
      return type;
    }
    if (type == "integer") {
      LLM42_RETURN_IF_ERROR(allow({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}));
      return Integer(s, ptr);
    }
    if (type == "string") {
      LLM42_RETURN_IF_ERROR(allow({"pattern", "format", "minLength", "maxLength"}));
      return String(s, present, ptr);
    }
    if (type == "array") {
      LLM42_RETURN_IF_ERROR(allow({"items", "prefixItems", "minItems", "maxItems"}));
      return Array(s, ptr);
    }
    if (type == "object") {
      LLM42_RETURN_IF_ERROR(allow({"properties", "required", "additionalProperties"}));
      return Object(s, ptr);
    }
    return Error(ptr + "/type", "unknown type '", type, "'");
  }

  absl::StatusOr<std::string> Integer(const Json& s, const std::string& ptr) {
    std::optional<int64_t> lo, hi;
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      const Json& v = s[key];
      const std::string p = absl::StrCat(ptr, "/", key);
      if (!v.is_number()) return Error(p, "not a number");
      const double d = v.get<double>();
      if (!(d >= -static_cast<double>(kMaxIntegerBound) && d <= static_cast<double>(kMaxIntegerBound))) {
        return Error(p, "integer bounds beyond 1e18 are not supported");
      }
      const bool lower = key[0] == 'm' ? std::string_view(key) == "minimum" : std::string_view(key) == "exclusiveMinimum";
      const bool exclusive = key[0] == 'e';
      int64_t bound;
      if (lower) {
        bound = static_cast<int64_t>(std::ceil(d));
        if (exclusive && static_cast<double>(bound) == d) ++bound;
        lo = lo ? std::max(*lo, bound) : bound;
      } else {
        bound = static_cast<int64_t>(std::floor(d));
        if (exclusive && static_cast<double>(bound) == d) --bound;
        hi = hi ? std::min(*hi, bound) : bound;
      }
    }
    if (!lo && !hi) return std::string("integer");
    if (lo && hi && *lo > *hi) return Error(ptr, "no integer lies within the bounds");
    std::vector<std::string> alts;
    // Negative numbers -n, n in [max(1, -hi), -lo].
    if (!lo || *lo < 0) {
      const int64_t nlo = hi && *hi < 0 ? -*hi : 1;
      alts.push_back(absl::StrCat("\"-\" ", NaturalRange(nlo, lo ? -*lo : -1)));
    }
    if (!hi || *hi >= 0) alts.push_back(NaturalRange(lo ? std::max<int64_t>(*lo, 0) : 0, hi ? *hi : -1));
    return absl::StrCat("( ", absl::StrJoin(alts, " | "), " )");
  }

  absl::StatusOr<std::string> String(const Json& s, const std::set<std::string>& present, const std::string& ptr) {
    if (present.count("format")) {
      if (present.size() > (present.count("type") ? 2 : 1)) return Error(ptr, "'format' beside other string keywords is not supported");
      const Json& f = s["format"];
      const std::string fmt = f.is_string() ? f.get<std::string>() : "";
      if (fmt == "date" || fmt == "time" || fmt == "date-time" || fmt == "uuid") return fmt + "-string";
      return Error(ptr + "/format", "the format '", f.is_string() ? fmt : f.dump(),
                   "' is not supported (date, time, date-time, uuid)");
    }
    if (present.count("pattern")) {
      if (present.count("minLength") || present.count("maxLength")) {
        return Error(ptr, "'pattern' beside 'minLength' or 'maxLength' is not supported");
      }
      const Json& p = s["pattern"];
      if (!p.is_string()) return Error(ptr + "/pattern", "not a string");
      absl::StatusOr<std::string> body = PatternConverter(p.get<std::string>()).Convert();
      if (!body.ok()) return Error(ptr + "/pattern", std::string(body.status().message()));
      return absl::StrCat("\"\\\"\" ", body->empty() ? "" : *body, " \"\\\"\"");
    }
    LLM42_ASSIGN_OR_RETURN(auto counts, Counts(s, "minLength", "maxLength", ptr));
    const auto [lo, hi] = counts;
    if (hi && *hi < lo) return Error(ptr, "maxLength is below minLength");
    if (lo == 0 && !hi) return std::string("string");
    return absl::StrCat("\"\\\"\" ", Repeat("char", lo, hi), " \"\\\"\"");
  }

  absl::StatusOr<std::string> Array(const Json& s, const std::string& ptr) {
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      const Json& p = s["prefixItems"];
      if (!p.is_array()) return Error(ptr + "/prefixItems", "an array of schemas");
      for (size_t i = 0; i < p.size(); ++i) {
        LLM42_ASSIGN_OR_RETURN(std::string e, Visit(p[i], absl::StrCat(ptr, "/prefixItems/", i)));
        prefix.push_back(e);
      }
    }
    std::optional<std::string> rest = std::string("value");
    if (s.contains("items")) {
      const Json& it = s["items"];
      if (it.is_array()) return Error(ptr + "/items", "an array of schemas here is draft 4's tuple form: use prefixItems");
      if (it.is_boolean() && !it.get<bool>()) {
        rest.reset();
      } else {
        LLM42_ASSIGN_OR_RETURN(rest, Visit(it, ptr + "/items"));
      }
    }
    LLM42_ASSIGN_OR_RETURN(auto counts, Counts(s, "minItems", "maxItems", ptr));
    auto [lo, hi] = counts;
    const auto k = static_cast<int64_t>(prefix.size());
    if (!rest) hi = hi ? std::min(*hi, k) : k;
    if (hi && *hi < lo) return Error(ptr, "no array length satisfies minItems, maxItems and items");
    // Elements from index i on, i already written (a comma before each but the first).
    std::string tail;
    const int64_t uniform_from = std::min(k, hi.value_or(k));
    {
      const int64_t i = uniform_from;
      const int64_t a = std::max<int64_t>(0, lo - i);
      const std::optional<int64_t> b = hi ? std::optional<int64_t>(*hi - i) : std::nullopt;
      if (!rest || (b && *b == 0)) {
        tail = "";
      } else if (i > 0) {
        tail = Repeat(absl::StrCat("\",\" ws ", *rest, " ws"), a, b);
      } else {
        const std::string more = Repeat(absl::StrCat("\",\" ws ", *rest, " ws"), std::max<int64_t>(0, a - 1),
                                        b ? std::optional<int64_t>(*b - 1) : std::nullopt);
        tail = a == 0 ? absl::StrCat("( ", *rest, " ws ", more, " )?") : absl::StrCat(*rest, " ws ", more);
      }
    }
    for (int64_t i = uniform_from - 1; i >= 0; --i) {
      const std::string item = absl::StrCat(i == 0 ? "" : "\",\" ws ", prefix[static_cast<size_t>(i)], " ws ", tail);
      tail = i < lo ? item : absl::StrCat("( ", item, " )?");
    }
    return absl::StrCat("\"[\" ws ", tail.empty() ? "" : tail + " ", "\"]\"");
  }

  absl::StatusOr<std::string> Object(const Json& s, const std::string& ptr) {
    std::vector<std::pair<std::string, std::string>> props;  // key literal, value expression
    std::set<std::string> required;
    if (s.contains("required")) {
      const Json& r = s["required"];
      if (!r.is_array()) return Error(ptr + "/required", "an array of names");
      for (const Json& n : r) {
        if (!n.is_string()) return Error(ptr + "/required", "an array of names");
        required.insert(n.get<std::string>());
      }
    }
    std::set<std::string> declared;
    if (s.contains("properties")) {
      const Json& p = s["properties"];
      if (!p.is_object()) return Error(ptr + "/properties", "an object of schemas");
      for (const auto& [name, schema] : p.items()) {
        LLM42_ASSIGN_OR_RETURN(std::string v, Visit(schema, absl::StrCat(ptr, "/properties/", Escape(name))));
        props.push_back({name, v});
        declared.insert(name);
      }
    }
    for (const std::string& name : required) {  // required but not declared: any value
      if (!declared.count(name)) props.push_back({name, "value"});
    }
    std::optional<std::string> extra;
    if (!s.contains("properties") && !s.contains("required")) extra = "value";  // any members
    if (s.contains("additionalProperties")) {
      extra.reset();
      const Json& a = s["additionalProperties"];
      if (!(a.is_boolean() && !a.get<bool>())) {
        LLM42_ASSIGN_OR_RETURN(extra, Visit(a, ptr + "/additionalProperties"));
      }
    }
    const auto n = props.size();
    // after_i: members from i on, one written before; first_i: from i on, none written yet.
    std::string after, first;
    if (extra) {
      const std::string member = absl::StrCat("string ws \":\" ws ", *extra, " ws");
      after = NewRule(absl::StrCat("( \",\" ws ", member, " )*"));
      first = NewRule(absl::StrCat("( ", member, " ", after, " )?"));
    } else {
      after = first = "\"\"";
    }
    for (size_t i = n; i-- > 0;) {
      const auto& [name, value] = props[i];
      const std::string kv = absl::StrCat(Literal(Json(name).dump()), " ws \":\" ws ", value, " ws");
      const bool req = required.count(name) > 0;
      const std::string next_after =
          NewRule(req ? absl::StrCat("\",\" ws ", kv, " ", after) : absl::StrCat("\",\" ws ", kv, " ", after, " | ", after));
      const std::string next_first = NewRule(req ? absl::StrCat(kv, " ", after) : absl::StrCat(kv, " ", after, " | ", first));
      after = next_after;
      first = next_first;
    }
    return absl::StrCat("\"{\" ws ", first, " \"}\"");
  }

  const Json& root_;
  std::string prefix_;
  std::string rules_;
  std::map<std::string, std::string> refs_;
  int n_rules_ = 0;
  int depth_ = 0;
};

}  // namespace

namespace {

// fn(converter) over the schema parsed (INVALID_ARGUMENT for what is not JSON or not readable).
template <typename F>
absl::StatusOr<std::string> WithSchema(std::string_view schema, F fn) {
  Json root;
  try {
    root = Json::parse(schema.begin(), schema.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("not JSON (byte ", e.byte, ")"));
  } catch (const Json::exception& e) {  // a number out of range
    return absl::InvalidArgumentError(absl::StrCat("not usable JSON: ", e.what()));
  }
  try {
    return fn(root);
  } catch (const Json::exception& e) {  // (every access is checked first; this is the backstop)
    return absl::InvalidArgumentError(absl::StrCat("the schema cannot be read: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<std::string> JsonSchemaToGbnf(std::string_view schema) {
  return WithSchema(schema, [](const Json& root) { return SchemaConverter(root).Convert(); });
}

absl::StatusOr<std::string> JsonSchemaToGbnfRules(std::string_view schema, std::string_view name) {
  return WithSchema(schema, [&](const Json& root) { return SchemaConverter(root, std::string(name) + "-").Rules(name); });
}

std::string_view JsonGbnfHelpers() { return kHelpers; }

}  // namespace llm42
