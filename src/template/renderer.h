// tritium template engine: evaluates a parsed template against a context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "template/ast.h"
#include "template/value.h"

namespace tritium::tmpl {

/// Maximum nesting of macro calls (recursive macros) before rendering fails with tritium::Error.
inline constexpr int kMaxMacroDepth = 64;
/// Statements executed (loop iterations included) in one render before it fails with tritium::Error: a chat
/// template of a real model runs well under a million; a hostile one (nested range loops) cannot hang the server.
inline constexpr int64_t kMaxRenderSteps = 2'000'000;
/// Bytes of rendered output (and of any string a template builds) before rendering fails.
inline constexpr size_t kMaxRenderBytes = size_t{1} << 28;

/// Renders `body` with the variables of `context` (a dict Value). Scoping follows Jinja2: a for loop
/// body gets a fresh scope each iteration (set inside a loop does not leak; use namespace()), macros see
/// the template's top-level variables plus their arguments. Undefined names print as "" and are falsy;
/// operating on them (+, <, in) fails. Errors: tritium::Error "chat template error at line L, column
/// C: ..."; raise_exception(msg) throws TemplateRaise (a tritium::Error) whose what() is msg.
std::string render_template(const Body& body, const Value& context);

}  // namespace tritium::tmpl
