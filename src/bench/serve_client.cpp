#include "bench/serve_client.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "core/error.h"

namespace tritium::server {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

namespace {

LatencyStats stats_of(const std::vector<double>& v) {
  LatencyStats s;
  if (v.empty()) return s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.median = percentile(v, 50);
  s.p99 = percentile(v, 99);
  return s;
}

struct RequestRecord {
  bool ok = false;
  std::string error;
  double ttft = 0, latency = 0;
  std::vector<double> itl;
  int64_t output_tokens = 0;
};

RequestRecord send_one(const BenchServeOptions& o, const std::string& model, const std::vector<int32_t>& prompt) {
  RequestRecord rec;
  httplib::Client cli(o.url);
  cli.set_read_timeout(600);
  cli.set_connection_timeout(30);
  json body = {{"model", model},       {"prompt", prompt},   {"max_tokens", o.output_len}, {"temperature", 0},
               {"ignore_eos", true},   {"stream", true},     {"stream_options", {{"include_usage", true}}}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!o.api_key.empty()) req.set_header("Authorization", "Bearer " + o.api_key);
  std::string buf;
  const auto t0 = Clock::now();
  auto last = t0;
  bool first = true;
  int64_t chunks = 0;
  bool done = false;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buf.append(data, len);
    size_t p;
    while ((p = buf.find("\n\n")) != std::string::npos) {
      const std::string ev = buf.substr(0, p);
      buf.erase(0, p + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      const std::string payload = ev.substr(6);
      if (payload == "[DONE]") { done = true; continue; }
      json j = json::parse(payload, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("usage") && j["usage"].is_object()) rec.output_tokens = j["usage"].value("completion_tokens", 0);
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const auto now = Clock::now();
      // As vLLM: the first chunk marks TTFT; every later chunk adds an inter-token latency.
      if (first) {
        rec.ttft = std::chrono::duration<double>(now - t0).count();
        first = false;
      } else {
        rec.itl.push_back(std::chrono::duration<double>(now - last).count());
      }
      last = now;
      ++chunks;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  rec.latency = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!sent) {
    rec.error = httplib::to_string(err);
  } else if (res.status != 200) {
    rec.error = fmt::format("HTTP {}: {}", res.status, buf.substr(0, 200));
  } else if (!done) {
    rec.error = "stream ended without [DONE]";
  } else {
    rec.ok = true;
    if (rec.output_tokens == 0) rec.output_tokens = chunks;
  }
  return rec;
}

}  // namespace

BenchServeResult run_bench_serve(const BenchServeOptions& o) {
  TRITIUM_CHECK(o.num_prompts > 0 && o.input_len > 0 && o.output_len > 0,
                "bench serve: --num-prompts, --input-len and --output-len must be positive");
  std::string model = o.model;
  {
    httplib::Client cli(o.url);
    cli.set_connection_timeout(10);
    httplib::Headers h;
    if (!o.api_key.empty()) h.emplace("Authorization", "Bearer " + o.api_key);
    auto r = cli.Get("/v1/models", h);
    if (!r) fail("bench serve: cannot reach {} ({})", o.url, httplib::to_string(r.error()));
    if (r->status != 200) fail("bench serve: GET {}/v1/models answered {}", o.url, r->status);
    if (model.empty()) {
      json j = json::parse(r->body, nullptr, false);
      if (j.is_discarded() || !j.contains("data") || j["data"].empty()) fail("bench serve: /v1/models lists no model");
      model = j["data"][0]["id"].get<std::string>();
    }
  }
  // Random prompts and Poisson arrival times.
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> tok(o.vocab_low, o.vocab_high - 1);
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.num_prompts));
  for (auto& p : prompts) {
    p.resize(static_cast<size_t>(o.input_len));
    for (auto& t : p) t = tok(rng);
  }
  std::vector<double> start_at(prompts.size(), 0.0);
  if (o.request_rate > 0) {
    std::exponential_distribution<double> gap(o.request_rate);
    double t = 0;
    for (auto& s : start_at) {
      s = t;
      t += gap(rng);
    }
  }
  const int workers = o.max_concurrency > 0 ? std::min(o.max_concurrency, o.num_prompts) : std::min(o.num_prompts, 512);
  std::vector<RequestRecord> recs(prompts.size());
  std::atomic<size_t> next{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> th;
  for (int w = 0; w < workers; ++w)
    th.emplace_back([&] {
      for (size_t i = next++; i < prompts.size(); i = next++) {
        std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(start_at[i])));
        recs[i] = send_one(o, model, prompts[i]);
      }
    });
  for (auto& t : th) t.join();
  BenchServeResult r;
  r.duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> ttft, tpot, itl, e2el;
  int good = 0;
  for (const auto& rec : recs) {
    if (!rec.ok) {
      ++r.failed;
      if (r.first_error.empty()) r.first_error = rec.error;
      continue;
    }
    ++r.completed;
    r.total_input += o.input_len;
    r.total_output += rec.output_tokens;
    ttft.push_back(rec.ttft * 1e3);
    e2el.push_back(rec.latency * 1e3);
    const double tp = rec.output_tokens > 1 ? (rec.latency - rec.ttft) / static_cast<double>(rec.output_tokens - 1) * 1e3 : 0;
    if (rec.output_tokens > 1) tpot.push_back(tp);
    for (double x : rec.itl) itl.push_back(x * 1e3);
    const bool meets = (o.slo_ttft_ms <= 0 || rec.ttft * 1e3 <= o.slo_ttft_ms) && (o.slo_tpot_ms <= 0 || tp <= o.slo_tpot_ms) &&
                       (o.slo_e2el_ms <= 0 || rec.latency * 1e3 <= o.slo_e2el_ms);
    if (meets) ++good;
  }
  r.request_throughput = r.completed / r.duration_s;
  r.output_throughput = static_cast<double>(r.total_output) / r.duration_s;
  r.total_token_throughput = static_cast<double>(r.total_input + r.total_output) / r.duration_s;
  r.goodput = good / r.duration_s;
  r.ttft_ms = stats_of(ttft);
  r.tpot_ms = stats_of(tpot);
  r.itl_ms = stats_of(itl);
  r.e2el_ms = stats_of(e2el);
  return r;
}

