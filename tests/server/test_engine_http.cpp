// The HTTP server in-process on 127.0.0.1 (ephemeral port): status codes and error JSON, streaming, chat BOS,
// metrics, client disconnects freeing KV blocks, and graceful shutdown.
#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "core/parallel.h"
#include "model/loader.h"
#include "server/openai_server.h"
#include "test_util.h"
#include "server/server_fixture.h"

using namespace tritium;
using nlohmann::json;
using tritium::test::Fixture;

namespace {

json post_json(httplib::Client& c, const std::string& path, const json& body, int* status,
               const httplib::Headers& h = {}) {
  auto r = c.Post(path.c_str(), h, body.dump(), "application/json");
  EXPECT_TRUE(r) << "no response for " << path;
  if (!r) return {};
  *status = r->status;
  return json::parse(r->body);
}

// Raw socket: sends a streaming request, reads `min_bytes` of the answer, then closes the connection.
void stream_and_disconnect(int port, const std::string& body, size_t min_bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  while (got.size() < min_bytes) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  EXPECT_NE(got.find("data: "), std::string::npos);
}

}  // namespace

TEST(EngineHttp, ErrorStatusesWhileGoodRequestsComplete) {
  Fixture f("sk-test");
  const httplib::Headers auth = {{"Authorization", "Bearer sk-test"}};
  // Good requests run concurrently with the bad ones.
  std::vector<std::thread> good;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    good.emplace_back([&, i] {
      auto c = f.client();
      int st = 0;
      json r = post_json(c, "/v1/completions",
                         {{"prompt", "Once upon a time " + std::to_string(i)}, {"max_tokens", 24}, {"temperature", 0}},
                         &st, auth);
      if (st == 200 && r["choices"][0]["finish_reason"] == "length" && r["usage"]["completion_tokens"] == 24) ++ok;
    });
  auto c = f.client();
  int st = 0;
  // Malformed JSON.
  auto r = c.Post("/v1/completions", auth, "{\"prompt\": ", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "invalid_request_error");
  // Invalid UTF-8 in the body: the parse error quotes the byte, the answer is still a 400 with valid JSON.
  r = c.Post("/v1/completions", auth, "{\"prompt\": \"\xff\xfe\", \"max_tokens\": 2}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "invalid_request_error");
  // Unknown model.
  json e = post_json(c, "/v1/completions", {{"model", "gpt-9"}, {"prompt", "hi"}}, &st, auth);
  EXPECT_EQ(st, 404);
  EXPECT_EQ(e["error"]["code"], "model_not_found");
  // Oversized body.
  r = c.Post("/v1/completions", auth, json{{"prompt", std::string(100000, 'a')}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(json::parse(r->body).contains("error"));
  // max_tokens past the context.
  e = post_json(c, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 5000}}, &st, auth);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(e["error"]["code"], "context_length_exceeded");
  // Wrong / missing API key.
  e = post_json(c, "/v1/completions", {{"prompt", "hi"}}, &st, {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(st, 401);
  EXPECT_EQ(e["error"]["code"], "invalid_api_key");
  e = post_json(c, "/v1/chat/completions", {{"messages", json::array()}}, &st);
  EXPECT_EQ(st, 401);
  // Bad field types and ranges.
  e = post_json(c, "/v1/completions", {{"prompt", "hi"}, {"temperature", "hot"}}, &st, auth);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(e["error"]["param"], "temperature");
  e = post_json(c, "/v1/chat/completions", {{"messages", "hello"}}, &st, auth);
  EXPECT_EQ(st, 400);
  // Unimplemented parameters that change the output are refused, not ignored.
  e = post_json(c, "/v1/completions", {{"prompt", "hi"}, {"logit_bias", {{"5", 100}}}}, &st, auth);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(e["error"]["param"], "logit_bias");
  e = post_json(c, "/v1/completions", {{"prompt", "hi"}, {"suffix", "end"}}, &st, auth);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(e["error"]["param"], "suffix");
  // Their neutral values (what some clients always send) are fine.
  e = post_json(c, "/v1/completions",
                {{"prompt", "hi"}, {"max_tokens", 2}, {"logit_bias", json::object()}, {"suffix", ""}, {"best_of", 1}},
                &st, auth);
  EXPECT_EQ(st, 200) << e.dump();
  // Unknown route; /health and /metrics need no key.
  r = c.Get("/v2/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(json::parse(r->body).contains("error"));
  r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  for (auto& t : good) t.join();
  EXPECT_EQ(ok.load(), 4);
}

TEST(EngineHttp, ResponseFormatKinds) {
  // Unknown or malformed response_format is a 400 naming the field; json_object / json_schema are served
  // (tests/server/test_structured_output.cpp); text and null generate as before.
  Fixture f;
  auto c = f.client();
  int st = 0;
  const json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    SCOPED_TRACE(path);
    const bool chat = std::string(path) == "/v1/chat/completions";
    auto req = [&](const json& rf) {
      json b = {{"max_tokens", 2}, {"temperature", 0}, {"response_format", rf}};
      if (chat) b["messages"] = msgs;
      else b["prompt"] = "hi";
      return b;
    };
    {
      json e = post_json(c, path, req(json{{"type", "regex"}}), &st);
      EXPECT_EQ(st, 400) << e.dump();
      EXPECT_EQ(e["error"]["type"], "invalid_request_error");
      EXPECT_EQ(e["error"]["param"], "response_format");
      const std::string msg = e["error"]["message"];
      EXPECT_NE(msg.find("'regex' is not one of"), std::string::npos) << msg;
    }
    for (const json& rf : {json{{"type", "json_schema"}}, json{{"type", "json_schema"}, {"json_schema", {{"name", "x"},
                           {"schema", {{"type", "number"}, {"multipleOf", 0.25}}}}}}}) {
      json e = post_json(c, path, req(rf), &st);
      EXPECT_EQ(st, 400) << e.dump();
      EXPECT_EQ(e["error"]["param"], "response_format");
    }
    {  // integer bounds are compiled into the grammar: the output is one of 3..7
      const json rf = {{"type", "json_schema"},
                       {"json_schema", {{"name", "x"}, {"schema", {{"type", "integer"}, {"minimum", 3}, {"maximum", 7}}}}}};
      json e = post_json(c, path, req(rf), &st);
      ASSERT_EQ(st, 200) << e.dump();
      const std::string out = chat ? e["choices"][0]["message"]["content"] : e["choices"][0]["text"];
      ASSERT_EQ(out.size(), 1u) << out;
      EXPECT_TRUE(out[0] >= '3' && out[0] <= '7') << out;
    }
    for (const json& rf : {json("json"), json{{"json_schema", {}}}, json{{"type", 3}}}) {
      json e = post_json(c, path, req(rf), &st);
      EXPECT_EQ(st, 400) << e.dump();
      EXPECT_EQ(e["error"]["param"], "response_format");
    }
    // {"type": "text"} and null (what clients send by default) generate as before.
    for (const json& rf : {json{{"type", "text"}}, json(nullptr)}) {
      json e = post_json(c, path, req(rf), &st);
      EXPECT_EQ(st, 200) << e.dump();
      EXPECT_EQ(e["usage"]["completion_tokens"], 2);
    }
  }
}

TEST(EngineHttp, CompletionChatStreamingAndMetrics) {
  Fixture f;
  auto c = f.client();
  int st = 0;
  json r = post_json(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 0},
                                            {"logprobs", 2}}, &st);
  ASSERT_EQ(st, 200);
  const std::string text = r["choices"][0]["text"];
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["logprobs"]["tokens"].size(), 10u);
  EXPECT_EQ(r["usage"]["prompt_tokens"], static_cast<int>(f.tok->encode("Once upon a time", true).size()));
  // Same request streamed: the concatenated deltas equal the text; the stream ends in [DONE].
  std::string body;
  auto sr = c.Post("/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 0},
                                           {"stream", true}}.dump(), "application/json");
  ASSERT_TRUE(sr);
  body = sr->body;
  std::string joined;
  size_t pos = 0, events = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    const std::string payload = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") { ++events; break; }
    joined += json::parse(payload)["choices"][0]["text"].get<std::string>();
    ++events;
  }
  EXPECT_EQ(joined, text);
  EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");

  // Chat: exactly one BOS at the start of the prompt.
  const json msgs = json::array({{{"role", "user"}, {"content", "Tell me a story."}}});
  r = post_json(c, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 6}, {"temperature", 0}}, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  const auto files = load_chat_template(test::bundled_model());
  const std::string rendered = apply_chat_template(ChatTemplate::from_string(files.source),
                                                   nlohmann::ordered_json::parse(msgs.dump()), true, files.bos_token,
                                                   files.eos_token);
  const auto ids = f.tok->encode(rendered, false);
  ASSERT_GE(ids.size(), 2u);
  ASSERT_TRUE(f.tok->bos_id().has_value());
  EXPECT_EQ(ids[0], *f.tok->bos_id());
  EXPECT_NE(ids[1], *f.tok->bos_id());
  EXPECT_EQ(r["usage"]["prompt_tokens"], static_cast<int>(ids.size()));

  // n = 2 with a seed: two choices, reproducible.
  json nreq = {{"prompt", "The sea"}, {"max_tokens", 8}, {"n", 2}, {"seed", 11}, {"temperature", 1.0}};
  json a = post_json(c, "/v1/completions", nreq, &st);
  json b = post_json(c, "/v1/completions", nreq, &st);
  ASSERT_EQ(a["choices"].size(), 2u);
  EXPECT_EQ(a["choices"], b["choices"]);

  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  for (const char* name : {"tritium:time_to_first_token_seconds_bucket", "tritium:inter_token_latency_seconds_sum",
                           "tritium:e2e_request_latency_seconds_count", "tritium:request_queue_time_seconds_bucket",
                           "tritium:num_requests_running", "tritium:num_requests_waiting",
                           "tritium:kv_cache_usage_perc", "tritium:prompt_tokens_total",
                           "tritium:generation_tokens_total", "tritium:request_success_total{finished_reason=\"length\"",
                           "tritium:prefix_cache_hits_total"})
    EXPECT_NE(m->body.find(name), std::string::npos) << name;
  EXPECT_NE(m->body.find("tritium:generation_tokens_total{model_name=\"tiny-bitnet\"} " +
                         std::to_string(10 + 10 + 6 + 4 * 8)),
            std::string::npos);
  // Step phases: every step that sampled a token is counted (at least the 10 of the longest request, at most one
  // per generated token), and its forward took time.
  auto value = [&](const std::string& series) {
    const size_t at = m->body.find(series + " ");
    EXPECT_NE(at, std::string::npos) << series;
    return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + series.size() + 1));
  };
  const double steps = value("tritium:engine_steps_total{model_name=\"tiny-bitnet\"}");
  EXPECT_GE(steps, 10);
  EXPECT_LE(steps, 10 + 10 + 6 + 4 * 8);
  EXPECT_GT(value("tritium:engine_step_seconds_total{phase=\"forward\",model_name=\"tiny-bitnet\"}"), 0);
  EXPECT_GE(value("tritium:engine_step_seconds_total{phase=\"schedule\",model_name=\"tiny-bitnet\"}"), 0);
  EXPECT_GE(value("tritium:engine_step_seconds_total{phase=\"output\",model_name=\"tiny-bitnet\"}"), 0);
}

