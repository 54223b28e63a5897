// tritium template engine: statement execution and expression evaluation.
#include "template/renderer.h"

#include <unordered_map>

#include "template/builtins.h"

namespace tritium::tmpl {

namespace {

class PositionedError : public Error {
 public:
  using Error::Error;
};

class Renderer {
 public:
  explicit Renderer(const Value& context) {
    scopes_.emplace_back();
    if (context.is_object())
      for (const auto& [k, v] : context.obj().items) scopes_.back()[k] = v;
  }

  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body, std::string& out) {
    for (const auto& s : body) {
      Flow f = exec(*s, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  [[noreturn]] static void error_at(int line, int col, const std::string& msg) {
    throw PositionedError(fmt::format("chat template error at line {}, column {}: {}", line, col, msg));
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    Value g = global_function(name);
    if (!g.is_undefined()) return g;
    return Value::undefined(name);
  }

  void assign(const std::vector<std::string>& targets, const Value& v, const Stmt& at) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = v;
      return;
    }
    Array items = iterate(v);
    if (items.size() != targets.size())
      error_at(at.line, at.col, fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()));
    for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = items[i];
  }

  Flow exec(const Stmt& s, std::string& out) {
    if (++steps_ > kMaxRenderSteps)
      error_at(s.line, s.col, fmt::format("the template runs more than {} statements (runaway loop?)", kMaxRenderSteps));
    if (out.size() > kMaxRenderBytes)
      error_at(s.line, s.col, fmt::format("the rendered text exceeds {} bytes", kMaxRenderBytes));
    switch (s.kind) {
      case Stmt::Kind::Text: out += s.text; return Flow::Normal;
      case Stmt::Kind::Output: out += eval(*s.expr).to_output(); return Flow::Normal;
      case Stmt::Kind::If:
        for (const auto& [cond, body] : s.branches)
          if (eval(*cond).truthy()) return exec_body(body, out);
        return exec_body(s.else_body, out);
      case Stmt::Kind::For: return exec_for(s, out);
      case Stmt::Kind::Set: {
        Value v;
        if (s.expr) {
          v = eval(*s.expr);
        } else {
          std::string captured;
          exec_body(s.body, captured);
          v = Value(std::move(captured));
        }
        if (!s.attr.empty()) {
          Value ns = lookup(s.targets[0]);
          if (!ns.is_object() || !ns.obj().is_namespace)
            error_at(s.line, s.col, fmt::format("cannot assign attribute on non-namespace object '{}'", s.targets[0]));
          ns.obj().set(s.attr, std::move(v));
        } else {
          assign(s.targets, v, s);
        }
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: define_macro(s); return Flow::Normal;
      case Stmt::Kind::Break:
        if (loop_depth_ == 0) error_at(s.line, s.col, "'break' outside a for loop");
        return Flow::Break;
      case Stmt::Kind::Continue:
        if (loop_depth_ == 0) error_at(s.line, s.col, "'continue' outside a for loop");
        return Flow::Continue;
      case Stmt::Kind::Block: return exec_body(s.body, out);
    }
    return Flow::Normal;
  }

  Flow exec_for(const Stmt& s, std::string& out) {
    Array items = iterate(eval(*s.expr));
    if (s.cond) {  // `for x in xs if cond`: filter first, so loop.length counts the kept items
      Array kept;
      for (const Value& it : items) {
        scopes_.emplace_back();
        assign(s.targets, it, s);
        bool keep = eval(*s.cond).truthy();
        scopes_.pop_back();
        if (keep) kept.push_back(it);
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec_body(s.else_body, out);
    const int64_t n = static_cast<int64_t>(items.size());
    ++loop_depth_;
    for (int64_t i = 0; i < n; ++i) {
      Object loop;
      loop.items = {{"index", Value(i + 1)},
                    {"index0", Value(i)},
                    {"revindex", Value(n - i)},
                    {"revindex0", Value(n - i - 1)},
                    {"first", Value(i == 0)},
                    {"last", Value(i == n - 1)},
                    {"length", Value(n)},
                    {"depth", Value(int64_t{1})},
                    {"depth0", Value(int64_t{0})},
                    {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("loop.previtem")},
                    {"nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("loop.nextitem")},
                    {"cycle", Value(Function([i](const CallArgs& a) -> Value {
                       if (a.pos.empty()) fail("loop.cycle() needs at least one argument");
                       return a.pos[static_cast<size_t>(i) % a.pos.size()];
                     }))}};
      scopes_.emplace_back();
      scopes_.back()["loop"] = Value(std::move(loop));
      assign(s.targets, items[static_cast<size_t>(i)], s);
      Flow f;
      try {
        f = exec_body(s.body, out);
      } catch (...) {
        scopes_.pop_back();
        --loop_depth_;
        throw;
      }
      scopes_.pop_back();
      if (f == Flow::Break) break;
    }
    --loop_depth_;
    return Flow::Normal;
  }

  void define_macro(const Stmt& s) {
    const Stmt* def = &s;
    scopes_.back()[s.text] = Value(Function([this, def](const CallArgs& a) -> Value { return call_macro(*def, a); }));
  }

  Value call_macro(const Stmt& def, const CallArgs& a) {
    if (macro_depth_ >= kMaxMacroDepth)
      fail("macro '{}' nested deeper than {} calls (runaway recursion?)", def.text, kMaxMacroDepth);
    if (a.pos.size() > def.params.size())
      fail("macro '{}' takes not more than {} argument(s)", def.text, def.params.size());
    // Macro scope: the template's top-level variables plus the arguments (not the caller's locals).
    std::vector<Scope> saved;
    saved.swap(scopes_);
    scopes_.push_back(saved.front());
    scopes_.emplace_back();
    int saved_loops = loop_depth_;
    loop_depth_ = 0;
    ++macro_depth_;
    std::string out;
    try {
      for (size_t i = 0; i < def.params.size(); ++i) {
        const auto& [pname, pdef] = def.params[i];
        const Value* given = nullptr;
        for (const auto& [k, v] : a.kw)
          if (k == pname) given = &v;
        if (!given && i < a.pos.size()) given = &a.pos[i];
        scopes_.back()[pname] = given ? *given : pdef ? eval(*pdef) : Value::undefined(pname);
      }
      for (const auto& [k, v] : a.kw) {
        bool known = false;
        for (const auto& p : def.params) known |= p.first == k;
        if (!known) fail("macro '{}' has no parameter named '{}'", def.text, k);
      }
      exec_body(def.body, out);
    } catch (...) {
      --macro_depth_;
      loop_depth_ = saved_loops;
      scopes_.swap(saved);
      throw;
    }
    --macro_depth_;
    loop_depth_ = saved_loops;
    scopes_.swap(saved);
    return Value(std::move(out));
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) a.pos.push_back(eval(*e.args[i]));
    for (const auto& [k, v] : e.kwargs) a.kw.emplace_back(k, eval(*v));
    return a;
  }

  Value eval(const Expr& e) {
    try {
      return eval_inner(e);
    } catch (const PositionedError&) {
      throw;
    } catch (const TemplateRaise&) {
      throw;
    } catch (const Error& err) {
      error_at(e.line, e.col, err.what());
    }
  }

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: return lookup(e.name);
      case Expr::Kind::GetAttr: return get_attr(eval(*e.args[0]), e.name);
      case Expr::Kind::GetItem: return get_item(eval(*e.args[0]), eval(*e.args[1]));
      case Expr::Kind::Slice: {
        Value parts[3];
        for (int k = 0; k < 3; ++k)
          if (e.args[static_cast<size_t>(k + 1)]) parts[k] = eval(*e.args[static_cast<size_t>(k + 1)]);
        return get_slice(eval(*e.args[0]), parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::Call: {
        const Expr& callee = *e.args[0];
        if (callee.kind == Expr::Kind::GetAttr) {
          Value obj = eval(*callee.args[0]);
          CallArgs a = eval_args(e, 1);
          if (auto r = call_method(obj, callee.name, a)) return *r;
          Value f = get_attr(obj, callee.name);
          if (f.is_function()) return f.fn()(a);
          if (f.is_undefined() && !obj.is_undefined() && !obj.is_object())
            fail("'{}' object has no method '{}'", obj.type_name(), callee.name);
          fail("'{}' is not callable", f.is_undefined() ? f.undefined_name() : callee.name);
        }
        Value f = eval(callee);
        CallArgs a = eval_args(e, 1);
        if (!f.is_function()) {
          if (f.is_undefined()) fail("'{}' is undefined (called as a function)", f.undefined_name());
          fail("'{}' object is not callable", f.type_name());
        }
        return f.fn()(a);
      }
      case Expr::Kind::Filter: return apply_filter(e.name, eval(*e.args[0]), eval_args(e, 1));
      case Expr::Kind::Test: {
        bool r = apply_test(e.name, eval(*e.args[0]), eval_args(e, 1));
        return Value(e.negated ? !r : r);
      }
      case Expr::Kind::Unary: {
        Value v = eval(*e.args[0]);
        if (e.name == "not") return Value(!v.truthy());
        if (e.name == "-") return binary_op("-", Value(int64_t{0}), v);
        if (!v.is_number()) fail("bad operand type for unary +: '{}'", v.type_name());
        return v;
      }
      case Expr::Kind::Binary: {
        if (e.name == "and") {
          Value a = eval(*e.args[0]);
          return a.truthy() ? eval(*e.args[1]) : a;
        }
        if (e.name == "or") {
          Value a = eval(*e.args[0]);
          return a.truthy() ? a : eval(*e.args[1]);
        }
        Value a = eval(*e.args[0]);
        return binary_op(e.name, a, eval(*e.args[1]));
      }
      case Expr::Kind::Compare: {
        Value left = eval(*e.args[0]);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.args[i + 1]);
          const std::string& op = e.ops[i];
          bool r;
          if (op == "==") r = left.equals(right);
          else if (op == "!=") r = !left.equals(right);
          else if (op == "in") r = contains(right, left);
          else if (op == "notin") r = !contains(right, left);
          else r = compare_order(op, left, right);
          if (!r) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::CondExpr:
        if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined("conditional expression without else");
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        Array items;
        for (const auto& x : e.args) items.push_back(eval(*x));
        return e.kind == Expr::Kind::Tuple ? Value::tuple(std::move(items)) : Value(std::move(items));
      }
      case Expr::Kind::Dict: {
        Object o;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i]);
          if (!k.is_string()) fail("dict literal keys must be strings, got {}", k.type_name());
          o.set(k.str(), eval(*e.args[i + 1]));
        }
        return Value(std::move(o));
      }
    }
    fail("unknown expression kind");
  }

  std::vector<Scope> scopes_;
  int macro_depth_ = 0;
  int64_t steps_ = 0;  // statements executed (kMaxRenderSteps)
  int loop_depth_ = 0;
};

}  // namespace

std::string render_template(const Body& body, const Value& context) {
  Renderer r(context);
  std::string out;
  r.exec_body(body, out);
  return out;
}

}  // namespace tritium::tmpl
