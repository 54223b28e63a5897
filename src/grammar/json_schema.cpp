#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>

#include "grammar/number_range.h"
#include "grammar/regex.h"

namespace tritium::grammar {

using nlohmann::json;

namespace {

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "strict", "name",
                                          "$defs", "definitions", "additionalProperties", "format", "nullable",
                                          "type", "properties", "required", "items", "prefixItems", "minItems",
                                          "maxItems", "enum", "const", "minLength", "maxLength", "pattern", "anyOf",
                                          "allOf", "$ref", "discriminator", "minimum", "maximum",
                                          "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
  return k;
}

constexpr std::array<const char*, 5> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                                        "multipleOf"};

bool has_number_keywords(const json& s) {
  return std::any_of(kNumberKeywords.begin(), kNumberKeywords.end(), [&](const char* k) { return s.contains(k); });
}

// The value of numeric keyword k as the decimal the schema writes: a double is dumped as its shortest round-trip
// text, so 0.1 reads back as exactly 0.1.
Decimal keyword_number(const json& s, const char* k) {
  const json& v = s[k];
  if (!v.is_number() || (v.is_number_float() && !std::isfinite(v.get<double>())))
    throw GrammarError(fmt::format("json schema: '{}' must be a finite number", k));
  return Decimal::parse(v.dump());
}

// Draft 4 writes an exclusive bound as minimum / maximum with exclusiveMinimum / exclusiveMaximum: true.
bool draft4_exclusive(const json& s, const char* k, const char* bound) {
  if (!s.contains(k) || !s[k].is_boolean()) return false;
  if (s[k].get<bool>() && !s.contains(bound))
    throw GrammarError(fmt::format("json schema: '{}': true (draft 4) needs '{}'", k, bound));
  return s[k].get<bool>();
}

// The numeric keywords of s: the tightest of the inclusive and exclusive bounds, and multipleOf (> 0).
NumberConstraints number_constraints(const json& s) {
  NumberConstraints c;
  const bool excl_min = draft4_exclusive(s, "exclusiveMinimum", "minimum");
  const bool excl_max = draft4_exclusive(s, "exclusiveMaximum", "maximum");
  if (s.contains("minimum")) c.tighten_lower({keyword_number(s, "minimum"), !excl_min});
  if (s.contains("maximum")) c.tighten_upper({keyword_number(s, "maximum"), !excl_max});
  if (s.contains("exclusiveMinimum") && !s["exclusiveMinimum"].is_boolean())
    c.tighten_lower({keyword_number(s, "exclusiveMinimum"), false});
  if (s.contains("exclusiveMaximum") && !s["exclusiveMaximum"].is_boolean())
    c.tighten_upper({keyword_number(s, "exclusiveMaximum"), false});
  if (s.contains("multipleOf")) {
    c.multiple_of = keyword_number(s, "multipleOf");
    if (c.multiple_of->neg || compare(*c.multiple_of, Decimal{}) == 0)
      throw GrammarError("json schema: 'multipleOf' must be greater than 0");
  }
  return c;
}

// Whether an enum / const member satisfies the numeric keywords (which constrain numbers only).
bool number_member_ok(const json& v, const NumberConstraints& c) {
  return c.empty() || !v.is_number() || satisfies(Decimal::parse(v.dump()), c);
}

const char* const kIpv4 =
    "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";

// RFC 4291 section 2.2 text forms, as RFC 3986's IPv6address: eight groups of 1-4 hex digits, or "::" standing
// for one run of zero groups with at most seven groups around it, the last 32 bits optionally an IPv4 address.
// Alternative k has at most k groups before "::" and the rest of the eight after it.
std::string ipv6_regex() {
  const std::string h16 = "[0-9A-Fa-f]{1,4}", ls32 = "(" + h16 + ":" + h16 + "|" + kIpv4 + ")";
  auto groups = [&](int n) { return "(" + h16 + ":){" + std::to_string(n) + "}"; };
  std::vector<std::string> alts = {groups(6) + ls32};
  for (int before = 0; before <= 7; ++before) {
    std::string a;
    if (before == 1) a = "(" + h16 + ")?";
    if (before > 1) a = "(" + h16 + "(:" + h16 + "){0," + std::to_string(before - 1) + "})?";
    a += "::";
    if (before <= 4) a += groups(5 - before) + ls32;
    else if (before == 5) a += ls32;
    else if (before == 6) a += h16;
    alts.push_back(a);
  }
  std::string re;
  for (const std::string& a : alts) {
    if (!re.empty()) re += '|';
    re += '(';
    re += a;
    re += ')';
  }
  return re;
}

