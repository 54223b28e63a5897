// POST /v1/responses (OpenAI Responses, server/responses_request.h and server/responses_dialect.h): the request
// translation (items -> messages, flat tools -> nested, text.format -> response_format, refusals), and the server
// in-process: non-streaming and streaming answers against the chat completion of the same greedy request (text
// and usage equal), the typed event order and sequence numbers, tool calls (forced by tool_choice) as
// function_call items fed back with function_call_output, and bad bodies answered 400 while the server serves on;
// the dialect alone for the finish reasons a live server rarely gives (abort) and text beside calls.
#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <vector>

#include "server/openai_protocol.h"
#include "server/responses_dialect.h"
#include "server/responses_request.h"
#include "server/server_fixture.h"
#include "test_util.h"

using namespace tritium;
using nlohmann::json;
using tritium::test::Fixture;

namespace {

json post(httplib::Client& c, const std::string& path, const json& body, int* status) {
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  EXPECT_TRUE(r) << "no response for " << path;
  if (!r) return {};
  *status = r->status;
  return json::parse(r->body);
}

/// The ApiError responses_to_chat throws for `body` (status 0 when it throws none).
server::ApiError refusal(const json& body) {
  try {
    (void)server::responses_to_chat(body);
  } catch (const server::ApiError& e) {
    return e;
  }
  return server::ApiError{0, "", "", "", ""};
}

struct Event {
  std::string name;
  json data;
};

/// The typed SSE records of a streamed answer; checks that every record is "event: NAME\ndata: JSON" whose
/// "type" is NAME.
std::vector<Event> parse_events(const std::string& body) {
  std::vector<Event> events;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated record at " << pos;
    if (end == std::string::npos) break;
    const std::string rec = body.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = rec.find('\n');
    EXPECT_EQ(rec.rfind("event: ", 0), 0u) << rec;
    EXPECT_NE(nl, std::string::npos) << rec;
    if (nl == std::string::npos) continue;
    EXPECT_EQ(rec.compare(nl + 1, 6, "data: "), 0) << rec;
    Event e{rec.substr(7, nl - 7), json::parse(rec.substr(nl + 7))};
    EXPECT_EQ(e.data["type"], e.name);
    events.push_back(std::move(e));
  }
  return events;
}

std::vector<std::string> names(const std::vector<Event>& ev) {
  std::vector<std::string> n;
  for (const auto& e : ev) n.push_back(e.name);
  return n;
}

/// A Hermes-style chat template (as Qwen's): tools in the system turn, calls as <tool_call> blocks, results as
/// <tool_response> blocks.
ChatTemplateFiles hermes_template() {
  ChatTemplateFiles f = load_chat_template(test::bundled_model());
  f.source = R"({%- if tools %}<|im_start|>system
You may call these tools inside <tool_call></tool_call> tags:
{%- for t in tools %}
{{ t | tojson }}
{%- endfor %}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant
{%- for tc in m.tool_calls %}
<tool_call>
{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %})";
  f.origin = "hermes test template";
  return f;
}

const json kAddTool = {{"type", "function"},
                       {"name", "add"},
                       {"description", "Adds two integers"},
                       {"parameters",
                        {{"type", "object"},
                         {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "integer"}}}}},
                         {"required", {"a", "b"}},
                         {"additionalProperties", false}}},
                       {"strict", true}};

}  // namespace

