// anvil_test_server: `anvil serve` with the coordinator's test doubles
// (tests/coordinator/fakes.h) instead of a GPU: FakeEvaluator measures a
// candidate at the time in its US param, ScriptedProposer proposes a fixed
// list per problem. Built only as a test target. Test knobs (environment):
//   ANVIL_TEST_CANDIDATES  candidates proposed per problem (default 6)
//   ANVIL_TEST_MEASURE_MS  wall time of each fake measurement (default 0)
//   ANVIL_TEST_RECHECKS    re-checks of each problem's fastest (default 1)
//   ANVIL_TEST_LLM         1: a request may name the "llm" proposer (as a
//                          server with jobs.llm_config); else it is refused,
//                          as the real factory refuses it without one
// Everything else is ServeMain's: the same options, store, gRPC and drain.
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "proto/problem.h"
#include "server/rpc/serve_main.h"
#include "tests/coordinator/fakes.h"

namespace anvil {
namespace {

using testing_fakes::FakeCandidate;
using testing_fakes::FakeClock;
using testing_fakes::FakeEvaluator;
using testing_fakes::ScriptedProposer;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

// FakeEvaluator taking real time per measurement, one call at a time (a
// server runs several jobs; the fake keeps plain counters).
class PacedEvaluator final : public CandidateEvaluator {
 public:
  explicit PacedEvaluator(int measure_ms) : measure_ms_(measure_ms), fake_(&clock_) {}
  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& c, const WorkContext&) override {
    absl::MutexLock lock(&mu_);
    return fake_.Build(c);
  }
  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& r,
                                                     const WorkContext&) override {
    int shapes = 0;
    for (const MeasureRequest& m : r) shapes += static_cast<int>(m.shapes.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(measure_ms_ * shapes));
    absl::MutexLock lock(&mu_);
    return fake_.Measure(r);
  }
  std::optional<v1::RunnerInfo> device() const override { return fake_.device(); }

 private:
  const int measure_ms_;
  FakeClock clock_;
  absl::Mutex mu_;
  FakeEvaluator fake_;
};

// Each job's proposer: per problem ANVIL_TEST_CANDIDATES candidates, each
// faster than the last (each a new best).
absl::StatusOr<std::vector<std::unique_ptr<Proposer>>> ScriptedProposers(
    const v1::OptimizeKernelRequest& request) {
  if (request.proposer().find("llm") != std::string::npos && EnvInt("ANVIL_TEST_LLM", 0) != 1) {
    return absl::FailedPreconditionError(
        "the request names the llm proposer but no LLM endpoint is configured here (test)");
  }
  const int n = EnvInt("ANVIL_TEST_CANDIDATES", 6);
  std::vector<std::vector<v1::Candidate>> script;
  for (const v1::Problem& p : request.problems()) {
    std::vector<v1::Candidate> list;
    for (int i = 0; i < n; ++i) {  // each faster than the last: each a new best
      list.push_back(FakeCandidate(p.layout(), 8.0 / (1 + 0.1 * i), absl::StrCat(ProblemName(p), "_", i)));
    }
    script.push_back(std::move(list));
  }
  std::vector<std::unique_ptr<Proposer>> out;
  out.push_back(std::make_unique<ScriptedProposer>("embedded", std::move(script), EnvInt("ANVIL_TEST_RECHECKS", 1)));
  return out;
}

ServeComponents TestComponents() {
  ServeComponents c;
  c.evaluator = [](const ServerOptions&) -> absl::StatusOr<std::unique_ptr<CandidateEvaluator>> {
    return std::make_unique<PacedEvaluator>(EnvInt("ANVIL_TEST_MEASURE_MS", 0));
  };
  c.proposers = [](const ServerOptions&, Store&) -> absl::StatusOr<ProposerSet> {
    return ProposerSet{ScriptedProposers, nullptr};
  };
  c.gpu = "FAKE-GPU";  // what FakeEvaluator reports once it has measured
  return c;
}

}  // namespace
}  // namespace anvil

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return anvil::ServeMain(args, anvil::TestComponents(), "anvil_test_server");
}