// The string formats compiled into the automaton, as regexes of grammar/regex.h (JSON Schema 2020-12 section 7.3
// with RFC 3339, 1123, 4291, 4122). Subsets where a full check is not regular or costs too many states: dates
// stop at day 28 of any month, emails are a plain local part @ 2-5 labels, hostnames have 1-6 labels of 1-41
// characters (within RFC 1123's 253), durations take any digit count.
std::map<std::string, std::string> format_regexes() {
  const std::string time = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])";
  const std::string n = "[0-9]+", label = "[A-Za-z0-9]([A-Za-z0-9-]{0,39}[A-Za-z0-9])?";
  // RFC 3339 appendix A: dur-date [dur-time] | dur-time | dur-week, each unit optional only from the left.
  const std::string dur_time = "T(" + n + "H(" + n + "M(" + n + "S)?)?|" + n + "M(" + n + "S)?|" + n + "S)";
  const std::string dur_date = "(" + n + "D|" + n + "M(" + n + "D)?|" + n + "Y(" + n + "M(" + n + "D)?)?)(" + dur_time + ")?";
  return {{"date", date},
          {"time", time},
          {"date-time", date + "T" + time},
          {"duration", "P(" + dur_date + "|" + dur_time + "|" + n + "W)"},
          {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
          {"email", "[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\\.[A-Za-z0-9-]{1,63}){1,4}"},
          {"hostname", label + "(\\." + label + "){0,5}"},
          {"ipv4", kIpv4},
          {"ipv6", ipv6_regex()}};
}

class Compiler {
 public:
  Compiler(const json& root, const JsonSchemaOptions& o, NfaBuilder& b) : root_(root), o_(o), b_(b) {}