TEST(ResponsesTranslation, InputItemsBecomeMessages) {
  const json chat = server::responses_to_chat(json::parse(R"({
    "model": "m", "instructions": "Be brief.", "max_output_tokens": 7, "temperature": 0, "top_p": 0.5,
    "stream": true, "store": true, "metadata": {"k": "v"}, "user": "u", "parallel_tool_calls": false,
    "input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Add 2 "},
                                                      {"type": "input_text", "text": "and 3."}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Calling."}]},
      {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{\"a\":2,\"b\":3}"},
      {"type": "function_call", "call_id": "c2", "name": "add", "arguments": "{\"a\":1,\"b\":1}"},
      {"type": "function_call_output", "call_id": "c1", "output": "5"},
      {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "2"}]},
      {"role": "user", "content": "Thanks"}]})"));
  const json want = json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Add 2 and 3."},
    {"role": "assistant", "content": "Calling.", "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":2,\"b\":3}"}},
      {"id": "c2", "type": "function", "function": {"name": "add", "arguments": "{\"a\":1,\"b\":1}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "5"},
    {"role": "tool", "tool_call_id": "c2", "content": "2"},
    {"role": "user", "content": "Thanks"}])");
  EXPECT_EQ(chat["messages"], want);
  EXPECT_EQ(chat["max_tokens"], 7);
  EXPECT_EQ(chat["temperature"], 0);
  EXPECT_EQ(chat["top_p"], 0.5);
  EXPECT_EQ(chat["stream"], true);
  EXPECT_EQ(chat["model"], "m");
  for (const char* k : {"metadata", "user", "store", "instructions", "input"}) EXPECT_FALSE(chat.contains(k)) << k;
  // parallel_tool_calls is chat's field too: it bounds a forced call list on a template without a call syntax.
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  // A string input is one user message; a call without an assistant message before it gets its own.
  EXPECT_EQ(server::responses_to_chat({{"input", "hi"}})["messages"],
            json::parse(R"([{"role": "user", "content": "hi"}])"));
  const json calls = server::responses_to_chat(json::parse(R"({"input": [{"role": "user", "content": "q"},
      {"type": "function_call", "call_id": "x", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "x", "output": "ok"}]})"));
  EXPECT_EQ(calls["messages"][1], json::parse(R"({"role": "assistant", "content": "", "tool_calls": [
      {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})"));
}

TEST(ResponsesTranslation, ToolsAndTextFormat) {
  json body = {{"input", "hi"},
               {"tools", json::array({kAddTool, {{"type", "function"}, {"name", "now"}}})},
               {"tool_choice", {{"type", "function"}, {"name", "add"}}},
               {"text", {{"format", {{"type", "json_schema"}, {"name", "out"}, {"strict", true},
                                     {"schema", {{"type", "object"}}}}}}}};
  json chat = server::responses_to_chat(body);
  EXPECT_EQ(chat["tools"][0], json({{"type", "function"},
                                    {"function", {{"name", "add"}, {"description", "Adds two integers"},
                                                  {"parameters", kAddTool["parameters"]}}}}));
  EXPECT_EQ(chat["tools"][1], json({{"type", "function"}, {"function", {{"name", "now"}}}}));
  EXPECT_EQ(chat["tool_choice"], json({{"type", "function"}, {"function", {{"name", "add"}}}}));
  EXPECT_EQ(chat["response_format"],
            json({{"type", "json_schema"},
                  {"json_schema", {{"name", "out"}, {"strict", true}, {"schema", {{"type", "object"}}}}}}));
  for (const char* tc : {"auto", "none", "required"}) {
    body["tool_choice"] = tc;
    EXPECT_EQ(server::responses_to_chat(body)["tool_choice"], tc);
  }
  body["text"] = {{"format", {{"type", "json_object"}}}};
  EXPECT_EQ(server::responses_to_chat(body)["response_format"], json({{"type", "json_object"}}));
  body["text"] = {{"format", {{"type", "text"}}}};
  EXPECT_FALSE(server::responses_to_chat(body).contains("response_format"));
  // The echo: flat tools with their defaults, store false (nothing is stored), the text config as given.
  const json echo = server::responses_echo(body);
  EXPECT_EQ(echo["tools"][1], json({{"type", "function"}, {"name", "now"}, {"description", nullptr},
                                    {"parameters", nullptr}, {"strict", nullptr}}));
  EXPECT_EQ(echo["store"], false);
  EXPECT_EQ(echo["text"], body["text"]);
  EXPECT_EQ(echo["tool_choice"], "required");
  EXPECT_EQ(echo["temperature"], 1.0);
  EXPECT_EQ(echo["instructions"], nullptr);
  EXPECT_EQ(server::responses_param("messages"), "input");
  EXPECT_EQ(server::responses_param("max_tokens"), "max_output_tokens");
  EXPECT_EQ(server::responses_param("response_format"), "text.format");
}

