#include "server/openai_server.h"

#include <chrono>
#include <random>
#include <thread>

#include "server/anthropic_dialect.h"
#include "server/anthropic_request.h"
#include "server/completion_call.h"
#include "server/metrics.h"
#include "server/responses_dialect.h"
#include "server/responses_request.h"
#include "server/structured_output.h"

namespace tritium::server {

using nlohmann::json;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string random_hex(uint64_t salt) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{:016x}", rng() ^ salt);
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiError from_request_error(const RequestError& e) {
  ApiError a;
  a.message = e.what();
  switch (e.kind()) {
    case RequestError::Kind::kInvalid: a.status = 400; break;
    case RequestError::Kind::kTooLong: a.status = 400; a.code = "context_length_exceeded"; a.param = "max_tokens"; break;
    case RequestError::Kind::kOverloaded: a.status = 429; a.type = "rate_limit_error"; break;
    case RequestError::Kind::kUnavailable: a.status = 503; a.type = "service_unavailable"; break;
  }
  return a;
}

ApiError not_found(const std::string& message, const std::string& code = "") {
  return ApiError{404, message, "NotFoundError", "", code};
}

/// The transport's own answers (malformed requests, limits, the connection cap) as OpenAI error JSON.
HttpResponse transport_error(int status, const std::string& message, size_t max_body) {
  ApiError e;
  e.status = status;
  e.message = message;
  if (status == 413) e.message = fmt::format("the request body is too large (limit {} bytes)", max_body);
  if (status == 431) e.message = "the request header is too large";
  if (status == 503) e.type = "service_unavailable";
  if (status >= 500 && status != 503) e.type = "internal_server_error";
  HttpResponse r;
  r.status = status;
  r.body = dump(error_json(e));
  return r;
}

}  // namespace

OpenAIServer::OpenAIServer(Engine& engine, const Tokenizer& tok, std::optional<ChatTemplateFiles> chat, ServerConfig cfg)
    : engine_(engine), tok_(tok), cfg_(std::move(cfg)) {
  created_ = unix_now();
  ctx_.model_name = cfg_.model_name;
  ctx_.tokenizer = &tok_;
  ctx_.max_model_len = engine_.max_model_len();
  ctx_.grammars = std::make_shared<GrammarCache>(make_vocabulary(tok_));
  if (chat) {
    template_ = ChatTemplate::from_string(chat->source);
    ctx_.chat_template = &*template_;
    ctx_.bos_token = chat->bos_token;
    ctx_.eos_token = chat->eos_token;
    ctx_.tool_syntax = detect_tool_call_syntax(chat->source);
  }
  const size_t max_body = cfg_.http.max_body_bytes;
  transport_ = std::make_unique<HttpTransport>(
      cfg_.http, [this](HttpRequest req, std::shared_ptr<Responder> res) { handle(std::move(req), std::move(res)); },
      [max_body](int status, const std::string& message) { return transport_error(status, message, max_body); });
}

OpenAIServer::~OpenAIServer() {
  shutdown(std::chrono::milliseconds(0));
}

int OpenAIServer::bind() {
  port_ = transport_->bind();
  return port_;
}

void OpenAIServer::start() {
  if (port_ == 0) bind();
  transport_->start();
}

void OpenAIServer::serve() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return stopped_; });
}

