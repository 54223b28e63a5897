// JSON Schema validation keywords compiled into the automaton (numeric ranges, multipleOf, formats, pattern,
// minItems / maxItems), in the manner of the JSON Schema Test Suite: for each schema, listed valid and invalid
// instances run on the NFA; every short instance enumerated, acceptance equal to validity; and random walks through
// the token masks, each output checked by an independent validator (nlohmann parse, exact decimal comparison of the
// number text, inet_pton for IP addresses, std::regex for patterns).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/token_grammar.h"

using namespace tritium;
using namespace tritium::grammar;
using nlohmann::json;
using test::nfa_accepts;

namespace {

using i128 = __int128;

// The value of JSON number text times 10^18, exactly; nullopt for text that is not a plain decimal (exponent) or
// does not fit (more than 19 integer or 18 fraction digits).
std::optional<i128> scaled(const std::string& text) {
  static const std::regex number(R"((-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?)");
  std::smatch m;
  if (!std::regex_match(text, m, number) || m[2].length() > 19 || m[3].length() > 18) return std::nullopt;
  const std::string digits = m[2].str() + m[3].str() + std::string(18 - static_cast<size_t>(m[3].length()), '0');
  i128 v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  return m[1].length() ? -v : v;
}

i128 scaled_keyword(const json& s, const char* k) {
  const std::optional<i128> v = scaled(s[k].dump());
  if (!v) throw std::runtime_error(std::string("test schema: unusable ") + k);
  return *v;
}

// Whether the number whose text is `raw` satisfies the numeric keywords of s (draft 2020 and draft 4 forms).
bool number_valid(const json& s, const std::string& raw) {
  const std::optional<i128> v = scaled(raw);
  if (!v) return false;
  const i128 one = scaled("1").value();
  if (s.value("type", "") == "integer" && *v % one != 0) return false;
  const bool d4_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() && s["exclusiveMinimum"];
  const bool d4_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() && s["exclusiveMaximum"];
  if (s.contains("minimum") && (d4_min ? *v <= scaled_keyword(s, "minimum") : *v < scaled_keyword(s, "minimum")))
    return false;
  if (s.contains("maximum") && (d4_max ? *v >= scaled_keyword(s, "maximum") : *v > scaled_keyword(s, "maximum")))
    return false;
  if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() && *v <= scaled_keyword(s, "exclusiveMinimum"))
    return false;
  if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() && *v >= scaled_keyword(s, "exclusiveMaximum"))
    return false;
  return !s.contains("multipleOf") || *v % scaled_keyword(s, "multipleOf") == 0;
}

bool format_valid(const std::string& format, const std::string& v) {
  unsigned char addr[16];
  if (format == "ipv4") return inet_pton(AF_INET, v.c_str(), addr) == 1;
  if (format == "ipv6") return inet_pton(AF_INET6, v.c_str(), addr) == 1;
  if (format == "uuid") return std::regex_match(v, std::regex("[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"));
  if (format == "hostname") {
    static const std::regex label("[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?");
    if (v.empty() || v.size() > 253) return false;
    size_t start = 0;
    for (size_t dot = v.find('.'); ; dot = v.find('.', start)) {
      const std::string l = v.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (l.size() > 63 || !std::regex_match(l, label)) return false;
      if (dot == std::string::npos) return true;
      start = dot + 1;
    }
  }
  if (format == "duration") {  // RFC 3339 appendix A, written out independently
    static const std::regex d(
        "P(((\\d+D)|(\\d+M(\\d+D)?)|(\\d+Y(\\d+M(\\d+D)?)?))(T((\\d+H(\\d+M(\\d+S)?)?)|(\\d+M(\\d+S)?)|(\\d+S)))?"
        "|T((\\d+H(\\d+M(\\d+S)?)?)|(\\d+M(\\d+S)?)|(\\d+S))|\\d+W)");
    return std::regex_match(v, d);
  }
  return true;  // other formats: not checked here
}

