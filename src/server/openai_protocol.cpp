#include "server/openai_protocol.h"
#include "server/structured_output.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "tokenizer/utf8.h"

namespace tritium::server {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  ApiError e;
  e.status = 400;
  e.message = msg;
  e.param = param;
  throw e;
}

double get_number(const json& b, const char* key, double def, double lo, double hi) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return def;
  if (!it->is_number()) bad(key, fmt::format("'{}' must be a number", key));
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, v));
  return v;
}

int64_t get_int(const json& b, const char* key, int64_t def, int64_t lo, int64_t hi) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return def;
  if (!it->is_number_integer()) bad(key, fmt::format("'{}' must be an integer", key));
  // nlohmann keeps integers above INT64_MAX unsigned; get<int64_t>() would wrap them to negative values.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi))
    bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, it->get<uint64_t>()));
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, v));
  return v;
}

bool get_bool(const json& b, const char* key, bool def) {
  auto it = b.find(key);
  if (it == b.end() || it->is_null()) return def;
  if (!it->is_boolean()) bad(key, fmt::format("'{}' must be a boolean", key));
  return it->get<bool>();
}

std::vector<int32_t> token_list(const json& a, const char* param, int vocab) {
  std::vector<int32_t> ids;
  for (const auto& t : a) {
    if (!t.is_number_integer()) bad(param, "token ids must be integers");
    // Integers above INT64_MAX are stored unsigned: reported with their own value, never wrapped.
    if (t.is_number_unsigned() && t.get<uint64_t>() >= static_cast<uint64_t>(vocab))
      bad(param, fmt::format("token id {} is outside the vocabulary of {}", t.get<uint64_t>(), vocab));
    const int64_t v = t.get<int64_t>();
    if (v < 0 || v >= vocab) bad(param, fmt::format("token id {} is outside the vocabulary of {}", v, vocab));
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

std::string encode_text_checked(const Tokenizer& tok, const std::string& s, bool special, const char* param,
                                std::vector<int32_t>& out) {
  try {
    out = tok.encode(s, special);
  } catch (const Error& e) {
    bad(param, e.what());
  }
  return s;
}

// A chat message's content: a string, or a list of {"type": "text", "text": ...} parts (joined).
std::string content_text(const json& c) {
  if (c.is_null()) return "";
  if (c.is_string()) return c.get<std::string>();
  if (c.is_array()) {
    std::string s;
    for (const auto& part : c) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
        bad("messages", "only text content parts are supported");
      s += part["text"].get<std::string>();
    }
    return s;
  }
  bad("messages", "message content must be a string or a list of text parts");
}

// The roles a message may have: OpenAI's, the legacy "function", and Llama 3.1's "ipython" (tool results).
bool known_role(const std::string& r) {
  static const char* const kRoles[] = {"system", "developer", "user", "assistant", "tool", "function", "ipython"};
  return std::any_of(std::begin(kRoles), std::end(kRoles), [&](const char* k) { return r == k; });
}

// The prompt text of a chat request: its messages (with tools and chat_template_kwargs) through the chat template.
std::string render_chat(const json& b, const ProtocolContext& ctx) {
  if (!ctx.chat_template) bad("messages", "this model has no chat template; use /v1/completions");
  auto it = b.find("messages");
  if (it == b.end() || !it->is_array() || it->empty()) bad("messages", "'messages' must be a non-empty array");
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (const auto& m : *it) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) bad("messages", "every message needs a 'role'");
    if (!known_role(m["role"].get_ref<const std::string&>()))
      bad("messages", fmt::format("messages[{}].role {} is not one of system, developer, user, assistant, tool, "
                                  "function, ipython", msgs.size(), m["role"].dump()));
    nlohmann::ordered_json om;
    om["role"] = m["role"].get<std::string>();
    om["content"] = content_text(m.value("content", json()));
    for (const char* k : {"name", "tool_call_id", "reasoning_content"})
      if (m.contains(k) && m[k].is_string()) om[k] = m[k].get<std::string>();
    if (m.contains("tool_calls") && m["tool_calls"].is_array())
      om["tool_calls"] = nlohmann::ordered_json::parse(m["tool_calls"].dump());
    msgs.push_back(std::move(om));
  }
  const bool add_gen = get_bool(b, "add_generation_prompt", true);
  nlohmann::ordered_json tools = nullptr, extra = nullptr;
  if (b.contains("tools") && b["tools"].is_array()) tools = nlohmann::ordered_json::parse(b["tools"].dump());
  if (b.contains("chat_template_kwargs") && b["chat_template_kwargs"].is_object())
    extra = nlohmann::ordered_json::parse(b["chat_template_kwargs"].dump());
  std::string text;
  try {
    text = apply_chat_template(*ctx.chat_template, msgs, add_gen, ctx.bos_token, ctx.eos_token, tools, extra);
  } catch (const Error& e) {
    bad("messages", e.what());
  }
  return text;
}