  Frag value(const json& s, int depth) {
    if (depth > o_.max_nesting) throw GrammarError(fmt::format("json schema: nested deeper than {} levels", o_.max_nesting));
    if (s.is_boolean()) return s.get<bool>() ? any_value(o_.any_json_depth) : b_.never();
    if (!s.is_object()) throw GrammarError("json schema: a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items())
      if (!annotations().count(k)) throw GrammarError(fmt::format("json schema: keyword '{}' is not supported", k));
    if (s.contains("$ref")) return ref(s, depth);
    if (s.contains("allOf")) {
      const json& a = s["allOf"];
      if (!a.is_array() || a.size() != 1) throw GrammarError("json schema: 'allOf' is supported with one schema only");
      json merged = s;
      merged.erase("allOf");
      for (const char* k : kNumberKeywords)
        if (a[0].is_object() && merged.contains(k) && a[0].contains(k) && merged[k] != a[0][k])
          throw GrammarError(fmt::format("json schema: 'allOf' with '{}' both outside and inside is not supported", k));
      if (a[0].is_boolean()) return a[0].get<bool>() ? value(merged, depth + 1) : b_.never();
      if (!a[0].is_object()) throw GrammarError("json schema: a schema must be an object or a boolean");
      merged.update(a[0]);
      return value(merged, depth + 1);
    }
    if (s.contains("anyOf")) {
      const json& a = s["anyOf"];
      if (!a.is_array() || a.empty()) throw GrammarError("json schema: 'anyOf' must be a non-empty array");
      json base = s;
      base.erase("anyOf");
      std::vector<Frag> alts;
      for (const json& alt : a) {
        json m = base;
        if (!alt.is_object()) {
          alts.push_back(value(alt, depth + 1));
          continue;
        }
        m.update(alt);
        alts.push_back(value(m, depth + 1));
      }
      return b_.alt(alts);
    }
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) throw GrammarError("json schema: 'enum' must be a non-empty array");
      const NumberConstraints c = number_constraints(s);
      std::vector<Frag> alts;
      for (const json& v : e)
        if (number_member_ok(v, c)) alts.push_back(b_.literal(v.dump()));
      return b_.alt(alts);
    }
    if (s.contains("const"))
      return number_member_ok(s["const"], number_constraints(s)) ? b_.literal(s["const"].dump()) : b_.never();
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array())
        for (const json& x : t) types.push_back(x.is_string() ? x.get<std::string>() : "");
      else throw GrammarError("json schema: 'type' must be a string or an array of strings");
    } else if (s.contains("properties") || s.contains("additionalProperties")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems")) {
      types.push_back("array");
    } else if (s.contains("pattern") || s.contains("minLength") || s.contains("maxLength")) {
      types.push_back("string");
    } else if (has_number_keywords(s)) {
      types.push_back("number");
    } else {
      return any_value(o_.any_json_depth);
    }
    if (s.contains("nullable")) {
      if (!s["nullable"].is_boolean()) throw GrammarError("json schema: 'nullable' must be a boolean");
      if (s["nullable"].get<bool>()) types.push_back("null");
    }
    std::vector<Frag> alts;
    for (const std::string& t : types) alts.push_back(typed(s, t, depth));
    return b_.alt(alts);
  }

  Frag any_value(int depth) {
    std::vector<Frag> alts = {string_any(), number(false), b_.literal("true"), b_.literal("false"),
                              b_.literal("null")};
    if (depth > 0) {
      alts.push_back(object_of([&] { return any_value(depth - 1); }));
      alts.push_back(array_of([&] { return any_value(depth - 1); }, 0, -1));
    }
    return b_.alt(alts);
  }

  Frag object_of(const std::function<Frag()>& val) {
    auto member = [&] { return b_.seq({string_any(), colon(), val()}); };
    return b_.seq({b_.literal("{"),
                   b_.alt({b_.empty(), b_.seq({member(), b_.repeat([&] { return b_.seq({comma(), member()}); }, 0, -1)})}),
                   b_.literal("}")});
  }

  Frag array_of(const std::function<Frag()>& item, int min, int max) {
    if (max == 0) return b_.literal("[]");
    Frag items = b_.seq({item(), b_.repeat([&] { return b_.seq({comma(), item()}); }, std::max(min - 1, 0),
                                          max < 0 ? -1 : max - 1)});
    return b_.seq({b_.literal("["), min == 0 ? b_.alt({b_.empty(), items}) : items, b_.literal("]")});
  }

 private:
  Frag ws() { return b_.alt({b_.empty(), b_.literal(" ")}); }
  Frag colon() { return b_.seq({b_.literal(":"), ws()}); }
  Frag comma() { return b_.seq({b_.literal(","), ws()}); }

  Frag string_char() {
    // A code point other than '"', '\\' and controls, or an escape (RFC 8259 section 7).
    return b_.alt({b_.codepoints({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}}),
                   b_.seq({b_.literal("\\"), b_.alt({b_.literal("\""), b_.literal("\\"), b_.literal("/"), b_.literal("b"),
                                                     b_.literal("f"), b_.literal("n"), b_.literal("r"), b_.literal("t")})})});
  }
  Frag string_any() { return b_.seq({b_.literal("\""), b_.repeat([&] { return string_char(); }, 0, -1), b_.literal("\"")}); }

  Frag number(bool integer) {
    // Bounded digit counts keep every number finite as a double.
    const char* re = integer ? "-?(0|[1-9][0-9]{0,15})" : "-?(0|[1-9][0-9]{0,15})(\\.[0-9]{1,15})?([eE][+-]?[1-9][0-9]?)?";
    return Regex::parse(re).build(b_, false);
  }

  static int count_kw(const json& s, const char* k, int dflt) {
    if (!s.contains(k)) return dflt;
    const json& v = s[k];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100000)
      throw GrammarError(fmt::format("json schema: '{}' must be a non-negative integer", k));
    return static_cast<int>(v.get<int64_t>());
  }

  Frag string_schema(const json& s) {
    const int mn = count_kw(s, "minLength", 0), mx = count_kw(s, "maxLength", -1);
    if (mx >= 0 && mx < mn) return b_.never();
    if (s.contains("pattern")) {
      if (s.contains("minLength") || s.contains("maxLength"))
        throw GrammarError("json schema: 'pattern' together with 'minLength' / 'maxLength' is not supported");
      if (!s["pattern"].is_string()) throw GrammarError("json schema: 'pattern' must be a string");
      return b_.seq({b_.literal("\""), Regex::parse(s["pattern"].get<std::string>()).build(b_, true), b_.literal("\"")});
    }
    static const std::map<std::string, std::string> formats = format_regexes();
    if (s.contains("format") && s["format"].is_string()) {
      auto it = formats.find(s["format"].get<std::string>());
      if (it != formats.end() && !s.contains("minLength") && !s.contains("maxLength"))
        return b_.seq({b_.literal("\""), Regex::parse(it->second).build(b_, false), b_.literal("\"")});
    }
    return b_.seq({b_.literal("\""), b_.repeat([&] { return string_char(); }, mn, mx), b_.literal("\"")});
  }

  Frag object_schema(const json& s, int depth) {
    const json props = s.value("properties", json::object());
    if (!props.is_object()) throw GrammarError("json schema: 'properties' must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) throw GrammarError("json schema: 'required' must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string() || !props.contains(r.get<std::string>()))
          throw GrammarError(fmt::format("json schema: required property {} is not in 'properties'", r.dump()));
        required.insert(r.get<std::string>());
      }
    }
    if (props.empty()) {
      const json ap = s.value("additionalProperties", json(true));
      if (ap.is_boolean() && !ap.get<bool>()) return b_.literal("{}");
      return object_of([&] { return ap.is_boolean() ? any_value(o_.any_json_depth - 1) : value(ap, depth + 1); });
    }
    // Members in key order; node (i, any) = before property i, with or without a member written so far.
    std::vector<std::pair<std::string, const json*>> list;
    for (const auto& [k, v] : props.items()) list.emplace_back(k, &v);
    const size_t n = list.size();
    std::vector<std::array<Frag, 2>> node(n + 1);
    for (size_t i = 0; i <= n; ++i)
      for (int e = 0; e < 2; ++e) node[i][e] = b_.empty();
    for (size_t i = 0; i < n; ++i) {
      const bool req = required.count(list[i].first) > 0;
      for (int e = 0; e < 2; ++e) {
        Frag member = b_.seq({e ? comma() : b_.empty(), b_.literal(json(list[i].first).dump()), colon(),
                              value(*list[i].second, depth + 1)});
        if (member.never) {
          if (req) return b_.never();
        } else {
          b_.connect(node[i][e], member);
          b_.connect(member, node[i + 1][1]);
        }
        if (!req) b_.connect(node[i][e], node[i + 1][e]);
      }
    }
    const Frag open = b_.literal("{"), close = b_.literal("}");
    b_.connect(open, node[0][0]);
    b_.connect(node[n][0], close);
    b_.connect(node[n][1], close);
    return Frag{open.in, close.out, false};
  }

  Frag array_schema(const json& s, int depth) {
    const int mn = count_kw(s, "minItems", 0), mx = count_kw(s, "maxItems", -1);
    if (mx >= 0 && mx < mn) return b_.never();
    if (s.contains("prefixItems")) {
      const json& pre = s["prefixItems"];
      if (!pre.is_array()) throw GrammarError("json schema: 'prefixItems' must be an array");
      const bool more = !(s.contains("items") && s["items"].is_boolean() && !s["items"].get<bool>());
      if (more || s.contains("minItems") || s.contains("maxItems"))
        throw GrammarError("json schema: 'prefixItems' is supported as a fixed tuple only (items: false, no min/maxItems)");
      if (pre.empty()) return b_.literal("[]");
      std::vector<Frag> parts = {b_.literal("[")};
      for (size_t i = 0; i < pre.size(); ++i) {
        if (i) parts.push_back(comma());
        parts.push_back(value(pre[i], depth + 1));
      }
      parts.push_back(b_.literal("]"));
      return b_.seq(parts);
    }
    const json items = s.value("items", json(true));
    Frag probe = items.is_boolean() && !items.get<bool>() ? b_.never() : b_.empty();
    if (probe.never) return mn == 0 ? b_.literal("[]") : b_.never();
    auto item = [&] { return items.is_boolean() ? any_value(o_.any_json_depth - 1) : value(items, depth + 1); };
    return array_of(item, mn, mx);
  }

  Frag typed(const json& s, const std::string& t, int depth) {
    if (t == "string") return string_schema(s);
    if (t == "integer") return has_number_keywords(s) ? integer_in_range(b_, number_constraints(s)) : number(true);
    if (t == "number") return has_number_keywords(s) ? number_in_range(b_, number_constraints(s)) : number(false);
    if (t == "boolean") return b_.alt({b_.literal("true"), b_.literal("false")});
    if (t == "null") return b_.literal("null");
    if (t == "object") return object_schema(s, depth);
    if (t == "array") return array_schema(s, depth);
    throw GrammarError(fmt::format("json schema: unknown type '{}'", t));
  }

  Frag ref(const json& s, int depth) {
    const json& r = s["$ref"];
    if (!r.is_string()) throw GrammarError("json schema: '$ref' must be a string");
    const std::string p = r.get<std::string>();
    if (p.empty() || p[0] != '#') throw GrammarError(fmt::format("json schema: only local $ref ('#...') is supported, got '{}'", p));
    const json* target = &root_;
    if (p.size() > 1) {
      try {
        target = &root_.at(json::json_pointer(p.substr(1)));
      } catch (const json::exception&) {
        throw GrammarError(fmt::format("json schema: $ref '{}' does not resolve", p));
      }
    }
    const int seen = static_cast<int>(std::count(stack_.begin(), stack_.end(), p));
    if (seen >= o_.max_ref_depth) return b_.never();  // recursion cut here: alternatives without it remain
    stack_.push_back(p);
    json merged = *target;
    if (merged.is_object())
      for (const auto& [k, v] : s.items())
        if (k != "$ref") merged[k] = v;
    Frag f = value(merged, depth + 1);
    stack_.pop_back();
    return f;
  }

  const json& root_;
  JsonSchemaOptions o_;
  NfaBuilder& b_;
  std::vector<std::string> stack_;
};

