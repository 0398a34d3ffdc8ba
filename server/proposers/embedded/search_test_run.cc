// RunSearch (search_test_fixture.h): one job of the embedded proposer alone,
// through a job service assembled as every other (server/proposers/job_setup.h).
#include "absl/strings/str_cat.h"
#include "server/proposers/embedded/embedded_proposer.h"
#include "server/proposers/embedded/search_test_fixture.h"
#include "server/proposers/job_setup.h"

namespace anvil {

absl::StatusOr<SearchResult> RunSearch(const std::vector<SeedFamily>& seeds,
                                       const std::vector<ShapeSpec>& problems,
                                       const std::string& job_id, CandidateEvaluator& evaluator,
                                       Store& store, const SearchOptions& options,
                                       const ProgressFn& progress) {
  if (problems.empty()) return absl::InvalidArgumentError("no problems to search");
  if (seeds.empty()) return absl::FailedPreconditionError("no seed families loaded");
  auto result = std::make_shared<std::optional<absl::StatusOr<SearchResult>>>();
  JobSetup setup;
  setup.store = &store;
  setup.evaluator = &evaluator;
  setup.clock = options.clock;
  setup.job.default_figure = options.figure;
  setup.job.build_chunk = std::max(1, options.build_chunk);
  setup.new_job_id = [job_id] { return job_id; };
  ProposerSet set;
  set.factory = [&seeds, &options, &progress, result](const v1::OptimizeKernelRequest&)
      -> absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> {
    EmbeddedProposerOptions e;
    e.seeds = seeds;
    e.search = options;
    e.progress = progress;
    e.on_done = [result](const absl::StatusOr<SearchResult>& r) { *result = r; };
    std::vector<std::unique_ptr<Proposer>> out;
    out.push_back(std::make_unique<EmbeddedProposer>(std::move(e)));
    return out;
  };
  setup.proposer_set = std::move(set);
  absl::StatusOr<std::unique_ptr<JobService>> service = MakeJobService(std::move(setup));
  if (!service.ok()) return service.status();
  v1::OptimizeKernelRequest request;
  request.set_proposer("embedded");
  request.set_reward_figure(options.figure);
  for (const ShapeSpec& s : problems) {
    v1::Problem* p = request.add_problems();
    *p->mutable_shape() = s.shape;
    p->set_layout(s.layout);
  }
  absl::StatusOr<v1::Job> job = (*service)->CreateJob(request);
  if (!job.ok()) return job.status();
  absl::StatusOr<v1::Job> done = (*service)->RunJob(job->id());
  if (result->has_value() && !(*result)->ok()) return (*result)->status();
  if (!done.ok()) return done.status();
  if (done->state() == v1::JOB_STATE_FAILED) return absl::InternalError(done->error());
  if (!result->has_value()) return absl::InternalError(absl::StrCat("job ", job_id, " ended without the search's result"));
  return **result;
}

}  // namespace anvil
