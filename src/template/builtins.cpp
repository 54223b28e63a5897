// tritium template engine: operators, filters, tests, methods and globals.
#include "template/builtins.h"
#include "template/renderer.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>

#include "template/pystr.h"

namespace tritium::tmpl {

namespace {

const Value kUndefined;

std::optional<int64_t> opt_int(const Value* v) {
  if (!v || v->is_none() || v->is_undefined()) return std::nullopt;
  if (v->is_bool()) return int64_t{v->as_bool()};
  if (!v->is_int()) fail("expected an integer, got {}", v->type_name());
  return v->as_int();
}

std::optional<std::string> opt_str(const Value* v) {
  if (!v || v->is_none() || v->is_undefined()) return std::nullopt;
  if (!v->is_string()) fail("expected a string, got {}", v->type_name());
  return v->str();
}

bool arg_bool(const CallArgs& a, const char* name, size_t idx, bool def) {
  const Value* v = a.get(name, idx);
  return v ? v->truthy() : def;
}

void require_defined(const Value& v, const char* what) {
  if (v.is_undefined()) fail("'{}' is undefined (in {})", v.undefined_name(), what);
}

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  require_defined(a, op.c_str());
  require_defined(b, op.c_str());
  fail("unsupported operand types for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
}

int64_t to_int_checked(double d) {
  if (!std::isfinite(d) || std::fabs(d) > 9.2e18) fail("integer result out of range");
  return static_cast<int64_t>(d);
}

// A dotted attribute path ("a.b.0") as used by map/selectattr/sort/join.
Value get_path(const Value& v, const std::string& path) {
  Value cur = v;
  for (const auto& part : pystr::split(path, std::string("."), -1)) {
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    Value next = get_attr(cur, part);
    if (digits && next.is_undefined() && (cur.is_array() || cur.is_string()))
      next = get_item(cur, Value(static_cast<int64_t>(std::stoll(part))));
    cur = next;
  }
  return cur;
}

// Sort key comparison: numbers numerically, strings optionally case-insensitively.
bool sort_less(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_string() && b.is_string() && !case_sensitive) return pystr::lower(a.str()) < pystr::lower(b.str());
  return compare_order("<", a, b);
}

CallArgs rest_args(const CallArgs& a, size_t from) {
  CallArgs r;
  for (size_t i = from; i < a.pos.size(); ++i) r.pos.push_back(a.pos[i]);
  r.kw = a.kw;
  return r;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value select_impl(const Value& seq, const CallArgs& a, bool by_attr, bool keep) {
  Array out;
  size_t first = by_attr ? 1 : 0;
  std::string attr;
  if (by_attr) {
    auto s = opt_str(a.get("attribute", 0));
    if (!s) fail("selectattr/rejectattr: missing attribute name");
    attr = *s;
  }
  const Value* test = a.pos.size() > first ? &a.pos[first] : nullptr;
  CallArgs targs;
  for (size_t i = first + 1; i < a.pos.size(); ++i) targs.pos.push_back(a.pos[i]);
  for (const Value& item : iterate(seq)) {
    Value subject = by_attr ? get_path(item, attr) : item;
    bool ok = test ? apply_test(test->to_output(), subject, targs) : subject.truthy();
    if (ok == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value sum_or_minmax(const std::string& name, const Value& seq, const CallArgs& a) {
  auto attr = opt_str(a.get("attribute", name == "sum" ? 0 : 1));
  Array items = iterate(seq);
  if (attr)
    for (auto& it : items) it = get_path(it, *attr);
  if (name == "sum") {
    const Value* start = a.get("start", 1);
    Value acc = start ? *start : Value(int64_t{0});
    for (const auto& it : items) acc = binary_op("+", acc, it);
    return acc;
  }
  if (items.empty()) return Value::undefined("empty sequence");
  bool cs = arg_bool(a, "case_sensitive", 0, false);
  Value best = items[0];
  for (const auto& it : items) {
    if (name == "min" ? sort_less(it, best, cs) : sort_less(best, it, cs)) best = it;
  }
  return best;
}

}  // namespace

// ---- access ------------------------------------------------------------------------------------

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_object()) {
    if (const Value* v = obj.obj().find(name)) return *v;
    return Value::undefined(name);
  }
  if (obj.is_undefined()) return Value::undefined(obj.undefined_name() + "." + name);
  return Value::undefined(name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_object()) {
    if (!key.is_string()) return Value::undefined(key.repr());
    return get_attr(obj, key.str());
  }
  if (obj.is_array() || obj.is_string()) {
    if (!key.is_int() && !key.is_bool()) fail("{} indices must be integers, not {}", obj.type_name(), key.type_name());
    int64_t i = key.is_bool() ? int64_t{key.as_bool()} : key.as_int();
    if (obj.is_array()) {
      int64_t n = static_cast<int64_t>(obj.arr().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("index " + std::to_string(i));
      return obj.arr()[static_cast<size_t>(i)];
    }
    auto offs = pystr::code_point_offsets(obj.str());
    int64_t n = static_cast<int64_t>(offs.size()) - 1;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("index " + std::to_string(i));
    size_t k = static_cast<size_t>(i);
    return Value(obj.str().substr(offs[k], offs[k + 1] - offs[k]));
  }
  if (obj.is_undefined()) return Value::undefined(obj.undefined_name() + "[" + key.repr() + "]");
  return Value::undefined(key.repr());
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  auto s0 = opt_int(&start), s1 = opt_int(&stop), s2 = opt_int(&step);
  if (obj.is_array()) {
    Array out;
    for (size_t i : pystr::slice_indices(static_cast<int64_t>(obj.arr().size()), s0, s1, s2)) out.push_back(obj.arr()[i]);
    return Value(std::move(out));
  }
  if (obj.is_string()) {
    auto offs = pystr::code_point_offsets(obj.str());
    std::string out;
    for (size_t i : pystr::slice_indices(static_cast<int64_t>(offs.size()) - 1, s0, s1, s2))
      out += obj.str().substr(offs[i], offs[i + 1] - offs[i]);
    return Value(std::move(out));
  }
  if (obj.is_undefined()) return obj;
  fail("'{}' object is not subscriptable with a slice", obj.type_name());
}

Array iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::Array: return v.arr();
    case Value::Kind::Object: {
      Array keys;
      for (const auto& kv : v.obj().items) keys.emplace_back(kv.first);
      return keys;
    }
    case Value::Kind::String: {
      Array chars;
      auto offs = pystr::code_point_offsets(v.str());
      for (size_t k = 0; k + 1 < offs.size(); ++k) chars.emplace_back(v.str().substr(offs[k], offs[k + 1] - offs[k]));
      return chars;
    }
    default: fail("'{}' object is not iterable", v.type_name());
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::String:
      if (!item.is_string()) fail("'in <string>' requires string as left operand, not {}", item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::Array:
      return std::any_of(container.arr().begin(), container.arr().end(), [&](const Value& x) { return x.equals(item); });
    case Value::Kind::Object: return item.is_string() && container.obj().find(item.str()) != nullptr;
    case Value::Kind::Undefined: fail("'{}' is undefined (right operand of 'in')", container.undefined_name());
    default: fail("argument of type '{}' is not iterable", container.type_name());
  }
}

bool compare_order(const std::string& op, const Value& a, const Value& b) {
  int c;
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
    double x = a.as_double(), y = b.as_double();
    if (a.is_int() && b.is_int()) c = a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int();
    else c = x < y ? -1 : x > y;
  } else if (a.is_string() && b.is_string()) {
    c = a.str().compare(b.str());
    c = c < 0 ? -1 : c > 0;
  } else {
    require_defined(a, op.c_str());
    require_defined(b, op.c_str());
    fail("'{}' not supported between '{}' and '{}'", op, a.type_name(), b.type_name());
  }
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string x = a.to_output(), y = b.to_output();
    if (x.size() + y.size() > kMaxRenderBytes) fail("string concatenation result too large");
    return Value(std::move(x) + y);
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.str().size() + b.str().size() > kMaxRenderBytes) fail("string concatenation result too large");
      return Value(a.str() + b.str());
    }
    if (a.is_array() && b.is_array()) {
      Array r = a.arr();
      r.insert(r.end(), b.arr().begin(), b.arr().end());
      return Value(std::move(r));
    }
  }
  if (op == "*") {
    const Value* seq = a.is_string() || a.is_array() ? &a : (b.is_string() || b.is_array()) ? &b : nullptr;
    const Value* cnt = seq == &a ? &b : &a;
    if (seq && (cnt->is_int() || cnt->is_bool())) {
      int64_t n = cnt->is_bool() ? int64_t{cnt->as_bool()} : cnt->as_int();
      if (n > 0 && (seq->is_string() ? seq->str().size() : seq->arr().size()) * static_cast<size_t>(n) > (size_t{1} << 28))
        fail("repetition result too large");
      if (seq->is_string()) {
        std::string r;
        for (int64_t i = 0; i < n; ++i) r += seq->str();
        return Value(std::move(r));
      }
      Array r;
      for (int64_t i = 0; i < n; ++i) r.insert(r.end(), seq->arr().begin(), seq->arr().end());
      return Value(std::move(r));
    }
  }
  bool na = a.is_number() || a.is_bool(), nb = b.is_number() || b.is_bool();
  if (!na || !nb) bad_operands(op, a, b);
  bool ints = !a.is_float() && !b.is_float();
  auto ival = [](const Value& v) { return v.is_bool() ? int64_t{v.as_bool()} : v.as_int(); };
  if (ints && (op == "+" || op == "-" || op == "*")) {
    int64_t x = ival(a), y = ival(b), r;
    bool ovf = op == "+" ? __builtin_add_overflow(x, y, &r) : op == "-" ? __builtin_sub_overflow(x, y, &r) : __builtin_mul_overflow(x, y, &r);
    if (ovf) fail("integer overflow in '{}'", op);
    return Value(r);
  }
  double x = a.as_double(), y = b.as_double();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "/") {
    if (y == 0) fail("division by zero");
    return Value(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) fail("integer division or modulo by zero");
    if (ints) {
      int64_t p = ival(a), q = ival(b);
      if (p == std::numeric_limits<int64_t>::min() && q == -1) fail("integer overflow in '{}'", op);
      int64_t d = p / q, m = p % q;
      if (m != 0 && ((m < 0) != (q < 0))) --d, m += q;
      return op == "//" ? Value(d) : Value(m);
    }
    double d = std::floor(x / y);
    return op == "//" ? Value(d) : Value(x - d * y);
  }
  if (op == "**") {
    if (ints && ival(b) >= 0) {
      int64_t acc = 1, base = ival(a);
      for (int64_t e = ival(b); e > 0; e >>= 1) {
        if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) fail("integer overflow in '**'");
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) fail("integer overflow in '**'");
      }
      return Value(acc);
    }
    return Value(std::pow(x, y));
  }
  fail("unknown operator '{}'", op);
}