// c.value(schema, depth), with an exception of the JSON library (a keyword's value of a type the compiler's checks
// do not expect) turned into a GrammarError named by `what`.
Frag compile_value(Compiler& c, const json& schema, int depth, const std::string& what) {
  try {
    return c.value(schema, depth);
  } catch (const json::exception& e) {
    throw GrammarError(fmt::format("{}: {}", what, e.what()));
  }
}

}  // namespace

Nfa compile_json_schema(const json& schema, const JsonSchemaOptions& opts) {
  NfaBuilder b(opts.max_states);
  Compiler c(schema, opts, b);
  const Frag f = compile_value(c, schema, 0, "json schema");
  if (f.never) throw GrammarError("json schema: no JSON value satisfies the schema (within the $ref depth limit)");
  return b.finish(f);
}

namespace {
// {"name": "<name>", "<args_key>": <arguments>} for any one of `tools`.
Frag any_tool_call(NfaBuilder& b, const std::vector<std::pair<std::string, json>>& tools, const std::string& args_key,
                   const JsonSchemaOptions& opts) {
  std::vector<Frag> calls;
  for (const auto& [name, params] : tools) {
    const json schema = params.is_null() ? json{{"type", "object"}} : params;
    Compiler c(schema, opts, b);  // each tool's parameters are the root of their own $refs
    const Frag args = compile_value(c, schema, 1, fmt::format("tools: parameters of '{}'", name));
    calls.push_back(b.seq({b.literal("{\"name\": " + json(name).dump() + ", " + json(args_key).dump() + ": "),
                           args, b.literal("}")}));
  }
  return b.alt(calls);
}
}  // namespace

