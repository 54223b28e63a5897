// tritium template engine: Jinja2 parser (tokens -> syntax tree).
#pragma once

#include <string>

#include "template/ast.h"
#include "template/lexer.h"

namespace tritium::tmpl {

/// Parses a template source into statements. Supported tags: if/elif/else, for (tuple targets, `if`
/// filter, else), set (plain, tuple, namespace attribute, block), macro, break/continue, generation;
/// comments; the Jinja2 expression grammar with its precedence. Throws tritium::Error
/// "chat template syntax error at line L, column C: ..." on malformed input.
Body parse_template(const std::string& src, const LexOptions& opt = {});

}  // namespace tritium::tmpl
