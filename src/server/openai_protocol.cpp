#include "server/openai_protocol.h"

#include <cmath>
#include <limits>

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

}  // namespace

json error_json(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", err}};
}

std::string api_finish_reason(const std::string& reason) { return reason; }

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
  // Structured output (json_object, json_schema, ...) needs guided decoding, which tritium does not have.
  if (b.contains("response_format") && !b["response_format"].is_null()) {
    const json& rf = b["response_format"];
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
      bad("response_format", "'response_format' must be an object with a string 'type'");
    const std::string& type = rf["type"].get_ref<const std::string&>();
    if (type != "text")
      bad("response_format", fmt::format("'response_format' of type '{}' is not supported (no guided decoding; only "
                                         "'text')", type));
  }
  const Tokenizer& tok = *ctx.tokenizer;
  const int vocab = tok.vocab_size();
  if (chat) {
    if (!ctx.chat_template) bad("messages", "this model has no chat template; use /v1/completions");
    auto it = b.find("messages");
    if (it == b.end() || !it->is_array() || it->empty()) bad("messages", "'messages' must be a non-empty array");
    nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
    for (const auto& m : *it) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) bad("messages", "every message needs a 'role'");
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
    if (p.is_string()) {
      add_text(p.get<std::string>());
    } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
      r.prompts.push_back(token_list(p, "prompt", vocab));
      r.prompt_texts.emplace_back();
    } else if (p.is_array() && !p.empty()) {
      for (const auto& e : p) {
        if (e.is_string()) add_text(e.get<std::string>());
        else if (e.is_array()) { r.prompts.push_back(token_list(e, "prompt", vocab)); r.prompt_texts.emplace_back(); }
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
  int64_t max_tokens = get_int(b, "max_tokens", -1, 1, big);
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
  return r;
}

EngineRequest make_engine_request(const ParsedRequest& r, size_t prompt_index, int choice) {
  EngineRequest e = r.base;
  e.prompt = r.prompts[prompt_index];
  if (e.sampling.has_seed) e.sampling.seed += static_cast<uint64_t>(choice) + 1000003ULL * prompt_index;
  return e;
}

json logprobs_json(const std::vector<TokenLogprob>& lps, const Tokenizer& tok, bool chat, size_t text_offset) {
  auto piece = [&](int32_t id) { return tok.decode({id}, false); };
  auto bytes_of = [](const std::string& s) {
    json a = json::array();
    for (unsigned char c : s) a.push_back(static_cast<int>(c));
    return a;
  };
  if (chat) {
    json content = json::array();
    for (const auto& lp : lps) {
      const std::string t = piece(lp.id);
      json top = json::array();
      for (const auto& [id, v] : lp.top) {
        const std::string s = piece(id);
        top.push_back({{"token", s}, {"logprob", v}, {"bytes", bytes_of(s)}});
      }
      content.push_back({{"token", t}, {"logprob", lp.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
    }
    return json{{"content", content}};
  }
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  size_t off = text_offset;
  for (const auto& lp : lps) {
    const std::string t = piece(lp.id);
    tokens.push_back(t);
    token_lps.push_back(lp.logprob);
    json top = json::object();
    for (const auto& [id, v] : lp.top) top[piece(id)] = v;
    tops.push_back(top);
    offsets.push_back(off);
    off += t.size();
  }
  return json{{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
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
    if (r.chat) {
      c["message"] = {{"role", "assistant"}, {"content", o.text}};
      c["logprobs"] = r.logprobs >= 0 ? logprobs_json(o.logprobs, *ctx.tokenizer, true) : json(nullptr);
    } else {
      const std::string prefix = r.echo ? r.prompt_texts[p] : std::string();
      c["text"] = prefix + o.text;
      c["logprobs"] = r.logprobs >= 0 ? logprobs_json(o.logprobs, *ctx.tokenizer, false, prefix.size()) : json(nullptr);
    }
    c["finish_reason"] = api_finish_reason(o.finish_reason);
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
                 int64_t created, const ProtocolContext& ctx) {
  json c;
  c["index"] = index;
  if (r.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!ev.text.empty() || first) delta["content"] = ev.text;
    c["delta"] = delta;
    c["logprobs"] = r.logprobs >= 0 && !ev.logprobs.empty() ? logprobs_json(ev.logprobs, *ctx.tokenizer, true) : json(nullptr);
  } else {
    std::string text = ev.text;
    if (first && r.echo) text = r.prompt_texts[static_cast<size_t>(index / r.n)] + text;
    c["text"] = text;
    c["logprobs"] = r.logprobs >= 0 && !ev.logprobs.empty() ? logprobs_json(ev.logprobs, *ctx.tokenizer, false) : json(nullptr);
  }
  c["finish_reason"] = ev.finished ? json(api_finish_reason(ev.finish_reason)) : json(nullptr);
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

}  // namespace tritium::server
