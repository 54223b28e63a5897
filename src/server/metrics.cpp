// Prometheus text exposition of the engine's metrics (vLLM's names, prefix "tritium:").
#include <fmt/format.h>

#include "server/metrics.h"

namespace tritium::server {

namespace {
std::string escape_label(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') { o += "\\n"; continue; }
    o += c;
  }
  return o;
}

void head(std::string& o, const char* name, const char* type, const char* help) {
  o += fmt::format("# HELP tritium:{} {}\n# TYPE tritium:{} {}\n", name, help, name, type);
}

void histogram(std::string& o, const char* name, const char* help, const Histogram& h, const std::string& label) {
  head(o, name, "histogram", help);
  for (size_t i = 0; i < h.bounds().size(); ++i)
    o += fmt::format("tritium:{}_bucket{{{},le=\"{}\"}} {}\n", name, label, h.bounds()[i], h.cumulative(i));
  o += fmt::format("tritium:{}_bucket{{{},le=\"+Inf\"}} {}\n", name, label, h.count());
  o += fmt::format("tritium:{}_sum{{{}}} {}\n", name, label, h.sum());
  o += fmt::format("tritium:{}_count{{{}}} {}\n", name, label, h.count());
}
}  // namespace

std::string render_metrics(const EngineMetrics& m, const std::string& model_name) {
  const std::string label = fmt::format("model_name=\"{}\"", escape_label(model_name));
  std::string o;
  auto gauge = [&](const char* name, const char* help, double v) {
    head(o, name, "gauge", help);
    o += fmt::format("tritium:{}{{{}}} {}\n", name, label, v);
  };
  auto counter = [&](const char* name, const char* help, int64_t v) {
    head(o, name, "counter", help);
    o += fmt::format("tritium:{}{{{}}} {}\n", name, label, v);
  };
  gauge("num_requests_running", "Number of requests in model execution batches.", static_cast<double>(m.num_requests_running));
  gauge("num_requests_waiting", "Number of requests waiting to be processed.", static_cast<double>(m.num_requests_waiting));
  gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", m.kv_cache_usage_perc);
  counter("prompt_tokens_total", "Number of prefill tokens processed.", m.prompt_tokens_total);
  counter("generation_tokens_total", "Number of generation tokens processed.", m.generation_tokens_total);
  head(o, "request_success_total", "counter", "Count of successfully processed requests.");
  for (const char* r : {"stop", "length", "abort", "error"}) {
    auto it = m.request_success_total.find(r);
    o += fmt::format("tritium:request_success_total{{finished_reason=\"{}\",{}}} {}\n", r, label,
                     it == m.request_success_total.end() ? 0 : it->second);
  }
  counter("prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
          m.prefix_cache_queries_total);
  counter("prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", m.prefix_cache_hits_total);
  counter("num_preemptions_total", "Cumulative number of preemptions from the engine.", m.num_preemptions_total);
  counter("engine_steps_total", "Engine steps that ran a forward.", m.engine_steps_total);
  head(o, "engine_step_seconds_total", "counter",
       "Wall time of the engine steps by phase: schedule (scheduling, batch and sampling rows), forward (the "
       "backend's forward and sampling, waiting for the device), output (detokenization, stop checks, streams).");
  for (const auto& [ph, v] : {std::pair<const char*, double>{"schedule", m.step_schedule_seconds_total},
                              {"forward", m.step_forward_seconds_total},
                              {"output", m.step_output_seconds_total}})
    o += fmt::format("tritium:engine_step_seconds_total{{phase=\"{}\",{}}} {}\n", ph, label, v);
  histogram(o, "time_to_first_token_seconds", "Histogram of time to first token in seconds.",
            m.time_to_first_token_seconds, label);
  histogram(o, "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
            m.inter_token_latency_seconds, label);
  histogram(o, "e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
            m.e2e_request_latency_seconds, label);
  histogram(o, "request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
            m.request_queue_time_seconds, label);
  gauge("cache_config_info", "Information of the KV cache: value is the number of blocks.", static_cast<double>(m.num_blocks));
  return o;
}

}  // namespace tritium::server
