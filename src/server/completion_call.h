// tritium server: one completion or chat completion request in flight, answered from the engine's events.
//
// The call submits nothing itself: it takes the engine handles of its choices (prompt p, sample i -> index
// p * n + i) and writes the answer as their events arrive, on the connection's strand: SSE chunks as they come
// (stream), or one JSON response when every choice has finished. A client that disconnects aborts every choice;
// so does destroying the call before it has answered. With a ResponseDialect (server/response_dialect.h) the
// same call answers another API: its chunks, response and errors go through the dialect.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "server/http_message.h"
#include "server/openai_protocol.h"
#include "server/response_dialect.h"

namespace tritium::server {

class CompletionCall : public std::enable_shared_from_this<CompletionCall> {
 public:
  /// `active` counts calls alive (decremented when this one is destroyed, i.e. after its last byte is out).
  /// `headers` go on the response (CORS).
  CompletionCall(Engine& engine, const ProtocolContext& ctx, ParsedRequest pr,
                 std::vector<std::shared_ptr<RequestHandle>> handles, std::shared_ptr<Responder> res,
                 std::string id, int64_t created, std::vector<std::pair<std::string, std::string>> headers,
                 std::atomic<int>& active, std::shared_ptr<ResponseDialect> dialect = nullptr);
  ~CompletionCall();

  /// Hands the call to the connection and subscribes to the engine's events.
  void start();
  /// Aborts every choice not yet finished (any thread); they end with finish_reason "abort".
  void abort_all();
  /// Stops the engine's callbacks into this call (server shutdown, before the transport goes away).
  void unsubscribe();

 private:
  void pump();
  void pump_stream(size_t k);
  void send_with_tool_calls(size_t k, RequestOutput ev, bool first);
  void finish();
  void send(const nlohmann::json& j);

  Engine& engine_;
  const ProtocolContext& ctx_;
  ParsedRequest pr_;
  std::vector<std::shared_ptr<RequestHandle>> hs_;
  std::shared_ptr<Responder> res_;
  std::string id_;
  int64_t created_;
  std::vector<std::pair<std::string, std::string>> headers_;
  std::atomic<int>& active_;
  std::shared_ptr<ResponseDialect> dialect_;  ///< null: the OpenAI completions / chat completions shapes
  /// What the engine's callback holds: it never owns the call, so the call is never destroyed on the engine's
  /// thread (under the handle's lock).
  struct Wakeup {
    std::atomic<bool> scheduled{false};
    std::shared_ptr<Responder> res;
    std::weak_ptr<CompletionCall> call;
  };
  std::shared_ptr<Wakeup> wake_;
  // On the strand only:
  std::vector<bool> finished_, started_;
  std::vector<size_t> text_offsets_;  ///< per choice: characters streamed so far (logprobs.text_offset)
  std::vector<RequestOutput> outs_;   ///< non-streaming: each choice's events so far
  std::vector<std::string> held_;     ///< chat with tools: each choice's text so far
  std::vector<bool> content_mode_;    ///< chat with tools: the choice is plain content (no call)
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  size_t unfinished_ = 0;
  bool answered_ = false;
};

}  // namespace tritium::server
