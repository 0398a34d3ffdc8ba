#include "server/proposers/llm/trajectories.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "proto/problem.h"

namespace anvil {
namespace {

using nlohmann::json;

// The conversation sent: system first, then the stored messages.
json Prompt(const LlmExchange& e) {
  json prompt = json::array();
  if (!e.system_prompt.empty()) prompt.push_back({{"role", "system"}, {"content", e.system_prompt}});
  json sent = json::parse(e.messages_json, nullptr, false);
  if (sent.is_array() && !sent.empty()) {
    for (const json& m : sent) prompt.push_back(m);
  } else {
    prompt.push_back({{"role", "user"}, {"content", e.prompt}});
  }
  return prompt;
}

}  // namespace

absl::StatusOr<TrajectoryCounts> WriteTrajectories(Store& store, const std::string& job_id,
                                                   std::ostream& out) {
  absl::StatusOr<v1::Job> job = store.GetJob(job_id);
  if (!job.ok()) return job.status();
  absl::StatusOr<std::vector<LlmExchange>> exchanges = store.ListLlmExchanges(job_id);
  if (!exchanges.ok()) return exchanges.status();
  TrajectoryCounts counts;
  for (const LlmExchange& e : *exchanges) {
    ++counts.exchanges;
    const json prompt = Prompt(e);
    for (const LlmSample& s : e.samples) {
      if (!s.reward.has_value()) {
        ++counts.unrewarded;
        continue;
      }
      json line = {
          {"prompt", prompt},
          {"completion", json::array({{{"role", "assistant"}, {"content", s.response}}})},
          {"reward", *s.reward},
          {"advantage", s.advantage.value_or(0.0)},
          {"label", *s.reward > 0},
          {"group", absl::StrCat(job_id, "/", e.id)},
          {"sample", s.sample_index},
          {"status", s.status},
          {"reward_kind", s.reward_kind},
          {"reward_fidelity", s.reward_fidelity},
          {"candidate_id", s.candidate_id},
          {"job_id", job_id},
          {"problem", e.problem ? ProblemName(*e.problem) : ""},
          {"recipe", e.recipe},
          {"prompt_version", e.prompt_version},
          {"model", e.model},
      };
      out << line.dump() << "\n";
      ++counts.written;
    }
  }
  if (!out) return absl::ResourceExhaustedError("writing trajectories failed (disk full?)");
  return counts;
}

}  // namespace anvil
