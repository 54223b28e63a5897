// tritium template engine: recursive-descent parser following Jinja2's grammar and precedence
// (condexpr < or < and < not < compare < + - < ~ < * / // % < ** < unary < postfix/filters/tests).
#include "template/parser.h"

#include <algorithm>
#include <initializer_list>

#include "core/error.h"

namespace tritium::tmpl {

namespace {

constexpr int kMaxNesting = 200;  // bounds parser recursion on adversarial input

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_all() {
    std::string end;
    Body b = parse_body({}, end);
    return b;
  }

 private:
  using TT = Token::Type;

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(const char* op) const { return cur().type == TT::Op && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == TT::Name && cur().value == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    advance();
    return true;
  }

  [[noreturn]] void error(const Token& tok, const std::string& msg) const {
    fail("chat template syntax error at line {}, column {}: {}", tok.line, tok.col, msg);
  }
  static std::string describe(const Token& tok) {
    switch (tok.type) {
      case TT::Eof: return "end of template";
      case TT::VarEnd: return "'}}'";
      case TT::BlockEnd: return "'%}'";
      case TT::String: return "string literal";
      default: return "'" + tok.value + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(cur(), fmt::format("expected '{}', got {}", op, describe(cur())));
  }
  std::string expect_name() {
    if (cur().type != TT::Name) error(cur(), fmt::format("expected a name, got {}", describe(cur())));
    std::string n = cur().value;
    advance();
    return n;
  }
  void expect_block_end() {
    if (cur().type != TT::BlockEnd) error(cur(), fmt::format("expected '%}}', got {}", describe(cur())));
    advance();
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.error(p.cur(), "template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  ExprPtr make(Expr::Kind k, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  // ---- statements ---------------------------------------------------------------------------
  // Parses until one of the block tags in `ends` (left unconsumed after its name; `end` receives it).
  Body parse_body(std::initializer_list<const char*> ends, std::string& end) {
    DepthGuard g(*this);
    Body body;
    while (true) {
      const Token& tok = cur();
      if (tok.type == TT::Eof) {
        if (ends.size() == 0) return body;
        error(tok, fmt::format("unexpected end of template, expected '{}'", *ends.begin()));
      }
      if (tok.type == TT::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->text = tok.value;
        body.push_back(std::move(s));
        advance();
      } else if (tok.type == TT::VarBegin) {
        advance();
        auto s = stmt(Stmt::Kind::Output, tok);
        s->expr = parse_tuple(true);
        if (cur().type != TT::VarEnd) error(cur(), fmt::format("expected '}}}}', got {}", describe(cur())));
        advance();
        body.push_back(std::move(s));
      } else if (tok.type == TT::BlockBegin) {
        const Token& name = peek();
        if (name.type != TT::Name) error(name, "expected a tag name after '{%'");
        for (const char* e : ends)
          if (name.value == e) {
            advance();
            advance();
            end = e;
            return body;
          }
        advance();
        body.push_back(parse_statement());
      } else {
        error(tok, fmt::format("unexpected {}", describe(tok)));
      }
    }
  }

  StmtPtr stmt(Stmt::Kind k, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = at.line;
    s->col = at.col;
    return s;
  }

  StmtPtr parse_statement() {
    const Token tok = cur();
    const std::string& tag = tok.value;
    advance();
    std::string end;
    if (tag == "if") {
      auto s = stmt(Stmt::Kind::If, tok);
      ExprPtr cond = parse_tuple(true);
      expect_block_end();
      while (true) {
        Body b = parse_body({"elif", "else", "endif"}, end);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "elif") {
          cond = parse_tuple(true);
          expect_block_end();
          continue;
        }
        if (end == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"}, end);
        }
        expect_block_end();
        return s;
      }
    }
    if (tag == "for") {
      auto s = stmt(Stmt::Kind::For, tok);
      s->targets = parse_targets();
      if (!skip_name("in")) error(cur(), fmt::format("expected 'in', got {}", describe(cur())));
      s->expr = parse_tuple(false);
      if (skip_name("if")) s->cond = parse_expression(true);
      if (is_name("recursive")) error(cur(), "recursive for loops are not supported");
      expect_block_end();
      s->body = parse_body({"else", "endfor"}, end);
      if (end == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, end);
      }
      expect_block_end();
      return s;
    }
    if (tag == "set") {
      auto s = stmt(Stmt::Kind::Set, tok);
      if (cur().type == TT::Name && peek().type == TT::Op && peek().value == ".") {
        s->targets.push_back(expect_name());
        advance();
        s->attr = expect_name();
      } else {
        s->targets = parse_targets();
      }
      if (skip_op("=")) {
        s->expr = parse_tuple(true);
        expect_block_end();
        return s;
      }
      if (is_op("|")) error(cur(), "filtered block set is not supported");
      expect_block_end();
      s->body = parse_body({"endset"}, end);
      expect_block_end();
      return s;
    }
    if (tag == "macro") {
      auto s = stmt(Stmt::Kind::Macro, tok);
      s->text = expect_name();
      expect_op("(");
      while (!is_op(")")) {
        std::string p = expect_name();
        ExprPtr def;
        if (skip_op("=")) def = parse_expression(true);
        s->params.emplace_back(std::move(p), std::move(def));
        if (!skip_op(",")) break;
      }
      expect_op(")");
      expect_block_end();
      s->body = parse_body({"endmacro"}, end);
      if (cur().type == TT::Name && cur().value == s->text) advance();
      expect_block_end();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      auto s = stmt(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, tok);
      expect_block_end();
      return s;
    }
    if (tag == "generation") {
      auto s = stmt(Stmt::Kind::Block, tok);
      expect_block_end();
      s->body = parse_body({"endgeneration"}, end);
      expect_block_end();
      return s;
    }
    error(tok, fmt::format("unknown or unsupported tag '{}'", tag));
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = skip_op("(");
    do {
      if (paren && is_op(")")) break;
      names.push_back(expect_name());
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  // ---- expressions ----------------------------------------------------------------------------
  // An expression, or a tuple of them when separated by commas.
  ExprPtr parse_tuple(bool with_condexpr) {
    const Token start = cur();
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::Tuple, start);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().type == TT::VarEnd || cur().type == TT::BlockEnd || is_op(")") || is_name("if")) break;
      t->args.push_back(parse_expression(with_condexpr));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard g(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const Token at = cur();
      advance();
      auto c = make(Expr::Kind::CondExpr, at);
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (skip_name("else")) other = parse_condexpr();
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const Token& at, const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::Binary, at);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  /// One left-associative binary level: next (op next)* while is_op() matches the current token. The node's
  /// operator name is `name`, or the operator token's own text when name is null.
  template <class Next, class IsOp>
  ExprPtr left_assoc(Next next, IsOp is_op, const char* name = nullptr) {
    ExprPtr e = next();
    while (is_op()) {
      const Token at = cur();
      advance();
      e = binary(at, name ? std::string(name) : at.value, std::move(e), next());
    }
    return e;
  }

  ExprPtr parse_or() {
    return left_assoc([this] { return parse_and(); }, [this] { return is_name("or"); }, "or");
  }
  ExprPtr parse_and() {
    return left_assoc([this] { return parse_not(); }, [this] { return is_name("and"); }, "and");
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this);
      const Token at = cur();
      advance();
      auto e = make(Expr::Kind::Unary, at);
      e->name = "not";
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    const Token start = cur();
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == TT::Op &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == "<=" ||
           cur().value == ">" || cur().value == ">=")) {
        op = cur().value;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().type == TT::Name && peek().value == "in") {
        op = "notin";
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::Compare, start);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr parse_math1() {
    return left_assoc([this] { return parse_concat(); }, [this] { return is_op("+") || is_op("-"); });
  }
  ExprPtr parse_concat() {
    return left_assoc([this] { return parse_math2(); }, [this] { return is_op("~"); }, "~");
  }
  ExprPtr parse_math2() {
    return left_assoc([this] { return parse_pow(); },
                      [this] { return is_op("*") || is_op("/") || is_op("//") || is_op("%"); });
  }
  ExprPtr parse_pow() {
    return left_assoc([this] { return parse_unary(true); }, [this] { return is_op("**"); }, "**");
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token at = cur();
      advance();
      e = make(Expr::Kind::Unary, at);
      e->name = at.value;
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token tok = cur();
    switch (tok.type) {
      case TT::Name: {
        advance();
        auto e = make(Expr::Kind::Literal, tok);
        if (tok.value == "true" || tok.value == "True") e->value = Value(true);
        else if (tok.value == "false" || tok.value == "False") e->value = Value(false);
        else if (tok.value == "none" || tok.value == "None") e->value = Value(nullptr);
        else {
          e->kind = Expr::Kind::Name;
          e->name = tok.value;
        }
        return e;
      }
      case TT::String: {
        std::string s;
        while (cur().type == TT::String) {  // adjacent literals concatenate
          s += cur().value;
          advance();
        }
        auto e = make(Expr::Kind::Literal, tok);
        e->value = Value(std::move(s));
        return e;
      }
      case TT::Int: {
        advance();
        auto e = make(Expr::Kind::Literal, tok);
        try {
          e->value = Value(static_cast<int64_t>(std::stoll(tok.value)));
        } catch (const std::exception&) {
          error(tok, "integer literal out of range");
        }
        return e;
      }
      case TT::Float: {
        advance();
        auto e = make(Expr::Kind::Literal, tok);
        try {
          e->value = Value(std::stod(tok.value));
        } catch (const std::exception&) {
          error(tok, "float literal out of range");
        }
        return e;
      }
      case TT::Op: {
        if (tok.value == "(") {
          advance();
          if (skip_op(")")) return make(Expr::Kind::Tuple, tok);
          ExprPtr inner = parse_expression(true);
          if (is_op(",")) {
            auto t = make(Expr::Kind::Tuple, tok);
            t->args.push_back(std::move(inner));
            while (skip_op(",")) {
              if (is_op(")")) break;
              t->args.push_back(parse_expression(true));
            }
            inner = std::move(t);
          }
          expect_op(")");
          return inner;
        }
        if (tok.value == "[") {
          advance();
          auto e = make(Expr::Kind::List, tok);
          while (!is_op("]")) {
            e->args.push_back(parse_expression(true));
            if (!skip_op(",")) break;
          }
          expect_op("]");
          return e;
        }
        if (tok.value == "{") {
          advance();
          auto e = make(Expr::Kind::Dict, tok);
          while (!is_op("}")) {
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
            if (!skip_op(",")) break;
          }
          expect_op("}");
          return e;
        }
        break;
      }
      default: break;
    }
    error(tok, fmt::format("unexpected {}", describe(tok)));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      const Token at = cur();
      if (skip_op(".")) {
        if (cur().type == TT::Int) {  // foo.0 means foo[0]
          auto g = make(Expr::Kind::GetItem, at);
          g->args.push_back(std::move(e));
          auto idx = make(Expr::Kind::Literal, cur());
          try {
            idx->value = Value(static_cast<int64_t>(std::stoll(cur().value)));
          } catch (const std::exception&) {
            error(cur(), "integer literal out of range");
          }
          advance();
          g->args.push_back(std::move(idx));
          e = std::move(g);
          continue;
        }
        auto g = make(Expr::Kind::GetAttr, at);
        g->name = expect_name();
        g->args.push_back(std::move(e));
        e = std::move(g);
      } else if (skip_op("[")) {
        e = parse_subscript(std::move(e), at);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, const Token& at) {
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    while (true) {
      if (is_op(":")) {
        slice = true;
        advance();
        if (++n > 2) error(cur(), "too many ':' in slice");
        continue;
      }
      if (is_op("]")) break;
      if (parts[n]) error(cur(), "expected ':' or ']'");
      parts[n] = parse_expression(true);
    }
    advance();
    if (!slice) {
      if (!parts[0]) error(at, "empty subscript");
      auto g = make(Expr::Kind::GetItem, at);
      g->args.push_back(std::move(obj));
      g->args.push_back(std::move(parts[0]));
      return g;
    }
    auto s = make(Expr::Kind::Slice, at);
    s->args.push_back(std::move(obj));
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  // Parses "(args, kw=value)" into e->args (appended) and e->kwargs.
  void parse_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (cur().type == TT::Name && peek().type == TT::Op && peek().value == "=") {
        std::string k = cur().value;
        advance();
        advance();
        e.kwargs.emplace_back(std::move(k), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) error(cur(), "positional argument after keyword argument");
        e.args.push_back(parse_expression(true));
      }
      if (!skip_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = make(Expr::Kind::Call, cur());
    c->args.push_back(std::move(callee));
    parse_args(*c);
    return c;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        const Token at = cur();
        advance();
        auto f = make(Expr::Kind::Filter, at);
        f->name = expect_name();
        while (is_op(".") && peek().type == TT::Name) {
          advance();
          f->name += "." + expect_name();
        }
        f->args.push_back(std::move(e));
        if (is_op("(")) parse_args(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        const Token at = cur();
        advance();
        auto t = make(Expr::Kind::Test, at);
        t->negated = skip_name("not");
        t->name = expect_name();
        t->args.push_back(std::move(e));
        const Token& n = cur();
        if (is_op("(")) {
          parse_args(*t);
        } else if ((n.type == TT::Name || n.type == TT::String || n.type == TT::Int || n.type == TT::Float ||
                    is_op("[") || is_op("{")) &&
                   !(is_name("else") || is_name("or") || is_name("and"))) {
          // `x is divisibleby 3`, `x is sameas false`: one argument without parentheses
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& src, const LexOptions& opt) { return Parser(tokenize(src, opt)).parse_all(); }

}  // namespace tritium::tmpl
