// Anthropic's Messages API: the request translation (blocks, tools, tool_choice), the response dialect
// (non-streaming object, SSE event order), and POST /v1/messages and /v1/messages/count_tokens on the in-process
// server against the same greedy chat completion, /tokenize, the API key and bad input.
#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <vector>

#include "server/anthropic_dialect.h"
#include "server/anthropic_request.h"
#include "server/openai_protocol.h"
#include "server/server_fixture.h"

using namespace tritium;
using nlohmann::json;
using tritium::test::Fixture;

namespace {

json translate_error(const json& body) {
  try {
    server::anthropic_to_chat(body);
  } catch (const server::ApiError& e) {
    return json{{"status", e.status}, {"message", e.message}};
  }
  return nullptr;
}

const json kToolTurns = json::array(
    {{{"role", "user"}, {"content", "weather in Paris?"}},
     {{"role", "assistant"},
      {"content", json::array({{{"type", "text"}, {"text", "Checking."}},
                               {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}}})}},
     {{"role", "user"},
      {"content", json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"},
                                {"content", json::array({{{"type", "text"}, {"text", "18C"}}})}},
                               {{"type", "text"}, {"text", "and tomorrow?"}, {"cache_control", {{"type", "ephemeral"}}}}})}}});

struct Sse {
  std::vector<std::string> names;
  std::vector<json> data;
};

Sse parse_sse(const std::string& body) {
  Sse s;
  size_t pos = 0;
  while (true) {
    const size_t e = body.find("event: ", pos);
    if (e == std::string::npos) break;
    const size_t nl = body.find('\n', e);
    s.names.push_back(body.substr(e + 7, nl - e - 7));
    const size_t d = body.find("data: ", nl);
    const size_t end = body.find("\n\n", d);
    s.data.push_back(json::parse(body.substr(d + 6, end - d - 6)));
    pos = end + 2;
  }
  return s;
}

json post(httplib::Client& c, const std::string& path, const json& body, int* status, const httplib::Headers& h = {}) {
  auto r = c.Post(path, h, body.dump(), "application/json");
  if (!r) {
    *status = -1;
    return nullptr;
  }
  *status = r->status;
  return json::parse(r->body, nullptr, false);
}

}  // namespace

