// Jinja's lexer and parser (jinja_ast.h), with jinja2's whitespace rules as transformers configures
// them: trim_blocks (the newline after a block or comment tag goes), lstrip_blocks (spaces and tabs
// before a block or comment tag on its own line go), keep_trailing_newline off, newlines
// normalized to \n; `-` strips all whitespace on its side of a tag, `+` keeps it.
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/chat/jinja_ast.h"
#include "lib/util/status.h"

namespace llm42::jinja {
namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | cp >> 6));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | cp >> 12));
    out->push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | cp >> 18));
    out->push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Where in the template (1-based), from a byte offset.
struct Position {
  int line = 1, column = 1;
};

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;  // name, operator, decoded string
  int64_t int_value = 0;
  double float_value = 0;
  size_t offset = 0;
};

// A tag's tokens, or text.
struct Segment {
  enum class Kind { kText, kVariable, kBlock };
  Kind kind = Kind::kText;
  std::string text;
  std::vector<Token> tokens;  // variable and block; the last is kEnd at the tag's end
  size_t offset = 0;
};

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}
  const std::string& source() const { return src_; }

  Position PositionOf(size_t offset) const {
    Position p;
    for (size_t i = 0; i < offset && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++p.line;
        p.column = 1;
      } else if ((static_cast<unsigned char>(src_[i]) & 0xC0) != 0x80) {
        ++p.column;
      }
    }
    return p;
  }

  absl::Status Error(size_t offset, const std::string& message) const {
    const Position p = PositionOf(offset);
    return absl::InvalidArgumentError(absl::StrCat("template line ", p.line, ", column ", p.column, ": ", message));
  }

  absl::StatusOr<std::vector<Segment>> Run() {
    std::vector<Segment> out;
    size_t pos = 0;
    bool strip_next = false;    // the previous tag ended with -: strip leading whitespace
    bool trim_newline = false;  // the previous block/comment tag ended plainly: drop one \n
    bool line_starting = true;  // what the previous tag's end consumed ended a line (jinja2's flag)
    while (pos <= src_.size()) {
      size_t open = FindTag(pos);
      std::string text = src_.substr(pos, (open == std::string::npos ? src_.size() : open) - pos);
      if (strip_next) {
        size_t i = 0;
        while (i < text.size() && IsSpace(text[i])) ++i;
        line_starting = i > 0 && text[i - 1] == '\n';
        text.erase(0, i);
      } else if (trim_newline) {
        line_starting = !text.empty() && text[0] == '\n';
        if (line_starting) text.erase(0, 1);
      } else if (pos > 0) {
        line_starting = false;
      }
      strip_next = trim_newline = false;
      if (open == std::string::npos) {
        if (!text.empty()) out.push_back(Segment{Segment::Kind::kText, std::move(text), {}, pos});
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      size_t inner = open + 2;
      const char control = inner < src_.size() ? src_[inner] : '\0';
      if (control == '-' || control == '+') ++inner;
      if (control == '-') {
        size_t end = text.size();
        while (end > 0 && IsSpace(text[end - 1])) --end;
        text.resize(end);
      } else if (control != '+' && kind != '{') {
        // lstrip_blocks: only spaces and tabs between the line's start and the tag.
        const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((line_start > 0 || line_starting) && line_start < text.size() &&
            text.find_first_not_of(" \t\r\f\v", line_start) == std::string::npos) {
          text.resize(line_start);
        }
      }
      if (!text.empty()) out.push_back(Segment{Segment::Kind::kText, std::move(text), {}, pos});
      if (kind == '#') {
        const size_t close = src_.find("#}", inner);
        if (close == std::string::npos) return Error(open, "a comment without its #}");
        const char before = close > inner ? src_[close - 1] : '\0';
        pos = close + 2;
        if (before == '-') strip_next = true;
        else if (before != '+') trim_newline = true;
        continue;
      }
      Segment seg;
      seg.kind = kind == '{' ? Segment::Kind::kVariable : Segment::Kind::kBlock;
      seg.offset = open;
      size_t end = 0;
      char end_control = '\0';
      if (absl::Status s = Tokens(inner, kind == '{' ? '}' : '%', &seg.tokens, &end, &end_control); !s.ok()) return s;
      // {% raw %}: the text up to {% endraw %} as it is.
      if (seg.kind == Segment::Kind::kBlock && seg.tokens.size() == 2 && seg.tokens[0].kind == Token::Kind::kName &&
          seg.tokens[0].text == "raw") {
        size_t search = end;
        for (;;) {
          const size_t tag = src_.find("{%", search);
          if (tag == std::string::npos) return Error(open, "raw without endraw");
          size_t j = tag + 2;
          const char raw_control = j < src_.size() ? src_[j] : '\0';
          if (raw_control == '-' || raw_control == '+') ++j;
          while (j < src_.size() && IsSpace(src_[j])) ++j;
          if (src_.compare(j, 6, "endraw") != 0) {
            search = tag + 2;
            continue;
          }
          std::string raw = src_.substr(end, tag - end);
          if (end_control == '-') {
            size_t i = 0;
            while (i < raw.size() && IsSpace(raw[i])) ++i;
            raw.erase(0, i);
          } else if (end_control != '+' && !raw.empty() && raw[0] == '\n') {
            raw.erase(0, 1);
          }
          if (raw_control == '-') {
            size_t e = raw.size();
            while (e > 0 && IsSpace(raw[e - 1])) --e;
            raw.resize(e);
          }
          if (!raw.empty()) out.push_back(Segment{Segment::Kind::kText, std::move(raw), {}, end});
          j += 6;
          while (j < src_.size() && IsSpace(src_[j])) ++j;
          char close_control = '\0';
          if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) close_control = src_[j++];
          if (src_.compare(j, 2, "%}") != 0) return Error(tag, "endraw without %}");
          end = j + 2;
          end_control = close_control;
          break;
        }
        pos = end;
        if (end_control == '-') strip_next = true;
        else if (end_control != '+') trim_newline = true;
        continue;
      }
      out.push_back(std::move(seg));
      pos = end;
      if (end_control == '-') strip_next = true;
      else if (end_control != '+' && kind == '%') trim_newline = true;
    }
    return out;
  }

 private:
  static bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

  size_t FindTag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos && i + 1 < src_.size(); i = src_.find('{', i + 1)) {
      const char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
    }
    return std::string::npos;
  }

  // The tokens of a tag from `pos` to its end (`}}` or `%}` at bracket depth 0, with - or +
  // before it), the offset after the end into *end.
  absl::Status Tokens(size_t pos, char closer, std::vector<Token>* out, size_t* end, char* end_control) {
    int depth = 0;
    const size_t tag_open = pos;
    for (;;) {
      while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
      if (pos >= src_.size()) return Error(tag_open - 2, closer == '}' ? "a {{ without its }}" : "a {% without its %}");
      const char c = src_[pos];
      if (depth == 0) {
        for (char control : {'-', '+', '\0'}) {
          const size_t at = pos + (control != '\0' ? 1 : 0);
          if ((control == '\0' || c == control) && at + 1 < src_.size() + 1 && src_.compare(at, 2, std::string{closer, '}'}) == 0) {
            out->push_back(Token{Token::Kind::kEnd, "", 0, 0, pos});
            *end = at + 2;
            *end_control = control;
            return absl::OkStatus();
          }
        }
      }
      Token t;
      t.offset = pos;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        t.kind = Token::Kind::kName;
        t.text = src_.substr(pos, e - pos);
        pos = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t e = pos;
        while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        bool is_float = false;
        if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
          is_float = true;
          ++e;
          while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
          size_t f = e + 1;
          if (f < src_.size() && (src_[f] == '+' || src_[f] == '-')) ++f;
          if (f < src_.size() && std::isdigit(static_cast<unsigned char>(src_[f]))) {
            is_float = true;
            e = f;
            while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
          }
        }
        std::string digits;
        for (size_t i = pos; i < e; ++i) {
          if (src_[i] != '_') digits += src_[i];
        }
        if (is_float) {
          t.kind = Token::Kind::kFloat;
          t.float_value = std::strtod(digits.c_str(), nullptr);
        } else {
          t.kind = Token::Kind::kInt;
          errno = 0;
          t.int_value = std::strtoll(digits.c_str(), nullptr, 10);
          if (errno == ERANGE) return Error(pos, "an integer literal out of range");
        }
        pos = e;
      } else if (c == '\'' || c == '"') {
        t.kind = Token::Kind::kString;
        size_t e = pos + 1;
        for (;; ++e) {
          if (e >= src_.size()) return Error(pos, "an unterminated string");
          if (src_[e] == '\\') {
            ++e;
            continue;
          }
          if (src_[e] == c) break;
        }
        if (absl::Status s = Unescape(src_.substr(pos + 1, e - pos - 1), pos, &t.text); !s.ok()) return s;
        pos = e + 1;
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                           "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};
        bool found = false;
        for (const char* op : kOps) {
          const size_t n = std::char_traits<char>::length(op);
          if (src_.compare(pos, n, op) == 0) {
            t.kind = Token::Kind::kOp;
            t.text = op;
            pos += n;
            found = true;
            break;
          }
        }
        if (!found) return Error(pos, absl::StrCat("unexpected character '", std::string(1, c), "'"));
        if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
        if (t.text == ")" || t.text == "]" || t.text == "}") {
          if (depth == 0) return Error(pos - 1, absl::StrCat("unexpected '", t.text, "'"));
          --depth;
        }
      }
      out->push_back(std::move(t));
    }
  }

  // Python's unicode-escape decoding of a literal's body (unknown escapes kept as they are).
  absl::Status Unescape(const std::string& body, size_t at, std::string* out) const {
    for (size_t i = 0; i < body.size(); ++i) {
      if (body[i] != '\\' || i + 1 >= body.size()) {
        out->push_back(body[i]);
        continue;
      }
      const char e = body[++i];
      auto hex = [&](int n) -> absl::StatusOr<uint32_t> {
        uint32_t v = 0;
        for (int k = 1; k <= n; ++k) {
          if (i + static_cast<size_t>(k) >= body.size()) return Error(at, "a truncated escape in a string");
          const char h = body[i + static_cast<size_t>(k)];
          const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (d < 0) return Error(at, "a bad escape in a string");
          v = v * 16 + static_cast<uint32_t>(d);
        }
        i += static_cast<size_t>(n);
        return v;
      };
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        case '\\': out->push_back('\\'); break;
        case '\'': out->push_back('\''); break;
        case '"': out->push_back('"'); break;
        case 'a': out->push_back('\a'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'v': out->push_back('\v'); break;
        case '0': out->push_back('\0'); break;
        case '\n': break;  // a line continuation
        case 'x':
        case 'u':
        case 'U': {
          absl::StatusOr<uint32_t> cp = hex(e == 'x' ? 2 : e == 'u' ? 4 : 8);
          if (!cp.ok()) return cp.status();
          if (*cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return Error(at, "an escape that is no character");
          AppendUtf8(*cp, out);
          break;
        }
        default:
          out->push_back('\\');
          out->push_back(e);
      }
    }
    return absl::OkStatus();
  }

  std::string src_;
};

