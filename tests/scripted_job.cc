#include "tests/scripted_job.h"

#include "deploy/layout.h"
#include "prompts/prompts.h"
#include "server/job_service.h"
#include "server/proposers/job_setup.h"
#include "server/proposers/llm/bandit_policy.h"
#include "server/proposers/llm/llm_proposer.h"
#include "tests/scripted_kernels.h"
#include "tests/scripted_llm_server.h"

namespace anvil::testing {
namespace {

// The job service, assembled as every other (server/proposers/job_setup.h),
// with the LLM proposer on the scripted endpoint.
JobSetup Setup(Store& store, CandidateEvaluator& evaluator, llm::Client& client) {
  JobSetup o;
  o.store = &store;
  o.evaluator = &evaluator;
  o.job.default_figure = "device";
  o.job.build_chunk = 8;
  ProposerSet set;
  set.share_policy = [] { return MakeBanditSharePolicy(); };
  set.factory = [&client](const v1::OptimizeKernelRequest&)
      -> absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> {
    LlmProposerOptions lo;
    lo.client = &client;
    lo.prompts_dir = DefaultPromptsDir(deploy::ExecutableDir());
    lo.samples_per_prompt = 5;  // every scripted choice (FirstTurnChoices)
    // Repairs queue (first in, first out) and alternate with new prompts; the
    // first two prompts queue at most two compile errors before a wrong
    // result, so its repair is at most the 9th prompt (the 3rd on the CPU).
    lo.max_prompts = 12;
    absl::StatusOr<std::unique_ptr<LlmProposer>> p = LlmProposer::Create(lo);
    if (!p.ok()) return p.status();
    std::vector<std::unique_ptr<Proposer>> v;
    v.push_back(std::move(*p));
    return v;
  };
  o.proposer_set = std::move(set);
  return o;
}

void Tally(const std::vector<LlmExchange>& exchanges, ScriptedJobOutcome& out) {
  out.exchanges = static_cast<int>(exchanges.size());
  for (const LlmExchange& e : exchanges) {
    for (const LlmSample& s : e.samples) {
      ++out.kinds[s.status + "/" + s.reward_kind];
      ++out.statuses[s.status];
      if ((s.reward_kind == "incorrect" || s.reward_kind == "cheat") && !(s.reward.value_or(0) < 0)) {
        out.failures_penalised = false;
      }
    }
    out.incorrect_repaired |= e.recipe == "repair" && e.prompt.find("was incorrect on") != std::string::npos &&
                              (e.prompt.find("wrong_result: ") != std::string::npos ||
                               e.prompt.find("exact_mismatch: ") != std::string::npos);
  }
}

}  // namespace

absl::StatusOr<ScriptedJobOutcome> RunScriptedJob(Store& store, CandidateEvaluator& evaluator,
                                                  const std::vector<v1::Shape>& shapes) {
  ScriptedLlmServer server(KernelAnswer);
  llm::ClientOptions co;
  co.base_url = server.base_url();
  co.model = "scripted-kernels";
  absl::StatusOr<std::unique_ptr<llm::Client>> client = llm::Client::Create(co);
  if (!client.ok()) return client.status();
  absl::StatusOr<std::unique_ptr<JobService>> service =
      MakeJobService(Setup(store, evaluator, **client));
  if (!service.ok()) return service.status();
  v1::OptimizeKernelRequest req;
  for (const v1::Shape& s : shapes) {
    v1::Problem* p = req.add_problems();
    *p->mutable_shape() = s;
    p->set_layout(v1::LAYOUT_NT);
  }
  req.set_proposer("llm");
  absl::StatusOr<v1::Job> job = (*service)->CreateJob(req);
  if (!job.ok()) return job.status();
  absl::StatusOr<v1::Job> done = (*service)->RunJob(job->id());
  if (!done.ok()) return done.status();
  ScriptedJobOutcome out;
  out.job = *done;
  absl::StatusOr<std::vector<LlmExchange>> ex = store.ListLlmExchanges(job->id());
  if (!ex.ok()) return ex.status();
  Tally(*ex, out);
  return out;
}

}  // namespace anvil::testing