TEST(ResponsesTranslation, BadBodiesAreRefusedNamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"([1])", ""},
      {R"({})", "input"},
      {R"({"input": 5})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": [7]})", "input"},
      {R"({"input": [{"role": "robot", "content": "x"}]})", "input"},
      {R"({"input": [{"role": "user"}]})", "input"},
      {R"({"input": [{"role": "user", "content": 3}]})", "input"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]})", "input"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_text"}]}]})", "input"},
      {R"({"input": [{"type": "reasoning", "summary": []}]})", "input"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input"},
      {R"({"input": [{"type": "function_call", "call_id": "a", "name": "f"}]})", "input"},
      {R"({"input": [{"type": "function_call_output", "call_id": "nope", "output": "1"}]})", "input"},
      {R"({"input": [{"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
                     {"type": "function_call_output", "call_id": "a", "output": 5}]})", "input"},
      {R"({"input": "x", "instructions": 3})", "instructions"},
      {R"({"input": "x", "tools": {"name": "f"}})", "tools"},
      {R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools"},
      {R"({"input": "x", "tools": [{"type": "function"}]})", "tools"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f", "strict": "yes"}]})", "tools"},
      {R"({"input": "x", "tool_choice": "always"})", "tool_choice"},
      {R"({"input": "x", "tool_choice": {"type": "file_search"}})", "tool_choice"},
      {R"({"input": "x", "text": {"format": {"type": "yaml"}}})", "text.format"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "s"}}})", "text.format"},
      {R"({"input": "x", "text": {"verbosity": "high"}})", "text.verbosity"},
      {R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"input": "x", "max_output_tokens": "5"})", "max_output_tokens"},
      {R"({"input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"input": "x", "conversation": "conv_1"})", "conversation"},
      {R"({"input": "x", "background": true})", "background"},
      {R"({"input": "x", "truncation": "auto"})", "truncation"},
      {R"({"input": "x", "include": ["reasoning.encrypted_content"]})", "include"},
      {R"({"input": "x", "reasoning": {"effort": "high"}})", "reasoning"},
      {R"({"input": "x", "metadata": {"k": 1}})", "metadata"},
      {R"({"input": "x", "store": "yes"})", "store"},
      {R"({"input": "x", "messages": []})", "messages"},
  };
  for (const auto& [body, param] : cases) {
    const server::ApiError e = refusal(json::parse(body));
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << ": " << e.message;
    EXPECT_FALSE(e.message.empty()) << body;
  }
  EXPECT_NE(refusal(json::parse(R"({"input": "x", "previous_response_id": "resp_1"})")).message.find("keeps no responses"),
            std::string::npos);
  EXPECT_EQ(refusal(json::parse(R"({"input": "x", "foo": 1})")).code, "unknown_parameter");
  // Neutral values of the refused fields are accepted.
  EXPECT_EQ(refusal(json::parse(R"({"input": "x", "previous_response_id": null, "background": false,
      "truncation": "disabled", "include": [], "reasoning": {}, "service_tier": "auto", "top_logprobs": 0,
      "store": false, "text": {"verbosity": "medium"}})")).status, 0);
}

