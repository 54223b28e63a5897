// tritium template engine: the dynamic value type of the Jinja2 subset used by chat templates.
// Semantics follow Python/Jinja2 (what Hugging Face transformers renders with): Python truthiness,
// Python str()/repr() output, reference semantics for lists and dicts, insertion-ordered dicts.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tritium::tmpl {

class Value;
using Array = std::vector<Value>;

/// Arguments of a call: positional values and keyword values, in call order.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  /// The keyword `name`, else positional `index`, else nullptr.
  const Value* get(std::string_view name, size_t index) const;
};

/// A callable (macro, global such as range/namespace, loop.cycle). Throws tritium::Error on misuse.
using Function = std::function<Value(const CallArgs&)>;

/// Insertion-ordered string-keyed dict (Python dict), or a Jinja namespace() when is_namespace.
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};

/// Jinja's Undefined: remembers the name it came from, for error messages.
struct Undefined {
  std::string name;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, Array, Object, Function };

  Value() : v_(Undefined{}) {}
  Value(std::nullptr_t) : v_(nullptr) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(Array a) : v_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o) : v_(std::make_shared<Object>(std::move(o))) {}
  Value(Function f) : v_(std::make_shared<Function>(std::move(f))) {}

  static Value undefined(std::string name) { Value v; v.v_ = Undefined{std::move(name)}; return v; }
  /// A Python tuple: a list that prints as (a, b).
  static Value tuple(Array a) { Value v(std::move(a)); v.tuple_ = true; return v; }
  bool is_tuple() const { return tuple_ && is_array(); }

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_array() const { return kind() == Kind::Array; }
  bool is_object() const { return kind() == Kind::Object; }
  bool is_function() const { return kind() == Kind::Function; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  /// Int, Float or Bool as double (Python numeric promotion).
  double as_double() const;
  const std::string& str() const { return std::get<std::string>(v_); }
  Array& arr() const { return *std::get<std::shared_ptr<Array>>(v_); }
  Object& obj() const { return *std::get<std::shared_ptr<Object>>(v_); }
  const Function& fn() const { return *std::get<std::shared_ptr<Function>>(v_); }
  const std::string& undefined_name() const { return std::get<Undefined>(v_).name; }

  /// Python truthiness; Undefined is falsy.
  bool truthy() const;
  /// Python str(): what {{ value }} prints. Undefined prints as "".
  std::string to_output() const;
  /// Python repr() (used inside printed lists/dicts).
  std::string repr() const;
  /// Python type name, for error messages ("str", "int", "list", "dict", "NoneType", ...).
  std::string type_name() const;

  /// Python ==, with int/float/bool numeric equality and deep list/dict comparison.
  bool equals(const Value& other) const;

  /// JSON -> Value (objects keep their key order).
  static Value from_json(const nlohmann::ordered_json& j);

 private:
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>, std::shared_ptr<Function>>
      v_;
  bool tuple_ = false;
};

/// Options of the tojson filter; defaults are HF transformers' tojson override
/// (json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)).
struct JsonDumpOptions {
  int indent = -1;  ///< < 0: single line with ", " / ": " separators; >= 0: newline + indent spaces, "," / ": "
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_sep, key_sep;  ///< empty: Python defaults for the indent mode
};

/// Python json.dumps of a value. Throws tritium::Error for values JSON cannot hold (Undefined, functions).
std::string json_dumps(const Value& v, const JsonDumpOptions& opt = {});

/// Python float repr: shortest round-trip digits, "1.0", "1e-05", "1.5e+16", "inf", "nan".
std::string python_float_repr(double d);

}  // namespace tritium::tmpl