Nfa compile_tool_call(const std::vector<std::pair<std::string, json>>& tools, const std::string& prefix,
                      const std::string& args_key, const std::string& suffix, const JsonSchemaOptions& opts) {
  if (tools.empty()) throw GrammarError("tools: no function to call");
  NfaBuilder b(opts.max_states);
  const Frag call = any_tool_call(b, tools, args_key, opts);
  return b.finish(b.seq({b.literal(prefix), call, b.literal(suffix)}));
}

Nfa compile_tool_call_list(const std::vector<std::pair<std::string, json>>& tools, const std::string& args_key,
                           int max_calls, const JsonSchemaOptions& opts) {
  if (tools.empty()) throw GrammarError("tools: no function to call");
  if (max_calls == 0 || max_calls < -1) throw GrammarError("tools: the number of calls must be at least 1");
  NfaBuilder b(opts.max_states);
  const Frag first = any_tool_call(b, tools, args_key, opts);
  const Frag more = b.repeat([&] { return b.seq({b.literal(", "), any_tool_call(b, tools, args_key, opts)}); }, 0,
                             max_calls < 0 ? -1 : max_calls - 1);
  return b.finish(b.seq({b.literal("["), first, more, b.literal("]")}));
}

Nfa compile_json_object(const JsonSchemaOptions& opts) {
  const json any = json::object();
  NfaBuilder b(opts.max_states);
  Compiler c(any, opts, b);
  return b.finish(c.object_of([&] { return c.any_value(opts.any_json_depth - 1); }));
}

Nfa compile_regex(const std::string& pattern, size_t max_states) {
  NfaBuilder b(max_states);
  return b.finish(Regex::parse(pattern).build(b, false));
}

Nfa compile_choice(const std::vector<std::string>& choices, size_t max_states) {
  if (choices.empty()) throw GrammarError("guided_choice: the list of choices is empty");
  NfaBuilder b(max_states);
  std::vector<Frag> alts;
  for (const std::string& c : choices) alts.push_back(b.literal(c));
  return b.finish(b.alt(alts));
}

}  // namespace tritium::grammar