TEST(ResponsesDialect, FinishReasonsAndTextBesideCalls) {
  const json echo = server::responses_echo({{"input", "x"}});
  auto chunk = [](const json& delta, const json& finish) {
    return json{{"object", "chat.completion.chunk"},
                {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}}}};
  };
  const json call = {{"id", "call_1"}, {"type", "function"}, {"index", 0},
                     {"function", {{"name", "add"}, {"arguments", "{\"a\":1}"}}}};
  // Streamed: text, then in the last chunk more text and a call; the message closes before the call's item.
  server::ResponsesDialect d(echo, "resp_abc", "m", 123);
  std::string sse = d.stream_chunk(chunk({{"role", "assistant"}, {"content", ""}}, nullptr));
  sse += d.stream_chunk(chunk({{"content", "Let me "}}, nullptr));
  sse += d.stream_chunk(chunk({{"content", "add."}, {"tool_calls", {call}}}, "tool_calls"));
  sse += d.stream_end(5, 9);
  const std::vector<Event> ev = parse_events(sse);
  EXPECT_EQ(names(ev), std::vector<std::string>({"response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done", "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done", "response.completed"}));
  ASSERT_EQ(ev.size(), 14u);
  for (size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i].data["sequence_number"], i);
  EXPECT_EQ(ev[6].data["text"], "Let me add.");
  EXPECT_EQ(ev[9].data["output_index"], 1);
  EXPECT_EQ(ev[11].data["arguments"], "{\"a\":1}");
  const json& done = ev[13].data["response"];
  EXPECT_EQ(done["id"], "resp_abc");
  EXPECT_EQ(done["created_at"], 123);
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 2u);
  EXPECT_EQ(done["output"][0]["id"], "msg_abc");
  EXPECT_EQ(done["output"][1], json({{"type", "function_call"}, {"id", "fc_abc_0"}, {"call_id", "call_1"},
                                     {"name", "add"}, {"arguments", "{\"a\":1}"}, {"status", "completed"}}));
  EXPECT_EQ(done["usage"]["input_tokens"], 5);
  EXPECT_EQ(done["usage"]["output_tokens"], 9);
  EXPECT_EQ(done["usage"]["total_tokens"], 14);
  // Streamed, cut at max_output_tokens: response.incomplete, the message incomplete.
  server::ResponsesDialect len(echo, "resp_l", "m", 1);
  std::string sse2 = len.stream_chunk(chunk({{"role", "assistant"}, {"content", "ab"}}, "length"));
  sse2 += len.stream_end(1, 1);
  const std::vector<Event> ev2 = parse_events(sse2);
  ASSERT_FALSE(ev2.empty());
  EXPECT_EQ(ev2.back().name, "response.incomplete");
  EXPECT_EQ(ev2.back().data["response"]["incomplete_details"], json({{"reason", "max_output_tokens"}}));
  EXPECT_EQ(ev2.back().data["response"]["output"][0]["status"], "incomplete");
  // Non-streaming: an aborted request fails; a call without text has no message item.
  server::ResponsesDialect ab(echo, "resp_x", "m", 1);
  const json usage = {{"prompt_tokens", 3}, {"completion_tokens", 2}, {"total_tokens", 5}};
  json r = ab.response({{"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "a"}}},
                                      {"finish_reason", "abort"}}}}, {"usage", usage}});
  EXPECT_EQ(r["status"], "failed");
  EXPECT_EQ(r["error"]["code"], "server_error");
  r = ab.response({{"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", nullptr},
                                                             {"tool_calls", {call}}}},
                                  {"finish_reason", "tool_calls"}}}}, {"usage", usage}});
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["type"], "function_call");
  EXPECT_EQ(r["usage"]["total_tokens"], 5);
}

