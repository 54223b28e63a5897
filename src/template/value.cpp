// tritium template engine: Value semantics (Python truthiness, str/repr, equality, json.dumps).
#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace tritium::tmpl {

const Value* CallArgs::get(std::string_view name, size_t index) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return index < pos.size() ? &pos[index] : nullptr;
}

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Object::set(const std::string& key, Value v) {
  for (auto& [k, old] : items)
    if (k == key) {
      old = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

double Value::as_double() const {
  switch (kind()) {
    case Kind::Int: return static_cast<double>(as_int());
    case Kind::Float: return std::get<double>(v_);
    case Kind::Bool: return as_bool() ? 1.0 : 0.0;
    default: fail("expected a number, got {}", type_name());
  }
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_double() != 0.0;
    case Kind::String: return !str().empty();
    case Kind::Array: return !arr().empty();
    case Kind::Object: return obj().is_namespace || !obj().items.empty();
    case Kind::Function: return true;
  }
  return false;
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, then laid out the way Python's repr does.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  size_t e = s.find('e');
  int exp = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out = "0.";
    out.append(static_cast<size_t>(-exp - 1), '0');
    out += digits;
  } else {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  if (neg) out.insert(out.begin(), '-');
  return out;
}

static std::string py_str_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += q;
  return out;
}

std::string Value::to_output() const {
  switch (kind()) {
    case Kind::Undefined: return "";
    case Kind::String: return str();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(as_int());
    case Kind::Float: return python_float_repr(as_double());
    case Kind::String: return py_str_repr(str());
    case Kind::Array: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < arr().size(); ++i) out += (i ? ", " : "") + arr()[i].repr();
      if (tuple_) return out + (arr().size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::Object: {
      if (obj().is_namespace) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : obj().items) {
        out += (first ? "" : ", ") + py_str_repr(k) + ": " + v.repr();
        first = false;
      }
      return out + "}";
    }
    case Kind::Function: return "<function>";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Array: return "list";
    case Kind::Object: return obj().is_namespace ? "Namespace" : "dict";
    case Kind::Function: return "function";
  }
  return "?";
}

bool Value::equals(const Value& o) const {
  bool num_a = is_number() || is_bool(), num_b = o.is_number() || o.is_bool();
  if (num_a && num_b) {
    if (is_float() || o.is_float()) return as_double() == o.as_double();
    auto ival = [](const Value& v) { return v.is_bool() ? int64_t{v.as_bool()} : v.as_int(); };
    return ival(*this) == ival(o);
  }
  if (kind() != o.kind()) return false;
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return str() == o.str();
    case Kind::Array: {
      if (arr().size() != o.arr().size()) return false;
      for (size_t i = 0; i < arr().size(); ++i)
        if (!arr()[i].equals(o.arr()[i])) return false;
      return true;
    }
    case Kind::Object: {
      if (&obj() == &o.obj()) return true;
      if (obj().is_namespace || o.obj().is_namespace) return false;
      if (obj().items.size() != o.obj().items.size()) return false;
      for (const auto& [k, v] : obj().items) {
        const Value* ov = o.obj().find(k);
        if (!ov || !v.equals(*ov)) return false;
      }
      return true;
    }
    case Kind::Function: return &fn() == &o.fn();
    default: return false;
  }
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(nullptr);
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(from_json(e));
      return Value(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      o.items.reserve(j.size());
      for (const auto& [k, v] : j.items()) o.items.emplace_back(k, from_json(v));
      return Value(std::move(o));
    }
    default: fail("unsupported JSON value type {}", j.type_name());
  }
}

// ---- json.dumps -------------------------------------------------------------------------------

static void append_utf16_escape(std::string& out, uint32_t u) {
  char b[8];
  std::snprintf(b, sizeof b, "\\u%04x", u);
  out += b;
}

static void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20) {
      append_utf16_escape(out, c);
    } else if (c >= 0x80 && ensure_ascii) {
      // Decode one UTF-8 sequence; invalid bytes are escaped as themselves.
      int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      uint32_t cp = len == 1 ? c : (c & (0x7F >> len));
      if (i + len > s.size()) len = 1, cp = c;
      for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      i += len - 1;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        append_utf16_escape(out, 0xD800 + (cp >> 10));
        append_utf16_escape(out, 0xDC00 + (cp & 0x3FF));
      } else {
        append_utf16_escape(out, cp);
      }
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

static void dump(std::string& out, const Value& v, const JsonDumpOptions& opt, int level) {
  const bool pretty = opt.indent >= 0;
  const std::string item_sep = !opt.item_sep.empty() ? opt.item_sep : (pretty ? "," : ", ");
  const std::string key_sep = !opt.key_sep.empty() ? opt.key_sep : ": ";
  auto newline = [&](int lvl) {
    if (!pretty) return;
    out += '\n';
    out.append(static_cast<size_t>(opt.indent * lvl), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
      double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += python_float_repr(d);
      return;
    }
    case Value::Kind::String: dump_string(out, v.str(), opt.ensure_ascii); return;
    case Value::Kind::Array: {
      if (v.arr().empty()) { out += "[]"; return; }
      out += '[';
      for (size_t i = 0; i < v.arr().size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        dump(out, v.arr()[i], opt, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Object: {
      if (v.obj().is_namespace) fail("tojson: Object of type Namespace is not JSON serializable");
      if (v.obj().items.empty()) { out += "{}"; return; }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.obj().items) items.push_back(&kv);
      if (opt.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        dump_string(out, items[i]->first, opt.ensure_ascii);
        out += key_sep;
        dump(out, items[i]->second, opt, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
    case Value::Kind::Undefined:
      fail("tojson: '{}' is undefined", v.undefined_name());
    case Value::Kind::Function: fail("tojson: a function is not JSON serializable");
  }
}

std::string json_dumps(const Value& v, const JsonDumpOptions& opt) {
  std::string out;
  dump(out, v, opt, 0);
  return out;
}

}  // namespace tritium::tmpl
