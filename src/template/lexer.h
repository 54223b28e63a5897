// tritium template engine: Jinja2 lexer (template text, {{ }}, {% %}, {# #}, whitespace control).
#pragma once

#include <string>
#include <vector>

namespace tritium::tmpl {

struct Token {
  enum class Type { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };
  Type type;
  std::string value;  ///< text, name, operator, or the (unescaped) string literal
  int line = 1, col = 1;
};

/// Lexer options; the defaults are what HF transformers' apply_chat_template uses
/// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False).
struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

/// Splits a template into tokens. Whitespace control follows Jinja2: `{%-`/`-%}` strip all whitespace
/// on that side; trim_blocks drops the first newline after a block or comment tag; lstrip_blocks strips
/// spaces and tabs between the start of a line and a block or comment tag (`{%+` disables it; `+%}`
/// disables trim_blocks). Throws tritium::Error naming line and column on unterminated tags/strings or
/// unexpected characters.
std::vector<Token> tokenize(const std::string& src, const LexOptions& opt = {});

}  // namespace tritium::tmpl