/// nlohmann's DOM builder behind a nesting count: an object or array that opens past the bound stops the parse at
/// once (sax_parse returns false). Parse errors are kept as text instead of thrown.
class BoundedDomSax {
 public:
  BoundedDomSax(json& out, int max_depth) : dom_(out, false), max_depth_(max_depth) {}
  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) { return open() && dom_.start_object(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t n) { return open() && dom_.start_array(n); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  bool key(json::string_t& k) {
    if (depth_ == 1) top_key_ = k;
    return dom_.key(k);
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) {
    error_ = e.what();
    return false;
  }

  bool too_deep() const { return too_deep_; }
  const std::string& error() const { return error_; }
  /// The member of the top-level object being read when the parse stopped ("" outside one).
  const std::string& top_key() const { return top_key_; }

 private:
  bool open() {
    if (++depth_ <= max_depth_) return true;
    too_deep_ = true;
    error_ = fmt::format("nested deeper than {} levels (objects and arrays)", max_depth_);
    return false;
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
  std::string error_, top_key_;
};

}  // namespace

bool parse_json_bounded(std::string_view text, json& out, std::string& error, bool* too_deep, int max_depth) {
  out = nullptr;
  BoundedDomSax sax(out, max_depth);
  const bool ok = json::sax_parse(text.data(), text.data() + text.size(), &sax);
  if (too_deep) *too_deep = sax.too_deep();
  if (ok) return true;
  out = nullptr;  // a partial document (at most max_depth deep) is dropped
  error = sax.error().empty() ? "parse error" : sax.error();
  return false;
}

json parse_client_json(std::string_view text, const std::string& param) {
  json out;
  BoundedDomSax sax(out, kMaxJsonDepth);
  if (json::sax_parse(text.data(), text.data() + text.size(), &sax)) return out;
  out = nullptr;
  if (sax.too_deep()) {
    // The body: the top-level member being read names the field; a field's own document: that field.
    const std::string field = param.empty() ? sax.top_key() : param;
    bad(field, fmt::format("{} {}", field.empty() ? std::string("the JSON body") : fmt::format("'{}'", field),
                           sax.error()));
  }
  if (param.empty()) bad("", fmt::format("malformed JSON body: {}", sax.error()));
  bad(param, fmt::format("'{}' is not valid JSON: {}", param, sax.error()));
}

json error_json(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", err}};
}

std::string api_finish_reason(const std::string& reason) { return reason; }

namespace {
// tools + tool_choice (OpenAI): "none" ignores the tools; "auto" (the default with tools) parses the output for
// calls; "required" or {"type": "function", "function": {"name"}} constrains the output to a call. On a template
// without a call syntax the output is a JSON list of calls: one or more for "required" (exactly one with
// "parallel_tool_calls": false), exactly one of the named function.
void parse_tool_choice(const json& b, const ProtocolContext& ctx, ParsedRequest& r) {
  const bool has_tools = b.contains("tools") && b["tools"].is_array() && !b["tools"].empty();
  const json tc = b.contains("tool_choice") && !b["tool_choice"].is_null() ? b["tool_choice"] : json(has_tools ? "auto" : "none");
  if (tc == "none") return;
  std::string only;
  if (tc.is_object()) {
    if (tc.value("type", "") != "function" || !tc.contains("function") || !tc["function"].is_object() ||
        !tc["function"].contains("name") || !tc["function"]["name"].is_string())
      bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}");
    only = tc["function"]["name"].get<std::string>();
  } else if (tc != "auto" && tc != "required") {
    bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}");
  }
  if (!has_tools) bad("tool_choice", "'tool_choice' needs a non-empty 'tools' array");
  bool parallel = true;
  if (b.contains("parallel_tool_calls") && !b["parallel_tool_calls"].is_null()) {
    if (!b["parallel_tool_calls"].is_boolean()) bad("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    parallel = b["parallel_tool_calls"].get<bool>();
  }
  r.tool_syntax = ctx.tool_syntax;
  if (tc == "auto") return;
  if (r.base.constraints.grammar)
    bad("tool_choice", "a forced tool call cannot be combined with response_format or guided_* fields");
  if (!ctx.grammars) bad("tool_choice", "constrained tool calls are not available here (no vocabulary)");
  const json& tools = b["tools"];
  // A template without a call syntax of its own: the call is constrained to a JSON list of calls.
  const ToolCallSyntax syntax = ctx.tool_syntax == ToolCallSyntax::kNone ? ToolCallSyntax::kJsonList : ctx.tool_syntax;
  r.tool_syntax = syntax;
  r.base.constraints.grammar =
      ctx.grammars->get(fmt::format("tools:{}:{}:{}:{}", static_cast<int>(syntax), only, parallel && only.empty(), tools.dump()),
                        [&] { return tool_call_grammar(tools, only, syntax, parallel && only.empty()); });
  r.tool_call_forced = true;
}
}  // namespace