// Jinja's template source as jinja2 reads it: newlines normalized, one trailing newline dropped.
std::string Normalize(std::string_view source) {
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s.push_back(source[i]);
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class Parser {
 public:
  Parser(const Lexer& lexer, std::vector<Segment> segments) : lexer_(lexer), segs_(std::move(segments)) {}

  absl::StatusOr<NodePtr> Run() {
    auto root = std::make_unique<Node>();
    root->kind = Node::Kind::kBlock;
    std::string stop;
    if (absl::Status s = ParseBody(&root->body, {}, &stop); !s.ok()) return s;
    return root;
  }

 private:
  // Parses nodes until a block tag whose first name is in `stops` (left unconsumed, its name
  // into *stop) or the end (an error when `stops` is not empty).
  absl::Status ParseBody(Body* body, const std::vector<std::string>& stops, std::string* stop) {
    while (seg_ < segs_.size()) {
      Segment& s = segs_[seg_];
      if (s.kind == Segment::Kind::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->text = std::move(s.text);
        body->push_back(std::move(n));
        ++seg_;
        continue;
      }
      toks_ = &s.tokens;
      tok_ = 0;
      parts_ = 0;
      if (s.kind == Segment::Kind::kVariable) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kEmit;
        n->line = lexer_.PositionOf(s.offset).line;
        LLM42_ASSIGN_OR_RETURN(n->expr, ParseExpression());
        if (absl::Status st = ExpectEnd(); !st.ok()) return st;
        body->push_back(std::move(n));
        ++seg_;
        continue;
      }
      if (Peek().kind != Token::Kind::kName) return Fail(Peek(), "expected a statement name");
      const std::string name = Peek().text;
      for (const std::string& st : stops) {
        if (name == st) {
          *stop = name;
          return absl::OkStatus();
        }
      }
      ++tok_;
      ++seg_;
      NodePtr node;
      const int line = lexer_.PositionOf(s.offset).line;
      if (name == "if") {
        LLM42_ASSIGN_OR_RETURN(node, ParseIf());
      } else if (name == "for") {
        LLM42_ASSIGN_OR_RETURN(node, ParseFor());
      } else if (name == "set") {
        LLM42_ASSIGN_OR_RETURN(node, ParseSet());
      } else if (name == "macro") {
        LLM42_ASSIGN_OR_RETURN(node, ParseMacro());
      } else if (name == "call") {
        LLM42_ASSIGN_OR_RETURN(node, ParseCallBlock());
      } else if (name == "filter") {
        LLM42_ASSIGN_OR_RETURN(node, ParseFilterBlock());
      } else if (name == "break" || name == "continue") {
        node = std::make_unique<Node>();
        node->kind = name == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
        if (absl::Status st = ExpectEnd(); !st.ok()) return st;
      } else if (name == "generation") {
        node = std::make_unique<Node>();
        node->kind = Node::Kind::kBlock;
        if (absl::Status st = ExpectEnd(); !st.ok()) return st;
        if (absl::Status st = ParseUntil(&node->body, {"endgeneration"}); !st.ok()) return st;
      } else {
        --tok_;
        return Fail(Peek(), absl::StrCat("unknown or unexpected statement '", name, "'",
                                         stops.empty() ? "" : absl::StrCat(" (expected ", stops.back(), ")")));
      }
      node->line = line;
      body->push_back(std::move(node));
    }
    if (!stops.empty()) {
      return lexer_.Error(lexer_.source().size(), absl::StrCat("the template ended before '", stops.back(), "'"));
    }
    return absl::OkStatus();
  }

  // A body up to one of `stops`, whose tag (with nothing else in it) is consumed.
  absl::Status ParseUntil(Body* body, const std::vector<std::string>& stops, std::string* which = nullptr) {
    if (nesting_ >= kMaxNesting) return Fail(Peek(), "blocks nest too deeply");
    ++nesting_;
    std::string stop;
    absl::Status s = ParseBody(body, stops, &stop);
    --nesting_;
    if (!s.ok()) return s;
    if (which != nullptr) *which = stop;
    return absl::OkStatus();
  }

  // Consumes the stop tag ParseUntil left (its name already known).
  absl::Status EndTag() {
    toks_ = &segs_[seg_].tokens;
    tok_ = 1;
    ++seg_;
    return ExpectEnd();
  }

  absl::StatusOr<NodePtr> ParseIf() {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kIf;
    ExprPtr cond;
    LLM42_ASSIGN_OR_RETURN(cond, ParseExpression());
    if (absl::Status s = ExpectEnd(); !s.ok()) return s;
    for (;;) {
      n->conditions.push_back(std::move(cond));
      Body& body = n->bodies.emplace_back();
      std::string stop;
      if (absl::Status s = ParseUntil(&body, {"elif", "else", "endif"}, &stop); !s.ok()) return s;
      toks_ = &segs_[seg_].tokens;
      tok_ = 1;
      ++seg_;
      if (stop == "elif") {
        LLM42_ASSIGN_OR_RETURN(cond, ParseExpression());
        if (absl::Status s = ExpectEnd(); !s.ok()) return s;
        continue;
      }
      if (absl::Status s = ExpectEnd(); !s.ok()) return s;
      if (stop == "else") {
        Body& else_body = n->bodies.emplace_back();
        if (absl::Status s = ParseUntil(&else_body, {"endif"}); !s.ok()) return s;
        if (absl::Status s = EndTag(); !s.ok()) return s;
      }
      return n;
    }
  }

  absl::Status ParseTargets(std::vector<std::string>* targets, bool allow_attr) {
    for (;;) {
      if (Peek().kind != Token::Kind::kName) return Fail(Peek(), "expected a name to assign");
      std::string t = Next().text;
      if (allow_attr && IsOp(".")) {
        ++tok_;
        if (Peek().kind != Token::Kind::kName) return Fail(Peek(), "expected an attribute name");
        t += "." + Next().text;
      }
      targets->push_back(std::move(t));
      if (!IsOp(",")) return absl::OkStatus();
      ++tok_;
    }
  }

  absl::StatusOr<NodePtr> ParseFor() {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kFor;
    if (absl::Status s = ParseTargets(&n->targets, false); !s.ok()) return s;
    if (!IsName("in")) return Fail(Peek(), "expected 'in'");
    ++tok_;
    LLM42_ASSIGN_OR_RETURN(n->expr, ParseCondExpression(/*allow_cond=*/false));
    if (IsName("if")) {
      ++tok_;
      LLM42_ASSIGN_OR_RETURN(n->filter, ParseExpression());
    }
    if (IsName("recursive")) return Fail(Peek(), "recursive loops are not supported");
    if (absl::Status s = ExpectEnd(); !s.ok()) return s;
    std::string stop;
    if (absl::Status s = ParseUntil(&n->body, {"else", "endfor"}, &stop); !s.ok()) return s;
    if (absl::Status s = EndTag(); !s.ok()) return s;
    if (stop == "else") {
      if (absl::Status s = ParseUntil(&n->else_body, {"endfor"}); !s.ok()) return s;
      if (absl::Status s = EndTag(); !s.ok()) return s;
    }
    return n;
  }

  absl::StatusOr<NodePtr> ParseSet() {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kSet;
    if (absl::Status s = ParseTargets(&n->targets, true); !s.ok()) return s;
    if (IsOp("=")) {
      ++tok_;
      LLM42_ASSIGN_OR_RETURN(n->expr, ParseTupleOrExpression());
      if (absl::Status s = ExpectEnd(); !s.ok()) return s;
      return n;
    }
    if (n->targets.size() != 1) return Fail(Peek(), "a set block assigns one name");
    // {% set x %}...{% endset %}, possibly with filters: {% set x | trim %}
    n->set_block = true;
    if (IsOp("|")) {
      auto placeholder = std::make_unique<Expr>();
      placeholder->kind = Expr::Kind::kName;
      placeholder->name = "";  // the block's output
      LLM42_ASSIGN_OR_RETURN(n->expr, ParseFilters(std::move(placeholder)));
    }
    if (absl::Status s = ExpectEnd(); !s.ok()) return s;
    if (absl::Status s = ParseUntil(&n->body, {"endset"}); !s.ok()) return s;
    if (absl::Status s = EndTag(); !s.ok()) return s;
    return n;
  }

  // Items separated by commas up to `close` (a trailing comma allowed), `item` parsing each; the
  // opening bracket already consumed, the closing one consumed here.
  absl::Status CommaSeparated(std::string_view close, const std::function<absl::Status()>& item) {
    while (!IsOp(close)) {
      if (absl::Status s = item(); !s.ok()) return s;
      if (IsOp(",")) {
        ++tok_;
      } else if (!IsOp(close)) {
        return Fail(Peek(), absl::StrCat("expected ',' or '", std::string(close), "'"));
      }
    }
    ++tok_;
    return absl::OkStatus();
  }

  absl::Status ParseParams(std::vector<std::pair<std::string, ExprPtr>>* params) {
    if (!IsOp("(")) return absl::OkStatus();
    ++tok_;
    return CommaSeparated(")", [&]() -> absl::Status {
      if (Peek().kind != Token::Kind::kName) return Fail(Peek(), "expected a parameter name");
      std::string name = Next().text;
      ExprPtr def;
      if (IsOp("=")) {
        ++tok_;
        LLM42_ASSIGN_OR_RETURN(def, ParseExpression());
      }
      params->emplace_back(std::move(name), std::move(def));
      return absl::OkStatus();
    });
  }

  absl::StatusOr<NodePtr> ParseMacro() {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kMacro;
    if (Peek().kind != Token::Kind::kName) return Fail(Peek(), "expected the macro's name");
    n->targets.push_back(Next().text);
    if (!IsOp("(")) return Fail(Peek(), "expected '(' after the macro's name");
    if (absl::Status s = ParseParams(&n->params); !s.ok()) return s;
    if (absl::Status s = ExpectEnd(); !s.ok()) return s;
    if (absl::Status s = ParseUntil(&n->body, {"endmacro"}); !s.ok()) return s;
    if (absl::Status s = EndTag(); !s.ok()) return s;
    return n;
  }

  absl::StatusOr<NodePtr> ParseCallBlock() {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kCallBlock;
    if (absl::Status s = ParseParams(&n->params); !s.ok()) return s;
    LLM42_ASSIGN_OR_RETURN(n->expr, ParseExpression());
    if (n->expr->kind != Expr::Kind::kCall) return Fail(Peek(), "a call block calls a macro");
    if (absl::Status s = ExpectEnd(); !s.ok()) return s;
    if (absl::Status s = ParseUntil(&n->body, {"endcall"}); !s.ok()) return s;
    if (absl::Status s = EndTag(); !s.ok()) return s;
    return n;
  }

  absl::StatusOr<NodePtr> ParseFilterBlock() {
    auto n = std::make_unique<Node>();
    n->kind = Node::Kind::kFilterBlock;
    // {% filter f(args) | g %}: a filter chain over the block's output (the placeholder name "").
    auto placeholder = std::make_unique<Expr>();
    placeholder->kind = Expr::Kind::kName;
    LLM42_ASSIGN_OR_RETURN(ExprPtr first, ParseFilterCall(std::move(placeholder)));
    LLM42_ASSIGN_OR_RETURN(n->expr, ParseFilters(std::move(first)));
    if (absl::Status s = ExpectEnd(); !s.ok()) return s;
    if (absl::Status s = ParseUntil(&n->body, {"endfilter"}); !s.ok()) return s;
    if (absl::Status s = EndTag(); !s.ok()) return s;
    return n;
  }

  // --- Expressions ---

  const Token& Peek() const { return (*toks_)[tok_]; }
  const Token& Next() { return (*toks_)[tok_++]; }
  bool IsOp(std::string_view op) const { return Peek().kind == Token::Kind::kOp && Peek().text == op; }
  bool IsName(std::string_view n) const { return Peek().kind == Token::Kind::kName && Peek().text == n; }

  absl::Status Fail(const Token& t, const std::string& message) const { return lexer_.Error(t.offset, message); }
  absl::Status ExpectEnd() const {
    if (Peek().kind != Token::Kind::kEnd) {
      return Fail(Peek(), absl::StrCat("unexpected '", Peek().text, "' (expected the end of the tag)"));
    }
    return absl::OkStatus();
  }

  ExprPtr Make(Expr::Kind kind, const Token& at) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    const Position p = lexer_.PositionOf(at.offset);
    e->line = p.line;
    e->column = p.column;
    return e;
  }

  absl::StatusOr<ExprPtr> ParseTupleOrExpression() {
    const Token& at = Peek();
    ExprPtr first;
    LLM42_ASSIGN_OR_RETURN(first, ParseExpression());
    if (!IsOp(",")) return first;
    ExprPtr tuple = Make(Expr::Kind::kTuple, at);
    tuple->items.push_back(std::move(first));
    while (IsOp(",")) {
      ++tok_;
      if (Peek().kind == Token::Kind::kEnd) break;
      ExprPtr e;
      LLM42_ASSIGN_OR_RETURN(e, ParseExpression());
      tuple->items.push_back(std::move(e));
    }
    return tuple;
  }

  absl::StatusOr<ExprPtr> ParseExpression() { return ParseCondExpression(true); }

  absl::StatusOr<ExprPtr> ParseCondExpression(bool allow_cond) {
    if (++depth_ > 200) return Fail(Peek(), "the expression nests too deeply");
    ExprPtr e;
    LLM42_ASSIGN_OR_RETURN(e, ParseOr());
    while (allow_cond && IsName("if")) {
      const Token& at = Next();
      ExprPtr cond = Make(Expr::Kind::kCond, at);
      ExprPtr test;
      LLM42_ASSIGN_OR_RETURN(test, ParseOr());
      cond->items.push_back(std::move(e));
      cond->items.push_back(std::move(test));
      if (IsName("else")) {
        ++tok_;
        ExprPtr other;
        LLM42_ASSIGN_OR_RETURN(other, ParseCondExpression(true));
        cond->items.push_back(std::move(other));
      }
      e = std::move(cond);
    }
    --depth_;
    return e;
  }

  ExprPtr Binary(std::string op, ExprPtr a, ExprPtr b, const Token& at) const {
    ExprPtr e = Make(Expr::Kind::kBinary, at);
    e->name = std::move(op);
    e->items.push_back(std::move(a));
    e->items.push_back(std::move(b));
    return e;
  }

  // A left-associative run of operands parsed by `next`, joined by any of `ops` (operator tokens,
  // or the keywords "and" and "or").
  absl::StatusOr<ExprPtr> LeftAssociative(std::initializer_list<std::string_view> ops,
                                          absl::StatusOr<ExprPtr> (Parser::*next)()) {
    ExprPtr e;
    LLM42_ASSIGN_OR_RETURN(e, (this->*next)());
    for (;;) {
      bool found = false;
      for (std::string_view op : ops) found = found || IsOp(op) || IsName(op);
      if (!found) return e;
      const Token& at = Next();
      ExprPtr r;
      LLM42_ASSIGN_OR_RETURN(r, (this->*next)());
      e = Binary(at.text, std::move(e), std::move(r), at);
    }
  }

  absl::StatusOr<ExprPtr> ParseOr() { return LeftAssociative({"or"}, &Parser::ParseAnd); }
  absl::StatusOr<ExprPtr> ParseAnd() { return LeftAssociative({"and"}, &Parser::ParseNot); }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (absl::Status g = Grow(); !g.ok()) return g;
    if (IsName("not")) {
      const Token& at = Next();
      ExprPtr e = Make(Expr::Kind::kUnary, at);
      e->name = "not";
      ExprPtr inner;
      LLM42_ASSIGN_OR_RETURN(inner, ParseNot());
      e->items.push_back(std::move(inner));
      return e;
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    ExprPtr e;
    LLM42_ASSIGN_OR_RETURN(e, ParseMath1());
    for (;;) {
      std::string op;
      if (Peek().kind == Token::Kind::kOp &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" || Peek().text == "<=" ||
           Peek().text == ">" || Peek().text == ">=")) {
        op = Peek().text;
        ++tok_;
      } else if (IsName("in")) {
        op = "in";
        ++tok_;
      } else if (IsName("not") && tok_ + 1 < toks_->size() && (*toks_)[tok_ + 1].kind == Token::Kind::kName &&
                 (*toks_)[tok_ + 1].text == "in") {
        op = "not in";
        tok_ += 2;
      } else {
        return e;
      }
      const Token& at = (*toks_)[tok_ - 1];
      ExprPtr r;
      LLM42_ASSIGN_OR_RETURN(r, ParseMath1());
      e = Binary(op, std::move(e), std::move(r), at);
    }
  }

  absl::StatusOr<ExprPtr> ParseMath1() { return LeftAssociative({"+", "-"}, &Parser::ParseConcat); }
  absl::StatusOr<ExprPtr> ParseConcat() { return LeftAssociative({"~"}, &Parser::ParseMath2); }
  absl::StatusOr<ExprPtr> ParseMath2() { return LeftAssociative({"*", "/", "//", "%"}, &Parser::ParsePow); }
  absl::StatusOr<ExprPtr> ParsePow() { return LeftAssociative({"**"}, &Parser::ParseUnaryWithFilters); }
  absl::StatusOr<ExprPtr> ParseUnaryWithFilters() { return ParseUnary(true); }

  // As jinja2: a sign binds tighter than filters and tests (-3 | abs is 3), which apply to it.
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filters = true) {
    if (absl::Status g = Grow(); !g.ok()) return g;
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      const Token& at = Next();
      e = Make(Expr::Kind::kUnary, at);
      e->name = at.text;
      ExprPtr inner;
      LLM42_ASSIGN_OR_RETURN(inner, ParseUnary(false));
      e->items.push_back(std::move(inner));
    } else {
      LLM42_ASSIGN_OR_RETURN(e, ParsePrimary());
      LLM42_ASSIGN_OR_RETURN(e, ParsePostfix(std::move(e)));
    }
    if (!with_filters) return e;
    return ParseFilters(std::move(e));
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& t = Peek();
    switch (t.kind) {
      case Token::Kind::kName: {
        ++tok_;
        ExprPtr e = Make(Expr::Kind::kLiteral, t);
        if (t.text == "true" || t.text == "True") {
          e->value = Value::Bool(true);
        } else if (t.text == "false" || t.text == "False") {
          e->value = Value::Bool(false);
        } else if (t.text == "none" || t.text == "None") {
          e->value = Value::None();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        return e;
      }
      case Token::Kind::kString: {
        ExprPtr e = Make(Expr::Kind::kLiteral, t);
        std::string s;
        while (Peek().kind == Token::Kind::kString) s += Next().text;  // adjacent literals join
        e->value = Value::String(std::move(s));
        return e;
      }
      case Token::Kind::kInt: {
        ++tok_;
        ExprPtr e = Make(Expr::Kind::kLiteral, t);
        e->value = Value::Int(t.int_value);
        return e;
      }
      case Token::Kind::kFloat: {
        ++tok_;
        ExprPtr e = Make(Expr::Kind::kLiteral, t);
        e->value = Value::Float(t.float_value);
        return e;
      }
      case Token::Kind::kOp:
        if (t.text == "(") {
          ++tok_;
          if (IsOp(")")) {
            ++tok_;
            return Make(Expr::Kind::kTuple, t);
          }
          ExprPtr e;
          LLM42_ASSIGN_OR_RETURN(e, ParseExpression());
          if (IsOp(",")) {
            ExprPtr tuple = Make(Expr::Kind::kTuple, t);
            tuple->items.push_back(std::move(e));
            while (IsOp(",")) {
              ++tok_;
              if (IsOp(")")) break;
              ExprPtr item;
              LLM42_ASSIGN_OR_RETURN(item, ParseExpression());
              tuple->items.push_back(std::move(item));
            }
            e = std::move(tuple);
          }
          if (!IsOp(")")) return Fail(Peek(), "expected ')'");
          ++tok_;
          return e;
        }
        if (t.text == "[") {
          ++tok_;
          ExprPtr e = Make(Expr::Kind::kList, t);
          LLM42_RETURN_IF_ERROR(CommaSeparated("]", [&]() -> absl::Status {
            LLM42_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression());
            e->items.push_back(std::move(item));
            return absl::OkStatus();
          }));
          return e;
        }
        if (t.text == "{") {
          ++tok_;
          ExprPtr e = Make(Expr::Kind::kDict, t);
          LLM42_RETURN_IF_ERROR(CommaSeparated("}", [&]() -> absl::Status {
            LLM42_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression());
            if (!IsOp(":")) return Fail(Peek(), "expected ':' in a dict literal");
            ++tok_;
            LLM42_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression());
            e->items.push_back(std::move(key));
            e->items.push_back(std::move(value));
            return absl::OkStatus();
          }));
          return e;
        }
        break;
      case Token::Kind::kEnd:
        return Fail(t, "an expression ends too soon");
    }
    return Fail(t, absl::StrCat("unexpected '", t.text, "'"));
  }

  absl::Status ParseArgs(Expr* call) {
    ++tok_;  // (
    return CommaSeparated(")", [&]() -> absl::Status {
      if (Peek().kind == Token::Kind::kName && tok_ + 1 < toks_->size() &&
          (*toks_)[tok_ + 1].kind == Token::Kind::kOp && (*toks_)[tok_ + 1].text == "=") {
        std::string name = Next().text;
        ++tok_;
        LLM42_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression());
        call->kwargs.emplace_back(std::move(name), std::move(v));
        return absl::OkStatus();
      }
      if (!call->kwargs.empty()) return Fail(Peek(), "a positional argument after keyword arguments");
      LLM42_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression());
      call->items.push_back(std::move(v));
      return absl::OkStatus();
    });
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr e) {
    for (;;) {
      if (absl::Status g = Grow(); !g.ok()) return g;
      if (IsOp(".")) {
        const Token& at = Next();
        if (Peek().kind != Token::Kind::kName && Peek().kind != Token::Kind::kInt) {
          return Fail(Peek(), "expected an attribute name");
        }
        ExprPtr a = Make(Expr::Kind::kAttr, at);
        const Token& name = Next();
        a->name = name.kind == Token::Kind::kInt ? std::to_string(name.int_value) : name.text;
        a->items.push_back(std::move(e));
        e = std::move(a);
      } else if (IsOp("[")) {
        const Token& at = Next();
        ExprPtr parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!IsOp(":") && !IsOp("]")) {
            LLM42_ASSIGN_OR_RETURN(parts[k], ParseExpression());
          }
          if (IsOp(":") && k < 2) {
            ++tok_;
            slice = true;
          } else {
            break;
          }
        }
        if (!IsOp("]")) return Fail(Peek(), "expected ']'");
        ++tok_;
        ExprPtr s = Make(slice ? Expr::Kind::kSlice : Expr::Kind::kItem, at);
        s->items.push_back(std::move(e));
        if (!slice && parts[0] == nullptr) return Fail(at, "an empty subscript");
        for (int k = 0; k < (slice ? 3 : 1); ++k) s->items.push_back(std::move(parts[k]));
        e = std::move(s);
      } else if (IsOp("(")) {
        ExprPtr c = Make(Expr::Kind::kCall, Peek());
        c->items.push_back(std::move(e));
        if (absl::Status s = ParseArgs(c.get()); !s.ok()) return s;
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  // A filter's name and arguments (after its '|') applied to `e`.
  absl::StatusOr<ExprPtr> ParseFilterCall(ExprPtr e) {
    if (Peek().kind != Token::Kind::kName) return Fail(Peek(), "expected a filter name");
    ExprPtr f = Make(Expr::Kind::kFilter, Peek());
    f->name = Next().text;
    f->items.push_back(std::move(e));
    if (IsOp("(")) LLM42_RETURN_IF_ERROR(ParseArgs(f.get()));
    return f;
  }

  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr e) {
    for (;;) {
      if (absl::Status g = Grow(); !g.ok()) return g;
      if (IsOp("|")) {
        ++tok_;
        LLM42_ASSIGN_OR_RETURN(e, ParseFilterCall(std::move(e)));
      } else if (IsName("is")) {
        const Token& at = Next();
        ExprPtr t = Make(Expr::Kind::kTest, at);
        if (IsName("not")) {
          ++tok_;
          t->negate = true;
        }
        if (Peek().kind != Token::Kind::kName) return Fail(Peek(), "expected a test name");
        t->name = Next().text;
        t->items.push_back(std::move(e));
        if (IsOp("(")) {
          if (absl::Status s = ParseArgs(t.get()); !s.ok()) return s;
        } else if (Peek().kind == Token::Kind::kString || Peek().kind == Token::Kind::kInt ||
                   Peek().kind == Token::Kind::kFloat ||
                   (Peek().kind == Token::Kind::kName && !IsName("and") && !IsName("or") && !IsName("else") &&
                    !IsName("if") && !IsName("in") && !IsName("is") && !IsName("not"))) {
          ExprPtr arg;  // `x is divisibleby 3`, `x is sameas none`
          LLM42_ASSIGN_OR_RETURN(arg, ParsePrimary());
          t->items.push_back(std::move(arg));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  // Bounds on what one tag and the template's nesting may build, so that no tree is deep enough
  // for a recursive walk (rendering, destruction) to run out of stack.
  static constexpr int kMaxExpressionParts = 1000;
  static constexpr int kMaxNesting = 100;
  absl::Status Grow() {
    if (++parts_ > kMaxExpressionParts) return Fail(Peek(), "the expression is too long");
    return absl::OkStatus();
  }

  const Lexer& lexer_;
  std::vector<Segment> segs_;
  size_t seg_ = 0;
  const std::vector<Token>* toks_ = nullptr;
  size_t tok_ = 0;
  int depth_ = 0;
  int parts_ = 0;
  int nesting_ = 0;
};

}  // namespace

absl::StatusOr<NodePtr> ParseTemplate(std::string_view source) {
  Lexer lexer(Normalize(source));
  absl::StatusOr<std::vector<Segment>> segments = lexer.Run();
  if (!segments.ok()) return segments.status();
  return Parser(lexer, std::move(segments).value()).Run();
}

}  // namespace llm42::jinja
