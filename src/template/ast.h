// tritium template engine: syntax tree of the Jinja2 subset.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace tritium::tmpl {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    GetAttr,   // args[0].name
    GetItem,   // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]] (null parts are omitted)
    Call,      // args[0](args[1..], kwargs)
    Filter,    // args[0] | name(args[1..], kwargs)
    Test,      // args[0] is [not] name(args[1..])  (negated)
    Unary,     // name in {"-", "+", "not"} applied to args[0]
    Binary,    // args[0] name args[1]: + - * / // % ** ~ and or
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...: == != < <= > >= in notin
    CondExpr,  // args[0] if args[1] else args[2] (args[2] may be null)
    List,      // [args...]
    Tuple,     // (args...)
    Dict,      // {args[0]: args[1], ...}
  };
  Kind kind;
  int line = 0, col = 0;
  std::string name;
  Value value;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    Text,      // text
    Output,    // {{ expr }}
    If,        // branches (cond, body) ...; else_body
    For,       // for targets in expr [if cond]: body; else_body
    Set,       // set targets = expr | set ns.attr = expr (attr non-empty) | block set (expr null: body)
    Macro,     // macro name(params): body
    Break,
    Continue,
    Block,     // {% generation %} ... : renders its body (HF's assistant-mask marker)
  };
  Kind kind;
  int line = 0, col = 0;
  std::string text;                // Text; Macro name
  ExprPtr expr;                    // Output, For iterable, Set value
  ExprPtr cond;                    // For filter
  std::vector<std::string> targets;
  std::string attr;                // set ns.attr
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro parameters with optional defaults
};

}  // namespace tritium::tmpl
