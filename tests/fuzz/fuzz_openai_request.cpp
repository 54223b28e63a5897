// libFuzzer target: OpenAI request bodies (server/openai_protocol.h) on arbitrary bytes: JSON parsing with the
// server's nesting bound, then parse_request for /v1/completions and /v1/chat/completions (the bundled model's
// tokenizer and chat template) and the engine requests built from it (structured output: the grammar compiled and
// its first token mask); also /tokenize and /detokenize; /v1/responses (server/responses_request.h): the body
// translated into a chat completions body, which then goes through parse_request, and its echo fields; and
// Anthropic's /v1/messages and count_tokens bodies (server/anthropic_request.h) translated into chat bodies that then
// go through parse_request / tokenize_json, and the AnthropicDialect's answer to a synthetic chat completion of the
// body's text. Acceptable failures: a JSON parse error or too deep a document, and an ApiError (a 4xx answer);
// anything else is a bug. Seeds: tests/fuzz/openai_request/ (among them deep_schema.json, a schema nested 2,000
// levels, and deep_schema_string.json, one of 1,000 levels given as a JSON string in guided_json: both refused at
// the bound; responses_*.json: Responses bodies; messages_*.json: Messages API bodies).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "server/anthropic_dialect.h"
#include "server/anthropic_request.h"
#include "server/openai_protocol.h"
#include "server/responses_request.h"
#include "server/structured_output.h"

namespace {

struct Context {
  std::unique_ptr<tritium::Tokenizer> tok;
  std::optional<tritium::ChatTemplate> tmpl;
  tritium::server::ProtocolContext ctx;
  Context() {
    const std::string dir = tritium::fuzz::bundled_model();
    tok = tritium::Tokenizer::from_file(dir + "/tokenizer.json");
    const tritium::ChatTemplateFiles f = tritium::load_chat_template(dir);
    tmpl = tritium::ChatTemplate::from_string(f.source);
    ctx.model_name = "tiny-bitnet";
    ctx.tokenizer = tok.get();
    ctx.chat_template = &*tmpl;
    ctx.bos_token = f.bos_token;
    ctx.eos_token = f.eos_token;
    ctx.max_model_len = 1024;
    ctx.grammars = std::make_shared<tritium::server::GrammarCache>(tritium::server::make_vocabulary(*tok));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Context c;
  // The server's own parse: nesting bounded while parsing (server::kMaxJsonDepth); a refused body ends here.
  nlohmann::json body;
  std::string error;
  if (!tritium::server::parse_json_bounded(std::string_view(reinterpret_cast<const char*>(data), size), body, error))
    return 0;
  for (bool chat : {false, true}) {
    try {
      const tritium::server::ParsedRequest r = tritium::server::parse_request(body, chat, c.ctx);
      for (size_t p = 0; p < r.prompts.size(); ++p)
        for (int i = 0; i < r.n; ++i) (void)tritium::server::make_engine_request(r, p, i);
      if (const auto& g = r.base.constraints.grammar) {  // the first step of constrained decoding
        const int32_t s0 = g->start();
        (void)g->mask(s0);
        (void)g->can_continue(s0);
      }
    } catch (const tritium::server::ApiError&) {
    }
  }
  try {
    const nlohmann::json chat = tritium::server::responses_to_chat(body);
    (void)tritium::server::responses_echo(body);
    const tritium::server::ParsedRequest r = tritium::server::parse_request(chat, true, c.ctx);
    (void)tritium::server::make_engine_request(r, 0, 0);
  } catch (const tritium::server::ApiError& e) {
    (void)tritium::server::responses_param(e.param);
  }
  try {
    (void)tritium::server::tokenize_json(body, c.ctx);
  } catch (const tritium::server::ApiError&) {
  }
  try {
    (void)tritium::server::detokenize_json(body, c.ctx);
  } catch (const tritium::server::ApiError&) {
  }
  for (bool count_tokens : {false, true}) {
    try {
      nlohmann::json chat = tritium::server::anthropic_to_chat(body, count_tokens);
      if (count_tokens) {
        chat.erase("model");
        chat.erase("tool_choice");
        (void)tritium::server::tokenize_json(chat, c.ctx);
      } else {
        const tritium::server::ParsedRequest r = tritium::server::parse_request(chat, true, c.ctx);
        tritium::server::AnthropicDialect d("msg_f", "tiny-bitnet", static_cast<int64_t>(r.prompts[0].size()));
        const std::string text = chat["messages"].back().value("content", std::string());
        const nlohmann::json done = {{"choices", {{{"finish_reason", "stop"}, {"stop_reason", text},
                                                    {"message", {{"role", "assistant"}, {"content", text}}}}}},
                                     {"usage", {{"prompt_tokens", 1}, {"completion_tokens", 1}}}};
        (void)d.response(done);
        (void)d.stream_chunk({{"choices", {{{"delta", {{"content", text}}}, {"finish_reason", "length"}}}}});
        (void)d.stream_end(1, 1);
      }
    } catch (const tritium::server::ApiError&) {
    }
  }
  return 0;
}