TEST(EngineHttp, AbortedStreamsLeaveNoBlocks) {
  Fixture f;
  const int total = test::under_sanitizer() ? 40 : 200;
  std::vector<std::thread> th;
  std::atomic<int> ok{0};
  std::atomic<int> next{0};
  for (int w = 0; w < 8; ++w)
    th.emplace_back([&] {
      auto c = f.client();
      for (int i = next++; i < total; i = next++) {
        const json body = {{"prompt", "Story number " + std::to_string(i)}, {"max_tokens", i % 5 == 0 ? 400 : 8},
                           {"temperature", 0.7}, {"seed", i}, {"ignore_eos", true}, {"stream", true}};
        if (i % 5 == 0) {  // 20% disconnect mid-stream
          stream_and_disconnect(f.srv->port(), body.dump(), 600);
          ++ok;
        } else {
          auto r = c.Post("/v1/completions", body.dump(), "application/json");
          if (r && r->status == 200 && r->body.find("data: [DONE]") != std::string::npos) ++ok;
        }
      }
    });
  for (auto& t : th) t.join();
  EXPECT_EQ(ok.load(), total);
  // Aborts take effect at the next engine step.
  for (int i = 0; i < 400 && f.engine->num_unfinished() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(f.engine->num_unfinished(), 0);
  const EngineMetrics m = f.engine->metrics();
  EXPECT_EQ(m.kv_cache_usage_perc, 0.0);
  EXPECT_EQ(m.num_requests_running, 0);
  EXPECT_GT(m.request_success_total.count("abort") ? m.request_success_total.at("abort") : 0, 0);
  auto c = f.client();
  auto met = c.Get("/metrics");
  ASSERT_TRUE(met);
  EXPECT_NE(met->body.find("tritium:kv_cache_usage_perc{model_name=\"tiny-bitnet\"} 0\n"), std::string::npos);
}

TEST(EngineHttp, GracefulShutdownFinishesInFlight) {
  Fixture f;
  std::string body;
  std::thread client([&] {
    auto c = f.client();
    auto r = c.Post("/v1/completions", json{{"prompt", "Long story"}, {"max_tokens", 120}, {"ignore_eos", true},
                                            {"temperature", 0}, {"stream", true}}.dump(), "application/json");
    if (r) body = r->body;
  });
  // Wait until the request runs, then shut down.
  for (int i = 0; i < 500 && f.engine->metrics().num_requests_running == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::thread stopper([&] { f.srv->shutdown(std::chrono::seconds(30)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // New requests are refused while draining.
  if (f.srv->draining() && f.engine->num_unfinished() > 0) {
    httplib::Client c("127.0.0.1", f.srv->port());
    auto r = c.Post("/v1/completions", json{{"prompt", "x"}}.dump(), "application/json");
    if (r) {
      EXPECT_EQ(r->status, 503);
    }
  }
  stopper.join();
  client.join();
  EXPECT_NE(body.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");
}

namespace {

// The SSE payloads of a streamed response body, [DONE] excluded.
std::vector<json> sse_events(const std::string& body) {
  std::vector<json> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    const std::string payload = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") break;
    out.push_back(json::parse(payload));
  }
  return out;
}

// log_softmax(logits of position p - 1)[token p] for every prompt position p >= 1, from one CPU forward.
std::vector<double> reference_prompt_logprobs(const Transformer& m, const std::vector<int32_t>& ids) {
  const ModelConfig& c = m.config();
  KvCache cache(KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 8});
  std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7};
  BatchChunk ch{ids, 0, table, true};
  std::vector<float> logits;
  CpuBackend(m).forward({&ch, 1}, cache, logits);
  const int V = c.vocab_size;
  std::vector<double> out;
  for (size_t p = 1; p < ids.size(); ++p) {
    const float* row = &logits[(p - 1) * V];
    double mx = -1e30, s = 0;
    for (int v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    for (int v = 0; v < V; ++v) s += std::exp(row[v] - mx);
    out.push_back(row[ids[p]] - mx - std::log(s));
  }
  return out;
}

}  // namespace

// lm-evaluation-harness's local-completions requests: a token-id prompt, echo, logprobs and max_tokens 0 return the
// prompt's text and the logprob of every prompt token after the first (the first one null), as one plain forward
// computes them; nothing is generated.
TEST(OpenAiApi, EchoTokenPromptScoresThePrompt) {
  Fixture f;
  auto c = f.client();
  const std::vector<int32_t> ids = f.tok->encode("The old man sat by the fire and told a story", true);
  int st = 0;
  json r = post_json(c, "/v1/completions", {{"prompt", ids}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 0}}, &st);
  ASSERT_EQ(st, 200) << r.dump();
  const json& ch = r["choices"][0];
  EXPECT_EQ(ch["text"], f.tok->decode(ids, true));  // the echo skips special tokens (BOS) by default, as vLLM
  EXPECT_EQ(r["usage"]["completion_tokens"], 0);
  const json& lp = ch["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  const std::vector<double> want = reference_prompt_logprobs(*f.model, ids);
  for (size_t p = 1; p < ids.size(); ++p) EXPECT_NEAR(lp["token_logprobs"][p].get<double>(), want[p - 1], 1e-4) << p;
  // The same scores with prefix caching in play: a second identical request is not served from cached blocks.
  json r2 = post_json(c, "/v1/completions", {{"prompt", ids}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 0}}, &st);
  EXPECT_EQ(r2["choices"][0]["logprobs"]["token_logprobs"], lp["token_logprobs"]);
  // vLLM's prompt_logprobs on a generating request: one entry per prompt token, the first null.
  r = post_json(c, "/v1/completions", {{"prompt", ids}, {"max_tokens", 2}, {"prompt_logprobs", 0}}, &st);
  ASSERT_EQ(st, 200);
  const json& pl = r["choices"][0]["prompt_logprobs"];
  ASSERT_EQ(pl.size(), ids.size());
  EXPECT_TRUE(pl[0].is_null());
  EXPECT_NEAR(pl[1][std::to_string(ids[1])]["logprob"].get<double>(), want[0], 1e-4);
  // max_tokens 0 with nothing to return is refused.
  post_json(c, "/v1/completions", {{"prompt", ids}, {"max_tokens", 0}}, &st);
  EXPECT_EQ(st, 400);
}

// Streamed logprobs carry the characters streamed before each token, as the non-streamed response does.
TEST(OpenAiApi, StreamedTextOffsetsAdvance) {
  Fixture f;
  auto c = f.client();
  const json req = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 0}};
  int st = 0;
  const json full = post_json(c, "/v1/completions", req, &st);
  ASSERT_EQ(st, 200);
  json sreq = req;
  sreq["stream"] = true;
  auto sr = c.Post("/v1/completions", sreq.dump(), "application/json");
  ASSERT_TRUE(sr);
  std::vector<int64_t> offsets;
  for (const json& e : sse_events(sr->body)) {
    const json& lp = e["choices"][0]["logprobs"];
    if (lp.is_null()) continue;
    for (const auto& o : lp["text_offset"]) offsets.push_back(o.get<int64_t>());
  }
  const json& want = full["choices"][0]["logprobs"]["text_offset"];
  ASSERT_EQ(offsets.size(), want.size());
  for (size_t i = 0; i < offsets.size(); ++i) EXPECT_EQ(offsets[i], want[i].get<int64_t>()) << i;
  EXPECT_GT(offsets.back(), 0);
}

// A token that is part of a UTF-8 character is shown as "bytes:\xNN..." with its own bytes: chat "bytes" are the
// token's bytes, and completions' top_logprobs keep one entry per token (no collisions on U+FFFD).
TEST(OpenAiApi, PartialUtf8TokensKeepTheirBytes) {
  auto tok = Tokenizer::from_file(test::bundled_model() + "/tokenizer.json");
  std::vector<int32_t> partial;
  for (int32_t id = 0; id < tok->vocab_size() && partial.size() < 2; ++id) {
    const std::string b = tok->decode_bytes({id}, false);
    if (b.size() == 1 && static_cast<unsigned char>(b[0]) >= 0x80) partial.push_back(id);
  }
  ASSERT_EQ(partial.size(), 2u) << "the vocabulary has no single-byte tokens >= 0x80";
  TokenLogprob lp;
  lp.id = partial[0];
  lp.logprob = -1.0f;
  lp.top = {{partial[0], -1.0f}, {partial[1], -2.0f}};
  const json chat = server::logprobs_json({lp}, *tok, true);
  const std::string b0 = tok->decode_bytes({partial[0]}, false);
  EXPECT_EQ(chat["content"][0]["bytes"], json::array({static_cast<int>(static_cast<unsigned char>(b0[0]))}));
  EXPECT_EQ(chat["content"][0]["token"].get<std::string>().rfind("bytes:\\x", 0), 0u);
  const json comp = server::logprobs_json({lp}, *tok, false);
  EXPECT_EQ(comp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(server::token_repr(*tok, partial[0]), fmt::format("bytes:\\x{:02x}", static_cast<unsigned char>(b0[0])));
}

// min_tokens, allowed_token_ids and bad_words change what is sampled; guided_grammar, malformed guided_* fields
// and beam search are refused naming the field.
TEST(OpenAiApi, TokenConstraintsAndRefusedFields) {
  Fixture f;
  auto c = f.client();
  int st = 0;
  // allowed_token_ids: one id -> every sampled token is that one.
  const int32_t a = f.tok->encode(" the", false).at(0);
  json r = post_json(c, "/v1/completions",
                     {{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"temperature", 1.0}, {"seed", 3},
                      {"allowed_token_ids", {a}}}, &st);
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(r["choices"][0]["text"], f.tok->decode({a, a, a, a, a}, true));
  // min_tokens: with only EOS and one other token allowed, EOS cannot end the request before 4 tokens.
  const int32_t eos = *f.tok->eos_id();
  r = post_json(c, "/v1/completions",
                {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}, {"min_tokens", 4},
                 {"allowed_token_ids", {eos, a}}, {"logit_bias", json::object()}}, &st);
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_GE(r["usage"]["completion_tokens"].get<int>(), 4);
  // bad_words: the greedy continuation's first word is never produced.
  const json plain = post_json(c, "/v1/completions",
                               {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 0}}, &st);
  const std::string first = plain["choices"][0]["logprobs"]["tokens"][0];
  r = post_json(c, "/v1/completions",
                {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 0},
                 {"bad_words", {first}}}, &st);
  ASSERT_EQ(st, 200) << r.dump();
  for (const auto& t : r["choices"][0]["logprobs"]["tokens"]) EXPECT_NE(t.get<std::string>(), first);
  // Refused fields: guided_grammar, and malformed guided_json (not JSON) / guided_choice (not a list).
  for (const char* k : {"guided_grammar", "guided_json", "guided_choice"}) {
    r = post_json(c, "/v1/completions", {{"prompt", "x"}, {k, "a"}}, &st);
    EXPECT_EQ(st, 400) << k;
    EXPECT_EQ(r["error"]["param"], k);
  }
  r = post_json(c, "/v1/completions", {{"prompt", "x"}, {"use_beam_search", true}}, &st);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(r["error"]["param"], "use_beam_search");
  r = post_json(c, "/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"tool_choice", "required"}}, &st);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(r["error"]["param"], "tool_choice");
  r = post_json(c, "/v1/completions", {{"prompt", "x"}, {"min_tokens", 20}, {"max_tokens", 4}}, &st);
  EXPECT_EQ(st, 400);
}

