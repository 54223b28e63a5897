#include "server/http_server.h"

#include <sys/socket.h>

#include <chrono>
#include <random>

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

/// Decrements a counter when the last copy goes away.
struct ActiveGuard {
  std::atomic<int>& n;
  explicit ActiveGuard(std::atomic<int>& c) : n(c) { ++n; }
  ~ActiveGuard() { --n; }
};

}  // namespace

OpenAIServer::OpenAIServer(Engine& engine, const Tokenizer& tok, std::optional<ChatTemplateFiles> chat, ServerConfig cfg)
    : engine_(engine), tok_(tok), cfg_(std::move(cfg)) {
  created_ = unix_now();
  ctx_.model_name = cfg_.model_name;
  ctx_.tokenizer = &tok_;
  ctx_.max_model_len = engine_.max_model_len();
  if (chat) {
    template_ = ChatTemplate::from_string(chat->source);
    ctx_.chat_template = &*template_;
    ctx_.bos_token = chat->bos_token;
    ctx_.eos_token = chat->eos_token;
  }
  const int threads = cfg_.http_threads > 0 ? cfg_.http_threads : 2 * engine_.config().max_num_seqs + 16;
  svr_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr_.set_payload_max_length(cfg_.max_body_bytes);
  svr_.set_keep_alive_timeout(5);
  svr_.set_read_timeout(30);
  svr_.set_write_timeout(30);
  // cpp-httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's shared library):
  // a burst of more simultaneous connects than that can be reset by the kernel (cpp-httplib issue #1675). We
  // record the listening socket here (keeping the library's default options) and enlarge its backlog in bind().
  svr_.set_socket_options([this](int sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = static_cast<int>(sock);
  });

  svr_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // CORS preflight of any route: answered here, before authentication (browsers send no credentials with it).
    if (req.method == "OPTIONS") {
      res.status = 204;
      res.set_header("Allow", "GET, POST, OPTIONS");
      if (!cors_allow_origin(cfg_.allowed_origins, req.get_header_value("Origin")).empty()) {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        const std::string asked = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
        res.set_header("Access-Control-Max-Age", "600");
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!cfg_.api_key.empty() && req.path.rfind("/v1/", 0) == 0) {
      const std::string want = "Bearer " + cfg_.api_key;
      if (req.get_header_value("Authorization") != want) {
        ApiError e;
        e.status = 401;
        e.message = "Incorrect API key provided.";
        e.code = "invalid_api_key";
        send_error(res, e);
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  svr_.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const std::string allow = cors_allow_origin(cfg_.allowed_origins, req.get_header_value("Origin"));
    if (allow.empty()) return;
    res.set_header("Access-Control-Allow-Origin", allow);
    if (allow != "*") res.set_header("Vary", "Origin");
  });
  // Statuses httplib sets itself (404 no route, 413 payload too large, 400 bad request...) get OpenAI error JSON.
  svr_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.status = res.status;
    if (res.status == 404) {
      e.type = "NotFoundError";
      e.message = fmt::format("{} {}: not found", req.method, req.path);
    } else if (res.status == 413) {
      e.message = "the request body is too large";
    } else {
      e.message = fmt::format("HTTP {}", res.status);
    }
    res.set_content(error_json(e).dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  });
  svr_.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    ApiError e;
    e.status = 500;
    e.type = "internal_server_error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& x) {
      e.message = x.what();
    } catch (...) {
      e.message = "internal error";
    }
    send_error(res, e);
  });

  svr_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) {
      res.status = 503;
      res.set_content("shutting down\n", "text/plain");
      return;
    }
    res.set_content("", "text/plain");
  });
  svr_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(engine_.metrics(), cfg_.model_name), "text/plain; version=0.0.4; charset=utf-8");
  });
  svr_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", cfg_.model_name}, {"object", "model"}, {"created", created_}, {"owned_by", "tritium"},
              {"root", cfg_.model_name}, {"max_model_len", engine_.max_model_len()}};
    res.set_content(json{{"object", "list"}, {"data", json::array({m})}}.dump(), "application/json");
  });
  svr_.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != cfg_.model_name) {
      ApiError e;
      e.status = 404;
      e.type = "NotFoundError";
      e.code = "model_not_found";
      e.message = fmt::format("The model `{}` does not exist.", std::string(req.matches[1]));
      send_error(res, e);
      return;
    }
    res.set_content(json{{"id", cfg_.model_name}, {"object", "model"}, {"created", created_}, {"owned_by", "tritium"}}.dump(),
                    "application/json");
  });
  svr_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, false);
  });
  svr_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, true);
  });
  auto tokenizer_route = [this](json (*fn)(const json&, const ProtocolContext&)) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      json body;
      if (!parse_body(req, res, body)) return;
      try {
        if (body.is_object() && body.contains("model") && body["model"] != cfg_.model_name)
          throw ApiError{404, fmt::format("The model `{}` does not exist.", body["model"].dump()), "NotFoundError",
                         "model", "model_not_found"};
        res.set_content(fn(body, ctx_).dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    };
  };
  svr_.Post("/tokenize", tokenizer_route(&tokenize_json));
  svr_.Post("/detokenize", tokenizer_route(&detokenize_json));
}

bool OpenAIServer::parse_body(const httplib::Request& req, httplib::Response& res, json& body) {
  try {
    body = json::parse(req.body);
    return true;
  } catch (const json::exception& e) {
    send_error(res, ApiError{400, fmt::format("malformed JSON body: {}", e.what()), "invalid_request_error", "", ""});
    return false;
  }
}

OpenAIServer::~OpenAIServer() {
  svr_.stop();
  if (thread_.joinable()) thread_.join();
}

