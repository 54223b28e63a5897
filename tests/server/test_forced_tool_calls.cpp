// tool_choice "required" or a named function on a model whose chat template has no call syntax (the bundled
// tiny-bitnet): the output is constrained to a JSON list of calls [{"name", "parameters"}, ...] and answered as
// message.tool_calls / delta.tool_calls with finish_reason "tool_calls"; the grammar and the parser of that list
// on their own.
#include <gtest/gtest.h>
#include <httplib.h>

#include <set>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/grammar_test_util.h"
#include "server/server_fixture.h"
#include "server/tool_calls.h"
#include "test_util.h"

using namespace tritium;
using nlohmann::json;
using tritium::test::Fixture;
using tritium::test::nfa_accepts;

namespace {

const json kWeather = {{"type", "object"},
                       {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}},
                                       {"days", {{"type", "integer"}, {"minimum", 1}, {"maximum", 7}}}}},
                       {"required", {"city", "days"}},
                       {"additionalProperties", false}};
const json kTime = {{"type", "object"},
                    {"properties", {{"zone", {{"enum", {"UTC", "CET", "PST"}}}}}},
                    {"required", {"zone"}},
                    {"additionalProperties", false}};

json tools_json() {
  return json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", kWeather}}}},
                      {{"type", "function"}, {"function", {{"name", "get_time"}, {"parameters", kTime}}}}});
}

json post_json(httplib::Client& c, const std::string& path, const json& body, int* status) {
  auto r = c.Post(path, body.dump(), "application/json");
  if (!r) {
    *status = -1;
    return json();
  }
  *status = r->status;
  return json::parse(r->body);
}

// The arguments of a call, checked by hand against the tool's schema: the properties, types and bounds.
void expect_valid_call(const json& call, const std::set<std::string>& allowed) {
  ASSERT_EQ(call["type"], "function") << call.dump();
  const std::string name = call["function"]["name"];
  EXPECT_TRUE(allowed.count(name)) << name;
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  ASSERT_TRUE(args.is_object()) << args.dump();
  if (name == "get_weather") {
    ASSERT_EQ(args.size(), 2u) << args.dump();
    ASSERT_TRUE(args["city"].is_string());
    EXPECT_LE(args["city"].get<std::string>().size(), 12u);
    ASSERT_TRUE(args["days"].is_number_integer()) << args.dump();
    EXPECT_GE(args["days"].get<int>(), 1);
    EXPECT_LE(args["days"].get<int>(), 7);
  } else {
    ASSERT_EQ(args.size(), 1u) << args.dump();
    const std::string z = args["zone"];
    EXPECT_TRUE(z == "UTC" || z == "CET" || z == "PST") << z;
  }
}

}  // namespace

TEST(ForcedToolCalls, ListGrammarAcceptsOnlyListsOfValidCalls) {
  const grammar::Nfa nfa = grammar::compile_tool_call_list({{"get_weather", kWeather}, {"get_time", kTime}}, "parameters");
  EXPECT_TRUE(nfa_accepts(nfa, R"([{"name": "get_weather", "parameters": {"city": "Oslo", "days": 3}}])"));
  EXPECT_TRUE(nfa_accepts(nfa, R"([{"name": "get_time", "parameters": {"zone": "CET"}}, )"
                               R"({"name": "get_weather", "parameters": {"city": "", "days": 7}}])"));
  EXPECT_FALSE(nfa_accepts(nfa, "[]"));
  EXPECT_FALSE(nfa_accepts(nfa, R"({"name": "get_time", "parameters": {"zone": "CET"}})"));       // not a list
  EXPECT_FALSE(nfa_accepts(nfa, R"([{"name": "get_date", "parameters": {"zone": "CET"}}])"));     // unknown tool
  EXPECT_FALSE(nfa_accepts(nfa, R"([{"name": "get_weather", "parameters": {"city": "a", "days": 8}}])"));  // maximum
  EXPECT_FALSE(nfa_accepts(nfa, R"([{"name": "get_time", "parameters": {"zone": "EST"}}])"));     // enum
  // At most one call: the one-call list is accepted, two calls are not.
  const grammar::Nfa one =
      grammar::compile_tool_call_list({{"get_weather", kWeather}, {"get_time", kTime}}, "parameters", 1);
  EXPECT_TRUE(nfa_accepts(one, R"([{"name": "get_time", "parameters": {"zone": "PST"}}])"));
  EXPECT_FALSE(nfa_accepts(one, R"([{"name": "get_time", "parameters": {"zone": "CET"}}, )"
                                R"({"name": "get_time", "parameters": {"zone": "CET"}}])"));
  EXPECT_THROW(grammar::compile_tool_call_list({{"get_time", kTime}}, "parameters", 0), grammar::GrammarError);
}

TEST(ForcedToolCalls, ListParserIsAllOrNothing) {
  std::string content;
  auto calls = server::parse_tool_calls(
      R"( [{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {}}] )", server::ToolCallSyntax::kJsonList,
      content);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "a");
  EXPECT_EQ(json::parse(calls[0].arguments), json({{"x", 1}}));
  EXPECT_EQ(calls[1].name, "b");
  EXPECT_EQ(content, "");
  for (const std::string text : {R"([{"name": "a", "parameters": {}}, 3])", R"({"name": "a", "parameters": {}})", "[]",
                                 "[{\"name\": \"a\"", "hello"}) {
    calls = server::parse_tool_calls(text, server::ToolCallSyntax::kJsonList, content);
    EXPECT_TRUE(calls.empty()) << text;
    EXPECT_EQ(content, text);
  }
  EXPECT_EQ(server::tool_call_marker(server::ToolCallSyntax::kJsonList), "[");
}

