// anvil_test_worker: `anvil worker` (WorkerMain, the real FleetWorker: gRPC,
// leases, heartbeats, artifacts) with test doubles for the node: fake GPUs
// and a test evaluator in place of the sandboxed builder and runner. Built
// only as a test target. Test knobs (environment):
//   ANVIL_TEST_GPU         model of the fake GPUs (default FAKE-GPU)
//   ANVIL_TEST_GPUS        how many (default 1)
//   ANVIL_TEST_MEASURE_MS  wall time of each measured shape (default 0)
//   ANVIL_TEST_BUILD_MS    wall time of each build (default 0)
//   ANVIL_TEST_INFRA_FAIL  1: every measure fails as the node's fault
//   ANVIL_TEST_CACHE_UNREACHABLE  1: the cache directory check fails (as for
//                          a 0700 parent the sandbox's uid cannot search)
//   ANVIL_TEST_NO_ISOLATION 1: the slots' evaluators cannot be made (as on a
//                          node that refuses namespaces: FailedPrecondition)
//   ANVIL_TEST_LIE         F: every figure it reports is F times too fast
//   ANVIL_TEST_MALFORMED   1: every measure result misses its last measurement
// Builds and measurements sleep in 10 ms steps and stop as soon as their
// context is cancelled (answering Cancelled), as the sandbox kills a runner.
// The test evaluator writes a real artifact per build (the candidate id) and
// refuses to measure one whose bytes are not that candidate's.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/coordinator/fakes.h"
#include "worker/fleet/worker_main.h"

namespace anvil {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

// Sleeps `ms`, waking every 10 ms to see whether the work is still wanted.
absl::Status Work(int ms, const WorkContext& context) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (context.Cancelled()) return absl::CancelledError("test: the work was cancelled");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::OkStatus();
}

// Every figure of `t` divided by `factor` (a worker that lies).
void Faster(v1::Timings& t, double factor) {
  for (v1::TimingStats* f : {t.mutable_device(), t.mutable_warm(), t.mutable_cold(), t.mutable_call(),
                             t.mutable_graph_hot(), t.mutable_graph_cold()}) {
    f->set_median_us(f->median_us() / factor);
  }
}

class TestSlotEvaluator final : public CandidateEvaluator {
 public:
  explicit TestSlotEvaluator(std::string dir) : dir_(std::move(dir)), fake_(nullptr) {}

  std::vector<absl::StatusOr<v1::Build>> Build(const std::vector<v1::Candidate>& cs,
                                               const WorkContext& context) override {
    if (absl::Status st = Work(EnvInt("ANVIL_TEST_BUILD_MS", 0), context); !st.ok()) {
      return std::vector<absl::StatusOr<v1::Build>>(cs.size(), st);
    }
    std::vector<absl::StatusOr<v1::Build>> out = fake_.Build(cs);
    for (size_t i = 0; i < cs.size(); ++i) {
      if (!out[i].ok()) continue;
      const std::string path = absl::StrCat(dir_, "/", cs[i].id(), ".so");
      std::ofstream(path) << "test artifact of " << cs[i].id();
      out[i]->set_artifact(path);
    }
    return out;
  }

  std::vector<absl::StatusOr<MeasureResult>> Measure(const std::vector<MeasureRequest>& rs,
                                                     const WorkContext& context) override {
    std::vector<absl::StatusOr<MeasureResult>> out;
    for (const MeasureRequest& r : rs) {
      std::ifstream in(r.build.artifact());
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (bytes != absl::StrCat("test artifact of ", r.candidate.id())) {
        out.push_back(absl::DataLossError(absl::StrCat("artifact ", r.build.artifact(), " is not the candidate's")));
        continue;
      }
      if (EnvInt("ANVIL_TEST_INFRA_FAIL", 0) == 1) {
        out.push_back(absl::InternalError("test: cudaErrorNoDevice before the candidate ran"));
        continue;
      }
      if (absl::Status st = Work(EnvInt("ANVIL_TEST_MEASURE_MS", 0) * static_cast<int>(r.shapes.size()), context);
          !st.ok()) {
        out.push_back(st);
        continue;
      }
      absl::StatusOr<MeasureResult> got = std::move(fake_.Measure({r}).front());
      if (got.ok() && EnvInt("ANVIL_TEST_LIE", 0) > 1) {
        for (v1::Measurement& m : got->measurements) Faster(*m.mutable_timings(), EnvInt("ANVIL_TEST_LIE", 0));
      }
      if (got.ok() && EnvInt("ANVIL_TEST_MALFORMED", 0) == 1) got->measurements.pop_back();
      out.push_back(std::move(got));
    }
    return out;
  }

  std::optional<v1::RunnerInfo> device() const override { return fake_.device(); }

 private:
  const std::string dir_;
  testing_fakes::FakeEvaluator fake_;
};

FleetWorkerComponents TestComponents() {
  FleetWorkerComponents c;
  c.gpus = []() -> absl::StatusOr<std::vector<v1::GpuInfo>> {
    std::vector<v1::GpuInfo> gpus;
    const char* model = std::getenv("ANVIL_TEST_GPU");
    for (int i = 0; i < EnvInt("ANVIL_TEST_GPUS", 1); ++i) {
      v1::GpuInfo& g = gpus.emplace_back();
      g.set_ordinal(i);
      g.set_uuid(absl::StrCat("GPU-test-", getpid(), "-", i));
      g.set_model(model ? model : "FAKE-GPU");
      g.set_arch("sm_90a");
      g.set_sm_count(132);
      g.set_memory_bytes(80LL << 30);
    }
    return gpus;
  };
  c.evaluator = [](int ordinal) -> absl::StatusOr<std::unique_ptr<CandidateEvaluator>> {
    if (EnvInt("ANVIL_TEST_NO_ISOLATION", 0) == 1) {
      return absl::FailedPreconditionError(
          "namespace isolation is not available here (test), and Anvil does not build or run untrusted "
          "kernels without it");
    }
    const char* tmp = std::getenv("TMPDIR");
    return std::make_unique<TestSlotEvaluator>(tmp ? tmp : "/tmp");
  };
  c.versions = [] { return std::string("driver=test cuda=test cublas=test"); };
  c.check_cache_dir = [](const std::string& dir) {
    if (EnvInt("ANVIL_TEST_CACHE_UNREACHABLE", 0) != 1) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("'", dir, "' is not reachable by the job's uid (test)"));
  };
  return c;
}

}  // namespace
}  // namespace anvil

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return anvil::WorkerMain(args, anvil::TestComponents(), "anvil_test_worker");
}