// The served model id comes from the model path with trailing separators and "." resolved.
TEST(OpenAiApi, DefaultModelIdFromThePath) {
  EXPECT_EQ(server::default_model_id(test::bundled_model()), "tiny-bitnet");
  EXPECT_EQ(server::default_model_id(test::bundled_model() + "/"), "tiny-bitnet");
  EXPECT_EQ(server::default_model_id(test::bundled_model() + "/."), "tiny-bitnet");
  EXPECT_EQ(server::default_model_id(test::bundled_model() + "/../tiny-bitnet//"), "tiny-bitnet");
  EXPECT_EQ(server::default_model_id("/"), "model");
  EXPECT_FALSE(server::default_model_id(".").empty());
  EXPECT_NE(server::default_model_id("."), ".");
}

// vLLM's /tokenize and /detokenize: text and chat messages to ids (as the completions endpoints encode them) and
// back; an unknown model is a 404.
TEST(OpenAiApi, TokenizeAndDetokenize) {
  Fixture f;
  auto c = f.client();
  int st = 0;
  json r = post_json(c, "/tokenize", {{"prompt", "Once upon a time"}, {"return_token_strs", true}}, &st);
  ASSERT_EQ(st, 200) << r.dump();
  const std::vector<int32_t> want = f.tok->encode("Once upon a time", true);
  EXPECT_EQ(r["tokens"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(r["count"], want.size());
  EXPECT_EQ(r["max_model_len"], f.engine->max_model_len());
  EXPECT_EQ(r["token_strs"].size(), want.size());
  r = post_json(c, "/tokenize", {{"prompt", "Once upon a time"}, {"add_special_tokens", false}}, &st);
  EXPECT_EQ(r["tokens"].get<std::vector<int32_t>>(), f.tok->encode("Once upon a time", false));
  r = post_json(c, "/detokenize", {{"tokens", want}}, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(r["prompt"], f.tok->decode(want, false));
  // Chat messages: the same ids the chat endpoint sends to the engine (usage.prompt_tokens).
  const json msgs = {{{"role", "user"}, {"content", "Hello there"}}};
  r = post_json(c, "/tokenize", {{"messages", msgs}}, &st);
  ASSERT_EQ(st, 200) << r.dump();
  json chat = post_json(c, "/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 1}}, &st);
  EXPECT_EQ(r["count"], chat["usage"]["prompt_tokens"]);
  post_json(c, "/detokenize", {{"tokens", {-1}}}, &st);
  EXPECT_EQ(st, 400);
  post_json(c, "/tokenize", {{"prompt", "x"}, {"model", "other"}}, &st);
  EXPECT_EQ(st, 404);
}

// CORS: with --allowed-origins a preflight gets the allowed methods and headers and every answer carries
// Access-Control-Allow-Origin for an allowed origin; another origin gets none, and without the option no route
// sends CORS headers.
TEST(OpenAiApi, CorsForAllowedOrigins) {
  Fixture f;
  auto c = f.client();
  const httplib::Headers from_app = {{"Origin", "https://app.example"},
                                     {"Access-Control-Request-Method", "POST"},
                                     {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto r = c.Options("/v1/completions", from_app);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));  // no origins configured
  server::ServerConfig sc;
  sc.http.port = 0;
  sc.model_name = "tiny-bitnet";
  sc.allowed_origins = {"https://app.example"};
  server::OpenAIServer cors(*f.engine, *f.tok, std::nullopt, sc);
  cors.start();
  httplib::Client cc("127.0.0.1", cors.port());
  r = cc.Options("/v1/completions", from_app);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  r = cc.Get("/v1/models", {{"Origin", "https://app.example"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  r = cc.Get("/v1/models", {{"Origin", "https://evil.example"}});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  cors.shutdown(std::chrono::seconds(1));
  EXPECT_EQ(server::cors_allow_origin({"*"}, "https://any.example"), "*");
  EXPECT_EQ(server::cors_allow_origin({"*"}, ""), "");
}