// An independent validator of the keywords these tests use; `raw` is v's text as written (for exact numbers).
bool valid(const json& s, const json& v, const std::string& raw) {
  if (s.contains("enum")) {
    bool in = false;
    for (const json& e : s["enum"]) in = in || e == v;
    if (!in) return false;
  }
  const std::string type = s.value("type", v.is_number() ? "number" : "");
  if (v.is_number()) return (type == "number" || type == "integer") && number_valid(s, raw);
  if (v.is_string()) {
    if (type != "string" && !s.contains("enum")) return false;
    const std::string str = v.get<std::string>();
    if (s.contains("pattern")) {
      std::string p = s["pattern"];
      if (!p.empty() && p.front() == '^') p.erase(0, 1);
      if (!p.empty() && p.back() == '$') p.pop_back();
      if (!std::regex_match(str, std::regex(p))) return false;
    }
    return !s.contains("format") || format_valid(s["format"], str);
  }
  if (v.is_array()) {
    if (type != "array") return false;
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    for (const json& item : v)
      if (s.contains("items") && !valid(s["items"], item, item.dump())) return false;
    return true;
  }
  return false;
}

bool valid_text(const json& s, const std::string& text) {
  try {
    return valid(s, json::parse(text), text);
  } catch (const json::parse_error&) {
    return false;
  }
}

struct Case {
  const char* schema;
  std::vector<std::string> valid, invalid;
  /// Valid instances the automaton does not write (its documented subset): "-0", "1.0" for integers, exponents.
  std::vector<std::string> unwritten = {};
};

