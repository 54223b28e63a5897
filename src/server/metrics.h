// tritium server: the engine's metrics as Prometheus text.
#pragma once

#include <string>

#include "engine/engine_metrics.h"

namespace tritium::server {

/// Prometheus text exposition (format 0.0.4) of the engine's metrics, vLLM's metric names with the prefix
/// "tritium:" and the label model_name.
std::string render_metrics(const EngineMetrics& m, const std::string& model_name);

}  // namespace tritium::server