ParsedRequest parse_request(const json& b, bool chat, const ProtocolContext& ctx) {
  if (!b.is_object()) bad("", "the request body must be a JSON object");
  ParsedRequest r;
  r.chat = chat;
  if (b.contains("model") && !b["model"].is_null()) {
    if (!b["model"].is_string()) bad("model", "'model' must be a string");
    const std::string m = b["model"].get<std::string>();
    if (m != ctx.model_name) {
      ApiError e;
      e.status = 404;
      e.type = "NotFoundError";
      e.param = "model";
      e.code = "model_not_found";
      e.message = fmt::format("The model `{}` does not exist.", m);
      throw e;
    }
  }
  // Parameters that change the output but are not implemented: refuse them rather than ignore them silently.
  if (b.contains("logit_bias") && !b["logit_bias"].is_null() && !(b["logit_bias"].is_object() && b["logit_bias"].empty()))
    bad("logit_bias", "'logit_bias' is not supported");
  if (b.contains("suffix") && !b["suffix"].is_null() && !(b["suffix"].is_string() && b["suffix"].get_ref<const std::string&>().empty()))
    bad("suffix", "'suffix' is not supported");
  if (b.contains("best_of") && !b["best_of"].is_null() && b["best_of"] != 1)
    bad("best_of", "'best_of' other than 1 is not supported");
  // Beam search changes the output and is not implemented: refused, naming the field.
  if (b.contains("use_beam_search") && !b["use_beam_search"].is_null() && b["use_beam_search"] != false)
    bad("use_beam_search", "'use_beam_search' is not supported");
  // Structured output: response_format, guided_json / guided_regex / guided_choice (server/structured_output.h).
  r.base.constraints.grammar = parse_structured_output(b, ctx.grammars.get());
  if (chat) {
    check_tools(b);
    parse_tool_choice(b, ctx, r);
  }
  const Tokenizer& tok = *ctx.tokenizer;
  const int vocab = tok.vocab_size();
  if (chat) {
    const std::string text = render_chat(b, ctx);
    // The rendered text already holds BOS where the template writes it: no special tokens (never a second BOS).
    std::vector<int32_t> ids;
    encode_text_checked(tok, text, false, "messages", ids);
    r.prompts.push_back(std::move(ids));
    r.prompt_texts.push_back(text);
  } else {
    auto it = b.find("prompt");
    if (it == b.end() || it->is_null()) bad("prompt", "'prompt' is required");
    const json& p = *it;
    auto add_text = [&](const std::string& s) {
      std::vector<int32_t> ids;
      encode_text_checked(tok, s, true, "prompt", ids);  // as HF / vLLM: the post-processor decides about BOS
      r.prompts.push_back(std::move(ids));
      r.prompt_texts.push_back(s);
    };
    // A token-id prompt's text (for echo) is its decoding, special tokens skipped unless the request sets
    // skip_special_tokens false (vLLM decodes the echoed prompt with the request's skip_special_tokens).
    const bool skip_special = get_bool(b, "skip_special_tokens", true);
    auto add_ids = [&](const json& a) {
      r.prompts.push_back(token_list(a, "prompt", vocab));
      r.prompt_texts.push_back(tok.decode(r.prompts.back(), skip_special));
    };
    if (p.is_string()) {
      add_text(p.get<std::string>());
    } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
      add_ids(p);
    } else if (p.is_array() && !p.empty()) {
      for (const auto& e : p) {
        if (e.is_string()) add_text(e.get<std::string>());
        else if (e.is_array()) add_ids(e);
        else bad("prompt", "'prompt' must be a string, a list of strings, token ids, or lists of token ids");
      }
    } else {
      bad("prompt", "'prompt' must be a string, a list of strings, token ids, or lists of token ids");
    }
    if (r.prompts.size() > 64) bad("prompt", "at most 64 prompts per request");
  }
  for (const auto& p : r.prompts)
    if (p.empty()) bad(chat ? "messages" : "prompt", "the prompt is empty");

  EngineRequest& e = r.base;
  r.stream = get_bool(b, "stream", false);
  if (b.contains("stream_options") && b["stream_options"].is_object())
    r.include_usage = get_bool(b["stream_options"], "include_usage", false);
  r.n = static_cast<int>(get_int(b, "n", 1, 1, 16));
  r.echo = !chat && get_bool(b, "echo", false);
  const int64_t big = std::numeric_limits<int32_t>::max();
  // Completions accept max_tokens 0 (score the prompt only: lm-evaluation-harness's echo + logprobs requests).
  int64_t max_tokens = get_int(b, "max_tokens", -1, chat ? 1 : 0, big);
  if (chat) max_tokens = get_int(b, "max_completion_tokens", max_tokens, 1, big);
  if (max_tokens < 0) {
    // OpenAI's completions default is 16; chat defaults to the rest of the context (as vLLM).
    size_t longest = 0;
    for (const auto& p : r.prompts) longest = std::max(longest, p.size());
    max_tokens = chat ? std::max<int64_t>(1, ctx.max_model_len - static_cast<int64_t>(longest)) : 16;
  }
  e.max_tokens = max_tokens;
  SamplingParams& s = e.sampling;
  s.temperature = static_cast<float>(get_number(b, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(get_number(b, "top_p", 1.0, 1e-9, 1.0));
  s.top_k = static_cast<int>(get_int(b, "top_k", 0, -1, 1 << 30));
  if (s.top_k < 0) s.top_k = 0;
  s.min_p = static_cast<float>(get_number(b, "min_p", 0.0, 0.0, 1.0));
  s.repetition_penalty = static_cast<float>(get_number(b, "repetition_penalty", 1.0, 1e-3, 100.0));
  s.presence_penalty = static_cast<float>(get_number(b, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(get_number(b, "frequency_penalty", 0.0, -2.0, 2.0));
  if (b.contains("seed") && !b["seed"].is_null()) {
    if (!b["seed"].is_number_integer()) bad("seed", "'seed' must be an integer");
    s.seed = static_cast<uint64_t>(b["seed"].get<int64_t>());
    s.has_seed = true;
  }
  if (b.contains("stop") && !b["stop"].is_null()) {
    const json& st = b["stop"];
    if (st.is_string()) e.stop.push_back(st.get<std::string>());
    else if (st.is_array()) {
      for (const auto& x : st) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or a list of strings");
        e.stop.push_back(x.get<std::string>());
      }
    } else bad("stop", "'stop' must be a string or a list of strings");
    // An empty stop string would match before any text: refused rather than ignored or ending every request.
    for (size_t i = 0; i < e.stop.size(); ++i)
      if (e.stop[i].empty())
        bad("stop", st.is_array() ? fmt::format("'stop' strings must not be empty (stop[{}] is \"\")", i)
                                  : std::string("'stop' must not be an empty string"));
    if (e.stop.size() > 16) bad("stop", "at most 16 stop strings");
  }
  if (b.contains("stop_token_ids") && !b["stop_token_ids"].is_null()) {
    if (!b["stop_token_ids"].is_array()) bad("stop_token_ids", "'stop_token_ids' must be a list of token ids");
    e.stop_token_ids = token_list(b["stop_token_ids"], "stop_token_ids", vocab);
  }
  e.ignore_eos = get_bool(b, "ignore_eos", false);
  e.skip_special_tokens = get_bool(b, "skip_special_tokens", true);
  if (chat) {
    if (get_bool(b, "logprobs", false)) r.logprobs = static_cast<int>(get_int(b, "top_logprobs", 0, 0, 20));
    else if (b.contains("top_logprobs") && !b["top_logprobs"].is_null())
      bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  } else {
    r.logprobs = static_cast<int>(get_int(b, "logprobs", -1, 0, 20));
  }
  e.logprobs = r.logprobs;
  r.prompt_logprobs = static_cast<int>(get_int(b, "prompt_logprobs", -1, 0, 20));
  e.prompt_logprobs = r.prompt_logprobs;
  if (r.echo && r.logprobs >= 0) e.prompt_logprobs = std::max(e.prompt_logprobs, r.logprobs);
  if (max_tokens == 0 && e.prompt_logprobs < 0 && !r.echo)
    bad("max_tokens", "'max_tokens' 0 needs 'echo' or 'prompt_logprobs' (nothing would be returned)");
  TokenConstraints& tc = e.constraints;
  tc.min_tokens = get_int(b, "min_tokens", 0, 0, big);
  if (tc.min_tokens > max_tokens)
    bad("min_tokens", fmt::format("'min_tokens' ({}) must not exceed max_tokens ({})", tc.min_tokens, max_tokens));
  if (b.contains("allowed_token_ids") && !b["allowed_token_ids"].is_null()) {
    if (!b["allowed_token_ids"].is_array() || b["allowed_token_ids"].empty())
      bad("allowed_token_ids", "'allowed_token_ids' must be a non-empty list of token ids");
    tc.allowed_token_ids = token_list(b["allowed_token_ids"], "allowed_token_ids", vocab);
  }
  if (b.contains("bad_words") && !b["bad_words"].is_null()) {
    if (!b["bad_words"].is_array()) bad("bad_words", "'bad_words' must be a list of strings");
    for (const auto& w : b["bad_words"]) {
      if (!w.is_string() || w.get_ref<const std::string&>().empty())
        bad("bad_words", "'bad_words' must be a list of non-empty strings");
      // As vLLM: the word as tokenized alone and after a space (the two ways it shows up inside text).
      for (const std::string& v : {w.get<std::string>(), " " + w.get<std::string>()}) {
        std::vector<int32_t> ids;
        encode_text_checked(tok, v, false, "bad_words", ids);
        if (!ids.empty() && std::find(tc.bad_words.begin(), tc.bad_words.end(), ids) == tc.bad_words.end())
          tc.bad_words.push_back(std::move(ids));
      }
    }
  }
  return r;
}

std::string default_model_id(const std::string& model_path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(model_path, ec), ec);
  if (ec) p = std::filesystem::path(model_path).lexically_normal();
  while (!p.empty() && p.filename().empty() && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  std::string name = p.filename().string();
  return name.empty() || name == "." || name == ".." ? std::string("model") : name;
}

EngineRequest make_engine_request(const ParsedRequest& r, size_t prompt_index, int choice) {
  EngineRequest e = r.base;
  e.prompt = r.prompts[prompt_index];
  if (e.sampling.has_seed) e.sampling.seed += static_cast<uint64_t>(choice) + 1000003ULL * prompt_index;
  return e;
}

namespace {

// Characters a token's bytes start (its non-continuation bytes): summed over a text's tokens, the text's length
// in code points, also when a character spans tokens.
size_t char_starts(const std::string& bytes) {
  size_t n = 0;
  for (unsigned char c : bytes) n += (c & 0xC0) != 0x80;
  return n;
}

json bytes_json(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

}  // namespace

std::string token_repr(const Tokenizer& tok, int32_t id) {
  const std::string b = tok.decode_bytes({id}, false);
  if (utf8::find_invalid(b) == std::string_view::npos) return b;
  std::string out = "bytes:";
  for (unsigned char c : b) out += fmt::format("\\x{:02x}", c);
  return out;
}

json logprobs_json(const std::vector<TokenLogprob>& lps, const Tokenizer& tok, bool chat, size_t* text_offset,
                   const std::vector<int32_t>* prompt, const std::vector<TokenLogprob>* prompt_lps) {
  if (chat) {
    json content = json::array();
    for (const auto& lp : lps) {
      json top = json::array();
      for (const auto& [id, v] : lp.top)
        top.push_back({{"token", token_repr(tok, id)}, {"logprob", v}, {"bytes", bytes_json(tok.decode_bytes({id}, false))}});
      content.push_back({{"token", token_repr(tok, lp.id)},
                         {"logprob", lp.logprob},
                         {"bytes", bytes_json(tok.decode_bytes({lp.id}, false))},
                         {"top_logprobs", top}});
    }
    return json{{"content", content}};
  }
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  size_t off = text_offset ? *text_offset : 0;
  auto add = [&](int32_t id, const TokenLogprob* lp) {
    tokens.push_back(token_repr(tok, id));
    token_lps.push_back(lp ? json(lp->logprob) : json(nullptr));
    json top = json::object();
    if (lp)
      for (const auto& [tid, v] : lp->top) top[token_repr(tok, tid)] = v;
    tops.push_back(lp ? top : json(nullptr));
    offsets.push_back(off);
    off += char_starts(tok.decode_bytes({id}, false));
  };
  if (prompt) {
    for (size_t i = 0; i < prompt->size(); ++i) {
      const TokenLogprob* lp = i > 0 && prompt_lps && i - 1 < prompt_lps->size() ? &(*prompt_lps)[i - 1] : nullptr;
      add((*prompt)[i], lp);
    }
  }
  for (const auto& lp : lps) add(lp.id, &lp);
  if (text_offset) *text_offset = off;
  return json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json prompt_logprobs_json(const std::vector<TokenLogprob>& lps, const Tokenizer& tok) {
  json out = json::array({nullptr});
  for (const auto& lp : lps) {
    json m = json::object();
    m[std::to_string(lp.id)] = {{"logprob", lp.logprob}, {"rank", lp.rank}, {"decoded_token", token_repr(tok, lp.id)}};
    int rank = 1;
    for (const auto& [id, v] : lp.top) {
      if (!m.contains(std::to_string(id)))
        m[std::to_string(id)] = {{"logprob", v}, {"rank", rank}, {"decoded_token", token_repr(tok, id)}};
      ++rank;
    }
    out.push_back(std::move(m));
  }
  return out;
}

json tool_calls_json(const std::vector<ToolCall>& calls, const std::string& id, size_t choice) {
  json a = json::array();
  for (size_t i = 0; i < calls.size(); ++i)
    a.push_back({{"id", fmt::format("call_{}_{}_{}", id.substr(id.find('-') + 1), choice, i)},
                 {"type", "function"},
                 {"index", i},
                 {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  return a;
}

json build_response(const ParsedRequest& r, const std::vector<RequestOutput>& outs, const std::string& id,
                    int64_t created, const ProtocolContext& ctx) {
  json choices = json::array();
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t k = 0; k < outs.size(); ++k) {
    const RequestOutput& o = outs[k];
    const size_t p = k / static_cast<size_t>(r.n);
    if (k % static_cast<size_t>(r.n) == 0) prompt_tokens += o.prompt_tokens;
    completion_tokens += o.completion_tokens;
    json c;
    c["index"] = k;
    std::string finish = api_finish_reason(o.finish_reason);
    if (r.chat) {
      c["message"] = {{"role", "assistant"}, {"content", o.text}};
      std::string content;
      const std::vector<ToolCall> calls =
          r.tool_syntax != ToolCallSyntax::kNone ? parse_tool_calls(o.text, r.tool_syntax, content) : std::vector<ToolCall>{};
      if (!calls.empty()) {
        c["message"]["content"] = content.empty() ? json(nullptr) : json(content);
        c["message"]["tool_calls"] = tool_calls_json(calls, id, k);
        if (finish == "stop") finish = "tool_calls";
      }
      c["logprobs"] = r.logprobs >= 0 ? logprobs_json(o.logprobs, *ctx.tokenizer, true) : json(nullptr);
    } else {
      const std::string prefix = r.echo ? r.prompt_texts[p] : std::string();
      c["text"] = prefix + o.text;
      size_t offset = 0;
      c["logprobs"] = r.logprobs >= 0 ? logprobs_json(o.logprobs, *ctx.tokenizer, false, &offset,
                                                      r.echo ? &r.prompts[p] : nullptr, &o.prompt_logprobs)
                                      : json(nullptr);
    }
    if (r.prompt_logprobs >= 0) c["prompt_logprobs"] = prompt_logprobs_json(o.prompt_logprobs, *ctx.tokenizer);
    c["finish_reason"] = finish;
    c["stop_reason"] = o.stop_string.empty() ? json(nullptr) : json(o.stop_string);
    choices.push_back(std::move(c));
  }
  json resp = {{"id", id},
               {"object", r.chat ? "chat.completion" : "text_completion"},
               {"created", created},
               {"model", ctx.model_name},
               {"choices", choices},
               {"usage",
                {{"prompt_tokens", prompt_tokens},
                 {"completion_tokens", completion_tokens},
                 {"total_tokens", prompt_tokens + completion_tokens}}}};
  return resp;
}

json build_chunk(const ParsedRequest& r, int index, const RequestOutput& ev, bool first, const std::string& id,
                 int64_t created, const ProtocolContext& ctx, size_t& text_offset) {
  json c;
  c["index"] = index;
  if (r.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!ev.text.empty() || first) delta["content"] = ev.text;
    c["delta"] = delta;
    c["logprobs"] = r.logprobs >= 0 && !ev.logprobs.empty() ? logprobs_json(ev.logprobs, *ctx.tokenizer, true) : json(nullptr);
  } else {
    const size_t p = static_cast<size_t>(index / r.n);
    const bool echo_now = first && r.echo;
    std::string text = ev.text;
    if (echo_now) text = r.prompt_texts[p] + text;
    c["text"] = text;
    c["logprobs"] = r.logprobs >= 0 && (!ev.logprobs.empty() || echo_now)
                        ? logprobs_json(ev.logprobs, *ctx.tokenizer, false, &text_offset,
                                        echo_now ? &r.prompts[p] : nullptr, &ev.prompt_logprobs)
                        : json(nullptr);
  }
  if (r.prompt_logprobs >= 0 && first) c["prompt_logprobs"] = prompt_logprobs_json(ev.prompt_logprobs, *ctx.tokenizer);
  c["finish_reason"] = ev.finished ? json(api_finish_reason(ev.finish_reason)) : json(nullptr);
  c["stop_reason"] = ev.stop_string.empty() ? json(nullptr) : json(ev.stop_string);
  return json{{"id", id},
              {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created},
              {"model", ctx.model_name},
              {"choices", json::array({c})}};
}

json build_usage_chunk(const ParsedRequest& r, int64_t prompt_tokens, int64_t completion_tokens, const std::string& id,
                       int64_t created, const ProtocolContext& ctx) {
  return json{{"id", id},
              {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", created},
              {"model", ctx.model_name},
              {"choices", json::array()},
              {"usage",
               {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens}}}};
}

json tokenize_json(const json& b, const ProtocolContext& ctx) {
  if (!b.is_object()) bad("", "the request body must be a JSON object");
  const Tokenizer& tok = *ctx.tokenizer;
  std::vector<int32_t> ids;
  if (b.contains("messages")) {
    check_tools(b);
    const std::string text = render_chat(b, ctx);
    encode_text_checked(tok, text, get_bool(b, "add_special_tokens", false), "messages", ids);
  } else {
    auto it = b.find("prompt");
    if (it == b.end() || !it->is_string()) bad("prompt", "'prompt' (a string) or 'messages' is required");
    encode_text_checked(tok, it->get<std::string>(), get_bool(b, "add_special_tokens", true), "prompt", ids);
  }
  json strs = nullptr;
  if (get_bool(b, "return_token_strs", false)) {
    strs = json::array();
    for (int32_t id : ids) strs.push_back(token_repr(tok, id));
  }
  return json{{"count", ids.size()}, {"max_model_len", ctx.max_model_len}, {"tokens", ids}, {"token_strs", strs}};
}

json detokenize_json(const json& b, const ProtocolContext& ctx) {
  if (!b.is_object()) bad("", "the request body must be a JSON object");
  auto it = b.find("tokens");
  if (it == b.end() || !it->is_array()) bad("tokens", "'tokens' must be a list of token ids");
  const std::vector<int32_t> ids = token_list(*it, "tokens", ctx.tokenizer->vocab_size());
  return json{{"prompt", ctx.tokenizer->decode(ids, false)}};
}

std::string cors_allow_origin(const std::vector<std::string>& allowed, const std::string& origin) {
  if (origin.empty()) return "";
  for (const std::string& a : allowed) {
    if (a == "*") return "*";
    if (a == origin) return origin;
  }
  return "";
}

}  // namespace tritium::server