std::string format_bench_serve(const BenchServeOptions& o, const BenchServeResult& r) {
  std::string s;
  auto line = [&](const std::string& k, const std::string& v) { s += fmt::format("{:<40}{:>12}\n", k, v); };
  auto f2 = [](double v) { return fmt::format("{:.2f}", v); };
  s += fmt::format("{:=^52}\n", " Serving Benchmark Result ");
  line("Successful requests:", std::to_string(r.completed));
  if (r.failed) line("Failed requests:", std::to_string(r.failed));
  line("Request rate (req/s):", o.request_rate > 0 ? f2(o.request_rate) : "inf");
  line("Max concurrency:", o.max_concurrency > 0 ? std::to_string(o.max_concurrency) : "unlimited");
  line("Benchmark duration (s):", f2(r.duration_s));
  line("Total input tokens:", std::to_string(r.total_input));
  line("Total generated tokens:", std::to_string(r.total_output));
  line("Request throughput (req/s):", f2(r.request_throughput));
  if (o.slo_ttft_ms > 0 || o.slo_tpot_ms > 0 || o.slo_e2el_ms > 0) line("Request goodput (req/s):", f2(r.goodput));
  line("Output token throughput (tok/s):", f2(r.output_throughput));
  line("Total Token throughput (tok/s):", f2(r.total_token_throughput));
  auto block = [&](const char* title, const char* abbr, const LatencyStats& st) {
    s += fmt::format("{:-^52}\n", fmt::format(" {} ", title));
    line(fmt::format("Mean {} (ms):", abbr), f2(st.mean));
    line(fmt::format("Median {} (ms):", abbr), f2(st.median));
    line(fmt::format("P99 {} (ms):", abbr), f2(st.p99));
  };
  block("Time to First Token", "TTFT", r.ttft_ms);
  block("Time per Output Token (excl. 1st token)", "TPOT", r.tpot_ms);
  block("Inter-token Latency", "ITL", r.itl_ms);
  block("End-to-end Latency", "E2EL", r.e2el_ms);
  s += fmt::format("{:=^52}\n", "");
  if (!r.first_error.empty()) s += fmt::format("first error: {}\n", r.first_error);
  return s;
}

}  // namespace tritium::server
