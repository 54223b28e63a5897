// tritium template engine: evaluates a parsed template against a context.
#pragma once

#include <string>

#include "template/ast.h"
#include "template/value.h"

namespace tritium::tmpl {

/// Maximum nesting of macro calls (recursive macros) before rendering fails with tritium::Error.
inline constexpr int kMaxMacroDepth = 64;

/// Renders `body` with the variables of `context` (a dict Value). Scoping follows Jinja2: a for loop
/// body gets a fresh scope each iteration (set inside a loop does not leak; use namespace()), macros see
/// the template's top-level variables plus their arguments. Undefined names print as "" and are falsy;
/// operating on them (+, <, in) fails. Errors: tritium::Error "chat template error at line L, column
/// C: ..."; raise_exception(msg) throws TemplateRaise (a tritium::Error) whose what() is msg.
std::string render_template(const Body& body, const Value& context);

}  // namespace tritium::tmpl
