// tritium template engine: operators, filters, tests, methods and globals of the Jinja2 subset,
// with the semantics of Python/Jinja2 as Hugging Face transformers configures it.
#pragma once

#include <optional>
#include <string>

#include "core/error.h"
#include "template/value.h"

namespace tritium::tmpl {

/// Thrown by the raise_exception() global: what() is the template's message, verbatim.
class TemplateRaise : public Error {
 public:
  using Error::Error;
};

/// obj.name: dict key (or namespace attribute); missing keys give Undefined; Undefined propagates.
Value get_attr(const Value& obj, const std::string& name);
/// obj[key]: list/string index (negative from the end), dict key; out of range gives Undefined.
Value get_item(const Value& obj, const Value& key);
/// obj[start:stop:step] on a list or string (Python semantics).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
/// Items of an iteration: list items, dict keys, string characters; Undefined iterates as empty.
Array iterate(const Value& v);
/// Python `item in container`.
bool contains(const Value& container, const Value& item);
/// Python <, <=, >, >= on numbers or strings (op is the operator text); throws on other types.
bool compare_order(const std::string& op, const Value& a, const Value& b);
/// Arithmetic and concatenation: + - * / // % ** ~ (Python semantics; `~` converts to strings).
Value binary_op(const std::string& op, const Value& a, const Value& b);

/// Applies filter `name` to `v`. Throws tritium::Error for unknown filters or bad arguments.
Value apply_filter(const std::string& name, const Value& v, const CallArgs& args);
/// Applies test `name` (is defined, is none, is string, ...). Throws tritium::Error for unknown tests.
bool apply_test(const std::string& name, const Value& v, const CallArgs& args);
/// Calls a method of a str/dict/list value (strip, split, startswith, items, get, ...);
/// std::nullopt when the value has no such method.
std::optional<Value> call_method(const Value& obj, const std::string& name, const CallArgs& args);
/// Global functions: range, namespace, dict, raise_exception, strftime_now. Undefined if unknown.
Value global_function(const std::string& name);

}  // namespace tritium::tmpl