const std::vector<Case>& cases() {
  static const std::vector<Case> k = {
      {R"({"type": "integer", "minimum": 1, "maximum": 7})",
       {"1", "2", "6", "7"},
       {"0", "8", "-1", "01", "007", "-0", "7.5", "+1", "", "10", "-7", "\"1\""},
       {"1.0", "1e0", "1 "}},
      {R"({"type": "integer", "minimum": -5, "maximum": 5})",
       {"-5", "-4", "-1", "0", "1", "5"},
       {"-6", "6", "-05", "00", "--1", "-", "55", "-50"},
       {"-0"}},
      {R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10})", {"1", "9"}, {"0", "10", "-1", "11"}},
      {R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 3, "exclusiveMaximum": true})",
       {"1", "2"},
       {"0", "3"}},
      {R"({"type": "integer", "minimum": 1.5, "maximum": 4.5})", {"2", "3", "4"}, {"1", "5"}},
      {R"({"type": "integer", "minimum": -9223372036854775808, "maximum": 9223372036854775807})",
       {"-9223372036854775808", "9223372036854775807", "0", "-1", "1000000000000000000"},
       {"9223372036854775808", "-9223372036854775809", "10000000000000000000", "99999999999999999999"}},
      {R"({"type": "integer", "minimum": 9223372036854775806})",
       {"9223372036854775806", "9223372036854775807"},
       {"9223372036854775805", "0", "922337203685477580"},
       {"9223372036854775808"}},  // valid, beyond int64
      {R"({"type": "integer", "maximum": -100})",
       {"-100", "-101", "-9223372036854775808", "-1000"},
       {"-99", "0", "100", "-10"},
       {"-9223372036854775809"}},
      {R"({"type": "integer", "multipleOf": 3})",
       {"0", "3", "-3", "999", "9223372036854775806", "-9223372036854775806"},
       {"1", "-4", "9223372036854775807", "1000"}},
      {R"({"type": "integer", "multipleOf": 7, "minimum": -20, "maximum": 20})",
       {"-14", "-7", "0", "7", "14"},
       {"-21", "21", "1", "-13", "28"}},
      {R"({"type": "integer", "multipleOf": 1000000, "minimum": 0, "maximum": 5000000})",
       {"0", "1000000", "5000000"},
       {"500000", "6000000", "-1000000", "1000001"}},
      {R"({"type": "integer", "multipleOf": 2.5})", {"0", "5", "-10", "25"}, {"2", "3", "-7"}},
      {R"({"type": "number", "minimum": 0, "maximum": 1.5})",
       {"0", "1", "0.5", "0.0", "1.0", "1.4", "1.4999", "1.5", "1.50", "1.500"},
       {"1.51", "1.6", "2", "-0.5", "00", "-0.1", "1.", ".5", "01.5", "1.5000000000000001"},
       {"-0", "-0.0", "1e0", "0.15E1"}},
      {R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})",
       {"0.5", "0.001", "0.999"},
       {"0", "1", "1.0", "-0.1", "1.001"},
       {}},
      {R"({"type": "number", "minimum": -2.5, "maximum": -0.5})",
       {"-2.5", "-2.49", "-1", "-0.5", "-0.50", "-2.0"},
       {"-2.51", "-0.4", "0", "-3", "0.5"}},
      {R"({"type": "number", "minimum": 0.1})",
       {"0.1", "0.10", "0.11", "1", "123456.5"},
       {"0.09999", "0", "-1", "0.0"}},
      {R"({"type": "number", "maximum": -0.001})", {"-0.001", "-5", "-0.0011"}, {"-0.0009", "0", "-0.0001"}},
      {R"({"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 100})",
       {"0", "0.01", "0.5", "0.50", "99.99", "100", "100.0", "100.00"},
       {"0.001", "0.015", "100.01", "-0.01", "101"}},
      {R"({"type": "number", "multipleOf": 5, "maximum": 12})",
       {"10", "10.0", "-5", "5", "0"},
       {"12", "15", "7", "2.5"}},
      {R"({"maximum": 3})", {"3", "2.5", "-1"}, {"4", "3.01"}},
      {R"({"enum": [1, 5, 10, "x"], "minimum": 3})", {"5", "10", "\"x\""}, {"1", "3"}},
      {R"({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "minItems": 1, "maxItems": 3})",
       {"[0]", "[1,2,3]", "[9, 0]"},
       {"[]", "[1,2,3,4]", "[10]", "[-1]"}},
      {R"({"type": "string", "pattern": "^[a-z]{2,3}$"})", {"\"ab\"", "\"abc\""}, {"\"a\"", "\"abcd\"", "\"AB\""}},
      {R"({"type": "string", "format": "ipv4"})",
       {"\"192.168.0.1\"", "\"0.0.0.0\"", "\"255.255.255.255\""},
       {"\"256.1.1.1\"", "\"1.2.3\"", "\"01.2.3.4\""}},
      {R"({"type": "string", "format": "ipv6"})",
       {"\"::\"", "\"::1\"", "\"1::\"", "\"2001:db8::ff00:42:8329\"", "\"fe80::1:2:3:4:5:6\"",
        "\"1:2:3:4:5:6:7:8\"", "\"::ffff:192.0.2.1\"", "\"1:2:3:4:5:6:1.2.3.4\"", "\"1:2:3:4:5:6:7::\"",
        "\"ABCD:ef01::\""},
       {"\"1:2:3:4:5:6:7:8:9\"", "\"1::2::3\"", "\"12345::\"", "\"1:2:3:4:5:6:7\"", "\":1\"", "\"1:2:3:4:5:6:7::8\"",
        "\"1:2:3:4:5:6:7:1.2.3.4\"", "\"::g\"", "\"\""}},
      {R"({"type": "string", "format": "hostname"})",
       {"\"example.com\"", "\"a\"", "\"a-b.c1\"", "\"x1.y2.z3\""},
       {"\"-a.com\"", "\"a-.com\"", "\"a..b\"", "\"\"", "\"a_b\"", "\"a.\""}},
      {R"({"type": "string", "format": "duration"})",
       {"\"P1D\"", "\"PT1H\"", "\"P1Y2M3DT4H5M6S\"", "\"P2W\"", "\"PT36H\"", "\"P1M\"", "\"PT1M\"", "\"P1Y\""},
       {"\"P\"", "\"PT\"", "\"P1H\"", "\"1D\"", "\"P1D2Y\"", "\"P1W2D\"", "\"P1DT\"", "\"PT1S2M\""}},
      {R"({"type": "string", "format": "uuid"})",
       {"\"123e4567-e89b-12d3-a456-426614174000\""},
       {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400\""}},
  };
  return k;
}

}  // namespace

