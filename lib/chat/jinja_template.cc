// Rendering a parsed template (jinja_ast.h) with Python's semantics where chat templates lean on
// them, and the built-in filters, tests, globals and methods of transformers' environment.
#include "lib/chat/jinja_template.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/chat/jinja_ast.h"
#include "lib/util/status.h"

namespace llm42::jinja {
namespace {

using Clock = std::chrono::steady_clock;

// A scope of names; a for-loop body and a macro call get their own.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  const Value* Find(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
      for (const auto& [k, v] : s->vars) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }
  void Set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { kNormal, kBreak, kContinue };

std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

// markupsafe's escape.
std::string HtmlEscape(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&#34;"; break;
      case '\'': r += "&#39;"; break;
      default: r += c;
    }
  }
  return r;
}

// A float's integer part, where it has one that fits.
std::optional<int64_t> Truncate(double d) {
  if (!(d > -9.2e18 && d < 9.2e18)) return std::nullopt;
  return static_cast<int64_t>(d);
}

bool IsPySpace(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string Strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  auto strip_char = [&](unsigned char c) {
    return chars ? chars->find(static_cast<char>(c)) != std::string::npos : IsPySpace(c);
  };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e && strip_char(static_cast<unsigned char>(s[b]))) ++b;
  }
  if (right) {
    while (e > b && strip_char(static_cast<unsigned char>(s[e - 1]))) --e;
  }
  return s.substr(b, e - b);
}

