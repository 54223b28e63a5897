// tritium server: the OpenAI-compatible HTTP server (cpp-httplib) in front of the serving engine.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (JSON or SSE streaming ending in "data: [DONE]"),
// GET /v1/models, GET /health, GET /metrics (Prometheus text, vLLM's metric names with the prefix "tritium:"),
// POST /tokenize and /detokenize (vLLM's shapes), and OPTIONS preflight with CORS headers for
// ServerConfig::allowed_origins.
// Errors are OpenAI error JSON: 400 bad request / context too long, 401 wrong API key, 404 unknown model or
// route, 413 body too large, 429 too many requests in flight, 503 shutting down. A streaming client that
// disconnects aborts its request (its KV blocks are freed at the engine's next step).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "server/openai_protocol.h"
#include "template/chat_template.h"

namespace tritium::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                    ///< 0 = an ephemeral port (tests)
  std::string api_key;                ///< "" = no authentication
  std::string model_name = "tritium";
  size_t max_body_bytes = 4u << 20;   ///< larger bodies get 413
  int http_threads = 0;               ///< 0 = 2 * max_num_seqs + 16 (a streaming client holds one thread)
  /// CORS: origins whose browsers may call the API ("*": any); empty = no CORS headers.
  std::vector<std::string> allowed_origins;
};

/// Prometheus text exposition (format 0.0.4) of the engine's metrics.
std::string render_metrics(const EngineMetrics& m, const std::string& model_name);

class OpenAIServer {
 public:
  /// The engine (already started) and tokenizer must outlive the server. chat: the model's chat template
  /// (without one, /v1/chat/completions answers 400).
  OpenAIServer(Engine& engine, const Tokenizer& tok, std::optional<ChatTemplateFiles> chat, ServerConfig cfg);
  ~OpenAIServer();

  /// Binds host:port; returns the bound port. Throws tritium::Error when the address is taken.
  int bind();
  /// Serves until shutdown() (call bind() first). Returns when the listener has stopped.
  void serve();
  /// bind() + serve() on a background thread.
  void start();
  /// Graceful shutdown: new requests get 503, in-flight requests finish (up to `grace`, then they are
  /// aborted), then the listener stops. Safe to call from any thread (e.g. a signal-waiting thread), once or more.
  void shutdown(std::chrono::milliseconds grace = std::chrono::minutes(10));
  int port() const { return port_; }
  bool draining() const { return draining_; }

 private:
  void handle_completion(const httplib::Request& req, httplib::Response& res, bool chat);
  /// Parses the body as JSON into `body`; on failure answers 400 and returns false.
  bool parse_body(const httplib::Request& req, httplib::Response& res, nlohmann::json& body);
  void send_error(httplib::Response& res, const ApiError& e);

  Engine& engine_;
  const Tokenizer& tok_;
  std::optional<ChatTemplate> template_;
  ProtocolContext ctx_;
  ServerConfig cfg_;
  int listen_fd_ = -1;  ///< the listening socket (recorded by the socket-options callback)
  httplib::Server svr_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int> active_{0};  ///< requests being answered (a stream counts until its last byte)
  std::atomic<uint64_t> next_id_{1};
  int64_t created_ = 0;
};

}  // namespace tritium::server
