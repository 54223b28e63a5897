#include "server/completion_call.h"

namespace tritium::server {

using nlohmann::json;

namespace {
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
}  // namespace

CompletionCall::CompletionCall(Engine& engine, const ProtocolContext& ctx, ParsedRequest pr,
                               std::vector<std::shared_ptr<RequestHandle>> handles, std::shared_ptr<Responder> res,
                               std::string id, int64_t created,
                               std::vector<std::pair<std::string, std::string>> headers, std::atomic<int>& active)
    : engine_(engine),
      ctx_(ctx),
      pr_(std::move(pr)),
      hs_(std::move(handles)),
      res_(std::move(res)),
      id_(std::move(id)),
      created_(created),
      headers_(std::move(headers)),
      active_(active) {
  ++active_;
  finished_.assign(hs_.size(), false);
  started_.assign(hs_.size(), false);
  text_offsets_.assign(hs_.size(), 0);
  outs_.resize(hs_.size());
  unfinished_ = hs_.size();
}

CompletionCall::~CompletionCall() {
  unsubscribe();
  if (!answered_) abort_all();
  --active_;
}

void CompletionCall::start() {
  const std::weak_ptr<CompletionCall> w = weak_from_this();
  res_->hold(shared_from_this());
  res_->on_disconnect([w] {
    if (auto c = w.lock()) c->abort_all();  // the client went away: free its KV blocks now
  });
  if (pr_.stream) {
    HttpResponse head;
    head.content_type = "text/event-stream";
    head.headers = headers_;
    head.headers.emplace_back("Cache-Control", "no-cache");
    res_->start_stream(std::move(head));
  }
  wake_ = std::make_shared<Wakeup>();
  wake_->res = res_;
  wake_->call = w;
  // Coalesces the engine's notifications: one pump on the strand per burst of events.
  for (auto& h : hs_)
    h->set_notify([wk = wake_] {
      if (wk->scheduled.exchange(true)) return;
      wk->res->post([wk] {
        wk->scheduled = false;
        if (auto c = wk->call.lock()) c->pump();
      });
    });
}

void CompletionCall::abort_all() {
  for (auto& h : hs_) engine_.abort(h->id());  // finished ids are ignored by the engine
}

void CompletionCall::unsubscribe() {
  for (auto& h : hs_) h->set_notify(nullptr);
}

void CompletionCall::send(const json& j) { res_->send_chunk("data: " + dump(j) + "\n\n"); }

void CompletionCall::pump_stream(size_t k) {
  RequestOutput ev;
  while (!finished_[k] && hs_[k]->next(ev, std::chrono::milliseconds(0))) {
    const bool first = !started_[k];
    if (ev.finished) {
      finished_[k] = true;
      --unfinished_;
      if (k % static_cast<size_t>(pr_.n) == 0) prompt_tokens_ += ev.prompt_tokens;
      completion_tokens_ += ev.completion_tokens;
    }
    if (first || ev.finished || !ev.text.empty() || !ev.logprobs.empty()) {
      started_[k] = true;
      send(build_chunk(pr_, static_cast<int>(k), ev, first, id_, created_, ctx_, text_offsets_[k]));
    }
  }
}

void CompletionCall::pump() {
  if (answered_) return;
  for (size_t k = 0; k < hs_.size(); ++k) {
    if (finished_[k]) continue;
    if (pr_.stream) {
      pump_stream(k);
      continue;
    }
    RequestOutput ev;
    while (!finished_[k] && hs_[k]->next(ev, std::chrono::milliseconds(0))) {
      if (ev.finished) {
        finished_[k] = true;
        --unfinished_;
      }
      append_output(outs_[k], std::move(ev));
    }
  }
  if (unfinished_ == 0) finish();
}

void CompletionCall::finish() {
  answered_ = true;
  if (pr_.stream) {
    if (pr_.include_usage) send(build_usage_chunk(pr_, prompt_tokens_, completion_tokens_, id_, created_, ctx_));
    res_->send_chunk("data: [DONE]\n\n");
    res_->end_stream();
    return;
  }
  HttpResponse r;
  r.headers = headers_;
  for (const auto& o : outs_) {
    if (o.finish_reason == "error") {
      r.status = 500;
      r.body = dump(error_json(ApiError{500, o.error, "internal_server_error", "", ""}));
      res_->respond(std::move(r));
      return;
    }
  }
  r.body = dump(build_response(pr_, outs_, id_, created_, ctx_));
  res_->respond(std::move(r));
}

}  // namespace tritium::server