TEST(GrammarJsonSchemaKeywords, ListedInstances) {
  for (const Case& c : cases()) {
    const json s = json::parse(c.schema);
    const Nfa nfa = compile_json_schema(s);
    for (const std::string& v : c.valid) {
      EXPECT_TRUE(valid_text(s, v)) << "the table is wrong: " << c.schema << " " << v;
      EXPECT_TRUE(nfa_accepts(nfa, v)) << c.schema << " should accept " << v;
    }
    for (const std::string& v : c.invalid) {
      EXPECT_FALSE(valid_text(s, v)) << "the table is wrong: " << c.schema << " " << v;
      EXPECT_FALSE(nfa_accepts(nfa, v)) << c.schema << " should reject " << v;
    }
    for (const std::string& v : c.unwritten) EXPECT_FALSE(nfa_accepts(nfa, v)) << c.schema << " writes " << v;
  }
}

TEST(GrammarJsonSchemaKeywords, TokenGrammarAgreesWithNfa) {
  for (const Case& c : cases()) {
    const json s = json::parse(c.schema);
    for (const auto* list : {&c.valid, &c.invalid})
      for (const std::string& v : *list)
        EXPECT_EQ(test::matches(compile_json_schema(s), v), nfa_accepts(compile_json_schema(s), v)) << c.schema << v;
  }
}

TEST(GrammarJsonSchemaKeywords, EveryShortIntegerIsReachable) {
  const char* schemas[] = {
      R"({"type": "integer", "minimum": -17, "maximum": 123})",
      R"({"type": "integer", "exclusiveMinimum": -17.5, "exclusiveMaximum": 99})",
      R"({"type": "integer", "minimum": 0})",
      R"({"type": "integer", "maximum": -3})",
      R"({"type": "integer", "multipleOf": 7, "minimum": -100, "maximum": 250})",
      R"({"type": "integer", "multipleOf": 12, "minimum": -1000})",
      R"({"type": "integer", "multipleOf": 13})",
      R"({"type": "integer", "multipleOf": 0.75, "maximum": 500})",
      R"({"type": "integer", "multipleOf": 10001, "minimum": -30003, "maximum": 30003})",
      R"({"type": "number", "multipleOf": 4, "minimum": -50.5, "exclusiveMaximum": 60})",
  };
  std::vector<std::string> texts;
  for (int n = -1200; n <= 1200; ++n) texts.push_back(std::to_string(n));
  for (int k = -3; k <= 3; ++k)
    for (int d : {-1, 0, 1}) texts.push_back(std::to_string(k * 10001 + d));
  for (const char* text : schemas) {
    const json s = json::parse(text);
    const Nfa nfa = compile_json_schema(s);
    int accepted = 0;
    for (const std::string& t : texts) {
      ASSERT_EQ(nfa_accepts(nfa, t), valid_text(s, t)) << text << " on " << t;
      accepted += nfa_accepts(nfa, t);
    }
    EXPECT_GT(accepted, 0) << text;
  }
}

TEST(GrammarJsonSchemaKeywords, EveryShortDecimalIsReachable) {
  const char* schemas[] = {
      R"({"type": "number", "minimum": -1.25, "maximum": 2.5})",
      R"({"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": 0.5})",
      R"({"type": "number", "minimum": 0.05})",
      R"({"type": "number", "exclusiveMaximum": -0.3})",
      R"({"type": "number", "minimum": 1.2, "maximum": 1.27})",
      R"({"type": "number", "multipleOf": 0.1, "minimum": -1, "maximum": 1})",
      R"({"type": "number", "multipleOf": 0.01, "exclusiveMinimum": -0.5})",
      R"({"type": "number", "multipleOf": 2, "minimum": -3.5, "maximum": 3.5})",
  };
  // Every text I[.F] with |I| <= 4 and 0-2 fraction digits, with and without "-", and a few malformed ones.
  std::vector<std::string> texts = {"-0", "-0.0", "00", "01.5", "1.", ".5", "-", "1e1", "0.5e0"};
  for (int i = 0; i <= 4; ++i) {
    for (const std::string sign : {"", "-"}) {
      const std::string head = sign + std::to_string(i);
      texts.push_back(head);
      for (int f = 0; f < 10; ++f) texts.push_back(head + "." + std::to_string(f));
      for (int f = 0; f < 100; ++f) texts.push_back(head + "." + (f < 10 ? "0" : "") + std::to_string(f));
    }
  }
  for (const char* text : schemas) {
    const json s = json::parse(text);
    const Nfa nfa = compile_json_schema(s);
    int accepted = 0;
    for (const std::string& t : texts) {
      const bool written = nfa_accepts(nfa, t);
      accepted += written;
      if (t == "-0" || (t.rfind("-0.0", 0) == 0 && t.find_first_not_of("-0.") == std::string::npos)) {
        EXPECT_FALSE(written) << text << " writes " << t;  // zero is written without "-"
        continue;
      }
      ASSERT_EQ(written, valid_text(s, t)) << text << " on " << t;
    }
    EXPECT_GT(accepted, 0) << text;
  }
}

