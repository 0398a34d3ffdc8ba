#include "server/proposers/llm/llm_proposer.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "prompts/prompts.h"
#include "proto/candidate.h"
#include "proto/figures.h"
#include "proto/problem.h"
#include "reward/reward.h"

namespace anvil {
namespace {

std::string VerdictWord(v1::Verdict v) {
  std::string name = v1::Verdict_Name(v);
  return absl::AsciiStrToLower(name.substr(name.find('_') + 1));  // "incorrect", "crashed", ...
}

}  // namespace

struct LlmProposer::Sample {
  int index = 0;
  int group = 0;                          // also its exchange's key (ProposerRecord)
  int problem = 0;
  int depth = 0;                          // repair turns before this sample
  std::string system;
  std::vector<llm::Message> conversation;  // what was sent, plus this answer
  int pending = 0;                        // kernels not yet observed
  std::optional<double> best;             // the best reward of its kernels so far
  std::string kind;
  std::string fidelity;                   // of the measurements `best` came from
  bool settled = false;
};

struct LlmProposer::Group {
  int recipe = -1;  // -1: a repair turn
  std::vector<int> samples;
  bool closed = false;
};

struct LlmProposer::Repair {
  int sample = 0;
  std::string name, failure, log, parent;
};

absl::StatusOr<std::unique_ptr<LlmProposer>> LlmProposer::Create(LlmProposerOptions options) {
  if (options.client == nullptr) options.client = options.owned_client.get();
  if (options.client == nullptr) return absl::InvalidArgumentError("the LLM proposer needs a client");
  if (options.samples_per_prompt < 1) return absl::InvalidArgumentError("samples_per_prompt must be >= 1");
  absl::StatusOr<PromptBuilder> builder = PromptBuilder::Load(options.prompts_dir);
  if (!builder.ok()) return builder.status();
  absl::StatusOr<std::string> version = PromptsVersion(options.prompts_dir);
  if (!version.ok()) return version.status();
  return std::unique_ptr<LlmProposer>(
      new LlmProposer(std::move(options), std::move(*builder), std::move(*version)));
}

LlmProposer::LlmProposer(LlmProposerOptions options, PromptBuilder builder, std::string version)
    : options_(std::move(options)),
      builder_(std::move(builder)),
      version_(std::move(version)),
      extractor_(options_.policy),
      bandit_(LlmRecipes(), options_.exploration) {}

LlmProposer::~LlmProposer() = default;

absl::StatusOr<std::vector<Proposal>> LlmProposer::Propose(const SearchView& view, int n) {
  absl::StatusOr<std::vector<Proposal>> out = ProposeNow(view, n);
  HandOver(view);  // even after a failure: the exchanges made before it
  return out;
}

void LlmProposer::HandOver(const SearchView& view) {
  if (view.records != nullptr) {
    for (ProposerRecord& r : to_keep_) view.records->push_back(std::move(r));
  }
  to_keep_.clear();
}

absl::StatusOr<std::vector<Proposal>> LlmProposer::ProposeNow(const SearchView& view, int n) {
  if (view.final_phase) return Rechecks(view);
  std::vector<Proposal> out;
  while (out.empty() && barren_ < options_.give_up_after &&
         (options_.max_prompts == 0 || prompts_ < options_.max_prompts)) {
    // Prompts are dear: wait for the measurements of the open ones (the
    // repairs and exemplars they bring) before asking again.
    int open = 0;
    for (const Group& g : groups_) open += !g.closed;
    if (open >= options_.max_open_prompts) break;
    // Repairs and new prompts take turns, so neither starves the other.
    bool asked = false;
    absl::Status st;
    if (repairs_.empty() || last_was_repair_) st = AskNew(view, out, &asked);
    if (st.ok() && !asked && !repairs_.empty()) {
      Repair r = std::move(repairs_.front());
      repairs_.erase(repairs_.begin());
      st = AskRepair(view, std::move(r), out);
      asked = true;
      last_was_repair_ = true;
    } else {
      last_was_repair_ = false;
    }
    if (!st.ok()) return st;
    if (!asked) break;  // no active problem, no repair
    barren_ = out.empty() ? barren_ + 1 : 0;
  }
  return out;
}

absl::Status LlmProposer::AskNew(const SearchView& view, std::vector<Proposal>& out, bool* asked) {
  int problem = -1;
  for (size_t i = 0; i < view.problems.size(); ++i) {
    if (!view.problems[i].active) continue;
    if (problem < 0 || prompted_[int(i)] < prompted_[problem]) problem = int(i);
  }
  *asked = problem >= 0;
  if (problem < 0) return absl::OkStatus();
  const int recipe = bandit_.Choose();
  absl::StatusOr<BuiltPrompt> prompt =
      builder_.Build(view, problem, LlmRecipes()[recipe], options_.exemplars);
  if (!prompt.ok()) return prompt.status();
  ++prompted_[problem];
  const std::string parent = prompt->exemplars.empty() ? "" : prompt->exemplars[0].candidate.id();
  return Ask(view, problem, recipe, prompt->system, {{"user", prompt->user}},
             options_.samples_per_prompt, parent, 0, out);
}

absl::Status LlmProposer::AskRepair(const SearchView& view, Repair r, std::vector<Proposal>& out) {
  const Sample& s = samples_[r.sample];
  absl::StatusOr<std::string> turn = builder_.Repair(r.name, r.failure, r.log);
  if (!turn.ok()) return turn.status();
  std::vector<llm::Message> messages = s.conversation;
  messages.push_back({"user", *turn});
  return Ask(view, s.problem, -1, s.system, std::move(messages), 1, r.parent, s.depth + 1, out);
}

namespace {

// The exchange record, without samples.
LlmExchange Record(const SearchView& view, const ProblemView& p, const llm::Client& client,
                   const std::string& system, const std::vector<llm::Message>& messages,
                   const llm::ChatResult& r) {
  LlmExchange e;
  e.job_id = view.job_id;
  if (!p.problem.gpu().empty()) e.problem = p.problem;
  e.model = client.options().model;
  e.endpoint = client.endpoint();
  e.system_prompt = system;
  nlohmann::json sent = nlohmann::json::array();
  for (const llm::Message& m : messages) sent.push_back({{"role", m.role}, {"content", m.content}});
  e.messages_json = sent.dump();
  e.prompt = messages.back().content;
  e.response = r.choices.empty() ? "" : r.choices[0].text;
  e.prompt_tokens = r.prompt_tokens;
  e.completion_tokens = r.completion_tokens;
  e.latency_ms = r.latency_ms;
  e.error = r.error;
  e.cost_usd = r.cost_usd;
  e.http_requests = r.http_requests;
  return e;
}

// A sample refused before nvcc: why, and its fixed reward.
void Refuse(const Extraction& x, double duplicate_reward, LlmSample& rec) {
  rec.status = x.refused[0].first;
  rec.reason = x.refused[0].second;
  if (rec.status == "duplicate") {
    rec.reward_kind = "duplicate";
    rec.reward = duplicate_reward;
    return;
  }
  v1::Build rejected;
  rejected.set_verdict(v1::VERDICT_REJECTED);
  const RewardValue r = BuildFailureReward(rejected);
  rec.reward_kind = r.kind;
  rec.reward = r.value;
}

}  // namespace

Proposal LlmProposer::MakeProposal(const SearchView& view, int problem, const std::string& recipe,
                                   const std::string& parent, const std::string& source) const {
  Proposal prop;
  v1::Candidate& c = prop.candidate;
  c.set_source(source);
  c.set_proposer("llm");
  c.set_family("llm");
  c.set_layout(view.problems[problem].problem.layout());
  c.set_arch(view.device && !view.device->arch().empty() ? view.device->arch() : "sm_90a");
  if (!parent.empty()) c.add_parent_ids(parent);
  AssignCandidateId(c);
  c.set_name(absl::StrCat("llm_", recipe, "_", c.id().substr(0, 8)));
  prop.problems.push_back(problem);
  for (int other : NearestProblems(view, problem, options_.neighbours)) prop.problems.push_back(other);
  prop.stage = absl::StrCat("llm-", recipe);
  // A screen: the job's figure and every check at a fraction of the GPU time;
  // the sample's reward says it came from one (LlmSample::reward_fidelity).
  prop.fidelity = v1::FIDELITY_SCREEN;
  return prop;
}

absl::Status LlmProposer::Ask(const SearchView& view, int problem, int recipe, const std::string& system,
                              std::vector<llm::Message> messages, int n, const std::string& parent,
                              int depth, std::vector<Proposal>& out) {
  ++prompts_;
  absl::StatusOr<llm::ChatResult> result =
      options_.client->Complete({system, messages, n, std::nullopt, nullptr});
  if (!result.ok()) return result.status();
  const std::string recipe_name = recipe >= 0 ? LlmRecipes()[recipe] : "repair";
  LlmExchange e = Record(view, view.problems[problem], *options_.client, system, messages, *result);
  e.prompt_version = version_;
  e.recipe = recipe_name;
  const int group = static_cast<int>(groups_.size());
  groups_.push_back({recipe, {}, false});
  for (size_t i = 0; i < result->choices.size(); ++i) {
    const std::string& text = result->choices[i].text;
    Extraction x = extractor_.Extract(text);
    LlmSample rec{0, int(i), text, "", "proposed", "", std::nullopt, std::nullopt, "", ""};
    Sample s{int(i), group, problem, depth, system, messages, 0, std::nullopt, "", "", false};
    s.conversation.push_back({"assistant", text});
    for (const ExtractedKernel& k : x.kernels) {
      out.push_back(MakeProposal(view, problem, recipe_name, parent, k.source));
      const std::string& id = out.back().candidate.id();
      sample_of_[id] = static_cast<int>(samples_.size());
      if (rec.candidate_id.empty()) rec.candidate_id = id;
      ++s.pending;
    }
    if (x.kernels.empty() && !x.refused.empty()) {
      Refuse(x, options_.duplicate_reward, rec);
      s.best = rec.reward;
      s.kind = rec.reward_kind;
    }
    if (e.candidate_id.empty()) e.candidate_id = rec.candidate_id;
    s.settled = s.pending == 0;
    e.samples.push_back(rec);
    groups_[group].samples.push_back(static_cast<int>(samples_.size()));
    samples_.push_back(std::move(s));
  }
  to_keep_.push_back({group, std::move(e), 0, {}});
  CloseGroup(group);
  return absl::OkStatus();
}

std::vector<Proposal> LlmProposer::Rechecks(const SearchView& view) {
  std::vector<Proposal> out;
  for (const auto& [problem, best] : best_) {
    if (rechecked_[problem] || problem >= int(view.problems.size())) continue;
    const ProblemView& p = view.problems[problem];
    if (p.best_us > 0 && best.first > p.best_us * 1.0001) continue;  // another proposer's is faster
    rechecked_[problem] = true;
    Proposal prop;
    prop.candidate = best.second;
    prop.problems = {problem};
    prop.recheck = true;
    prop.stage = "llm-verify";
    out.push_back(std::move(prop));
  }
  return out;
}

void LlmProposer::Observe(const SearchView& view, std::span<const Observation> results) {
  for (const Observation& o : results) ObserveOne(view, o);
  HandOver(view);
}

// A sample's kernel: its reward from the coordinator's reward callback
// (Observation::rewards), clipped, and the problems' bests it sets.
void LlmProposer::ObserveOne(const SearchView& view, const Observation& o) {
  if (o.proposal.recheck) return;
  auto it = sample_of_.find(o.proposal.candidate.id());
  if (it == sample_of_.end()) return;
  const int sample = it->second;
  const size_t scored = std::min(o.rewards.size(), o.reward_kinds.size());
  if (o.outcome == Outcome::kBuildFailed && o.build.has_value()) {
    if (scored > 0) {
      Settle(sample, o.rewards[0], o.reward_kinds[0]);
    } else {
      Settle(sample, std::nan(""), "skipped");
    }
    MaybeRepair(o, sample);
    return;
  }
  if (o.outcome != Outcome::kMeasured || o.measurements.empty()) {
    Settle(sample, std::nan(""), "skipped");
    return;
  }
  std::vector<double> rewards;
  std::string kind;
  const std::string fidelity(FidelityName(o.measurements[0].fidelity()));
  for (size_t j = 0; j < o.measurements.size(); ++j) {
    const v1::Measurement& m = o.measurements[j];
    const int problem = o.measured_on[j];
    const double us = RankingUs(m, view.figure);
    if (Beats(us, best_.count(problem) ? best_[problem].first : 0)) {
      best_[problem] = {us, o.proposal.candidate};
    }
    if (j >= scored) continue;
    const RewardValue r{o.rewards[j], o.reward_kinds[j]};
    rewards.push_back(ClippedReward(r, options_.clip));
    if (kind.empty() || r.kind != "speedup") kind = r.kind;
  }
  if (rewards.empty()) {
    Settle(sample, std::nan(""), "skipped");
    return;
  }
  Settle(sample, SampleReward(rewards), kind, fidelity);
  MaybeRepair(o, sample);
}

void LlmProposer::Settle(int sample, double reward, const std::string& kind,
                         const std::string& fidelity) {
  Sample& s = samples_[sample];
  if (!std::isnan(reward) && (!s.best.has_value() || reward > *s.best)) {
    s.best = reward;
    s.kind = kind;
    s.fidelity = fidelity;
  }
  if (--s.pending > 0) return;
  s.settled = true;
  CloseGroup(s.group);
}

// Once every sample of a prompt has its reward: advantages, records, bandit.
void LlmProposer::CloseGroup(int group) {
  Group& g = groups_[group];
  if (g.closed) return;
  std::vector<int> scored;
  for (int s : g.samples) {
    if (!samples_[s].settled) return;
    if (samples_[s].best.has_value()) scored.push_back(s);
  }
  g.closed = true;
  std::vector<double> rewards;
  for (int s : scored) rewards.push_back(*samples_[s].best);
  std::vector<double> adv = GroupAdvantages(rewards);
  double payoff = 0;
  for (size_t i = 0; i < scored.size(); ++i) {
    const Sample& s = samples_[scored[i]];
    payoff = std::max(payoff, RewardPayoff(*s.best, s.kind == "speedup"));
    LlmSample outcome;
    outcome.reward = s.best;
    outcome.advantage = adv[i];
    outcome.reward_kind = s.kind;
    outcome.reward_fidelity = s.fidelity;
    to_keep_.push_back({s.group, std::nullopt, s.index, std::move(outcome)});
  }
  if (g.recipe >= 0) bandit_.Update(g.recipe, payoff);
}

void LlmProposer::MaybeRepair(const Observation& o, int sample) {
  const Sample& s = samples_[sample];
  if (s.depth >= options_.max_repairs) return;
  Repair r{sample, o.proposal.candidate.name(), "", "", o.proposal.candidate.id()};
  if (o.outcome == Outcome::kBuildFailed && o.build &&
      o.build->verdict() == v1::VERDICT_COMPILE_ERROR) {
    r.failure = "did not compile";
    r.log = TrimLog(o.build->error(), options_.max_log_chars);
  } else if (!o.measurements.empty() && (o.measurements[0].verdict() == v1::VERDICT_INCORRECT ||
                                         o.measurements[0].verdict() == v1::VERDICT_CRASHED ||
                                         o.measurements[0].verdict() == v1::VERDICT_TIMEOUT)) {
    const v1::Measurement& m = o.measurements[0];
    r.failure = absl::StrCat("was ", VerdictWord(m.verdict()), " on ", ShapeName(m.problem().shape()),
                             " ", LayoutName(m.problem().layout()));
    r.log = TrimLog(absl::StrCat(m.reason(), ": ", m.detail()), options_.max_log_chars);
  } else {
    return;
  }
  repairs_.push_back(std::move(r));
}

}  // namespace anvil
