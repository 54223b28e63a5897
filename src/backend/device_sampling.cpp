#include "backend/device_sampling.h"

#include <algorithm>

namespace tritium {

void append_penalty_entries(const RowSampling& r, int32_t vocab, std::vector<PenaltyEntry>& out) {
  const bool rep = r.repetition_penalty != 1.0f;
  const bool pres = r.presence_penalty != 0.0f || r.frequency_penalty != 0.0f;
  if (!rep && !pres) return;
  // (id, in output) pairs sorted by id: the runs of one id give its entry.
  std::vector<std::pair<int32_t, int32_t>> ids;
  ids.reserve((rep ? r.prompt.size() : 0) + r.output.size());
  if (rep)
    for (int32_t t : r.prompt) ids.emplace_back(t, 0);
  for (int32_t t : r.output) ids.emplace_back(t, 1);
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    int32_t count = 0;
    while (j < ids.size() && ids[j].first == ids[i].first) count += ids[j++].second;
    const int32_t id = ids[i].first;
    if (id >= 0 && id < vocab && (rep || count > 0)) out.push_back({id, rep ? 1 : 0, pres ? count : 0});
    i = j;
  }
}

}  // namespace tritium
