#include "server/completion_call.h"

namespace tritium::server {

using nlohmann::json;

namespace {
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
}  // namespace

CompletionCall::CompletionCall(Engine& engine, const ProtocolContext& ctx, ParsedRequest pr,
                               std::vector<std::shared_ptr<RequestHandle>> handles, std::shared_ptr<Responder> res,
                               std::string id, int64_t created,
                               std::vector<std::pair<std::string, std::string>> headers, std::atomic<int>& active,
                               std::shared_ptr<ResponseDialect> dialect)
    : engine_(engine),
      ctx_(ctx),
      pr_(std::move(pr)),
      hs_(std::move(handles)),
      res_(std::move(res)),
      id_(std::move(id)),
      created_(created),
      headers_(std::move(headers)),
      active_(active),
      dialect_(std::move(dialect)) {
  ++active_;
  finished_.assign(hs_.size(), false);
  started_.assign(hs_.size(), false);
  text_offsets_.assign(hs_.size(), 0);
  held_.assign(hs_.size(), std::string());
  content_mode_.assign(hs_.size(), false);
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

void CompletionCall::send(const json& j) {
  if (dialect_) {
    const std::string events = dialect_->stream_chunk(j);
    if (!events.empty()) res_->send_chunk(events);
    return;
  }
  res_->send_chunk("data: " + dump(j) + "\n\n");
}

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
    if (pr_.tool_syntax != ToolCallSyntax::kNone) {
      send_with_tool_calls(k, std::move(ev), first);
      continue;
    }
    if (first || ev.finished || !ev.text.empty() || !ev.logprobs.empty()) {
      started_[k] = true;
      send(build_chunk(pr_, static_cast<int>(k), ev, first, id_, created_, ctx_, text_offsets_[k]));
    }
  }
}

// Chat with tools: text that may still be a call (it starts like the syntax's marker, or the call is forced) is
// held back; at the end a call is sent as delta.tool_calls (finish_reason "tool_calls"), anything else as content.
void CompletionCall::send_with_tool_calls(size_t k, RequestOutput ev, bool first) {
  held_[k] += ev.text;
  std::string shown;
  if (content_mode_[k]) {
    shown = ev.text;
  } else if (!pr_.tool_call_forced) {
    const std::string mk = tool_call_marker(pr_.tool_syntax);
    const size_t a = held_[k].find_first_not_of(" \t\r\n");
    const std::string t = a == std::string::npos ? std::string() : held_[k].substr(a);
    const bool maybe_call = t.size() >= mk.size() ? t.compare(0, mk.size(), mk) == 0 : mk.compare(0, t.size(), t) == 0;
    if (!maybe_call) {
      content_mode_[k] = true;
      shown = held_[k];
    }
  }
  const bool finished = ev.finished;
  const std::string reason = ev.finish_reason;
  ev.text = shown;
  if (!(first || finished || !ev.text.empty() || !ev.logprobs.empty())) return;
  started_[k] = true;
  json chunk = build_chunk(pr_, static_cast<int>(k), ev, first, id_, created_, ctx_, text_offsets_[k]);
  if (finished && !content_mode_[k]) {
    std::string content;
    const std::vector<ToolCall> calls = parse_tool_calls(held_[k], pr_.tool_syntax, content);
    json& c = chunk["choices"][0];
    if (!calls.empty()) {
      c["delta"]["tool_calls"] = tool_calls_json(calls, id_, k);
      if (!content.empty()) c["delta"]["content"] = content;
      if (reason == "stop") c["finish_reason"] = "tool_calls";
    } else if (!held_[k].empty()) {
      c["delta"]["content"] = held_[k];
    }
  }
  send(chunk);
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
  if (pr_.stream && dialect_) {
    res_->send_chunk(dialect_->stream_end(prompt_tokens_, completion_tokens_));
    res_->end_stream();
    return;
  }
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
      const ApiError e{500, o.error, "internal_server_error", "", ""};
      r.body = dump(dialect_ ? dialect_->error(e) : error_json(e));
      res_->respond(std::move(r));
      return;
    }
  }
  const json chat = build_response(pr_, outs_, id_, created_, ctx_);
  r.body = dump(dialect_ ? dialect_->response(chat) : chat);
  res_->respond(std::move(r));
}

}  // namespace tritium::server
