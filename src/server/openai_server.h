// tritium server: the OpenAI-compatible API in front of the serving engine, on the event-driven HTTP transport
// (server/http_transport.h).
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (JSON or SSE streaming ending in "data: [DONE]"),
// POST /v1/responses (OpenAI Responses: JSON or typed SSE events; nothing is stored),
// GET /v1/models, GET /health, GET /metrics (Prometheus text, vLLM's metric names with the prefix "tritium:"),
// POST /tokenize and /detokenize (vLLM's shapes), Anthropic's POST /v1/messages and /v1/messages/count_tokens
// (server/anthropic_request.h, server/anthropic_dialect.h; errors there in Anthropic's shape), and OPTIONS preflight with CORS headers for
// ServerConfig::allowed_origins.
// Errors are OpenAI error JSON: 400 bad request / context too long, 401 wrong API key, 404 unknown model or
// route, 405 wrong method, 413 body too large, 429 too many requests in flight, 503 shutting down. A client that
// disconnects, streaming or not, aborts its request (its KV blocks are freed at the engine's next step).
// Generation never holds a transport thread: a request is submitted to the engine and answered from the
// engine's events (RequestHandle::set_notify), so /health and /metrics answer at once under any load.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/http_transport.h"
#include "server/openai_protocol.h"
#include "server/response_dialect.h"
#include "template/chat_template.h"

namespace tritium::server {

struct ServerConfig {
  TransportConfig http;  ///< address, I/O threads, connection cap, timeouts, body limit
  std::string api_key;   ///< "" = no authentication
  std::string model_name = "tritium";
  /// CORS: origins whose browsers may call the API ("*": any); empty = no CORS headers.
  std::vector<std::string> allowed_origins;
};

class CompletionCall;

class OpenAIServer {
 public:
  /// The engine (already started) and tokenizer must outlive the server. chat: the model's chat template
  /// (without one, /v1/chat/completions answers 400).
  OpenAIServer(Engine& engine, const Tokenizer& tok, std::optional<ChatTemplateFiles> chat, ServerConfig cfg);
  ~OpenAIServer();

  /// Binds host:port; returns the bound port. Throws tritium::Error when the address is taken.
  int bind();
  /// Starts serving on the transport's threads (call bind() first); returns at once.
  void start();
  /// Waits until shutdown() has finished.
  void serve();
  /// Graceful shutdown: the listener closes and new requests on open connections get 503; in-flight requests
  /// finish (up to `grace`, then they are aborted and answered with finish_reason "abort"); then every
  /// connection, idle or slow ones included, is closed. Safe to call from any thread, once or more.
  void shutdown(std::chrono::milliseconds grace = std::chrono::minutes(10));
  int port() const { return port_; }
  bool draining() const { return draining_; }
  /// Open HTTP connections.
  int connections() const { return transport_->connections(); }
  /// Open HTTP connections waiting for a request.
  int idle_connections() const { return transport_->idle_connections(); }

 private:
  friend class CompletionCall;
  void handle(HttpRequest req, std::shared_ptr<Responder> res);
  void handle_completion(const HttpRequest& req, std::shared_ptr<Responder> res, bool chat);
  /// POST /v1/responses: the Responses body translated into a chat completion (server/responses_request.h),
  /// answered through a ResponsesDialect (server/responses_dialect.h); no response is stored.
  void handle_responses(const HttpRequest& req, std::shared_ptr<Responder> res);
  /// Anthropic's POST /v1/messages (a chat completion answered through AnthropicDialect) and
  /// /v1/messages/count_tokens ({"input_tokens": the rendered prompt's tokens}). Throws ApiError.
  void handle_messages(const HttpRequest& req, std::shared_ptr<Responder> res, bool count_tokens);
  /// Submits a parsed (chat) completion request and answers it from the engine's events: in the OpenAI shapes,
  /// or through `dialect` (another API translated into a chat completion, server/response_dialect.h).
  /// `id`: the response id. Throws ApiError when the engine refuses a request.
  void start_call(const HttpRequest& req, std::shared_ptr<Responder> res, ParsedRequest pr, std::string id,
                  std::shared_ptr<ResponseDialect> dialect = nullptr);
  HttpResponse json_response(int status, const nlohmann::json& j) const;
  /// `anthropic`: in Anthropic's error shape (the /v1/messages routes).
  HttpResponse error_response(const ApiError& e, bool anthropic = false) const;
  /// Answers `res` with r plus the CORS headers the request's Origin gets.
  void reply(const HttpRequest& req, Responder& res, HttpResponse r) const;
  void add_cors(const HttpRequest& req, HttpResponse& r) const;

  Engine& engine_;
  const Tokenizer& tok_;
  std::optional<ChatTemplate> template_;
  ProtocolContext ctx_;
  ServerConfig cfg_;
  std::unique_ptr<HttpTransport> transport_;
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int> active_{0};  ///< completion calls not yet answered in full
  std::atomic<uint64_t> next_id_{1};
  int64_t created_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::vector<std::weak_ptr<CompletionCall>> calls_;  ///< guarded by mu_ (for shutdown)
};

}  // namespace tritium::server