TEST(AnthropicRequest, BlocksBecomeChatMessages) {
  const json b = {{"model", "m"}, {"max_tokens", 8},
                  {"system", json::array({{{"type", "text"}, {"text", "Be brief."}}, {{"type", "text"}, {"text", "Be kind."}}})},
                  {"messages", kToolTurns}, {"stop_sequences", {"END"}}, {"temperature", 0.5}, {"top_k", 3},
                  {"metadata", {{"user_id", "u"}}}, {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}};
  const json c = server::anthropic_to_chat(b);
  EXPECT_EQ(c["max_tokens"], 8);
  EXPECT_EQ(c["stop"], json::array({"END"}));
  EXPECT_EQ(c["temperature"], 0.5);
  EXPECT_EQ(c["top_k"], 3);
  const json& m = c["messages"];
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "Be brief.\nBe kind."}}));
  EXPECT_EQ(m[1], json({{"role", "user"}, {"content", "weather in Paris?"}}));
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["content"], "Checking.");
  EXPECT_EQ(m[2]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(m[2]["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(m[3], json({{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"name", "get_weather"}, {"content", "18C"}}));
  EXPECT_EQ(m[4], json({{"role", "user"}, {"content", "and tomorrow?"}}));
}

TEST(AnthropicRequest, ToolsAndToolChoiceMapToChat) {
  json b = {{"model", "m"}, {"max_tokens", 8}, {"messages", {{{"role", "user"}, {"content", "hi"}}}},
            {"tools", {{{"name", "f"}, {"description", "d"}, {"input_schema", {{"type", "object"}}}}}}};
  json c = server::anthropic_to_chat(b);
  EXPECT_EQ(c["tools"][0], json({{"type", "function"},
                                 {"function", {{"name", "f"}, {"description", "d"}, {"parameters", {{"type", "object"}}}}}}));
  EXPECT_FALSE(c.contains("tool_choice"));
  b["tool_choice"] = {{"type", "any"}};
  EXPECT_EQ(server::anthropic_to_chat(b)["tool_choice"], "required");
  EXPECT_FALSE(server::anthropic_to_chat(b).contains("parallel_tool_calls"));
  b["tool_choice"] = {{"type", "auto"}, {"disable_parallel_tool_use", true}};
  EXPECT_EQ(server::anthropic_to_chat(b)["tool_choice"], "auto");
  EXPECT_EQ(server::anthropic_to_chat(b)["parallel_tool_calls"], false);
  b["tool_choice"] = {{"type", "none"}};
  EXPECT_EQ(server::anthropic_to_chat(b)["tool_choice"], "none");
  b["tool_choice"] = {{"type", "tool"}, {"name", "f"}};
  EXPECT_EQ(server::anthropic_to_chat(b)["tool_choice"], json({{"type", "function"}, {"function", {{"name", "f"}}}}));
  b["tool_choice"] = {{"type", "sometimes"}};
  EXPECT_EQ(translate_error(b)["status"], 400);
}

TEST(AnthropicRequest, BadInputIsA400NamingTheField) {
  const json user = {{"role", "user"}, {"content", "hi"}};
  const json ok = {{"model", "m"}, {"max_tokens", 8}, {"messages", {user}}};
  ASSERT_TRUE(translate_error(ok).is_null());
  auto with = [&](const char* k, const json& v) {
    json b = ok;
    b[k] = v;
    return translate_error(b);
  };
  json nomax = ok;
  nomax.erase("max_tokens");
  EXPECT_NE(translate_error(nomax)["message"].get<std::string>().find("max_tokens"), std::string::npos);
  EXPECT_TRUE(server::anthropic_to_chat(nomax, true).contains("messages"));  // count_tokens needs no max_tokens
  EXPECT_EQ(with("max_tokens", 0)["status"], 400);
  EXPECT_EQ(with("max_tokens", "8")["status"], 400);
  EXPECT_EQ(with("messages", json::array())["status"], 400);
  EXPECT_EQ(with("messages", "hi")["status"], 400);
  EXPECT_EQ(with("system", 3)["status"], 400);
  EXPECT_EQ(with("temperature", 1.5)["status"], 400);
  EXPECT_EQ(with("stop_sequences", json::array({1}))["status"], 400);
  EXPECT_EQ(with("tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}})["status"], 400);
  EXPECT_EQ(with("tools", {{{"name", "f"}}})["message"], "tools[0].input_schema: must be a JSON Schema object");
  EXPECT_EQ(with("tool_choice", {{"type", "any"}})["status"], 400);  // no tools
  EXPECT_EQ(with("messages", {{{"role", "assistant"}, {"content", "x"}}, user})["status"], 400);
  EXPECT_EQ(with("messages", {{{"role", "system"}, {"content", "x"}}})["status"], 400);
  EXPECT_EQ(with("messages", {user, {{"role", "assistant"}, {"content", "prefill"}}})["status"], 400);
  const json img = with("messages", {{{"role", "user"}, {"content", {{{"type", "image"}, {"source", json::object()}}}}}});
  EXPECT_EQ(img["message"], "messages[0].content[0].type: 'image' blocks are not supported by this model");
  EXPECT_EQ(with("messages", {{{"role", "user"}, {"content", {{{"type", "hologram"}}}}}})["status"], 400);
  EXPECT_EQ(with("messages", {{{"role", "user"}, {"content", {{{"type", "tool_use"}, {"id", "a"}, {"name", "f"}, {"input", json::object()}}}}}})["status"], 400);
  const json orphan = with("messages", {{{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_x"}, {"content", "1"}}}}}});
  EXPECT_EQ(orphan["message"], "messages[0].content[0].tool_use_id: 'toolu_x' matches no tool_use of an earlier assistant turn");
  json bad_input = kToolTurns;
  bad_input[1]["content"][1]["input"] = "Paris";
  EXPECT_EQ(with("messages", bad_input)["message"], "messages[1].content[1].input: must be an object");
}

TEST(AnthropicDialect, NonStreamingResponseMapsTextToolsStopAndUsage) {
  server::AnthropicDialect d("msg_abc", "tiny", 7);
  const json chat = {{"choices", {{{"index", 0}, {"finish_reason", "tool_calls"}, {"stop_reason", nullptr},
                                   {"message", {{"role", "assistant"}, {"content", "Let me look."},
                                                {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                                                 {"function", {{"name", "f"}, {"arguments", "{\"x\": 2}"}}}}}}}}}}},
                     {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 5}}}};
  const json r = d.response(chat);
  EXPECT_EQ(r["id"], "msg_abc");
  EXPECT_EQ(r["type"], "message");
  EXPECT_EQ(r["stop_reason"], "tool_use");
  EXPECT_TRUE(r["stop_sequence"].is_null());
  ASSERT_EQ(r["content"].size(), 2u);
  EXPECT_EQ(r["content"][0], json({{"type", "text"}, {"text", "Let me look."}}));
  EXPECT_EQ(r["content"][1], json({{"type", "tool_use"}, {"id", "toolu_abc_0"}, {"name", "f"}, {"input", {{"x", 2}}}}));
  EXPECT_EQ(r["usage"], json({{"input_tokens", 7}, {"output_tokens", 5}}));
  json stopped = chat;
  stopped["choices"][0] = {{"finish_reason", "stop"}, {"stop_reason", "END"}, {"message", {{"content", "a"}}}};
  EXPECT_EQ(d.response(stopped)["stop_reason"], "stop_sequence");
  EXPECT_EQ(d.response(stopped)["stop_sequence"], "END");
  stopped["choices"][0]["finish_reason"] = "length";
  EXPECT_EQ(d.response(stopped)["stop_reason"], "max_tokens");
  EXPECT_EQ(server::anthropic_error_json(server::ApiError{401, "no", "", "", ""}),
            json({{"type", "error"}, {"error", {{"type", "authentication_error"}, {"message", "no"}}}}));
  EXPECT_EQ(server::anthropic_error_json(server::ApiError{503, "x", "", "", ""})["error"]["type"], "overloaded_error");
  EXPECT_EQ(server::anthropic_error_json(server::ApiError{500, "x", "", "", ""})["error"]["type"], "api_error");
}

TEST(AnthropicDialect, StreamingToolCallIsOneToolUseBlock) {
  server::AnthropicDialect d("msg_q", "tiny", 3);
  std::string s = d.stream_chunk({{"choices", {{{"delta", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}}}}});
  s += d.stream_chunk({{"choices", {{{"delta", {{"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "{\"a\":1}"}}}}}}}},
                                     {"finish_reason", "tool_calls"}}}}});
  s += d.stream_end(3, 9);
  const Sse e = parse_sse(s);
  EXPECT_EQ(e.names, (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                               "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(e.data[0]["message"]["usage"]["input_tokens"], 3);
  EXPECT_EQ(e.data[2]["content_block"]["type"], "tool_use");
  EXPECT_EQ(e.data[2]["content_block"]["id"], "toolu_q_0");
  EXPECT_EQ(json::parse(e.data[3]["delta"]["partial_json"].get<std::string>()), json({{"a", 1}}));
  EXPECT_EQ(e.data[5]["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(e.data[5]["usage"]["output_tokens"], 9);
}

TEST(AnthropicApi, MessagesMatchTheSameGreedyChatCompletion) {
  Fixture f;
  auto c = f.client();
  int st = 0;
  const json chat = post(c, "/v1/chat/completions",
                         {{"messages", {{{"role", "system"}, {"content", "You tell stories."}}, {{"role", "user"}, {"content", "Once upon a time"}}}},
                          {"max_tokens", 12}, {"temperature", 0}}, &st);
  ASSERT_EQ(st, 200) << chat.dump();
  const json body = {{"model", "tiny-bitnet"}, {"max_tokens", 12}, {"temperature", 0}, {"system", "You tell stories."},
                     {"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}};
  const json m = post(c, "/v1/messages", body, &st);
  ASSERT_EQ(st, 200) << m.dump();
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(m["content"].size(), 1u);
  EXPECT_EQ(m["content"][0]["text"], chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(m["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(m["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(m["stop_reason"], chat["choices"][0]["finish_reason"] == "length" ? "max_tokens" : "end_turn");

  json sb = body;
  sb["stream"] = true;
  auto r = c.Post("/v1/messages", sb.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const Sse e = parse_sse(r->body);
  ASSERT_GE(e.names.size(), 6u);
  EXPECT_EQ(e.names[0], "message_start");
  EXPECT_EQ(e.names[e.names.size() - 2], "message_delta");
  EXPECT_EQ(e.names.back(), "message_stop");
  std::string text;
  for (size_t i = 0; i < e.names.size(); ++i)
    if (e.names[i] == "content_block_delta") text += e.data[i]["delta"]["text"].get<std::string>();
  EXPECT_EQ(text, chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(e.data[0]["message"]["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(e.data[e.names.size() - 2]["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(e.data[e.names.size() - 2]["delta"]["stop_reason"], m["stop_reason"]);
}

TEST(AnthropicApi, StopSequenceIsReported) {
  Fixture f;
  auto c = f.client();
  int st = 0;
  const json msgs = {{{"role", "user"}, {"content", "Once upon a time"}}};
  const json first = post(c, "/v1/messages", {{"model", "tiny-bitnet"}, {"max_tokens", 16}, {"temperature", 0}, {"messages", msgs}}, &st);
  ASSERT_EQ(st, 200);
  const std::string text = first["content"][0]["text"].get<std::string>();
  ASSERT_GE(text.size(), 6u) << text;
  const std::string stop = text.substr(3, 3);  // a piece the greedy output is known to contain
  const json m = post(c, "/v1/messages",
                      {{"model", "tiny-bitnet"}, {"max_tokens", 16}, {"temperature", 0}, {"messages", msgs}, {"stop_sequences", {"zzzz", stop}}}, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], stop);
  EXPECT_EQ(m["content"][0]["text"], text.substr(0, text.find(stop)));
}

TEST(AnthropicApi, CountTokensEqualsTokenizeOfTheRenderedPrompt) {
  Fixture f;
  auto c = f.client();
  int st = 0;
  const json body = {{"model", "tiny-bitnet"}, {"system", "Be brief."}, {"messages", kToolTurns}};
  const json n = post(c, "/v1/messages/count_tokens", body, &st);
  ASSERT_EQ(st, 200) << n.dump();
  const json chat = server::anthropic_to_chat(body, true);
  const json t = post(c, "/tokenize", {{"messages", chat["messages"]}}, &st);
  ASSERT_EQ(st, 200) << t.dump();
  EXPECT_EQ(n, json({{"input_tokens", t["count"]}}));
  EXPECT_GT(t["count"].get<int>(), 10);
  // The same tool_use / tool_result turns generate (the prompt count is message_start's input_tokens).
  json gen = body;
  gen["max_tokens"] = 4;
  const json m = post(c, "/v1/messages", gen, &st);
  ASSERT_EQ(st, 200) << m.dump();
  EXPECT_EQ(m["usage"]["input_tokens"], t["count"]);
}

TEST(AnthropicApi, ApiKeyAndErrorsUseAnthropicsShape) {
  Fixture f("sk-test");
  auto c = f.client();
  int st = 0;
  const json body = {{"model", "tiny-bitnet"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  json r = post(c, "/v1/messages", body, &st, {{"x-api-key", "wrong"}});
  EXPECT_EQ(st, 401);
  EXPECT_EQ(r["type"], "error");
  EXPECT_EQ(r["error"]["type"], "authentication_error");
  r = post(c, "/v1/messages", body, &st, {{"x-api-key", "sk-test"}});
  EXPECT_EQ(st, 200) << r.dump();
  const httplib::Headers key = {{"x-api-key", "sk-test"}};
  std::vector<json> bad = {json::array(), {{"model", "tiny-bitnet"}, {"messages", body["messages"]}}};
  json b = body;
  b["messages"] = {{{"role", "user"}, {"content", {{{"type", "image"}}}}}};
  bad.push_back(b);
  b["messages"] = {{{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "nope"}}}}}};
  bad.push_back(b);
  b = body;
  b["top_p"] = "high";
  bad.push_back(b);
  for (const json& x : bad) {
    r = post(c, "/v1/messages", x, &st, key);
    EXPECT_EQ(st, 400) << x.dump();
    EXPECT_EQ(r["type"], "error") << r.dump();
    EXPECT_EQ(r["error"]["type"], "invalid_request_error") << r.dump();
  }
  auto raw = c.Post("/v1/messages", key, "{not json", "application/json");
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->status, 400);
  EXPECT_EQ(json::parse(raw->body)["error"]["type"], "invalid_request_error");
  b = body;
  b["model"] = "claude-x";
  r = post(c, "/v1/messages", b, &st, key);
  EXPECT_EQ(st, 404);
  EXPECT_EQ(r["error"]["type"], "not_found_error");
  raw = c.Get("/v1/messages", key);
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->status, 405);
  EXPECT_EQ(json::parse(raw->body)["type"], "error");
  r = post(c, "/v1/messages", body, &st, key);  // still serving
  EXPECT_EQ(st, 200);
  EXPECT_EQ(r["content"][0]["type"], "text");
}