void OpenAIServer::send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  // An error message may quote the client's bytes (a JSON parse error echoes the offending byte): invalid
  // UTF-8 there becomes U+FFFD instead of making dump() throw (which turned a 400 into a 500).
  res.set_content(error_json(e).dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

int OpenAIServer::bind() {
  if (cfg_.port == 0) {
    port_ = svr_.bind_to_any_port(cfg_.host);
    if (port_ <= 0) fail("serve: cannot bind {} (any port)", cfg_.host);
  } else {
    if (!svr_.bind_to_port(cfg_.host, cfg_.port)) fail("serve: cannot bind {}:{} (address in use?)", cfg_.host, cfg_.port);
    port_ = cfg_.port;
  }
  // A second listen() on a listening socket updates its backlog (Linux); capped by net.core.somaxconn.
  if (listen_fd_ >= 0) ::listen(listen_fd_, 4096);
  return port_;
}

void OpenAIServer::serve() { svr_.listen_after_bind(); }

void OpenAIServer::start() {
  bind();
  thread_ = std::thread([this] { serve(); });
  while (!svr_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void OpenAIServer::shutdown(std::chrono::milliseconds grace) {
  draining_ = true;
  engine_.drain();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while ((engine_.num_unfinished() > 0 || active_.load() > 0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  svr_.stop();
  if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

void OpenAIServer::handle_completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  auto guard = std::make_shared<ActiveGuard>(active_);
  if (draining_) {
    send_error(res, ApiError{503, "the server is shutting down", "service_unavailable", "", ""});
    return;
  }
  json body;
  if (!parse_body(req, res, body)) return;
  ParsedRequest pr;
  try {
    pr = parse_request(body, chat, ctx_);
  } catch (const ApiError& e) {
    send_error(res, e);
    return;
  }
  // Submit every choice (prompt p, sample i -> index p * n + i).
  std::vector<std::shared_ptr<RequestHandle>> hs;
  try {
    for (size_t p = 0; p < pr.prompts.size(); ++p)
      for (int i = 0; i < pr.n; ++i) hs.push_back(engine_.add_request(make_engine_request(pr, p, i)));
  } catch (const RequestError& e) {
    for (auto& h : hs) engine_.abort(h->id());
    send_error(res, from_request_error(e));
    return;
  }
  const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", random_hex(next_id_++));
  const int64_t created = unix_now();

  if (!pr.stream) {
    std::vector<RequestOutput> outs;
    for (auto& h : hs) outs.push_back(h->wait_all());
    for (const auto& o : outs) {
      if (o.finish_reason == "error") {
        send_error(res, ApiError{500, o.error, "internal_server_error", "", ""});
        return;
      }
    }
    res.set_content(build_response(pr, outs, id, created, ctx_).dump(), "application/json");
    return;
  }

  struct StreamState {
    ParsedRequest pr;
    std::vector<std::shared_ptr<RequestHandle>> hs;
    std::vector<bool> finished, started;
    std::vector<size_t> text_offsets;  // per choice: characters streamed so far (logprobs.text_offset)
    int64_t prompt_tokens = 0, completion_tokens = 0;
    std::string id;
    int64_t created = 0;
  };
  auto st = std::make_shared<StreamState>();
  st->pr = std::move(pr);
  st->hs = std::move(hs);
  st->finished.assign(st->hs.size(), false);
  st->started.assign(st->hs.size(), false);
  st->text_offsets.assign(st->hs.size(), 0);
  st->id = id;
  st->created = created;
  auto abort_all = [this, st] {
    for (size_t k = 0; k < st->hs.size(); ++k)
      if (!st->finished[k]) engine_.abort(st->hs[k]->id());
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st, abort_all](size_t, httplib::DataSink& sink) {
        auto send = [&](const json& j) {
          const std::string s = "data: " + j.dump() + "\n\n";
          return sink.write(s.data(), s.size());
        };
        size_t unfinished = 0;
        for (bool f : st->finished) unfinished += f ? 0 : 1;
        bool wrote = false;
        for (size_t k = 0; k < st->hs.size(); ++k) {
          if (st->finished[k]) continue;
          RequestOutput ev;
          auto wait = std::chrono::milliseconds(unfinished == 1 ? 50 : 0);
          while (!st->finished[k] && st->hs[k]->next(ev, wait)) {
            wait = std::chrono::milliseconds(0);
            const bool first = !st->started[k];
            if (ev.finished) {
              st->finished[k] = true;
              --unfinished;
              if (k % static_cast<size_t>(st->pr.n) == 0) st->prompt_tokens += ev.prompt_tokens;
              st->completion_tokens += ev.completion_tokens;
            }
            if (first || ev.finished || !ev.text.empty() || !ev.logprobs.empty()) {
              st->started[k] = true;
              wrote = true;
              if (!send(build_chunk(st->pr, static_cast<int>(k), ev, first, st->id, st->created, ctx_,
                                    st->text_offsets[k]))) {
                abort_all();
                return false;
              }
            }
          }
        }
        if (unfinished == 0) {
          if (st->pr.include_usage &&
              !send(build_usage_chunk(st->pr, st->prompt_tokens, st->completion_tokens, st->id, st->created, ctx_)))
            return false;
          static const std::string done = "data: [DONE]\n\n";
          if (!sink.write(done.data(), done.size())) return false;
          sink.done();
          return true;
        }
        if (!wrote && !sink.is_writable()) {
          abort_all();
          return false;
        }
        if (!wrote && st->hs.size() > 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        return true;
      },
      [guard, abort_all](bool success) {
        if (!success) abort_all();  // client went away: free its blocks now
      });
}

}  // namespace tritium::server