class Renderer {
 public:
  explicit Renderer(const Limits& limits)
      : limits_(limits),
        deadline_(Clock::now() +
                  std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits.max_seconds))) {}
  // Macros hold the scope they were defined in, which holds them; a namespace may hold itself.
  // Those cycles are broken here, once nothing of the rendering is left to call.
  ~Renderer() {
    for (const std::shared_ptr<Callable>& c : macros_) c->fn = nullptr;
    for (const Value& ns : namespaces_) ns.mutable_namespace() = Dict();
  }

  absl::StatusOr<std::string> Render(const Node& root, const Dict& variables) {
    auto globals = std::make_shared<Scope>();
    for (const auto& [k, v] : variables.items()) globals->Set(k, v);
    std::string out;
    absl::StatusOr<Flow> f = ExecBody(root.body, globals, &out);
    if (!f.ok()) return f.status();
    return out;
  }

 private:
  // --- Errors and limits ---

  absl::Status Error(int line, const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat("template line ", line, ": ", message));
  }
  absl::Status Step(int line) {
    if (++steps_ > limits_.max_steps) {
      return absl::ResourceExhaustedError(absl::StrCat("template line ", line, ": the template ran past ",
                                                       limits_.max_steps, " steps"));
    }
    if ((steps_ & 1023) == 0 && Clock::now() > deadline_) {
      return absl::ResourceExhaustedError(absl::StrCat("template line ", line, ": the template ran past ",
                                                       limits_.max_seconds, " s"));
    }
    return absl::OkStatus();
  }
  absl::Status Append(std::string* out, std::string_view s, int line) {
    if (out->size() + s.size() > limits_.max_output_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("template line ", line, ": the output grew past ",
                                                       limits_.max_output_bytes, " bytes"));
    }
    out->append(s);
    return absl::OkStatus();
  }

  // --- Statements ---

  absl::StatusOr<Flow> ExecBody(const Body& body, const ScopePtr& scope, std::string* out) {
    for (const NodePtr& n : body) {
      LLM42_ASSIGN_OR_RETURN(const Flow f, Exec(*n, scope, out));
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  absl::StatusOr<Flow> Exec(const Node& n, const ScopePtr& scope, std::string* out) {
    LLM42_RETURN_IF_ERROR(Step(n.line));
    switch (n.kind) {
      case Node::Kind::kText:
        LLM42_RETURN_IF_ERROR(Append(out, n.text, n.line));
        return Flow::kNormal;
      case Node::Kind::kEmit: {
        LLM42_ASSIGN_OR_RETURN(const Value v, Eval(*n.expr, scope));
        LLM42_RETURN_IF_ERROR(Append(out, v.Str(), n.line));
        return Flow::kNormal;
      }
      case Node::Kind::kIf:
        for (size_t i = 0; i < n.bodies.size(); ++i) {
          bool take = i >= n.conditions.size();
          if (!take) {
            LLM42_ASSIGN_OR_RETURN(const Value c, Eval(*n.conditions[i], scope));
            take = c.Truthy();
          }
          if (take) return ExecBody(n.bodies[i], scope, out);
        }
        return Flow::kNormal;
      case Node::Kind::kFor: return ExecFor(n, scope, out);
      case Node::Kind::kSet: {
        Value v;
        if (n.set_block) {
          std::string captured;
          LLM42_ASSIGN_OR_RETURN(const Flow f, ExecBody(n.body, scope, &captured));
          (void)f;
          v = Value::String(std::move(captured));
          if (n.expr != nullptr) {
            LLM42_ASSIGN_OR_RETURN(v, EvalWithPlaceholder(*n.expr, scope, v));
          }
        } else {
          LLM42_ASSIGN_OR_RETURN(v, Eval(*n.expr, scope));
        }
        LLM42_RETURN_IF_ERROR(Assign(n.targets, v, scope, n.line));
        return Flow::kNormal;
      }
      case Node::Kind::kMacro: {
        scope->Set(n.targets[0], MakeMacro(n, scope, n.targets[0]));
        return Flow::kNormal;
      }
      case Node::Kind::kCallBlock: {
        // caller(): the block's body as a macro of the block's parameters.
        const Value caller = MakeMacro(n, scope, "caller");
        const Expr& call = *n.expr;
        LLM42_ASSIGN_OR_RETURN(const Value callee, Eval(*call.items[0], scope));
        LLM42_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call, scope, 1));
        args.keywords.emplace_back("caller", caller);
        LLM42_ASSIGN_OR_RETURN(const Value result, CallValue(callee, args, call.line));
        LLM42_RETURN_IF_ERROR(Append(out, result.Str(), n.line));
        return Flow::kNormal;
      }
      case Node::Kind::kFilterBlock: {
        std::string captured;
        LLM42_ASSIGN_OR_RETURN(const Flow f, ExecBody(n.body, scope, &captured));
        (void)f;
        LLM42_ASSIGN_OR_RETURN(const Value v, EvalWithPlaceholder(*n.expr, scope, Value::String(std::move(captured))));
        LLM42_RETURN_IF_ERROR(Append(out, v.Str(), n.line));
        return Flow::kNormal;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
      case Node::Kind::kBlock: return ExecBody(n.body, scope, out);
    }
    return Flow::kNormal;
  }

  absl::Status Assign(const std::vector<std::string>& targets, const Value& v, const ScopePtr& scope, int line) {
    if (targets.size() == 1) {
      const std::string& t = targets[0];
      const size_t dot = t.find('.');
      if (dot == std::string::npos) {
        scope->Set(t, v);
        return absl::OkStatus();
      }
      const Value* ns = scope->Find(t.substr(0, dot));
      if (ns == nullptr || ns->kind() != Value::Kind::kNamespace) {
        return Error(line, absl::StrCat("cannot assign attribute on non-namespace object '", t.substr(0, dot), "'"));
      }
      ns->mutable_namespace().Set(t.substr(dot + 1), v);
      return absl::OkStatus();
    }
    LLM42_ASSIGN_OR_RETURN(const List items, Iterate(v, line));
    if (items.size() != targets.size()) {
      return Error(line, absl::StrCat("cannot unpack ", items.size(), " values into ", targets.size(), " names"));
    }
    for (size_t i = 0; i < targets.size(); ++i) LLM42_RETURN_IF_ERROR(Assign({targets[i]}, items[i], scope, line));
    return absl::OkStatus();
  }

  absl::StatusOr<Flow> ExecFor(const Node& n, const ScopePtr& scope, std::string* out) {
    LLM42_ASSIGN_OR_RETURN(const Value iterable, Eval(*n.expr, scope));
    LLM42_ASSIGN_OR_RETURN(List items, Iterate(iterable, n.line));
    if (n.filter != nullptr) {
      List kept;
      for (const Value& item : items) {
        auto probe = std::make_shared<Scope>();
        probe->parent = scope;
        LLM42_RETURN_IF_ERROR(Assign(n.targets, item, probe, n.line));
        LLM42_ASSIGN_OR_RETURN(const Value keep, Eval(*n.filter, probe));
        if (keep.Truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return ExecBody(n.else_body, scope, out);
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      LLM42_RETURN_IF_ERROR(Step(n.line));
      auto body_scope = std::make_shared<Scope>();
      body_scope->parent = scope;
      LLM42_RETURN_IF_ERROR(Assign(n.targets, items[static_cast<size_t>(i)], body_scope, n.line));
      Dict loop;  // its keys are distinct: appended without Set's search
      loop.Reserve(12);
      loop.AppendNew("index", Value::Int(i + 1));
      loop.AppendNew("index0", Value::Int(i));
      loop.AppendNew("revindex", Value::Int(length - i));
      loop.AppendNew("revindex0", Value::Int(length - i - 1));
      loop.AppendNew("first", Value::Bool(i == 0));
      loop.AppendNew("last", Value::Bool(i == length - 1));
      loop.AppendNew("length", Value::Int(length));
      loop.AppendNew("depth", Value::Int(1));
      loop.AppendNew("depth0", Value::Int(0));
      loop.AppendNew("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::Undefined("previtem"));
      loop.AppendNew("nextitem", i + 1 < length ? items[static_cast<size_t>(i + 1)] : Value::Undefined("nextitem"));
      auto cycle = std::make_shared<Callable>();
      cycle->name = "cycle";
      cycle->fn = [i](const CallArgs& a) -> absl::StatusOr<Value> {
        if (a.positional.empty()) return absl::InvalidArgumentError("loop.cycle needs at least one value");
        return a.positional[static_cast<size_t>(i) % a.positional.size()];
      };
      loop.AppendNew("cycle", Value::MakeCallable(std::move(cycle)));
      body_scope->Set("loop", Value::MakeDict(std::move(loop)));
      LLM42_ASSIGN_OR_RETURN(const Flow f, ExecBody(n.body, body_scope, out));
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Value MakeMacro(const Node& n, const ScopePtr& defined_in, const std::string& name) {
    auto c = std::make_shared<Callable>();
    c->name = name;
    macros_.push_back(c);
    const Node* node = &n;
    c->fn = [this, node, defined_in](const CallArgs& a) -> absl::StatusOr<Value> {
      if (++depth_ > limits_.max_depth) {
        --depth_;
        return absl::ResourceExhaustedError(absl::StrCat("template line ", node->line, ": macros nest past ",
                                                         limits_.max_depth, " calls"));
      }
      auto scope = std::make_shared<Scope>();
      scope->parent = defined_in;
      List varargs;
      for (size_t i = 0; i < a.positional.size(); ++i) {
        if (i < node->params.size()) {
          scope->Set(node->params[i].first, a.positional[i]);
        } else {
          varargs.push_back(a.positional[i]);
        }
      }
      Dict kwargs;
      for (const auto& [k, v] : a.keywords) {
        bool param = false;
        for (const auto& p : node->params) param |= p.first == k;
        if (param || k == "caller") {
          scope->Set(k, v);
        } else {
          kwargs.Set(k, v);
        }
      }
      for (size_t i = a.positional.size(); i < node->params.size(); ++i) {
        const auto& [pname, def] = node->params[i];
        bool given = false;
        for (const auto& kw : a.keywords) given |= kw.first == pname;
        if (given) continue;
        if (def != nullptr) {
          absl::StatusOr<Value> v = Eval(*def, scope);
          if (!v.ok()) {
            --depth_;
            return v.status();
          }
          scope->Set(pname, *v);
        } else {
          scope->Set(pname, Value::Undefined(pname));
        }
      }
      scope->Set("varargs", Value::MakeTuple(std::move(varargs)));
      scope->Set("kwargs", Value::MakeDict(std::move(kwargs)));
      std::string out;
      absl::StatusOr<Flow> f = ExecBody(node->body, scope, &out);
      --depth_;
      if (!f.ok()) return f.status();
      return Value::String(std::move(out));
    };
    return Value::MakeCallable(std::move(c));
  }

  // --- Expressions ---

  absl::StatusOr<Value> EvalWithPlaceholder(const Expr& chain, const ScopePtr& scope, const Value& v) {
    auto s = std::make_shared<Scope>();
    s->parent = scope;
    s->Set("", v);
    return Eval(chain, s);
  }

  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, const ScopePtr& scope, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.items.size(); ++i) {
      LLM42_ASSIGN_OR_RETURN(Value v, Eval(*e.items[i], scope));
      a.positional.push_back(std::move(v));
    }
    for (const auto& [k, ex] : e.kwargs) {
      LLM42_ASSIGN_OR_RETURN(Value v, Eval(*ex, scope));
      a.keywords.emplace_back(k, std::move(v));
    }
    return a;
  }

  absl::StatusOr<Value> CallValue(const Value& callee, const CallArgs& args, int line) {
    if (callee.kind() != Value::Kind::kCallable) {
      if (callee.is_undefined()) return Error(line, absl::StrCat("'", callee.undefined_name(), "' is undefined"));
      return Error(line, absl::StrCat("'", callee.Str(), "' is not callable"));
    }
    absl::StatusOr<Value> r = callee.callable().fn(args);
    if (!r.ok() && r.status().message().find("template line") == std::string_view::npos &&
        absl::IsInvalidArgument(r.status())) {
      return Error(line, std::string(r.status().message()));
    }
    return r;
  }

  absl::StatusOr<List> Iterate(const Value& v, int line) {
    switch (v.kind()) {
      case Value::Kind::kList: return v.list();
      case Value::Kind::kDict:
      case Value::Kind::kNamespace: {
        List keys;
        for (const auto& [k, unused] : v.dict().items()) keys.push_back(Value::String(k));
        return keys;
      }
      case Value::Kind::kString: {
        List chars;
        for (std::string& c : CodePoints(v.string_value())) chars.push_back(Value::String(std::move(c)));
        return chars;
      }
      case Value::Kind::kUndefined: return List{};
      default: return Error(line, absl::StrCat("'", TypeName(v), "' object is not iterable"));
    }
  }

  // jinja2's lazy filters iterate a value only when it is true (None and empty give nothing).
  absl::StatusOr<List> Lazy(const Value& v, int line) {
    if (!v.Truthy()) return List{};
    return Iterate(v, line);
  }

  static std::string TypeName(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kUndefined: return "Undefined";
      case Value::Kind::kNone: return "NoneType";
      case Value::Kind::kBool: return "bool";
      case Value::Kind::kInt: return "int";
      case Value::Kind::kFloat: return "float";
      case Value::Kind::kString: return "str";
      case Value::Kind::kList: return "list";
      case Value::Kind::kDict: return "dict";
      case Value::Kind::kNamespace: return "Namespace";
      case Value::Kind::kCallable: return "function";
    }
    return "object";
  }

  absl::StatusOr<Value> Eval(const Expr& e, const ScopePtr& scope) {
    if (++depth_ > limits_.max_depth * 4) {
      --depth_;
      return absl::ResourceExhaustedError(absl::StrCat("template line ", e.line, ": expressions nest too deeply"));
    }
    absl::StatusOr<Value> v = EvalInner(e, scope);
    --depth_;
    if (v.ok()) {
      absl::Status s = Step(e.line);
      if (!s.ok()) return s;
    }
    return v;
  }

  absl::StatusOr<Value> EvalInner(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: {
        if (const Value* v = scope->Find(e.name)) return *v;
        return Global(e.name);
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List items;
        for (const ExprPtr& x : e.items) {
          LLM42_ASSIGN_OR_RETURN(Value v, Eval(*x, scope));
          items.push_back(std::move(v));
        }
        return e.kind == Expr::Kind::kTuple ? Value::MakeTuple(std::move(items)) : Value::MakeList(std::move(items));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          LLM42_ASSIGN_OR_RETURN(const Value k, Eval(*e.items[i], scope));
          LLM42_ASSIGN_OR_RETURN(Value v, Eval(*e.items[i + 1], scope));
          if (!k.is_string()) return Error(e.line, "dict keys must be strings here");
          d.Set(k.string_value(), std::move(v));
        }
        return Value::MakeDict(std::move(d));
      }
      case Expr::Kind::kAttr: {
        LLM42_ASSIGN_OR_RETURN(const Value obj, Eval(*e.items[0], scope));
        return GetAttr(obj, e.name, e.line);
      }
      case Expr::Kind::kItem: {
        LLM42_ASSIGN_OR_RETURN(const Value obj, Eval(*e.items[0], scope));
        LLM42_ASSIGN_OR_RETURN(const Value key, Eval(*e.items[1], scope));
        return GetItem(obj, key, e.line);
      }
      case Expr::Kind::kSlice: return EvalSlice(e, scope);
      case Expr::Kind::kCall: {
        LLM42_ASSIGN_OR_RETURN(const Value callee, Eval(*e.items[0], scope));
        LLM42_ASSIGN_OR_RETURN(const CallArgs args, EvalArgs(e, scope, 1));
        return CallValue(callee, args, e.line);
      }
      case Expr::Kind::kFilter: {
        LLM42_ASSIGN_OR_RETURN(const Value subject, Eval(*e.items[0], scope));
        LLM42_ASSIGN_OR_RETURN(const CallArgs args, EvalArgs(e, scope, 1));
        return Filter(e.name, subject, args, e.line);
      }
      case Expr::Kind::kTest: {
        LLM42_ASSIGN_OR_RETURN(const Value subject, Eval(*e.items[0], scope));
        LLM42_ASSIGN_OR_RETURN(const CallArgs args, EvalArgs(e, scope, 1));
        LLM42_ASSIGN_OR_RETURN(const bool r, Test(e.name, subject, args, e.line));
        return Value::Bool(r != e.negate);
      }
      case Expr::Kind::kUnary: {
        LLM42_ASSIGN_OR_RETURN(const Value v, Eval(*e.items[0], scope));
        if (e.name == "not") return Value::Bool(!v.Truthy());
        if (v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool) {
          if (e.name == "-" && v.int_value() == INT64_MIN) return Error(e.line, "integer overflow in unary -");
          return Value::Int(e.name == "-" ? -v.int_value() : v.int_value());
        }
        if (v.kind() == Value::Kind::kFloat) return Value::Float(e.name == "-" ? -v.float_value() : v.float_value());
        return Error(e.line, absl::StrCat("bad operand type for unary ", e.name, ": '", TypeName(v), "'"));
      }
      case Expr::Kind::kBinary: return EvalBinary(e, scope);
      case Expr::Kind::kCond: {
        LLM42_ASSIGN_OR_RETURN(const Value c, Eval(*e.items[1], scope));
        if (c.Truthy()) return Eval(*e.items[0], scope);
        if (e.items.size() > 2) return Eval(*e.items[2], scope);
        return Value::Undefined("");
      }
    }
    return Value();
  }

  static int64_t PyIndex(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

  absl::StatusOr<Value> EvalSlice(const Expr& e, const ScopePtr& scope) {
    LLM42_ASSIGN_OR_RETURN(const Value obj, Eval(*e.items[0], scope));
    std::optional<int64_t> part[3];
    for (int k = 0; k < 3; ++k) {
      if (e.items[static_cast<size_t>(k) + 1] == nullptr) continue;
      LLM42_ASSIGN_OR_RETURN(const Value v, Eval(*e.items[static_cast<size_t>(k) + 1], scope));
      if (v.is_none()) continue;
      if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) {
        return Error(e.line, "slice indices must be integers");
      }
      part[k] = v.int_value();
    }
    const int64_t step = part[2].value_or(1);
    if (step == 0) return Error(e.line, "slice step cannot be zero");
    List items;
    bool string = false;
    if (obj.is_list()) {
      items = obj.list();
    } else if (obj.is_string()) {
      string = true;
      for (std::string& c : CodePoints(obj.string_value())) items.push_back(Value::String(std::move(c)));
    } else {
      return Error(e.line, absl::StrCat("'", TypeName(obj), "' object is not subscriptable"));
    }
    const auto n = static_cast<int64_t>(items.size());
    auto clamp = [&](std::optional<int64_t> v, int64_t def) {
      if (!v) return def;
      const int64_t x = *v < 0 ? *v + n : *v;
      return step > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t start = clamp(part[0], step > 0 ? 0 : n - 1);
    const int64_t stop = clamp(part[1], step > 0 ? n : -1);
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      out.push_back(items[static_cast<size_t>(i)]);
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    if (!string) return Value::MakeList(std::move(out));
    std::string s;
    for (const Value& c : out) s += c.string_value();
    return Value::String(std::move(s));
  }

  absl::StatusOr<Value> EvalBinary(const Expr& e, const ScopePtr& scope) {
    const std::string& op = e.name;
    LLM42_ASSIGN_OR_RETURN(const Value a, Eval(*e.items[0], scope));
    if (op == "and") return a.Truthy() ? Eval(*e.items[1], scope) : absl::StatusOr<Value>(a);
    if (op == "or") return a.Truthy() ? absl::StatusOr<Value>(a) : Eval(*e.items[1], scope);
    LLM42_ASSIGN_OR_RETURN(const Value b, Eval(*e.items[1], scope));
    if (op == "~") {
      std::string r = a.Str() + b.Str();
      if (r.size() > limits_.max_output_bytes) return Error(e.line, "~: a string past the output limit");
      return Value::String(std::move(r));
    }
    if (op == "==") return Value::Bool(a.Equals(b));
    if (op == "!=") return Value::Bool(!a.Equals(b));
    if (op == "in" || op == "not in") {
      LLM42_ASSIGN_OR_RETURN(const bool in, Contains(b, a, e.line));
      return Value::Bool(in == (op == "in"));
    }
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      LLM42_ASSIGN_OR_RETURN(const int c, Compare(a, b, e.line));
      return Value::Bool(op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0);
    }
    return Arithmetic(op, a, b, e.line);
  }

  absl::StatusOr<bool> Contains(const Value& container, const Value& item, int line) {
    switch (container.kind()) {
      case Value::Kind::kString:
        if (!item.is_string()) return Error(line, "'in <string>' requires string as left operand");
        return container.string_value().find(item.string_value()) != std::string::npos;
      case Value::Kind::kList:
        for (const Value& v : container.list()) {
          if (v.Equals(item)) return true;
        }
        return false;
      case Value::Kind::kDict:
      case Value::Kind::kNamespace:
        return item.is_string() && container.dict().Find(item.string_value()) != nullptr;
      case Value::Kind::kUndefined: return false;
      default: return Error(line, absl::StrCat("argument of type '", TypeName(container), "' is not iterable"));
    }
  }

  absl::StatusOr<int> Compare(const Value& a, const Value& b, int line) {
    if (a.is_number() && b.is_number()) {
      const double x = a.float_value(), y = b.float_value();
      if (a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat) {
        return a.int_value() < b.int_value() ? -1 : a.int_value() > b.int_value() ? 1 : 0;
      }
      return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) {
      const int c = a.string_value().compare(b.string_value());
      return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if (a.is_list() && b.is_list()) {
      const List& x = a.list();
      const List& y = b.list();
      for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
        if (x[i].Equals(y[i])) continue;
        return Compare(x[i], y[i], line);
      }
      return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    return Error(line, absl::StrCat("'<' not supported between instances of '", TypeName(a), "' and '", TypeName(b), "'"));
  }

  absl::StatusOr<Value> Arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
    const bool ints = (a.kind() == Value::Kind::kInt || a.kind() == Value::Kind::kBool) &&
                      (b.kind() == Value::Kind::kInt || b.kind() == Value::Kind::kBool);
    if (op == "+") {
      if (a.is_markup() || b.is_markup()) {  // Markup.__add__ / __radd__ escape the plain side
        if ((a.is_string() || a.is_number() || a.is_none()) && (b.is_string() || b.is_number() || b.is_none())) {
          auto side = [](const Value& v) { return v.is_markup() ? v.string_value() : HtmlEscape(v.Str()); };
          std::string r = side(a) + side(b);
          if (r.size() > limits_.max_output_bytes) return Error(line, "+: a string past the output limit");
          return Value::Markup(std::move(r));
        }
      }
      if (a.is_string() && b.is_string()) {
        if (a.string_value().size() + b.string_value().size() > limits_.max_output_bytes) {
          return Error(line, "+: a string past the output limit");
        }
        return Value::String(a.string_value() + b.string_value());
      }
      if (a.is_list() && b.is_list()) {
        if (a.list().size() + b.list().size() > static_cast<size_t>(limits_.max_steps)) {
          return Error(line, "+: a list past the step limit");
        }
        List l = a.list();
        l.insert(l.end(), b.list().begin(), b.list().end());
        return Value::MakeList(std::move(l));
      }
    }
    if (op == "*") {
      const Value* seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
      const Value* times = seq == &a ? &b : &a;
      if (seq != nullptr && (times->kind() == Value::Kind::kInt || times->kind() == Value::Kind::kBool)) {
        const int64_t n = std::max<int64_t>(0, times->int_value());
        const size_t unit = seq->is_string() ? seq->string_value().size() : seq->list().size();
        const double bound = static_cast<double>(seq->is_string() ? limits_.max_output_bytes : static_cast<size_t>(limits_.max_steps));
        if (static_cast<double>(unit) * static_cast<double>(n) > bound) {
          return absl::ResourceExhaustedError(absl::StrCat("template line ", line, ": a repetition past the output limit"));
        }
        if (seq->is_string()) {
          std::string s;
          for (int64_t i = 0; i < n; ++i) s += seq->string_value();
          return Value::String(std::move(s));
        }
        List l;
        for (int64_t i = 0; i < n; ++i) l.insert(l.end(), seq->list().begin(), seq->list().end());
        return Value::MakeList(std::move(l));
      }
    }
    if (!a.is_number() || !b.is_number()) {
      return Error(line, absl::StrCat("unsupported operand type(s) for ", op, ": '", TypeName(a), "' and '", TypeName(b), "'"));
    }
    // Python's ints never overflow; these are 64-bit, and refuse to (rather than wrap).
    const absl::Status overflow = Error(line, absl::StrCat("integer overflow in ", op));
    if (ints && op != "/" && op != "**") {
      const int64_t x = a.int_value(), y = b.int_value();
      int64_t r = 0;
      if (op == "+") return __builtin_add_overflow(x, y, &r) ? absl::StatusOr<Value>(overflow) : Value::Int(r);
      if (op == "-") return __builtin_sub_overflow(x, y, &r) ? absl::StatusOr<Value>(overflow) : Value::Int(r);
      if (op == "*") return __builtin_mul_overflow(x, y, &r) ? absl::StatusOr<Value>(overflow) : Value::Int(r);
      if (y == 0) return Error(line, "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) return overflow;
      const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0);  // floor
      if (op == "//") return Value::Int(q);
      if (op == "%") return Value::Int(x - q * y);
    }
    if (ints && op == "**" && b.int_value() >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < b.int_value(); ++i) {
        if (__builtin_mul_overflow(r, a.int_value(), &r)) return overflow;
        if (r == 0 || r == 1) break;  // 0 and 1 stay; -1 alternates (its loop is bounded by overflow-free steps)
      }
      if (a.int_value() == -1) r = b.int_value() % 2 == 0 ? 1 : -1;
      return Value::Int(r);
    }
    const double x = a.float_value(), y = b.float_value();
    if (op == "+") return Value::Float(x + y);
    if (op == "-") return Value::Float(x - y);
    if (op == "*") return Value::Float(x * y);
    if (op == "**") return Value::Float(std::pow(x, y));
    if (y == 0) return Error(line, "float division by zero");
    if (op == "/") return Value::Float(x / y);
    if (op == "//") return Value::Float(std::floor(x / y));
    if (op == "%") return Value::Float(x - std::floor(x / y) * y);
    return Error(line, absl::StrCat("unknown operator ", op));
  }

  // --- Data model ---

  static Value Bound(std::string name, std::function<absl::StatusOr<Value>(const CallArgs&)> fn) {
    auto c = std::make_shared<Callable>();
    c->name = std::move(name);
    c->fn = std::move(fn);
    return Value::MakeCallable(std::move(c));
  }

  static absl::StatusOr<std::string> StringArg(const CallArgs& a, size_t i, const char* what) {
    if (i >= a.positional.size() || !a.positional[i].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " takes a string argument"));
    }
    return a.positional[i].string_value();
  }

  absl::StatusOr<Value> StringMethod(const std::string& s, const std::string& name, int line) {
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      return Bound(name, [s, name](const CallArgs& a) -> absl::StatusOr<Value> {
        std::optional<std::string> chars;
        if (!a.positional.empty() && a.positional[0].is_string()) chars = a.positional[0].string_value();
        return Value::String(Strip(s, chars, name != "rstrip", name != "lstrip"));
      });
    }
    if (name == "upper" || name == "lower") {
      return Bound(name, [s, name](const CallArgs&) -> absl::StatusOr<Value> {
        std::string r = s;
        for (char& c : r) c = static_cast<char>(name == "upper" ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
        return Value::String(std::move(r));
      });
    }
    if (name == "startswith" || name == "endswith") {
      return Bound(name, [s, name](const CallArgs& a) -> absl::StatusOr<Value> {
        List options;
        if (!a.positional.empty() && a.positional[0].is_list()) {
          options = a.positional[0].list();
        } else {
          options.push_back(a.positional.empty() ? Value() : a.positional[0]);
        }
        for (const Value& o : options) {
          if (!o.is_string()) return absl::InvalidArgumentError(absl::StrCat(name, " takes a string or a tuple of strings"));
          if (name == "startswith" ? s.starts_with(o.string_value()) : s.ends_with(o.string_value())) return Value::Bool(true);
        }
        return Value::Bool(false);
      });
    }
    if (name == "split" || name == "rsplit") {
      return Bound(name, [s, name](const CallArgs& a) -> absl::StatusOr<Value> {
        int64_t max = -1;
        if (a.positional.size() > 1) max = a.positional[1].int_value();
        if (const Value* m = a.Keyword("maxsplit")) max = m->int_value();
        List parts;
        const bool by_space = a.positional.empty() || a.positional[0].is_none();
        if (by_space) {
          // Runs of whitespace separate; leading and trailing whitespace gives no empty part.
          size_t i = 0;
          while (i < s.size()) {
            while (i < s.size() && IsPySpace(static_cast<unsigned char>(s[i]))) ++i;
            if (i >= s.size()) break;
            if (max >= 0 && static_cast<int64_t>(parts.size()) == max) {
              parts.push_back(Value::String(Strip(s.substr(i), std::nullopt, false, true)));
              break;
            }
            size_t j = i;
            while (j < s.size() && !IsPySpace(static_cast<unsigned char>(s[j]))) ++j;
            parts.push_back(Value::String(s.substr(i, j - i)));
            i = j;
          }
          return Value::MakeList(std::move(parts));
        }
        if (!a.positional[0].is_string() || a.positional[0].string_value().empty()) {
          return absl::InvalidArgumentError("split takes a non-empty separator");
        }
        const std::string& sep = a.positional[0].string_value();
        if (name == "rsplit" && max >= 0) {
          std::vector<std::string> rev;
          size_t end = s.size();
          while (static_cast<int64_t>(rev.size()) < max) {
            const size_t at = end >= sep.size() ? s.rfind(sep, end - sep.size()) : std::string::npos;
            if (at == std::string::npos || at + sep.size() > end) break;
            rev.push_back(s.substr(at + sep.size(), end - at - sep.size()));
            end = at;
          }
          parts.push_back(Value::String(s.substr(0, end)));
          for (auto it = rev.rbegin(); it != rev.rend(); ++it) parts.push_back(Value::String(*it));
          return Value::MakeList(std::move(parts));
        }
        size_t start = 0;
        for (;;) {
          const size_t at = s.find(sep, start);
          if (at == std::string::npos || (max >= 0 && static_cast<int64_t>(parts.size()) == max)) {
            parts.push_back(Value::String(s.substr(start)));
            break;
          }
          parts.push_back(Value::String(s.substr(start, at - start)));
          start = at + sep.size();
        }
        return Value::MakeList(std::move(parts));
      });
    }
    if (name == "replace") {
      return Bound(name, [this, s, line](const CallArgs& a) -> absl::StatusOr<Value> {
        LLM42_ASSIGN_OR_RETURN(const std::string from, StringArg(a, 0, "replace"));
        LLM42_ASSIGN_OR_RETURN(const std::string to, StringArg(a, 1, "replace"));
        int64_t count = a.positional.size() > 2 ? a.positional[2].int_value() : -1;
        LLM42_ASSIGN_OR_RETURN(std::string r, ReplaceBounded(s, from, to, count, line));
        return Value::String(std::move(r));
      });
    }
    if (name == "find" || name == "count" || name == "index" || name == "rfind") {
      return Bound(name, [s, name](const CallArgs& a) -> absl::StatusOr<Value> {
        LLM42_ASSIGN_OR_RETURN(const std::string sub, StringArg(a, 0, "find"));
        if (name == "count") {
          if (sub.empty()) return Value::Int(static_cast<int64_t>(CodePoints(s).size()) + 1);
          int64_t n = 0;
          for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
          return Value::Int(n);
        }
        const size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
        if (at == std::string::npos) {
          if (name == "index") return absl::InvalidArgumentError("substring not found");
          return Value::Int(-1);
        }
        return Value::Int(static_cast<int64_t>(CodePoints(s.substr(0, at)).size()));
      });
    }
    if (name == "title" || name == "capitalize") {
      return Bound(name, [s, name](const CallArgs&) -> absl::StatusOr<Value> {
        return Value::String(name == "title" ? Title(s) : Capitalize(s));
      });
    }
    if (name == "format") {
      return Bound(name, [s](const CallArgs& a) -> absl::StatusOr<Value> { return PyFormat(s, a); });
    }
    if (name == "join") {
      return Bound(name, [this, s](const CallArgs& a) -> absl::StatusOr<Value> {
        if (a.positional.empty() || !a.positional[0].is_list()) return absl::InvalidArgumentError("join takes a list");
        std::string r;
        for (size_t i = 0; i < a.positional[0].list().size(); ++i) {
          if (i > 0) r += s;
          r += a.positional[0].list()[i].Str();
          if (r.size() > limits_.max_output_bytes) return absl::InvalidArgumentError("join: a string past the output limit");
        }
        return Value::String(std::move(r));
      });
    }
    if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
      return Bound(name, [s, name](const CallArgs&) -> absl::StatusOr<Value> {
        if (s.empty()) return Value::Bool(false);
        for (unsigned char c : s) {
          const bool ok = name == "isdigit" ? std::isdigit(c) != 0 : name == "isalpha" ? std::isalpha(c) != 0
                        : name == "isspace" ? IsPySpace(c) : std::isalnum(c) != 0;
          if (!ok) return Value::Bool(false);
        }
        return Value::Bool(true);
      });
    }
    return Value::Undefined(absl::StrCat("str object has no attribute ", name));
  }

  // str.replace, refused where the result would outgrow the output limit.
  absl::StatusOr<std::string> ReplaceBounded(const std::string& s, const std::string& from, const std::string& to,
                                             int64_t count, int line) {
    size_t hits = 0;
    if (from.empty()) {
      hits = CodePoints(s).size() + 1;
    } else {
      for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + from.size())) ++hits;
    }
    if (count >= 0) hits = std::min(hits, static_cast<size_t>(count));
    if (to.size() > from.size() &&
        static_cast<double>(s.size()) + static_cast<double>(hits) * static_cast<double>(to.size() - from.size()) >
            static_cast<double>(limits_.max_output_bytes)) {
      return Error(line, "replace: a result past the output limit");
    }
    return Replace(s, from, to, count);
  }

  static std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    if (from.empty()) {
      std::string r;
      int64_t n = 0;
      for (const std::string& c : CodePoints(s)) {
        if (count < 0 || n < count) {
          r += to;
          ++n;
        }
        r += c;
      }
      if (count < 0 || n < count) r += to;
      return r;
    }
    std::string r;
    size_t start = 0;
    int64_t n = 0;
    for (size_t at = s.find(from); at != std::string::npos && (count < 0 || n < count); at = s.find(from, start)) {
      r += s.substr(start, at - start) + to;
      start = at + from.size();
      ++n;
    }
    return r + s.substr(start);
  }

  static std::string Title(const std::string& s) {
    std::string r = s;
    bool prev_cased = false;
    for (char& c : r) {
      const auto u = static_cast<unsigned char>(c);
      if (std::isalpha(u)) {
        c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
        prev_cased = true;
      } else {
        prev_cased = false;
      }
    }
    return r;
  }

  static std::string Capitalize(const std::string& s) {
    std::string r = s;
    for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!r.empty()) r[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(r[0])));
    return r;
  }

  // str.format with {} and {0}/{name} fields (no format specs but plain ones).
  static absl::StatusOr<Value> PyFormat(const std::string& fmt, const CallArgs& a) {
    std::string r;
    size_t auto_index = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
      if (fmt[i] == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
        r += '{';
        ++i;
      } else if (fmt[i] == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
        r += '}';
        ++i;
      } else if (fmt[i] == '{') {
        const size_t close = fmt.find('}', i);
        if (close == std::string::npos) return absl::InvalidArgumentError("format: a '{' without '}'");
        std::string field = fmt.substr(i + 1, close - i - 1);
        if (field.find(':') != std::string::npos || field.find('!') != std::string::npos) {
          return absl::InvalidArgumentError("format: format specifications are not supported");
        }
        const Value* v = nullptr;
        if (field.empty()) {
          if (auto_index < a.positional.size()) v = &a.positional[auto_index++];
        } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
          const size_t k = static_cast<size_t>(std::stoul(field));
          if (k < a.positional.size()) v = &a.positional[k];
        } else {
          v = a.Keyword(field);
        }
        if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat("format: no value for field '{", field, "}'"));
        r += v->Str();
        i = close;
      } else {
        r += fmt[i];
      }
    }
    return Value::String(std::move(r));
  }

  absl::StatusOr<Value> GetAttr(const Value& obj, const std::string& name, int line) {
    switch (obj.kind()) {
      case Value::Kind::kUndefined:
        return Error(line, absl::StrCat("'", obj.undefined_name().empty() ? name : obj.undefined_name(), "' is undefined"));
      case Value::Kind::kDict: {
        if (name == "items" || name == "keys" || name == "values") {
          const Value d = obj;
          return Bound(name, [d, name](const CallArgs&) -> absl::StatusOr<Value> {
            List out;
            for (const auto& [k, v] : d.dict().items()) {
              if (name == "items") {
                out.push_back(Value::MakeTuple({Value::String(k), v}));
              } else {
                out.push_back(name == "keys" ? Value::String(k) : v);
              }
            }
            return Value::MakeList(std::move(out));
          });
        }
        if (name == "get") {
          const Value d = obj;
          return Bound(name, [d](const CallArgs& a) -> absl::StatusOr<Value> {
            if (a.positional.empty()) return absl::InvalidArgumentError("get takes a key");
            const Value* v = a.positional[0].is_string() ? d.dict().Find(a.positional[0].string_value()) : nullptr;
            if (v != nullptr) return *v;
            return a.positional.size() > 1 ? a.positional[1] : Value::None();
          });
        }
        if (name == "pop" || name == "update" || name == "setdefault" || name == "clear" || name == "popitem") {
          return Error(line, absl::StrCat("access to attribute '", name, "' of 'dict' object is unsafe"));
        }
        const Value* v = obj.dict().Find(name);
        return v != nullptr ? *v : Value::Undefined(name);
      }
      case Value::Kind::kNamespace: {
        const Value* v = obj.dict().Find(name);
        return v != nullptr ? *v : Value::Undefined(name);
      }
      case Value::Kind::kString: return StringMethod(obj.string_value(), name, line);
      case Value::Kind::kList:
        if (name == "append" || name == "pop" || name == "extend" || name == "insert" || name == "remove" ||
            name == "sort" || name == "reverse" || name == "clear") {
          return Error(line, absl::StrCat("access to attribute '", name, "' of 'list' object is unsafe"));
        }
        if (name == "index" || name == "count") {
          const Value l = obj;
          return Bound(name, [l, name](const CallArgs& a) -> absl::StatusOr<Value> {
            if (a.positional.empty()) return absl::InvalidArgumentError(absl::StrCat(name, " takes a value"));
            int64_t n = 0;
            for (size_t i = 0; i < l.list().size(); ++i) {
              if (!l.list()[i].Equals(a.positional[0])) continue;
              if (name == "index") return Value::Int(static_cast<int64_t>(i));
              ++n;
            }
            if (name == "index") return absl::InvalidArgumentError("the value is not in the list");
            return Value::Int(n);
          });
        }
        return Value::Undefined(name);
      default: return Value::Undefined(name);
    }
  }

  absl::StatusOr<Value> GetItem(const Value& obj, const Value& key, int line) {
    switch (obj.kind()) {
      case Value::Kind::kUndefined:
        return Error(line, absl::StrCat("'", obj.undefined_name(), "' is undefined"));
      case Value::Kind::kDict:
      case Value::Kind::kNamespace: {
        if (!key.is_string()) return Value::Undefined(key.Str());
        const Value* v = obj.dict().Find(key.string_value());
        if (v != nullptr) return *v;
        return obj.kind() == Value::Kind::kDict ? GetAttr(obj, key.string_value(), line) : Value::Undefined(key.string_value());
      }
      case Value::Kind::kList: {
        if (obj.is_generator()) return Error(line, "'generator' object is not subscriptable (add | list)");
        if (key.kind() != Value::Kind::kInt && key.kind() != Value::Kind::kBool) {
          if (key.is_string()) return GetAttr(obj, key.string_value(), line);
          return Error(line, "list indices must be integers");
        }
        const auto n = static_cast<int64_t>(obj.list().size());
        const int64_t i = PyIndex(key.int_value(), n);
        if (i < 0 || i >= n) return Value::Undefined(absl::StrCat("index ", key.int_value()));
        return obj.list()[static_cast<size_t>(i)];
      }
      case Value::Kind::kString: {
        if (key.kind() != Value::Kind::kInt && key.kind() != Value::Kind::kBool) {
          if (key.is_string()) return GetAttr(obj, key.string_value(), line);
          return Error(line, "string indices must be integers");
        }
        const std::vector<std::string> cps = CodePoints(obj.string_value());
        const auto n = static_cast<int64_t>(cps.size());
        const int64_t i = PyIndex(key.int_value(), n);
        if (i < 0 || i >= n) return Value::Undefined(absl::StrCat("index ", key.int_value()));
        return Value::String(cps[static_cast<size_t>(i)]);
      }
      default: return Value::Undefined(key.Str());
    }
  }

  absl::StatusOr<Value> Global(const std::string& name) {
    if (name == "raise_exception") {
      return Bound(name, [](const CallArgs& a) -> absl::StatusOr<Value> {
        return absl::InvalidArgumentError(a.positional.empty() ? std::string("raise_exception") : a.positional[0].Str());
      });
    }
    if (name == "namespace") {
      return Bound(name, [this](const CallArgs& a) -> absl::StatusOr<Value> {
        Dict d;
        if (!a.positional.empty() && a.positional[0].is_mapping()) {
          for (const auto& [k, v] : a.positional[0].dict().items()) d.Set(k, v);
        }
        for (const auto& [k, v] : a.keywords) d.Set(k, v);
        Value ns = Value::MakeNamespace(std::move(d));
        namespaces_.push_back(ns);
        return ns;
      });
    }
    if (name == "dict") {
      return Bound(name, [](const CallArgs& a) -> absl::StatusOr<Value> {
        Dict d;
        if (!a.positional.empty() && a.positional[0].is_mapping()) {
          for (const auto& [k, v] : a.positional[0].dict().items()) d.Set(k, v);
        }
        for (const auto& [k, v] : a.keywords) d.Set(k, v);
        return Value::MakeDict(std::move(d));
      });
    }
    if (name == "range") {
      return Bound(name, [this](const CallArgs& a) -> absl::StatusOr<Value> {
        int64_t start = 0, stop = 0, step = 1;
        if (a.positional.size() == 1) {
          stop = a.positional[0].int_value();
        } else if (a.positional.size() >= 2) {
          start = a.positional[0].int_value();
          stop = a.positional[1].int_value();
          if (a.positional.size() > 2) step = a.positional[2].int_value();
        }
        if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
        const double n = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
        if (n > static_cast<double>(limits_.max_steps)) {
          return absl::ResourceExhaustedError("range() past the template's step limit");
        }
        List out;
        for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
          out.push_back(Value::Int(i));
          if (__builtin_add_overflow(i, step, &i)) break;
        }
        return Value::MakeList(std::move(out));
      });
    }
    if (name == "strftime_now") {
      return Bound(name, [](const CallArgs& a) -> absl::StatusOr<Value> {
        if (a.positional.empty() || !a.positional[0].is_string()) {
          return absl::InvalidArgumentError("strftime_now takes a format string");
        }
        // The conversions every C library has (an unknown one aborts a Windows process).
        const std::string& format = a.positional[0].string_value();
        for (size_t i = 0; i < format.size(); ++i) {
          if (format[i] != '%') continue;
          if (i + 1 >= format.size() || std::string_view("aAbBcdHIjmMpSUwWxXyYzZ%").find(format[i + 1]) == std::string_view::npos) {
            return absl::InvalidArgumentError("strftime_now: a conversion other than %a %A %b %B %c %d %H %I %j %m %M %p "
                                              "%S %U %w %W %x %X %y %Y %z %Z %%");
          }
          ++i;
        }
        const std::time_t now = std::time(nullptr);
        std::tm local{};
#ifdef _WIN32
        localtime_s(&local, &now);
#else
        localtime_r(&now, &local);
#endif
        char buf[256];
        const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &local);
        return Value::String(std::string(buf, n));
      });
    }
    return Value::Undefined(name);
  }

  // --- Filters ---

  absl::StatusOr<Value> Filter(const std::string& name, const Value& v, const CallArgs& a, int line) {
    auto arg = [&](size_t i, const char* keyword) -> const Value* {
      if (i < a.positional.size()) return &a.positional[i];
      return keyword != nullptr ? a.Keyword(keyword) : nullptr;
    };
    if (name == "tojson") {
      int indent = -1;
      if (const Value* i = arg(0, "indent"); i != nullptr && !i->is_none()) indent = static_cast<int>(i->int_value());
      bool sort_keys = false;
      if (const Value* s = a.Keyword("sort_keys")) sort_keys = s->Truthy();
      absl::StatusOr<std::string> j = v.ToJson(indent, sort_keys);
      if (!j.ok()) return Error(line, std::string(j.status().message()));
      return Value::String(*std::move(j));
    }
    if (name == "safe") return Value::Markup(v.Str());
    if (name == "string") return v.is_string() ? v : Value::String(v.Str());
    if (name == "trim") {
      std::optional<std::string> chars;
      if (const Value* c = arg(0, "chars"); c != nullptr && c->is_string()) chars = c->string_value();
      return Value::String(Strip(v.Str(), chars, true, true));
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      LLM42_ASSIGN_OR_RETURN(const Value m, StringMethod(v.Str(), name, line));
      return m.callable().fn(CallArgs{});
    }
    if (name == "replace") {
      if (a.positional.size() < 2) return Error(line, "replace takes two strings");
      LLM42_ASSIGN_OR_RETURN(std::string r, ReplaceBounded(v.Str(), a.positional[0].Str(), a.positional[1].Str(),
                                                           a.positional.size() > 2 ? a.positional[2].int_value() : -1, line));
      return Value::String(std::move(r));
    }
    if (name == "length" || name == "count") {
      switch (v.kind()) {
        case Value::Kind::kString: return Value::Int(static_cast<int64_t>(CodePoints(v.string_value()).size()));
        case Value::Kind::kList:
          if (v.is_generator()) return Error(line, "object of type 'generator' has no len() (add | list)");
          return Value::Int(static_cast<int64_t>(v.list().size()));
        case Value::Kind::kDict:
        case Value::Kind::kNamespace: return Value::Int(static_cast<int64_t>(v.dict().size()));
        case Value::Kind::kUndefined: return Value::Int(0);
        default: return Error(line, absl::StrCat("object of type '", TypeName(v), "' has no len()"));
      }
    }
    if (name == "default" || name == "d") {
      const Value* def = arg(0, "default_value");
      const Value* boolean = arg(1, "boolean");
      const bool use = v.is_undefined() || (boolean != nullptr && boolean->Truthy() && !v.Truthy());
      return use ? (def != nullptr ? *def : Value::String("")) : v;
    }
    if (name == "first" || name == "last") {
      if (name == "last" && v.is_generator()) return Error(line, "'generator' object is not reversible (add | list)");
      LLM42_ASSIGN_OR_RETURN(const List items, Iterate(v, line));
      if (items.empty()) return Value::Undefined(name);
      return name == "first" ? items.front() : items.back();
    }
    if (name == "join") {
      LLM42_ASSIGN_OR_RETURN(List items, Iterate(v, line));
      const Value* sep = arg(0, "d");
      const Value* attribute = arg(1, "attribute");
      std::string r;
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0 && sep != nullptr) r += sep->Str();
        Value item = items[i];
        if (attribute != nullptr) {
          LLM42_ASSIGN_OR_RETURN(item, GetItemOrAttr(item, *attribute, line));
        }
        r += item.Str();
        if (r.size() > limits_.max_output_bytes) return Error(line, "join: a string past the output limit");
      }
      return Value::String(std::move(r));
    }
    if (name == "list") {
      LLM42_ASSIGN_OR_RETURN(List items, Iterate(v, line));
      return Value::MakeList(std::move(items));  // a generator or tuple becomes a list
    }
    if (name == "reverse") {
      if (v.is_string()) {
        std::vector<std::string> cps = CodePoints(v.string_value());
        std::string r;
        for (auto it = cps.rbegin(); it != cps.rend(); ++it) r += *it;
        return Value::String(std::move(r));
      }
      LLM42_ASSIGN_OR_RETURN(List items, Iterate(v, line));
      std::reverse(items.begin(), items.end());
      return Value::MakeList(std::move(items));
    }
    if (name == "items") {
      if (v.is_undefined()) return Value::MakeList({});
      if (!v.is_mapping()) return Error(line, "items needs a mapping");
      List out;
      for (const auto& [k, x] : v.dict().items()) out.push_back(Value::MakeTuple({Value::String(k), x}));
      return Value::MakeGenerator(std::move(out));
    }
    if (name == "dictsort") {
      if (!v.is_mapping()) return Error(line, "dictsort needs a mapping");
      std::vector<std::pair<std::string, Value>> items = v.dict().items();
      const Value* by = a.Keyword("by");
      const bool by_value = by != nullptr && by->Str() == "value";
      const Value* case_sensitive = arg(0, "case_sensitive");
      const bool cs = case_sensitive != nullptr && case_sensitive->Truthy();
      const Value* reverse = a.Keyword("reverse");
      auto lower = [cs](std::string s) {
        if (!cs) for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return s;
      };
      std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
        if (by_value) return lower(x.second.Str()) < lower(y.second.Str());
        return lower(x.first) < lower(y.first);
      });
      if (reverse != nullptr && reverse->Truthy()) std::reverse(items.begin(), items.end());
      List out;
      for (auto& [k, x] : items) out.push_back(Value::MakeTuple({Value::String(k), x}));
      return Value::MakeList(std::move(out));
    }
    if (name == "map") {
      LLM42_ASSIGN_OR_RETURN(const List items, Lazy(v, line));
      List out;
      const Value* attribute = a.Keyword("attribute");
      for (const Value& item : items) {
        if (attribute != nullptr) {
          LLM42_ASSIGN_OR_RETURN(Value x, GetItemOrAttr(item, *attribute, line));
          if (x.is_undefined()) {
            if (const Value* def = a.Keyword("default")) x = *def;
          }
          out.push_back(std::move(x));
        } else {
          if (a.positional.empty()) return Error(line, "map needs a filter name or attribute=");
          CallArgs rest;
          rest.positional.assign(a.positional.begin() + 1, a.positional.end());
          rest.keywords = a.keywords;
          LLM42_ASSIGN_OR_RETURN(Value x, Filter(a.positional[0].Str(), item, rest, line));
          out.push_back(std::move(x));
        }
      }
      return Value::MakeGenerator(std::move(out));
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
      LLM42_ASSIGN_OR_RETURN(const List items, Lazy(v, line));
      const bool attr = name.ends_with("attr");
      const bool select = name.starts_with("select");
      List out;
      for (const Value& item : items) {
        Value subject = item;
        size_t first = 0;
        if (attr) {
          if (a.positional.empty()) return Error(line, absl::StrCat(name, " needs an attribute"));
          LLM42_ASSIGN_OR_RETURN(subject, GetItemOrAttr(item, a.positional[0], line));
          first = 1;
        }
        bool pass;
        if (a.positional.size() > first) {
          CallArgs rest;
          rest.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(first) + 1, a.positional.end());
          LLM42_ASSIGN_OR_RETURN(pass, Test(a.positional[first].Str(), subject, rest, line));
        } else {
          pass = subject.Truthy();
        }
        if (pass == select) out.push_back(item);
      }
      return Value::MakeGenerator(std::move(out));
    }
    if (name == "unique") {
      LLM42_ASSIGN_OR_RETURN(const List items, Iterate(v, line));
      List out;
      for (const Value& item : items) {
        bool seen = false;
        for (const Value& o : out) seen |= o.Equals(item);
        if (!seen) out.push_back(item);
      }
      return Value::MakeGenerator(std::move(out));
    }
    if (name == "sort") {
      LLM42_ASSIGN_OR_RETURN(List items, Iterate(v, line));
      const Value* attribute = a.Keyword("attribute");
      const Value* reverse = arg(0, "reverse");
      absl::Status st;
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        Value kx = x, ky = y;
        if (attribute != nullptr) {
          kx = GetItemOrAttr(x, *attribute, line).value_or(Value());
          ky = GetItemOrAttr(y, *attribute, line).value_or(Value());
        }
        absl::StatusOr<int> c = Compare(kx, ky, line);
        if (!c.ok()) {
          st = c.status();
          return false;
        }
        return *c < 0;
      });
      if (!st.ok()) return st;
      if (reverse != nullptr && reverse->Truthy()) std::reverse(items.begin(), items.end());
      return Value::MakeList(std::move(items));
    }
    if (name == "sum" || name == "min" || name == "max") {
      LLM42_ASSIGN_OR_RETURN(const List items, Iterate(v, line));
      if (name == "sum") {
        Value total = Value::Int(0);
        for (const Value& item : items) {
          LLM42_ASSIGN_OR_RETURN(total, Arithmetic("+", total, item, line));
        }
        return total;
      }
      if (items.empty()) return Value::Undefined(name);
      Value best = items[0];
      for (const Value& item : items) {
        LLM42_ASSIGN_OR_RETURN(const int c, Compare(item, best, line));
        if (name == "min" ? c < 0 : c > 0) best = item;
      }
      return best;
    }
    if (name == "int") {
      if (v.kind() == Value::Kind::kFloat) {
        if (const std::optional<int64_t> i = Truncate(v.float_value())) return Value::Int(*i);
        return Error(line, "int: the float has no integer part that fits");
      }
      if (v.is_number()) return Value::Int(v.int_value());
      if (v.is_string()) {
        try {
          return Value::Int(std::stoll(Strip(v.string_value(), std::nullopt, true, true)));
        } catch (...) {
        }
      }
      const Value* def = arg(0, "default");
      return def != nullptr ? *def : Value::Int(0);
    }
    if (name == "float") {
      if (v.is_number()) return Value::Float(v.float_value());
      if (v.is_string()) {
        try {
          return Value::Float(std::stod(v.string_value()));
        } catch (...) {
        }
      }
      return Value::Float(0.0);
    }
    if (name == "abs") {
      if (v.kind() == Value::Kind::kFloat) return Value::Float(std::fabs(v.float_value()));
      if (v.is_number()) {
        if (v.int_value() == INT64_MIN) return Error(line, "integer overflow in abs");
        return Value::Int(v.int_value() < 0 ? -v.int_value() : v.int_value());
      }
      return Error(line, "abs needs a number");
    }
    if (name == "round") {
      const int64_t precision = arg(0, "precision") != nullptr ? arg(0, "precision")->int_value() : 0;
      const double scale = std::pow(10.0, static_cast<double>(precision));
      return Value::Float(std::nearbyint(v.float_value() * scale) / scale);
    }
    if (name == "indent") {
      const Value* width = arg(0, "width");
      const Value* first = arg(1, "first");
      const Value* blank = arg(2, "blank");
      if (width != nullptr && !width->is_string() && width->int_value() > static_cast<int64_t>(limits_.max_output_bytes)) {
        return Error(line, "indent: a width past the output limit");
      }
      const std::string pad = width == nullptr ? std::string(4, ' ')
                              : width->is_string() ? width->string_value()
                                                   : std::string(static_cast<size_t>(std::max<int64_t>(0, width->int_value())), ' ');
      const std::string s = v.Str();
      std::string r;
      size_t start = 0;
      bool first_line = true;
      for (;;) {
        const size_t nl = s.find('\n', start);
        const std::string line_text = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        const bool is_blank = line_text.empty();
        if ((!first_line || (first != nullptr && first->Truthy())) && (!is_blank || (blank != nullptr && blank->Truthy()))) {
          r += pad;
        }
        r += line_text;
        if (r.size() > limits_.max_output_bytes) return Error(line, "indent: a result past the output limit");
        if (nl == std::string::npos) break;
        r += '\n';
        start = nl + 1;
        first_line = false;
      }
      return Value::String(std::move(r));
    }
    if (name == "wordcount") {
      int64_t n = 0;
      bool in_word = false;
      for (unsigned char c : v.Str()) {
        const bool word = std::isalnum(c) != 0 || c == '_' || c >= 0x80;
        if (word && !in_word) ++n;
        in_word = word;
      }
      return Value::Int(n);
    }
    if (name == "batch") {
      LLM42_ASSIGN_OR_RETURN(const List items, Iterate(v, line));
      const int64_t size = a.positional.empty() ? 1 : std::max<int64_t>(1, a.positional[0].int_value());
      List out;
      for (size_t i = 0; i < items.size(); i += static_cast<size_t>(size)) {
        out.push_back(Value::MakeList(List(items.begin() + static_cast<std::ptrdiff_t>(i),
                                           items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), i + static_cast<size_t>(size))))));
      }
      return Value::MakeGenerator(std::move(out));
    }
    if (name == "format") {
      // Python's % formatting, %s and %d.
      const std::string fmt = v.Str();
      std::string r;
      size_t k = 0;
      for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%' || i + 1 >= fmt.size()) {
          r += fmt[i];
          continue;
        }
        const char spec = fmt[++i];
        if (spec == '%') {
          r += '%';
        } else if (spec == 's' || spec == 'd') {
          if (k >= a.positional.size()) return Error(line, "format: not enough arguments");
          const Value& x = a.positional[k++];
          if (spec == 'd' && x.kind() == Value::Kind::kFloat) {
            const std::optional<int64_t> i = Truncate(x.float_value());
            if (!i) return Error(line, "format: %d of a float with no integer part that fits");
            r += std::to_string(*i);
          } else {
            r += x.Str();
          }
        } else {
          return Error(line, "format: only %s and %d are supported");
        }
      }
      return Value::String(std::move(r));
    }
    if (name == "escape" || name == "e" || name == "forceescape") {
      if (v.is_markup() && name != "forceescape") return v;
      return Value::Markup(HtmlEscape(v.Str()));
    }
    if (name == "center") {
      const std::string s = v.Str();
      const int64_t width = a.positional.empty() ? 80 : a.positional[0].int_value();
      if (width > static_cast<int64_t>(limits_.max_output_bytes)) return Error(line, "center: a width past the output limit");
      const auto len = static_cast<int64_t>(CodePoints(s).size());
      if (len >= width) return Value::String(s);
      const int64_t total = width - len, left = total / 2 + (total & width & 1);
      return Value::String(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
    }
    return Error(line, absl::StrCat("no filter named '", name, "'"));
  }

  absl::StatusOr<Value> GetItemOrAttr(const Value& item, const Value& attribute, int line) {
    Value cur = item;
    // Dotted attributes ("function.name"), as Jinja's make_attrgetter.
    const std::string path = attribute.Str();
    size_t start = 0;
    for (;;) {
      const size_t dot = path.find('.', start);
      const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (cur.is_undefined()) return cur;
      LLM42_ASSIGN_OR_RETURN(cur, GetItem(cur, Value::String(part), line));
      if (dot == std::string::npos) return cur;
      start = dot + 1;
    }
  }

  // --- Tests ---

  absl::StatusOr<bool> Test(const std::string& name, const Value& v, const CallArgs& a, int line) {
    const Value* other = a.positional.empty() ? nullptr : &a.positional[0];
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "string") return v.is_string();
    if (name == "number") return v.is_number();
    if (name == "integer") return v.kind() == Value::Kind::kInt;
    if (name == "float") return v.kind() == Value::Kind::kFloat;
    if (name == "boolean") return v.kind() == Value::Kind::kBool;
    if (name == "true") return v.kind() == Value::Kind::kBool && v.bool_value();
    if (name == "false") return v.kind() == Value::Kind::kBool && !v.bool_value();
    if (name == "mapping") return v.is_mapping();
    if (name == "sequence") return v.is_list() || v.is_string() || v.is_mapping();
    if (name == "iterable") return v.is_list() || v.is_string() || v.is_mapping() || v.is_undefined();
    if (name == "callable") return v.kind() == Value::Kind::kCallable;
    if (name == "odd" || name == "even") {
      if (!v.is_number()) return Error(line, absl::StrCat("'", name, "' needs a number"));
      return (v.int_value() % 2 != 0) == (name == "odd");
    }
    if (name == "divisibleby") {
      if (other == nullptr || other->int_value() == 0) return Error(line, "divisibleby needs a nonzero number");
      return other->int_value() == -1 || v.int_value() % other->int_value() == 0;
    }
    if (other == nullptr && (name == "equalto" || name == "eq" || name == "==" || name == "sameas" || name == "in" ||
                             name == "ne" || name == "lt" || name == "gt" || name == "le" || name == "ge")) {
      return Error(line, absl::StrCat("the test '", name, "' needs an argument"));
    }
    if (name == "equalto" || name == "eq" || name == "==") return v.Equals(*other);
    if (name == "ne" || name == "!=") return !v.Equals(*other);
    if (name == "sameas") return v.kind() == other->kind() && (v.is_none() || v.Equals(*other));
    if (name == "in") return Contains(*other, v, line);
    if (name == "lt" || name == "gt" || name == "le" || name == "ge" || name == "<" || name == ">" || name == "<=" || name == ">=") {
      LLM42_ASSIGN_OR_RETURN(const int c, Compare(v, *other, line));
      return name == "lt" || name == "<" ? c < 0 : name == "gt" || name == ">" ? c > 0 : name == "le" || name == "<=" ? c <= 0 : c >= 0;
    }
    if (name == "lower" || name == "upper") {
      if (!v.is_string()) return false;
      bool cased = false;
      for (unsigned char c : v.string_value()) {
        if (std::isalpha(c)) {
          cased = true;
          if (name == "lower" ? std::isupper(c) : std::islower(c)) return false;
        }
      }
      return cased;
    }
    return Error(line, absl::StrCat("no test named '", name, "'"));
  }

  Limits limits_;
  Clock::time_point deadline_;
  std::vector<std::shared_ptr<Callable>> macros_;
  std::vector<Value> namespaces_;
  int64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace

Template::Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;
Template::~Template() = default;

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  LLM42_ASSIGN_OR_RETURN(NodePtr root, ParseTemplate(source));
  Template t;
  t.root_ = std::move(root);
  return t;
}

absl::StatusOr<std::string> Template::Render(const Dict& variables, const Limits& limits) const {
  Renderer r(limits);
  return r.Render(*root_, variables);
}

}  // namespace llm42::jinja