void OpenAIServer::shutdown(std::chrono::milliseconds grace) {
  if (draining_.exchange(true)) {  // another thread is shutting down (or has): wait for it
    serve();
    return;
  }
  transport_->stop_accepting();
  engine_.drain();
  auto live_calls = [&] {
    std::vector<std::shared_ptr<CompletionCall>> v;
    std::lock_guard lk(mu_);
    for (auto& w : calls_)
      if (auto c = w.lock()) v.push_back(std::move(c));
    return v;
  };
  auto wait_idle = [&](std::chrono::steady_clock::time_point until) {
    while ((engine_.num_unfinished() > 0 || active_.load() > 0) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  wait_idle(std::chrono::steady_clock::now() + grace);
  // Past the grace period: abort what is left and give the "abort" answers a moment to be written.
  for (auto& c : live_calls()) c->abort_all();
  wait_idle(std::chrono::steady_clock::now() + std::chrono::seconds(2));
  // No engine callback may post into the transport once it is gone.
  for (auto& c : live_calls()) c->unsubscribe();
  transport_->stop();
  {
    std::lock_guard lk(mu_);
    stopped_ = true;
    calls_.clear();
  }
  cv_.notify_all();
}

HttpResponse OpenAIServer::json_response(int status, const json& j) const {
  HttpResponse r;
  r.status = status;
  r.body = dump(j);
  return r;
}

HttpResponse OpenAIServer::error_response(const ApiError& e, bool anthropic) const {
  return json_response(e.status, anthropic ? anthropic_error_json(e) : error_json(e));
}

void OpenAIServer::add_cors(const HttpRequest& req, HttpResponse& r) const {
  const std::string allow = cors_allow_origin(cfg_.allowed_origins, req.header("origin"));
  if (allow.empty()) return;
  r.headers.emplace_back("Access-Control-Allow-Origin", allow);
  if (allow != "*") r.headers.emplace_back("Vary", "Origin");
}

void OpenAIServer::reply(const HttpRequest& req, Responder& res, HttpResponse r) const {
  add_cors(req, r);
  res.respond(std::move(r));
}

void OpenAIServer::handle(HttpRequest req, std::shared_ptr<Responder> res) {
  // CORS preflight of any route: answered before authentication (browsers send no credentials with it).
  if (req.method == "OPTIONS") {
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    r.headers.emplace_back("Allow", "GET, POST, OPTIONS");
    if (!cors_allow_origin(cfg_.allowed_origins, req.header("origin")).empty()) {
      r.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      const std::string asked = req.header("access-control-request-headers");
      r.headers.emplace_back("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
      r.headers.emplace_back("Access-Control-Max-Age", "600");
    }
    return reply(req, *res, std::move(r));
  }
  // Anthropic's Messages API routes answer errors in Anthropic's shape (server/anthropic_dialect.h).
  const bool anthropic = req.path.rfind("/v1/messages", 0) == 0;
  try {
    // The key as OpenAI clients send it (Authorization: Bearer) or as Anthropic clients do (x-api-key).
    if (!cfg_.api_key.empty() && req.path.rfind("/v1/", 0) == 0 && req.header("authorization") != "Bearer " + cfg_.api_key &&
        req.header("x-api-key") != cfg_.api_key)
      throw ApiError{401, "Incorrect API key provided.", "invalid_request_error", "", "invalid_api_key"};
    const bool get = req.method == "GET", post = req.method == "POST";
    const std::string& p = req.path;
    if (p == "/health" && get) {
      HttpResponse r;
      r.content_type = "text/plain";
      if (draining_) {
        r.status = 503;
        r.body = "shutting down\n";
      }
      return reply(req, *res, std::move(r));
    }
    if (p == "/metrics" && get) {
      HttpResponse r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = render_metrics(engine_.metrics(), cfg_.model_name);
      return reply(req, *res, std::move(r));
    }
    if (p == "/v1/models" && get) {
      json m = {{"id", cfg_.model_name}, {"object", "model"}, {"created", created_}, {"owned_by", "tritium"},
                {"root", cfg_.model_name}, {"max_model_len", engine_.max_model_len()}};
      return reply(req, *res, json_response(200, json{{"object", "list"}, {"data", json::array({m})}}));
    }
    if (p.rfind("/v1/models/", 0) == 0 && p.size() > 11 && get) {
      const std::string name = p.substr(11);
      if (name != cfg_.model_name) throw not_found(fmt::format("The model `{}` does not exist.", name), "model_not_found");
      return reply(req, *res,
                   json_response(200, json{{"id", cfg_.model_name}, {"object", "model"}, {"created", created_},
                                           {"owned_by", "tritium"}}));
    }
    if ((p == "/v1/completions" || p == "/v1/chat/completions") && post)
      return handle_completion(req, res, p == "/v1/chat/completions");
    if (p == "/v1/responses" && post) return handle_responses(req, res);
    if ((p == "/v1/messages" || p == "/v1/messages/count_tokens") && post)
      return handle_messages(req, res, p == "/v1/messages/count_tokens");
    if ((p == "/tokenize" || p == "/detokenize") && post) {
      const json body = parse_client_json(req.body);
      if (body.is_object() && body.contains("model") && body["model"] != cfg_.model_name)
        throw ApiError{404, fmt::format("The model `{}` does not exist.", body["model"].dump()), "NotFoundError",
                       "model", "model_not_found"};
      return reply(req, *res, json_response(200, p == "/tokenize" ? tokenize_json(body, ctx_) : detokenize_json(body, ctx_)));
    }
    static const char* const kRoutes[] = {"/health", "/metrics", "/v1/models", "/v1/completions",
                                          "/v1/chat/completions", "/v1/responses", "/tokenize",
                                          "/detokenize", "/v1/messages", "/v1/messages/count_tokens"};
    for (const char* r : kRoutes)
      if (p == r) throw ApiError{405, fmt::format("{} {}: method not allowed", req.method, p), "invalid_request_error", "", ""};
    throw not_found(fmt::format("{} {}: not found", req.method, p));
  } catch (const ApiError& e) {
    reply(req, *res, error_response(e, anthropic));
  } catch (const std::exception& x) {
    reply(req, *res, error_response(ApiError{500, x.what(), "internal_server_error", "", ""}, anthropic));
  }
}

void OpenAIServer::handle_messages(const HttpRequest& req, std::shared_ptr<Responder> res, bool count_tokens) {
  if (draining_) throw ApiError{503, "the server is shutting down", "service_unavailable", "", ""};
  const json body = parse_client_json(req.body);
  json chat = anthropic_to_chat(body, count_tokens);
  if (count_tokens) {
    if (chat["model"] != cfg_.model_name)
      throw not_found(fmt::format("The model `{}` does not exist.", chat["model"].get<std::string>()), "model_not_found");
    chat.erase("model");
    chat.erase("tool_choice");
    return reply(req, *res, json_response(200, json{{"input_tokens", tokenize_json(chat, ctx_)["count"]}}));
  }
  ParsedRequest pr = parse_request(chat, true, ctx_);
  const std::string id = "msg_" + random_hex(next_id_++);
  const auto input_tokens = static_cast<int64_t>(pr.prompts[0].size());
  start_call(req, std::move(res), std::move(pr), id, std::make_shared<AnthropicDialect>(id, cfg_.model_name, input_tokens));
}

void OpenAIServer::handle_completion(const HttpRequest& req, std::shared_ptr<Responder> res, bool chat) {
  if (draining_) throw ApiError{503, "the server is shutting down", "service_unavailable", "", ""};
  // Parsed with the nesting bound (kMaxJsonDepth): a deep body is refused at its first level past it.
  const json body = parse_client_json(req.body);
  ParsedRequest pr = parse_request(body, chat, ctx_);
  start_call(req, std::move(res), std::move(pr), fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", random_hex(next_id_++)));
}

void OpenAIServer::handle_responses(const HttpRequest& req, std::shared_ptr<Responder> res) {
  if (draining_) throw ApiError{503, "the server is shutting down", "service_unavailable", "", ""};
  const json body = parse_client_json(req.body);
  const json chat = responses_to_chat(body);
  const std::string id = "resp_" + random_hex(next_id_++);
  try {
    ParsedRequest pr = parse_request(chat, true, ctx_);
    auto dialect = std::make_shared<ResponsesDialect>(responses_echo(body), id, cfg_.model_name, unix_now());
    start_call(req, std::move(res), std::move(pr), id, std::move(dialect));
  } catch (ApiError& e) {
    // Errors about the translated chat body name the Responses field it came from.
    e.param = responses_param(e.param);
    throw;
  }
}

void OpenAIServer::start_call(const HttpRequest& req, std::shared_ptr<Responder> res, ParsedRequest pr, std::string id,
                              std::shared_ptr<ResponseDialect> dialect) {
  std::vector<std::shared_ptr<RequestHandle>> hs;
  try {
    for (size_t p = 0; p < pr.prompts.size(); ++p)
      for (int i = 0; i < pr.n; ++i) hs.push_back(engine_.add_request(make_engine_request(pr, p, i)));
  } catch (const RequestError& e) {
    for (auto& h : hs) engine_.abort(h->id());
    throw from_request_error(e);
  }
  HttpResponse cors;
  add_cors(req, cors);
  auto call = std::make_shared<CompletionCall>(engine_, ctx_, std::move(pr), std::move(hs), res, std::move(id),
                                               unix_now(), std::move(cors.headers), active_, std::move(dialect));
  {
    std::lock_guard lk(mu_);
    std::erase_if(calls_, [](const std::weak_ptr<CompletionCall>& w) { return w.expired(); });
    calls_.push_back(call);
  }
  call->start();
}

}  // namespace tritium::server