// The bundled model's template renders no tools and has no call syntax; "required" and a named function still give
// calls that follow the schemas, sampled or greedy, streamed or not; "auto" leaves the output as content.
TEST(ForcedToolCalls, RequiredAndNamedOnATemplateWithoutCallSyntax) {
  Fixture f;
  auto c = f.client();
  int st = 0;
  const json msgs = json::array({{{"role", "user"}, {"content", "What is the weather in Oslo?"}}});
  // "parallel_tool_calls": false: exactly one call, whatever the sample.
  for (int seed = 1; seed <= 6; ++seed) {
    const json r = post_json(c, "/v1/chat/completions",
                             {{"messages", msgs}, {"tools", tools_json()}, {"tool_choice", "required"},
                              {"parallel_tool_calls", false}, {"max_tokens", 160}, {"temperature", 1.0}, {"seed", seed}},
                             &st);
    ASSERT_EQ(st, 200) << r.dump();
    const json& ch = r["choices"][0];
    ASSERT_EQ(ch["finish_reason"], "tool_calls") << r.dump();
    ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u) << r.dump();
    expect_valid_call(ch["message"]["tool_calls"][0], {"get_weather", "get_time"});
  }
  // Parallel calls (the default): a list of one or more. This model rarely closes the list, so most samples are cut
  // by the token limit: such a cut list is returned as content, not calls, and holds more than one call.
  int more_than_one = 0;
  for (int seed = 1; seed <= 6; ++seed) {
    const json r = post_json(c, "/v1/chat/completions",
                             {{"messages", msgs}, {"tools", tools_json()}, {"tool_choice", "required"},
                              {"max_tokens", 200}, {"temperature", 1.0}, {"seed", seed}}, &st);
    ASSERT_EQ(st, 200) << r.dump();
    const json& ch = r["choices"][0];
    if (ch["finish_reason"] == "length") {
      EXPECT_TRUE(!ch["message"].contains("tool_calls") || ch["message"]["tool_calls"].is_null()) << r.dump();
      const std::string text = ch["message"]["content"];
      EXPECT_EQ(text.rfind("[{\"name\": \"get_", 0), 0u) << text;
      more_than_one += text.find("}}, {\"name\": \"get_") != std::string::npos;
      continue;
    }
    ASSERT_EQ(ch["finish_reason"], "tool_calls") << r.dump();
    ASSERT_FALSE(ch["message"]["tool_calls"].empty()) << r.dump();
    for (const json& call : ch["message"]["tool_calls"]) expect_valid_call(call, {"get_weather", "get_time"});
    more_than_one += ch["message"]["tool_calls"].size() > 1;
  }
  EXPECT_GT(more_than_one, 0);
  // A parallel_tool_calls that is not a boolean is a 400.
  const json bad_parallel = post_json(c, "/v1/chat/completions",
                                      {{"messages", msgs}, {"tools", tools_json()}, {"tool_choice", "required"},
                                       {"parallel_tool_calls", "no"}}, &st);
  EXPECT_EQ(st, 400) << bad_parallel.dump();
  EXPECT_EQ(bad_parallel["error"]["param"], "parallel_tool_calls");
  const json named = {{"messages", msgs}, {"tools", tools_json()},
                      {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}},
                      {"max_tokens", 160}, {"temperature", 0}};
  const json r = post_json(c, "/v1/chat/completions", named, &st);
  ASSERT_EQ(st, 200) << r.dump();
  const json& calls = r["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), 1u) << r.dump();  // a named function: exactly one call of it
  expect_valid_call(calls[0], {"get_time"});
  // Streamed: the same greedy calls, sent as delta.tool_calls in the last chunk.
  json s = named;
  s["stream"] = true;
  auto sr = c.Post("/v1/chat/completions", s.dump(), "application/json");
  ASSERT_TRUE(sr);
  ASSERT_EQ(sr->status, 200);
  json last;
  size_t pos = 0;
  while ((pos = sr->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = sr->body.find("\n\n", pos);
    const std::string payload = sr->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload != "[DONE]") last = json::parse(payload);
  }
  ASSERT_EQ(last["choices"][0]["finish_reason"], "tool_calls") << last.dump();
  const json& streamed = last["choices"][0]["delta"]["tool_calls"];
  ASSERT_EQ(streamed.size(), calls.size()) << last.dump();
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(streamed[i]["function"]["name"], calls[i]["function"]["name"]);
    EXPECT_EQ(streamed[i]["function"]["arguments"], calls[i]["function"]["arguments"]);
  }
  // "auto": no syntax to parse, the output is content and finish_reason is not "tool_calls".
  const json a = post_json(c, "/v1/chat/completions",
                           {{"messages", msgs}, {"tools", tools_json()}, {"max_tokens", 8}, {"temperature", 0}}, &st);
  ASSERT_EQ(st, 200) << a.dump();
  EXPECT_NE(a["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_FALSE(a["choices"][0]["message"].contains("tool_calls") && !a["choices"][0]["message"]["tool_calls"].is_null());
  // A named function that is not among the tools is still a 400.
  const json bad = post_json(c, "/v1/chat/completions",
                             {{"messages", msgs}, {"tools", tools_json()},
                              {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}, &st);
  EXPECT_EQ(st, 400) << bad.dump();
  EXPECT_EQ(bad["error"]["param"], "tool_choice");
}