TEST(GrammarJsonSchemaKeywords, RandomWalksValidate) {
  std::vector<std::string> schemas;
  for (const Case& c : cases()) schemas.push_back(c.schema);
  schemas.push_back(R"({"type": "number", "minimum": -1000000.125, "maximum": 99.5})");
  schemas.push_back(R"({"type": "number", "exclusiveMinimum": 9223372036854775000})");
  schemas.push_back(R"({"type": "integer", "multipleOf": 9973, "minimum": -9223372036854775808})");
  std::mt19937 rng(46);
  for (const std::string& text : schemas) {
    const json s = json::parse(text);
    TokenGrammar g(compile_json_schema(s), test::byte_vocab());
    for (int k = 0; k < 150; ++k) {
      const std::string out = test::random_walk(g, rng, 400);
      ASSERT_TRUE(valid_text(s, out)) << text << " wrote " << out;
    }
  }
}

TEST(GrammarJsonSchemaKeywords, RefusedWithTheKeywordNamed) {
  const std::pair<const char*, const char*> refused[] = {
      {R"({"type": "number", "multipleOf": 0.25})", "multipleOf"},
      {R"({"type": "number", "multipleOf": 2.5, "maximum": 10})", "multipleOf"},
      {R"({"type": "integer", "multipleOf": 123457})", "multipleOf"},
      {R"({"type": "integer", "multipleOf": 0})", "multipleOf"},
      {R"({"type": "integer", "multipleOf": -2})", "multipleOf"},
      {R"({"type": "integer", "minimum": "1"})", "minimum"},
      {R"({"type": "integer", "exclusiveMaximum": true})", "exclusiveMaximum"},
      {R"({"type": "integer", "minimum": 1, "allOf": [{"minimum": 2}]})", "minimum"},
      {R"({"type": "string", "pattern": "a+", "maxLength": 3})", "pattern"},
  };
  for (const auto& [text, keyword] : refused) {
    try {
      compile_json_schema(json::parse(text));
      ADD_FAILURE() << text << " accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(keyword), std::string::npos) << text << ": " << e.what();
    }
  }
  // A multipleOf above the residue automaton's limit is listed when few multiples lie in range.
  EXPECT_TRUE(nfa_accepts(compile_json_schema(json::parse(
                              R"({"type": "integer", "multipleOf": 123457, "minimum": 1, "maximum": 123457000})")),
                          "123457000"));
  // Empty ranges have no instance: refused as such.
  EXPECT_THROW(compile_json_schema(json::parse(R"({"type": "integer", "minimum": 5, "maximum": 4})")), GrammarError);
  EXPECT_THROW(compile_json_schema(json::parse(R"({"type": "integer", "minimum": 1.2, "maximum": 1.8})")), GrammarError);
  EXPECT_THROW(compile_json_schema(json::parse(R"({"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1})")),
               GrammarError);
  // Numeric keywords constrain numbers only: a string schema with a minimum is any string.
  EXPECT_TRUE(nfa_accepts(compile_json_schema(json::parse(R"({"type": ["string", "integer"], "minimum": 3})")),
                          "\"x\""));
}

TEST(GrammarJsonSchemaKeywords, AutomataStaySmall) {
  // The widest integer range and a multipleOf at the residue limit stay far below the state budget.
  const Nfa wide = compile_json_schema(json::parse(R"({"type": "integer", "minimum": -9223372036854775808})"));
  EXPECT_LT(wide.states.size(), 3000u);
  const Nfa modulus = compile_json_schema(json::parse(R"({"type": "integer", "multipleOf": 9999})"));
  EXPECT_LT(modulus.states.size(), 200000u) << modulus.states.size();
}