// ---- filters -----------------------------------------------------------------------------------

Value apply_filter(const std::string& name, const Value& v, const CallArgs& a) {
  if (name == "trim" || name == "strip") return Value(pystr::strip(v.to_output(), opt_str(a.get("chars", 0)), true, true));
  if (name == "upper") return Value(pystr::upper(v.to_output()));
  if (name == "lower") return Value(pystr::lower(v.to_output()));
  if (name == "capitalize") return Value(pystr::capitalize(v.to_output()));
  if (name == "title") return Value(pystr::title(v.to_output()));
  if (name == "string") return Value(v.to_output());
  if (name == "safe") return v;
  if (name == "e" || name == "escape") return Value(html_escape(v.to_output()));
  if (name == "tojson") {
    JsonDumpOptions opt;
    if (auto ind = opt_int(a.get("indent", 0))) opt.indent = static_cast<int>(std::clamp<int64_t>(*ind, 0, 64));
    opt.ensure_ascii = arg_bool(a, "ensure_ascii", 99, false);
    opt.sort_keys = arg_bool(a, "sort_keys", 99, false);
    if (const Value* seps = a.get("separators", 99); seps && seps->is_array() && seps->arr().size() == 2) {
      opt.item_sep = seps->arr()[0].to_output();
      opt.key_sep = seps->arr()[1].to_output();
    }
    return Value(json_dumps(v, opt));
  }
  if (name == "length" || name == "count") {
    switch (v.kind()) {
      case Value::Kind::Undefined: return Value(int64_t{0});
      case Value::Kind::String: return Value(static_cast<int64_t>(pystr::length(v.str())));
      case Value::Kind::Array: return Value(static_cast<int64_t>(v.arr().size()));
      case Value::Kind::Object: return Value(static_cast<int64_t>(v.obj().items.size()));
      default: fail("object of type '{}' has no len()", v.type_name());
    }
  }
  if (name == "default" || name == "d") {
    const Value* def = a.get("default_value", 0);
    bool boolean = arg_bool(a, "boolean", 1, false);
    if (v.is_undefined() || (boolean && !v.truthy())) return def ? *def : Value(std::string());
    return v;
  }
  if (name == "join") {
    std::string sep = a.get("d", 0) ? a.get("d", 0)->to_output() : "";
    auto attr = opt_str(a.get("attribute", 1));
    std::string out;
    bool first = true;
    for (const Value& it : iterate(v)) {
      out += (first ? "" : sep) + (attr ? get_path(it, *attr) : it).to_output();
      first = false;
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    Array items = iterate(v);
    if (items.empty()) return Value::undefined(name + " of empty sequence");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value(iterate(v));
  if (name == "reverse") {
    if (v.is_string()) return get_slice(v, Value(), Value(), Value(int64_t{-1}));
    Array items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value(Array{});
    if (!v.is_object()) fail("items filter expects a mapping, got {}", v.type_name());
    Array out;
    for (const auto& [k, val] : v.obj().items) out.push_back(Value::tuple(Array{Value(k), val}));
    return Value(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_object()) fail("dictsort expects a mapping, got {}", v.type_name());
    bool cs = arg_bool(a, "case_sensitive", 0, false), by_value = false, rev = arg_bool(a, "reverse", 2, false);
    if (auto by = opt_str(a.get("by", 1))) by_value = *by == "value";
    Array out;
    for (const auto& [k, val] : v.obj().items) out.push_back(Value::tuple(Array{Value(k), val}));
    std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
      const Value& kx = x.arr()[by_value ? 1 : 0];
      const Value& ky = y.arr()[by_value ? 1 : 0];
      return rev ? sort_less(ky, kx, cs) : sort_less(kx, ky, cs);
    });
    return Value(std::move(out));
  }
  if (name == "replace") {
    const Value *from = a.get("old", 0), *to = a.get("new", 1);
    if (!from || !to) fail("replace filter needs two arguments");
    auto cnt = opt_int(a.get("count", 2));
    return Value(pystr::replace(v.to_output(), from->to_output(), to->to_output(), cnt.value_or(-1)));
  }
  if (name == "selectattr") return select_impl(v, a, true, true);
  if (name == "rejectattr") return select_impl(v, a, true, false);
  if (name == "select") return select_impl(v, a, false, true);
  if (name == "reject") return select_impl(v, a, false, false);
  if (name == "map") {
    Array out;
    if (auto attr = opt_str(a.get("attribute", 99))) {
      const Value* def = a.get("default", 99);
      for (const Value& it : iterate(v)) {
        Value x = get_path(it, *attr);
        out.push_back(x.is_undefined() && def ? *def : x);
      }
      return Value(std::move(out));
    }
    if (a.pos.empty()) fail("map filter needs a filter name or attribute=");
    std::string f = a.pos[0].to_output();
    CallArgs fargs = rest_args(a, 1);
    for (const Value& it : iterate(v)) out.push_back(apply_filter(f, it, fargs));
    return Value(std::move(out));
  }
  if (name == "sort") {
    bool rev = arg_bool(a, "reverse", 0, false), cs = arg_bool(a, "case_sensitive", 1, false);
    auto attr = opt_str(a.get("attribute", 2));
    Array items = iterate(v);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      Value kx = attr ? get_path(x, *attr) : x, ky = attr ? get_path(y, *attr) : y;
      return rev ? sort_less(ky, kx, cs) : sort_less(kx, ky, cs);
    });
    return Value(std::move(items));
  }
  if (name == "unique") {
    Array out;
    for (const Value& it : iterate(v))
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return o.equals(it); })) out.push_back(it);
    return Value(std::move(out));
  }
  if (name == "sum" || name == "min" || name == "max") return sum_or_minmax(name, v, a);
  if (name == "int") {
    const Value* def = a.get("default", 0);
    Value fallback = def ? *def : Value(int64_t{0});
    if (v.is_int()) return v;
    if (v.is_bool()) return Value(int64_t{v.as_bool()});
    if (v.is_float()) return Value(to_int_checked(v.as_double()));
    if (v.is_string()) {
      try {
        size_t used = 0;
        std::string s = pystr::strip(v.str(), std::nullopt, true, true);
        int64_t r = std::stoll(s, &used);
        if (used == s.size()) return Value(r);
        double d = std::stod(s, &used);
        if (used == s.size()) return Value(to_int_checked(d));
      } catch (const std::exception&) {
      }
    }
    return fallback;
  }
  if (name == "float") {
    const Value* def = a.get("default", 0);
    if (v.is_number() || v.is_bool()) return Value(v.as_double());
    if (v.is_string()) {
      try {
        size_t used = 0;
        std::string s = pystr::strip(v.str(), std::nullopt, true, true);
        double d = std::stod(s, &used);
        if (used == s.size()) return Value(d);
      } catch (const std::exception&) {
      }
    }
    return def ? *def : Value(0.0);
  }
  if (name == "abs") {
    if (v.is_int()) {
      if (v.as_int() == std::numeric_limits<int64_t>::min()) fail("integer overflow in abs");
      return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    }
    return Value(std::fabs(v.as_double()));
  }
  if (name == "round") {
    int64_t prec = opt_int(a.get("precision", 0)).value_or(0);
    std::string method = opt_str(a.get("method", 1)).value_or("common");
    double m = std::pow(10.0, static_cast<double>(prec)), x = v.as_double() * m;
    double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value(r / m);
  }
  if (name == "indent") {
    int64_t width = 4;
    std::string pad;
    if (const Value* w = a.get("width", 0)) {
      if (w->is_string()) pad = w->str();
      else width = opt_int(w).value_or(4);
    }
    if (pad.empty()) pad = std::string(static_cast<size_t>(std::clamp<int64_t>(width, 0, 256)), ' ');
    bool first = arg_bool(a, "first", 1, false), blank = arg_bool(a, "blank", 2, false);
    auto lines = pystr::split(v.to_output(), std::string("\n"), -1);
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n";
      bool do_pad = (i > 0 || first) && (blank || !lines[i].empty());
      out += (do_pad ? pad : "") + lines[i];
    }
    return Value(std::move(out));
  }
  if (name == "attr") {
    auto n = opt_str(a.get("name", 0));
    if (!n) fail("attr filter needs a name");
    return get_attr(v, *n);
  }
  fail("unknown filter '{}'", name);
}