TEST(ResponsesApi, GreedyResponseMatchesTheChatCompletion) {
  Fixture f;
  auto c = f.client();
  int st = 0;
  const json chat = post(c, "/v1/chat/completions",
                         {{"messages", {{{"role", "system"}, {"content", "Be brief."}},
                                        {{"role", "user"}, {"content", "Tell me a story."}}}},
                          {"max_tokens", 12}, {"temperature", 0}}, &st);
  ASSERT_EQ(st, 200);
  const json req = {{"model", "tiny-bitnet"}, {"instructions", "Be brief."}, {"input", "Tell me a story."},
                    {"max_output_tokens", 12}, {"temperature", 0}, {"metadata", {{"k", "v"}}}};
  const json r = post(c, "/v1/responses", req, &st);
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r["model"], "tiny-bitnet");
  EXPECT_GT(r["created_at"].get<int64_t>(), 1600000000);
  EXPECT_EQ(r["instructions"], "Be brief.");
  EXPECT_EQ(r["max_output_tokens"], 12);
  EXPECT_EQ(r["temperature"], 0);
  EXPECT_EQ(r["metadata"], json({{"k", "v"}}));
  EXPECT_EQ(r["store"], false);
  EXPECT_EQ(r["error"], nullptr);
  ASSERT_EQ(r["output"].size(), 1u);
  const json& item = r["output"][0];
  EXPECT_EQ(item["type"], "message");
  EXPECT_EQ(item["role"], "assistant");
  EXPECT_EQ(item["id"].get<std::string>().rfind("msg_", 0), 0u);
  ASSERT_EQ(item["content"].size(), 1u);
  EXPECT_EQ(item["content"][0]["type"], "output_text");
  EXPECT_EQ(item["content"][0]["annotations"], json::array());
  EXPECT_EQ(item["content"][0]["text"], chat["choices"][0]["message"]["content"]);
  EXPECT_EQ(r["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(r["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(r["usage"]["total_tokens"], chat["usage"]["total_tokens"]);
  if (chat["choices"][0]["finish_reason"] == "length") {
    EXPECT_EQ(r["status"], "incomplete");
    EXPECT_EQ(r["incomplete_details"], json({{"reason", "max_output_tokens"}}));
    EXPECT_EQ(item["status"], "incomplete");
  } else {
    EXPECT_EQ(r["status"], "completed");
    EXPECT_EQ(r["incomplete_details"], nullptr);
  }
  // A string input and the same message as an item list render the same prompt.
  json items = req;
  items["input"] = json::parse(R"([{"type": "message", "role": "user",
                                   "content": [{"type": "input_text", "text": "Tell me a story."}]}])");
  const json r2 = post(c, "/v1/responses", items, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(r2["output"][0]["content"][0]["text"], item["content"][0]["text"]);
  EXPECT_EQ(r2["usage"], r["usage"]);
  EXPECT_NE(r2["id"], r["id"]);
}

