// tritium serve: the OpenAI-compatible HTTP server over the continuous-batching engine.
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <pthread.h>
#include <sys/resource.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "model/model_files.h"
#include "server/openai_server.h"

namespace tritium::cli {
namespace {

struct ServeArgs {
  ModelOptions model;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::vector<std::string> allowed_origins;
  std::string served_model_name;
  std::string kv_cache_memory;
  double kv_cache_fraction = 0.10;
  double gpu_memory_utilization = 0.9;
  std::string kv_dtype = "auto";
  float kv_scale = 0;
  int block_size = 16;
  int max_num_seqs = 64;
  int64_t max_num_batched_tokens = 0;  // 0: 8192 on a GPU of >= 70 GiB, 2048 on a smaller one, 512 on the CPU
  int64_t max_model_len = 0;
  bool no_prefix_caching = false;
  std::string max_body = "4MiB";
  int64_t max_pending = 4096;
  int max_connections = 0;  // 0: default_max_connections() of the file-descriptor limit
  int http_threads = 4;
  double keep_alive_timeout = 5;
  double header_timeout = 10;
  double shutdown_timeout = 30;
  std::string chat_template;
};

std::chrono::milliseconds seconds(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

/// Each connection is a file descriptor: lift the soft limit to the hard one so that --max-connections holds.
/// Returns the soft limit in force afterwards (0 when it cannot be read; RLIM_INFINITY as a large number).
uint64_t raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  return static_cast<uint64_t>(rl.rlim_cur);
}

/// --max-connections when not given: the file-descriptor limit less 1/8 of it (at least 256) for the model's
/// files, the listening socket, logs and the engine's own descriptors, at most 65,536 (each open connection also
/// holds two 4 KiB buffers) and at least 64. A connection over the cap replaces the longest-idle one, so the cap
/// bounds memory and descriptors rather than who gets served.
int default_max_connections(uint64_t fd_limit) {
  if (fd_limit == 0) return 1000;
  const uint64_t headroom = std::max<uint64_t>(256, fd_limit / 8);
  const uint64_t n = fd_limit > headroom ? fd_limit - headroom : 0;
  return static_cast<int>(std::clamp<uint64_t>(n, 64, 65536));
}

/// "123", "64KiB", "512MiB", "2GiB", "1.5G" -> bytes. Throws tritium::Error on anything else.
size_t parse_bytes(const std::string& s, const char* opt) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (...) {
    fail("{}: '{}' is not a size (e.g. 512MiB, 2GiB, 1000000)", opt, s);
  }
  std::string unit = s.substr(pos);
  double mul = 1;
  if (unit.empty() || unit == "B") mul = 1;
  else if (unit == "K" || unit == "KiB" || unit == "KB") mul = 1024.0;
  else if (unit == "M" || unit == "MiB" || unit == "MB") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB" || unit == "GB") mul = 1024.0 * 1024 * 1024;
  else fail("{}: unknown unit in '{}' (use B, KiB, MiB, GiB)", opt, s);
  if (!(v > 0)) fail("{}: '{}' must be positive", opt, s);
  return static_cast<size_t>(v * mul);
}

int run(const ServeArgs& a) {
  // Signals are taken by a dedicated thread (sigwait): block them before any other thread starts.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  LoadedModel lm = load_model(a.model);
  EngineConfig ec;
  ec.block_size = a.block_size;
  if (!a.kv_cache_memory.empty()) ec.kv_cache_memory = parse_bytes(a.kv_cache_memory, "--kv-cache-memory");
  ec.kv_cache_fraction = a.kv_cache_fraction;
  ec.gpu_memory_utilization = a.gpu_memory_utilization;
  ec.kv_dtype = kv_dtype_for(a.kv_dtype);
  ec.kv_scale = a.kv_scale;
  ec.enable_prefix_caching = !a.no_prefix_caching;
  ec.max_num_seqs = a.max_num_seqs;
  // A GPU step of a few thousand prefill tokens costs little more than one of 512, and new requests then wait fewer
  // steps for their prompt. vLLM's API server defaults: 8192 on GPUs of at least 70 GiB, 2048 on smaller ones (their
  // activations then take less of the KV pool's memory). On the H200 8192 gave bench serve 1.04x the output of 2048
  // at 64 concurrent and the same at 256, with a lower median TPOT and a higher P99 ITL at 256; 2048 gave 1.15x /
  // 1.29x the output of 512 (bench/RESULTS.md, "Serving"). The CPU keeps 512 (its prefill is compute bound, and a
  // long step stalls every decode row).
  const size_t device_bytes = lm.backend->device_memory_total();
  constexpr size_t kLargeGpu = size_t{70} << 30;
  ec.max_num_batched_tokens = a.max_num_batched_tokens > 0 ? a.max_num_batched_tokens
                              : device_bytes == 0          ? 512
                              : device_bytes >= kLargeGpu  ? 8192
                                                           : 2048;
  // The engine would silently clamp a longer limit to the model's context (vLLM refuses it too).
  const int64_t max_pos = lm.model().config().max_position_embeddings;
  if (a.max_model_len > max_pos)
    fail("--max-model-len {} exceeds the model's max_position_embeddings {}", a.max_model_len, max_pos);
  ec.max_model_len = a.max_model_len;
  ec.max_pending = a.max_pending;
  Engine engine(*lm.backend, *lm.tokenizer, ec);
  // As vLLM: a KV pool that cannot hold one sequence of max_model_len tokens is a start-up error, not answers
  // silently cut short later.
  const int64_t pool_tokens = engine.config().num_blocks * engine.config().block_size;
  if (pool_tokens < engine.max_model_len())
    fail("the KV cache holds {} tokens, less than max_model_len {}: raise --kv-cache-memory / --kv-cache-fraction / "
         "--gpu-memory-utilization or lower --max-model-len",
         pool_tokens, engine.max_model_len());
  fmt::print(stderr, "{}\n", engine.kv_summary());

  std::optional<ChatTemplateFiles> chat;
  try {
    chat = load_model_chat_template(lm.dir);
  } catch (const Error& e) {
    if (a.chat_template.empty())
      fmt::print(stderr, "warning: no chat template ({}); /v1/chat/completions will answer 400\n", e.what());
  }
  if (!a.chat_template.empty()) {  // vLLM's --chat-template: a Jinja file replaces the model's template
    std::ifstream f(a.chat_template, std::ios::binary);
    if (!f) fail("--chat-template: cannot read '{}'", a.chat_template);
    std::string src((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!chat) chat = ChatTemplateFiles{};
    chat->source = std::move(src);
    chat->origin = a.chat_template;
  }
  server::ServerConfig sc;
  sc.http.host = a.host;
  sc.http.port = a.port;
  sc.http.max_body_bytes = parse_bytes(a.max_body, "--max-body-size");
  sc.http.io_threads = a.http_threads;
  sc.http.keep_alive_timeout = seconds(a.keep_alive_timeout);
  sc.http.header_timeout = seconds(a.header_timeout);
  const uint64_t fd_limit = raise_fd_limit();
  sc.http.max_connections = a.max_connections > 0 ? a.max_connections : default_max_connections(fd_limit);
  sc.api_key = a.api_key;
  sc.allowed_origins = a.allowed_origins;
  sc.model_name = a.served_model_name.empty() ? server::default_model_id(lm.dir) : a.served_model_name;
  server::OpenAIServer srv(engine, *lm.tokenizer, chat, sc);
  const int port = srv.bind();
  engine.start();
  srv.start();
  fmt::print(stderr, "serving {} ({}) on http://{}:{} (model loaded in {:.2f} s; endpoints /v1/completions "
                     "/v1/chat/completions /v1/models /health /metrics)\n",
             sc.model_name, lm.backend->name(), a.host, port, lm.load_seconds);
  fmt::print(stderr, "HTTP: at most {} open connections (file-descriptor limit {}); past it a new connection "
                     "replaces the longest-idle one\n", sc.http.max_connections, fd_limit);

  std::thread sig_thread([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    fmt::print(stderr, "received signal {}: no new requests; finishing {} in flight\n", sig, engine.num_unfinished());
    srv.shutdown(seconds(a.shutdown_timeout));
  });
  srv.serve();
  sig_thread.join();
  engine.stop();
  fmt::print(stderr, "server stopped\n");
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  add_model_options(sub, a->model);
  sub->add_option("--host", a->host, "address to listen on (default 127.0.0.1)");
  sub->add_option("--port", a->port, "port (default 8000)")->check(CLI::Range(0, 65535));
  sub->add_option("--api-key", a->api_key, "require 'Authorization: Bearer KEY' on /v1/*");
  sub->add_option("--served-model-name", a->served_model_name, "model id in the API (default: the folder name)");
  sub->add_option("--allowed-origins", a->allowed_origins,
                  "CORS: origins browsers may call the API from (e.g. https://app.example or '*'); default none")
      ->delimiter(',');
  sub->add_option("--kv-cache-memory", a->kv_cache_memory,
                  "KV cache pool size, e.g. 256MiB (default: --gpu-memory-utilization on a GPU, --kv-cache-fraction on "
                  "the CPU)");
  sub->add_option("--gpu-memory-utilization", a->gpu_memory_utilization,
                  "--device cuda: fraction of the GPU's memory the server may use in all (weights, workspace, KV "
                  "cache), as vLLM; the KV pool gets the rest (default 0.9)")
      ->check(CLI::Range(0.01, 1.0));
  sub->add_option("--kv-cache-fraction", a->kv_cache_fraction,
                  "CPU: fraction of MemAvailable for the KV pool when --kv-cache-memory is not given (default 0.10)")
      ->check(CLI::Range(0.001, 1.0));
  sub->add_option("--kv-cache-dtype", a->kv_dtype,
                  "KV cache dtype: auto (= f32, exact), f32, f16, bf16, "
                  "fp8 (e4m3, per-tensor scale), int8");
  sub->add_option("--kv-cache-scale", a->kv_scale, "fp8/int8 per-tensor KV scale (default: calibrated at start)");
  sub->add_option("--block-size", a->block_size, "tokens per KV block")->check(CLI::Range(1, 1024));
  sub->add_option("--max-num-seqs", a->max_num_seqs, "running sequences at most")->check(CLI::Range(1, 4096));
  sub->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "tokens per step at most (>= 16; default 8192 on a GPU of >= 70 GiB, 2048 on a smaller GPU, 512 on the CPU)")->check(CLI::Range(16, 1 << 20));
  sub->add_option("--max-model-len", a->max_model_len, "context limit (default: max_position_embeddings)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  sub->add_flag("--no-prefix-caching", a->no_prefix_caching, "disable automatic prefix caching");
  sub->add_option("--max-body-size", a->max_body, "largest request body (default 4MiB; larger -> 413)");
  sub->add_option("--max-pending", a->max_pending, "requests in flight at most (more -> 429)")->check(CLI::Range(1, 1 << 30));
  sub->add_option("--chat-template", a->chat_template, "a Jinja chat template file to use instead of the model's");
  sub->add_option("--max-connections", a->max_connections, "open HTTP connections at most; past it a new connection replaces the one idle longest (waiting for "
                  "a request), and gets 503 only when none is idle (default: the file-descriptor limit less 1/8 of it, "
                  "at least 256 kept, within 64..65536)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--http-threads", a->http_threads, "threads of the HTTP event loop (default 4)")->check(CLI::Range(1, 256));
  sub->add_option("--keep-alive-timeout", a->keep_alive_timeout, "seconds an idle connection is kept (default 5)")
      ->check(CLI::Range(0.01, 86400.0));
  sub->add_option("--header-timeout", a->header_timeout, "seconds a client has to send a request's header (default 10)")
      ->check(CLI::Range(0.01, 3600.0));
  sub->add_option("--shutdown-timeout", a->shutdown_timeout,
                  "on SIGTERM/SIGINT: seconds in-flight requests may take to finish before they are aborted (default 30)")
      ->check(CLI::Range(0.0, 86400.0));
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
