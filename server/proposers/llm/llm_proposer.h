// LlmProposer: candidates from a language model (CUDA-L1 / CUDA-L2 style),
// behind the coordinator's ask/tell interface (server/proposer.h).
//
// Propose: picks a problem (the active one it has prompted least) and a
// context recipe (a UCB1 bandit over "contrast", "neighbours", "best",
// paid by the best sample of each prompt), builds the prompt
// (prompt_builder.h), asks the client for n samples, hands the exchange to
// the coordinator to keep (SearchView::records), and extracts kernels
// (extract.h: ABI and source policy checked, duplicates dropped) as
// proposals measured on the problem and its nearest neighbours.
// Pending repairs and new prompts take turns: a candidate that did not compile or was
// incorrect gets up to max_repairs follow-up turns in its own conversation,
// with the trimmed compiler output or the verdict and reason.
//
// Observe: each sample's reward is its clipped log2 speedup by the job's
// figure (mean over the problems it was measured on, best of its kernels),
// or a fixed negative reward by failure kind, as the coordinator's reward
// callback computed them (Observation::rewards); once every sample of a
// prompt has one, their GRPO advantages are computed and handed over to keep
// with the exchange. The proposer writes nothing itself.
// Design and the stored format: LLM_PROPOSER.md.
//
// Thread-compatible (the coordinator calls it from one job thread).
#ifndef ANVIL_SERVER_PROPOSERS_LLM_LLM_PROPOSER_H_
#define ANVIL_SERVER_PROPOSERS_LLM_LLM_PROPOSER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llm/llm.h"
#include "reward/advantage.h"
#include "reward/bandit.h"
#include "server/proposer.h"
#include "server/proposers/llm/extract.h"
#include "server/proposers/llm/prompt_builder.h"

namespace anvil {

struct LlmProposerOptions {
  llm::Client* client = nullptr;    // REQUIRES: non-null (or owned_client), outlives the proposer
  std::shared_ptr<llm::Client> owned_client;     // used when client is null
  std::string prompts_dir;          // REQUIRES: the prompts/ templates and VERSION
  int samples_per_prompt = 4;       // n of each exchange
  int exemplars = 2;                // fastest and slowest variants per contrastive prompt
  int neighbours = 2;               // other problems each kernel is also measured on
  int max_repairs = 2;              // repair turns along one lineage
  int max_prompts = 0;              // prompts in this run (repairs included); 0: no limit
  int give_up_after = 6;            // prompts in a row that yield no kernel: stop proposing
  int max_open_prompts = 2;         // prompts whose samples are not all measured yet
  size_t max_log_chars = 3000;      // compiler output or reason in a repair turn
  double duplicate_reward = -1;     // a sample repeating an earlier kernel
  double exploration = 1.0;         // the recipe bandit's c
  RewardClip clip;
  sandbox::SourcePolicy policy;
};

// An LLM proposer from a JSON configuration file:
//   {"client": {<llm/LLM.md keys>},
//    "proposer": {"samples_per_prompt": 4, "exemplars": 2, "neighbours": 2,
//                 "max_repairs": 2, "max_prompts": 0}}
// InvalidArgument for a bad file or key.
absl::StatusOr<std::unique_ptr<Proposer>> LlmProposerFromConfig(const std::string& path,
                                                                const std::string& prompts_dir);

class LlmProposer : public Proposer {
 public:
  static absl::StatusOr<std::unique_ptr<LlmProposer>> Create(LlmProposerOptions options);
  ~LlmProposer() override;

  const std::string& name() const override { return name_; }
  absl::StatusOr<std::vector<Proposal>> Propose(const SearchView& view, int n) override;
  void Observe(const SearchView& view, std::span<const Observation> results) override;

  // The recipe bandit's state, e.g. "contrast: 0.42 over 3, ...".
  std::string Describe() const { return bandit_.Describe(); }
  int prompts() const { return prompts_; }

 private:
  struct Sample;
  struct Group;
  struct Repair;
  LlmProposer(LlmProposerOptions options, PromptBuilder builder, std::string version);

  absl::StatusOr<std::vector<Proposal>> ProposeNow(const SearchView& view, int n);
  void ObserveOne(const SearchView& view, const Observation& o);
  // Moves what is to be kept into view.records (dropped when it is null).
  void HandOver(const SearchView& view);
  // One exchange: sends `messages`, queues it to be kept, turns answers into
  // proposals.
  absl::Status Ask(const SearchView& view, int problem, int recipe, const std::string& system,
                   std::vector<llm::Message> messages, int n, const std::string& parent,
                   int depth, std::vector<Proposal>& out);
  absl::Status AskNew(const SearchView& view, std::vector<Proposal>& out, bool* asked);
  absl::Status AskRepair(const SearchView& view, Repair repair, std::vector<Proposal>& out);
  Proposal MakeProposal(const SearchView& view, int problem, const std::string& recipe,
                        const std::string& parent, const std::string& source) const;
  std::vector<Proposal> Rechecks(const SearchView& view);
  // `fidelity`: of the measurements the reward came from ("" for none).
  void Settle(int sample, double reward, const std::string& kind, const std::string& fidelity = "");
  void CloseGroup(int group);
  void MaybeRepair(const Observation& o, int sample);

  const std::string name_ = "llm";
  LlmProposerOptions options_;
  PromptBuilder builder_;
  std::string version_;
  Extractor extractor_;
  Ucb1 bandit_;
  std::vector<Sample> samples_;
  std::vector<Group> groups_;
  std::vector<Repair> repairs_;
  std::map<std::string, int> sample_of_;     // candidate id -> sample
  std::map<int, int> prompted_;              // problem -> prompts
  std::map<int, std::pair<double, v1::Candidate>> best_;  // problem -> our best (RankingUs)
  std::vector<ProposerRecord> to_keep_;      // exchanges and outcomes not yet handed over
  std::map<int, bool> rechecked_;
  int prompts_ = 0;
  int barren_ = 0;  // prompts in a row without a kernel
  bool last_was_repair_ = false;
};

}  // namespace anvil

#endif  // ANVIL_SERVER_PROPOSERS_LLM_LLM_PROPOSER_H_