// ---- tests -------------------------------------------------------------------------------------

bool apply_test(const std::string& name, const Value& v, const CallArgs& a) {
  auto arg0 = [&]() -> const Value& {
    if (a.pos.empty()) fail("test '{}' needs an argument", name);
    return a.pos[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number() || v.is_bool();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object() && !v.obj().is_namespace;
  if (name == "sequence") return v.is_array() || v.is_string() || (v.is_object() && !v.obj().is_namespace);
  if (name == "iterable") return v.is_array() || v.is_string() || v.is_object() || v.is_undefined();
  if (name == "callable") return v.is_function();
  if (name == "odd" || name == "even") {
    if (!v.is_int()) fail("test '{}' expects an integer, got {}", name, v.type_name());
    bool odd = (v.as_int() % 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "divisibleby") {
    auto n = opt_int(&arg0());
    if (!v.is_int() || !n || *n == 0) fail("test 'divisibleby' expects non-zero integers");
    return v.as_int() % *n == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return v.equals(arg0());
  if (name == "ne" || name == "!=") return !v.equals(arg0());
  if (name == "lt" || name == "lessthan" || name == "<") return compare_order("<", v, arg0());
  if (name == "le" || name == "<=") return compare_order("<=", v, arg0());
  if (name == "gt" || name == "greaterthan" || name == ">") return compare_order(">", v, arg0());
  if (name == "ge" || name == ">=") return compare_order(">=", v, arg0());
  if (name == "in") return contains(arg0(), v);
  if (name == "sameas") {
    const Value& o = arg0();
    if (v.kind() != o.kind()) return false;
    if (v.is_array()) return &v.arr() == &o.arr();
    if (v.is_object()) return &v.obj() == &o.obj();
    return v.equals(o);
  }
  if (name == "lower") return v.is_string() && pystr::lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && pystr::upper(v.str()) == v.str();
  if (name == "escaped") return false;
  fail("unknown test '{}'", name);
}

// ---- methods -----------------------------------------------------------------------------------

std::optional<Value> call_method(const Value& obj, const std::string& name, const CallArgs& a) {
  if (obj.is_string()) {
    const std::string& s = obj.str();
    if (name == "strip") return Value(pystr::strip(s, opt_str(a.get("chars", 0)), true, true));
    if (name == "lstrip") return Value(pystr::strip(s, opt_str(a.get("chars", 0)), true, false));
    if (name == "rstrip") return Value(pystr::strip(s, opt_str(a.get("chars", 0)), false, true));
    if (name == "split") {
      Array out;
      for (auto& p : pystr::split(s, opt_str(a.get("sep", 0)), opt_int(a.get("maxsplit", 1)).value_or(-1)))
        out.emplace_back(std::move(p));
      return Value(std::move(out));
    }
    if (name == "startswith" || name == "endswith") {
      const Value* p = a.get("prefix", 0);
      if (!p) fail("str.{}() needs an argument", name);
      Array options = p->is_array() ? p->arr() : Array{*p};
      for (const Value& o : options) {
        if (!o.is_string()) fail("str.{}() argument must be str or a tuple of str, not {}", name, o.type_name());
        const std::string& x = o.str();
        bool hit = name == "startswith" ? s.compare(0, x.size(), x) == 0
                                        : (s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0);
        if (hit) return Value(true);
      }
      return Value(false);
    }
    if (name == "replace") {
      auto from = opt_str(a.get("old", 0)), to = opt_str(a.get("new", 1));
      if (!from || !to) fail("str.replace() needs two string arguments");
      return Value(pystr::replace(s, *from, *to, opt_int(a.get("count", 2)).value_or(-1)));
    }
    if (name == "upper") return Value(pystr::upper(s));
    if (name == "lower") return Value(pystr::lower(s));
    if (name == "title") return Value(pystr::title(s));
    if (name == "capitalize") return Value(pystr::capitalize(s));
    if (name == "find") {
      auto sub = opt_str(a.get("sub", 0));
      if (!sub) fail("str.find() needs a string argument");
      size_t p = s.find(*sub);
      return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(pystr::length(s.substr(0, p))));
    }
    if (name == "count") {
      auto sub = opt_str(a.get("sub", 0));
      if (!sub || sub->empty()) fail("str.count() needs a non-empty string argument");
      int64_t n = 0;
      for (size_t p = s.find(*sub); p != std::string::npos; p = s.find(*sub, p + sub->size())) ++n;
      return Value(n);
    }
    if (name == "join") {
      const Value* seq = a.get("iterable", 0);
      if (!seq) fail("str.join() needs an argument");
      std::string out;
      bool first = true;
      for (const Value& it : iterate(*seq)) {
        if (!it.is_string()) fail("str.join(): expected str items, got {}", it.type_name());
        out += (first ? "" : s) + it.str();
        first = false;
      }
      return Value(std::move(out));
    }
    if (name == "splitlines") {
      Array out;
      for (auto& l : pystr::split(s, std::string("\n"), -1)) out.emplace_back(std::move(l));
      if (!out.empty() && out.back().str().empty()) out.pop_back();
      return Value(std::move(out));
    }
    return std::nullopt;
  }
  if (obj.is_object() && !obj.obj().is_namespace) {
    if (name == "items") return apply_filter("items", obj, {});
    if (name == "keys") return Value(iterate(obj));
    if (name == "values") {
      Array out;
      for (const auto& kv : obj.obj().items) out.push_back(kv.second);
      return Value(std::move(out));
    }
    if (name == "get") {
      const Value* key = a.get("key", 0);
      if (!key) fail("dict.get() needs a key");
      const Value* def = a.get("default", 1);
      Value r = get_item(obj, *key);
      return r.is_undefined() ? (def ? *def : Value(nullptr)) : r;
    }
    return std::nullopt;
  }
  if (obj.is_array()) {
    if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
        name == "clear" || name == "sort" || name == "reverse")
      fail("list.{}() modifies a list, which HF's immutable sandbox forbids", name);
    if (name == "index") {
      const Value* x = a.get("value", 0);
      if (!x) fail("list.index() needs an argument");
      for (size_t i = 0; i < obj.arr().size(); ++i)
        if (obj.arr()[i].equals(*x)) return Value(static_cast<int64_t>(i));
      fail("list.index(x): x not in list");
    }
    if (name == "count") {
      const Value* x = a.get("value", 0);
      if (!x) fail("list.count() needs an argument");
      return Value(static_cast<int64_t>(std::count_if(obj.arr().begin(), obj.arr().end(), [&](const Value& e) { return e.equals(*x); })));
    }
  }
  return std::nullopt;
}

// ---- globals -----------------------------------------------------------------------------------

Value global_function(const std::string& name) {
  if (name == "raise_exception") {
    return Value(Function([](const CallArgs& a) -> Value {
      const Value* m = a.get("message", 0);
      throw TemplateRaise(m ? m->to_output() : std::string("raise_exception() called"));
    }));
  }
  if (name == "range") {
    return Value(Function([](const CallArgs& a) -> Value {
      if (a.pos.empty() || a.pos.size() > 3) fail("range() expects 1 to 3 integer arguments");
      auto at = [&](size_t i) { return *opt_int(&a.pos[i]); };
      int64_t start = a.pos.size() > 1 ? at(0) : 0, stop = a.pos.size() > 1 ? at(1) : at(0);
      int64_t step = a.pos.size() > 2 ? at(2) : 1;
      if (step == 0) fail("range() arg 3 must not be zero");
      Array out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() >= 1'000'000) fail("range() too large (limit 1000000 items)");
        out.emplace_back(i);
      }
      return Value(std::move(out));
    }));
  }
  if (name == "namespace" || name == "dict") {
    bool ns = name == "namespace";
    return Value(Function([ns](const CallArgs& a) -> Value {
      Object o;
      o.is_namespace = ns;
      for (const Value& p : a.pos) {
        if (!p.is_object()) fail("namespace()/dict() positional argument must be a mapping");
        for (const auto& [k, v] : p.obj().items) o.set(k, v);
      }
      for (const auto& [k, v] : a.kw) o.set(k, v);
      return Value(std::move(o));
    }));
  }
  if (name == "strftime_now") {
    return Value(Function([](const CallArgs& a) -> Value {
      auto f = opt_str(a.get("format", 0));
      if (!f) fail("strftime_now() needs a format string");
      std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      char buf[256];
      size_t n = std::strftime(buf, sizeof buf, f->c_str(), &tm);
      return Value(std::string(buf, n));
    }));
  }
  return Value::undefined(name);
}

}  // namespace tritium::tmpl