TEST(ResponsesApi, StreamedEventsInOrderAndTheirTextIsTheChatText) {
  Fixture f;
  auto c = f.client();
  int st = 0;
  const json chat = post(c, "/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}}, {"max_tokens", 10},
                          {"temperature", 0}}, &st);
  ASSERT_EQ(st, 200);
  auto sr = c.Post("/v1/responses",
                   json{{"input", "Once upon a time"}, {"max_output_tokens", 10}, {"temperature", 0}, {"stream", true}}
                       .dump(),
                   "application/json");
  ASSERT_TRUE(sr);
  ASSERT_EQ(sr->status, 200);
  EXPECT_NE(sr->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  const std::vector<Event> ev = parse_events(sr->body);
  ASSERT_GE(ev.size(), 9u);
  for (size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i].data["sequence_number"], i) << ev[i].name;
  const std::vector<std::string> n = names(ev);
  const std::vector<std::string> head = {"response.created", "response.in_progress", "response.output_item.added",
                                         "response.content_part.added"};
  EXPECT_EQ(std::vector<std::string>(n.begin(), n.begin() + 4), head);
  const std::vector<std::string> tail = {"response.output_text.done", "response.content_part.done",
                                         "response.output_item.done"};
  const size_t last = n.size() - 1;
  EXPECT_EQ(std::vector<std::string>(n.end() - 4, n.end() - 1), tail);
  std::string joined;
  for (size_t i = 4; i < last - 3; ++i) {
    EXPECT_EQ(n[i], "response.output_text.delta");
    EXPECT_FALSE(ev[i].data["delta"].get<std::string>().empty());
    EXPECT_EQ(ev[i].data["item_id"], ev[2].data["item"]["id"]);
    EXPECT_EQ(ev[i].data["output_index"], 0);
    EXPECT_EQ(ev[i].data["content_index"], 0);
    joined += ev[i].data["delta"].get<std::string>();
  }
  const std::string text = chat["choices"][0]["message"]["content"];
  EXPECT_EQ(joined, text);
  EXPECT_EQ(ev[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(ev[0].data["response"]["output"], json::array());
  EXPECT_EQ(ev[last - 3].data["text"], text);
  EXPECT_EQ(ev[last - 2].data["part"]["text"], text);
  const bool length = chat["choices"][0]["finish_reason"] == "length";
  EXPECT_EQ(n[last], length ? "response.incomplete" : "response.completed");
  const json& done = ev[last].data["response"];
  EXPECT_EQ(done["id"], ev[0].data["response"]["id"]);
  EXPECT_EQ(done["status"], length ? "incomplete" : "completed");
  ASSERT_EQ(done["output"].size(), 1u);
  EXPECT_EQ(done["output"][0], ev[last - 1].data["item"]);
  EXPECT_EQ(done["output"][0]["content"][0]["text"], text);
  EXPECT_EQ(done["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  EXPECT_EQ(done["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  EXPECT_EQ(done["usage"]["total_tokens"], chat["usage"]["total_tokens"]);
}

TEST(ResponsesApi, ForcedCallsAreFunctionCallItemsAndTheirOutputsGoBack) {
  Fixture f("", {}, hermes_template());
  auto c = f.client();
  int st = 0;
  const json input = json::parse(R"([{"role": "user", "content": "Add 2 and 3."}])");
  const json req = {{"input", input}, {"tools", {kAddTool}}, {"tool_choice", "required"}, {"temperature", 0},
                    {"max_output_tokens", 200}};
  const json r = post(c, "/v1/responses", req, &st);
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(r["status"], "completed");
  ASSERT_EQ(r["output"].size(), 1u) << r.dump();
  const json call = r["output"][0];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "add");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_FALSE(call["call_id"].get<std::string>().empty());
  const json args = json::parse(call["arguments"].get<std::string>());
  EXPECT_TRUE(args["a"].is_number_integer()) << args;
  EXPECT_TRUE(args["b"].is_number_integer()) << args;
  EXPECT_EQ(args.size(), 2u);
  EXPECT_EQ(r["tools"][0]["name"], "add");
  EXPECT_EQ(r["tool_choice"], "required");
  // The chat completion of the same request makes the same call.
  const json chat = post(c, "/v1/chat/completions",
                         {{"messages", input}, {"tools", server::responses_to_chat(req)["tools"]},
                          {"tool_choice", "required"}, {"temperature", 0}, {"max_tokens", 200}}, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(chat["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], call["arguments"]);
  EXPECT_EQ(r["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
  // Streamed, with the call named: the call's events after the in-progress ones, no message item.
  json sreq = req;
  sreq["stream"] = true;
  sreq["tool_choice"] = {{"type", "function"}, {"name", "add"}};
  auto sr = c.Post("/v1/responses", sreq.dump(), "application/json");
  ASSERT_TRUE(sr);
  ASSERT_EQ(sr->status, 200);
  const std::vector<Event> ev = parse_events(sr->body);
  EXPECT_EQ(names(ev), std::vector<std::string>({"response.created", "response.in_progress",
                                                 "response.output_item.added", "response.function_call_arguments.delta",
                                                 "response.function_call_arguments.done", "response.output_item.done",
                                                 "response.completed"}));
  ASSERT_EQ(ev.size(), 7u);
  EXPECT_EQ(ev[2].data["item"]["status"], "in_progress");
  EXPECT_EQ(ev[2].data["item"]["arguments"], "");
  EXPECT_EQ(ev[3].data["delta"], call["arguments"]);
  EXPECT_EQ(ev[4].data["arguments"], call["arguments"]);
  EXPECT_EQ(ev[4].data["name"], "add");
  EXPECT_EQ(ev[4].data["item_id"], ev[2].data["item"]["id"]);
  EXPECT_EQ(ev[5].data["item"]["arguments"], call["arguments"]);
  EXPECT_EQ(ev[6].data["response"]["output"][0], ev[5].data["item"]);
  EXPECT_EQ(ev[6].data["response"]["usage"], r["usage"]);
  // The call and its output fed back: a message (no call) comes out.
  json back = input;
  back.push_back(call);
  back.push_back({{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "5"}});
  const json r2 = post(c, "/v1/responses", {{"input", back}, {"tools", {kAddTool}}, {"tool_choice", "none"},
                                            {"temperature", 0}, {"max_output_tokens", 8}}, &st);
  ASSERT_EQ(st, 200) << r2.dump();
  ASSERT_EQ(r2["output"].size(), 1u);
  EXPECT_EQ(r2["output"][0]["type"], "message");
  // The fed-back turn is in the prompt: it is longer than the first one by the call and its result.
  EXPECT_GT(r2["usage"]["input_tokens"].get<int>(), r["usage"]["input_tokens"].get<int>() + 5);
  // An output whose call is not in the input is refused.
  back.erase(back.begin() + 1);
  const json e = post(c, "/v1/responses", {{"input", back}, {"max_output_tokens", 4}}, &st);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(e["error"]["param"], "input");
}

TEST(ResponsesApi, BadBodiesGet400AndTheServerServesOn) {
  Fixture f("sk-r");
  httplib::Client c = f.client();
  const httplib::Headers bearer = {{"Authorization", "Bearer sk-r"}};
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"input\": ", ""},
      {R"({"input": "x", "previous_response_id": "resp_1"})", "previous_response_id"},
      {R"({"input": [{"type": "function_call_output", "call_id": "c", "output": "1"}]})", "input"},
      {R"({"input": [{"type": "computer_call"}]})", "input"},
      {R"({"input": "x", "temperature": "hot"})", "temperature"},
      {R"({"input": "x", "max_output_tokens": 100000})", "max_output_tokens"},
      {R"({"input": "x", "tool_choice": "required"})", "tool_choice"},
      {R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "bogus"}}}})",
       "text.format"},
      {R"({"input": "x", "unknown": true})", "unknown"},
  };
  for (const auto& [body, param] : cases) {
    auto r = c.Post("/v1/responses", bearer, body, "application/json");
    ASSERT_TRUE(r) << body;
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    const json e = json::parse(r->body);
    ASSERT_TRUE(e.contains("error")) << r->body;
    EXPECT_EQ(e["error"]["type"], "invalid_request_error") << r->body;
    EXPECT_TRUE(e["error"]["message"].is_string());
    if (!param.empty()) {
      EXPECT_EQ(e["error"]["param"], param) << body << " -> " << r->body;
    }
  }
  // Unknown model: 404; no key: 401; x-api-key works; GET: 405.
  auto r = c.Post("/v1/responses", bearer, R"({"model": "gpt-9", "input": "x"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = c.Post("/v1/responses", R"({"input": "x", "max_output_tokens": 2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = c.Post("/v1/responses", {{"x-api-key", "sk-r"}}, R"({"input": "x", "max_output_tokens": 2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = c.Get("/v1/responses", bearer);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  // Still serving, a json_schema format honoured.
  r = c.Post("/v1/responses", bearer,
             json{{"input", "x"}, {"max_output_tokens", 40}, {"temperature", 0},
                  {"text", {{"format", {{"type", "json_schema"}, {"name", "o"},
                                        {"schema", {{"type", "object"},
                                                    {"properties", {{"ok", {{"type", "boolean"}}}}},
                                                    {"required", {"ok"}}, {"additionalProperties", false}}}}}}}}
                 .dump(),
             "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json out = json::parse(r->body);
  if (out["status"] == "completed") {
    const json obj = json::parse(out["output"][0]["content"][0]["text"].get<std::string>());
    EXPECT_TRUE(obj["ok"].is_boolean()) << obj;
    EXPECT_EQ(obj.size(), 1u);
  }
  EXPECT_EQ(out["text"]["format"]["type"], "json_schema");
}
