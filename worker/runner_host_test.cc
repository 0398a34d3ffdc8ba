#include "worker/runner_host.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "proto/problem.h"
#include "sandbox/sandbox.h"

namespace anvil {
namespace {

v1::LtAlgo Algo(int m, v1::Layout layout, const std::string& version, const std::string& bytes) {
  v1::LtAlgo a;
  *a.mutable_shape() = MakeShape(m, 64, 64);
  a.set_layout(layout);
  a.set_cublas_version(version);
  a.set_algo(bytes);
  return a;
}

// A runner takes the first stored choice that matches its problem, so a newly
// tuned one must replace the earlier (a retune mark included), not follow it.
TEST(MergeTunedAlgo, ReplacesTheSameProblemsChoiceAndKeepsOthers) {
  std::vector<v1::LtAlgo> algos = {Algo(128, v1::LAYOUT_NT, "130100", "old"),
                                   Algo(256, v1::LAYOUT_NT, "130100", "other"),
                                   Algo(128, v1::LAYOUT_NN, "130100", "nn"),
                                   Algo(128, v1::LAYOUT_NT, "130000", "older cublas")};
  algos[0].set_retune(true);
  MergeTunedAlgo(algos, Algo(128, v1::LAYOUT_NT, "130100", "new"));
  ASSERT_EQ(algos.size(), 4u);
  int matching = 0;
  for (const v1::LtAlgo& a : algos) {
    if (a.shape().m() == 128 && a.layout() == v1::LAYOUT_NT && a.cublas_version() == "130100") {
      ++matching;
      EXPECT_EQ(a.algo(), "new");
      EXPECT_FALSE(a.retune());
    }
  }
  EXPECT_EQ(matching, 1);
  EXPECT_EQ(algos[0].algo(), "other");
  EXPECT_EQ(algos[1].algo(), "nn");
  EXPECT_EQ(algos[2].algo(), "older cublas");
}

TEST(MergeTunedAlgo, AppendsAChoiceForANewProblem) {
  std::vector<v1::LtAlgo> algos;
  MergeTunedAlgo(algos, Algo(64, v1::LAYOUT_NN, "130100", "first"));
  ASSERT_EQ(algos.size(), 1u);
  EXPECT_EQ(algos[0].algo(), "first");
}

TEST(ProcessEndReason, SaysWhyARunnerEndedInAFewWords) {
  sandbox::Result r;
  r.exit_code = 0;
  EXPECT_EQ(ProcessEndReason(r), "done");
  r.exit_code = 5;
  r.stderr_text =
      "anvil-runner: the process state changed after candidate c1 (/tmp/libs/0-c1.so): device memory in "
      "use grew by 1100 MiB (1024 MiB allowed); threads 4 -> 5; the rest of the batch needs a fresh process\n";
  EXPECT_EQ(ProcessEndReason(r), "state changed: device memory in use, threads");
  r.stderr_text = "garbled";
  EXPECT_EQ(ProcessEndReason(r), "state changed");
  r.exit_code = 3;
  EXPECT_EQ(ProcessEndReason(r), "sticky CUDA error");
  r.exit_code = -1;
  r.term_signal = 11;
  EXPECT_EQ(ProcessEndReason(r), "signal 11");
  r.timed_out = true;
  EXPECT_EQ(ProcessEndReason(r), "timeout");
}

// A stand-in for anvil-runner (a test double): a shell script that speaks
// the runner's protocol as far as `events`, then does what `then` says.
class FakeRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<sandbox::ScratchDir> dir = sandbox::ScratchDir::Create("/tmp", "fake-runner-test-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_.emplace(std::move(*dir));
    ASSERT_EQ(mkdir((dir_->path() + "/bin").c_str(), 0755), 0);
    library_ = dir_->path() + "/candidate.so";
    std::ofstream(library_) << "not a library";
    chmod(library_.c_str(), 0644);
  }
  RunnerHost Make(const std::string& then) {
    const std::string runner = dir_->path() + "/bin/fake-runner";
    std::ofstream(runner) << "#!/bin/sh\ncat > /dev/null\n"
                          << "echo '{\"info\":{\"gpu\":\"FakeGPU\"}}'\n"
                          << "echo '{\"problem_start\":{\"reference_call_us\":10,"
                          << "\"candidate_calls\":100,\"baseline_calls\":300}}'\n"
                          << then << "\n";
    chmod(runner.c_str(), 0755);
    RunnerHostOptions o;
    o.toolchain.runner = runner;
    o.toolchain.cuda_root = "/usr";
    o.isolation = sandbox::Isolation::kAuto;  // about limits, not isolation
    o.limits.floor = absl::Seconds(1);
    o.limits.output_cap_bytes = 1 << 20;
    return RunnerHost(o);
  }
  absl::StatusOr<RunnerResults> Run(RunnerHost& e) {
    v1::Candidate c;
    c.set_id("fake");
    c.set_layout(v1::LAYOUT_NT);
    v1::Build b;
    b.set_verdict(v1::VERDICT_PASSED);
    b.set_artifact(library_);
    return e.Measure(c, b, {MakeShape(1000, 1000, 1000), MakeShape(64, 64, 64)}, {});
  }
  std::optional<sandbox::ScratchDir> dir_;
  std::string library_;
};

// The fixed limit would be 60 s + 60 s per problem: a hang after the
// problem's start costs its scaled limit (1 s floor here) instead.
TEST_F(FakeRunnerTest, AHangIsKilledAtItsScaledLimitAndTheRestIsNotRun) {
  RunnerHost e = Make("sleep 1000");
  absl::StatusOr<RunnerResults> ev = Run(e);
  ASSERT_TRUE(ev.ok()) << ev.status();
  ASSERT_EQ(ev->measurements.size(), 2u);
  const v1::Measurement& m = ev->measurements[0];
  EXPECT_EQ(m.verdict(), v1::VERDICT_TIMEOUT);
  EXPECT_EQ(m.reason(), "timeout");
  EXPECT_LT(ev->seconds, 15);
  EXPECT_GT(m.time_limit_s(), 1);
  EXPECT_LT(m.time_limit_s(), 3);
  EXPECT_TRUE(absl::StrContains(m.time_limit_basis(), "10 us slowest baseline")) << m.time_limit_basis();
  EXPECT_TRUE(absl::StrContains(m.detail(), "the limit:")) << m.detail();
  EXPECT_EQ(ev->measurements[1].verdict(), v1::VERDICT_TIMEOUT);
  EXPECT_TRUE(absl::StrContains(ev->measurements[1].detail(), "not run")) << ev->measurements[1].detail();
  EXPECT_EQ(ev->runner_starts, 1);
}

TEST_F(FakeRunnerTest, AnOutputFloodIsCutAtTheCapAndKilled) {
  RunnerHost e = Make("yes 'device printf flood'");
  absl::StatusOr<RunnerResults> ev = Run(e);
  ASSERT_TRUE(ev.ok()) << ev.status();
  ASSERT_EQ(ev->measurements.size(), 2u);
  const v1::Measurement& m = ev->measurements[0];
  EXPECT_EQ(m.verdict(), v1::VERDICT_CRASHED);
  EXPECT_EQ(m.reason(), "output_flood");
  EXPECT_EQ(m.output_cap_bytes(), 1 << 20);
  EXPECT_LT(ev->seconds, 10);
  EXPECT_TRUE(absl::StrContains(ev->measurements[1].detail(), "not run"));
}

// A stand-in for anvil-runner that speaks the batch protocol (a test
// double): each item does what its candidate id says (good, crash, hang,
// flood, sticky: a sticky CUDA error after its measurement, state: changed
// process state after its measurement, forge: prints another candidate's
// measurement). Every measurement names the process that took it.
class FakeBatchRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<sandbox::ScratchDir> dir = sandbox::ScratchDir::Create("/tmp", "fake-batch-test-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_.emplace(std::move(*dir));
    ASSERT_EQ(mkdir((dir_->path() + "/bin").c_str(), 0755), 0);
    const std::string runner = dir_->path() + "/bin/fake-runner";
    std::ofstream(runner) << R"(#!/usr/bin/env python3
import json, os, signal, sys, time
def emit(e):
    print(json.dumps(e), flush=True)
def measurement(item, verdict, reason=""):
    had = sent.count(key(item["shape"]))  # the host's baselines for this problem
    return {"measurement": {"candidate_id": item["candidateId"],
            "problem": {"shape": item["shape"], "layout": item.get("layout", "LAYOUT_NT")},
            "verdict": verdict, "reason": reason, "detail": "had=%d" % had, "seconds": 0.01,
            "gpu_uuid": PROCESS, "versions": item["library"],
            "fidelity": req.get("protocol", {}).get("fidelity", "FIDELITY_FULL")}}
PROCESS = os.urandom(8).hex()  # pids repeat across pid namespaces
def key(shape):
    return (shape.get("m"), shape.get("n"), shape.get("k"))
timed = set()
started = poisoned = False
for line in sys.stdin:  # one request a line; the next only after keepAlive
    if poisoned:
        sys.exit(4)  # an earlier batch's candidate left the process unusable
    req = json.loads(line)  # lowerCamelCase, as protobuf writes JSON
    protocol = req.get("protocol", {})
    screen = protocol.get("fidelity") == "FIDELITY_SCREEN"
    figure = protocol.get("screenFigure") or "graph-cold"
    sent = [key(b["shape"]) for b in req.get("screened", [])]
    if not started:
        emit({"info": {"gpu": "FakeGPU", "arch": "sm_90a"}})
        started = True
    for item in req["items"]:
        what = item["candidateId"].split("-")[0]
        emit({"problem_start": {"reference_call_us": 10, "candidate_calls": 100, "baseline_calls": 300}})
        if screen and key(item["shape"]) not in sent and key(item["shape"]) not in timed:
            timed.add(key(item["shape"]))  # a first screen of the problem: its baselines, for the host
            emit({"screened": {"shape": item["shape"], "layout": "LAYOUT_NT", "figure": figure,
                  "records": [{"name": "cublas", "timings": {"graph_cold": {"median_us": 10}}}],
                  "reference_call_us": 10, "excess_err": 1e-5}})
        if what == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif what == "hang":
            time.sleep(1000)
        elif what == "flood":
            while True:
                sys.stdout.write("device printf flood\n")
        elif what == "forge":
            emit(measurement(dict(item, candidateId="good-forged"), "VERDICT_PASSED"))
        elif what == "sticky":
            emit(measurement(item, "VERDICT_CRASHED", "cuda_error"))
            sys.exit(3)
        elif what == "state":
            emit(measurement(item, "VERDICT_PASSED"))
            sys.exit(5)
        elif what == "early":  # says its batch is done before the rest is measured
            emit({"batch_end": {"items": len(req["items"])}})
            time.sleep(1000)
        else:
            poisoned = poisoned or what == "poison"
            emit(measurement(item, "VERDICT_PASSED"))
    if not req.get("keepAlive"):
        break
    emit({"batch_end": {"items": len(req["items"])}})
)";
    chmod(runner.c_str(), 0755);
    options_.toolchain.runner = runner;
    options_.toolchain.cuda_root = "/usr";
    options_.isolation = sandbox::Isolation::kAuto;  // about the protocol, not isolation
    options_.limits.floor = absl::Seconds(1);
    options_.limits.output_cap_bytes = 1 << 20;
  }
  BatchEntry Entry(const std::string& id, int problems) {
    BatchEntry e;
    e.candidate.set_id(id);
    e.candidate.set_layout(v1::LAYOUT_NT);
    e.build.set_verdict(v1::VERDICT_PASSED);
    e.build.set_artifact(dir_->path() + "/" + id + ".so");
    std::ofstream(e.build.artifact()) << "not a library";
    for (int p = 0; p < problems; ++p) e.shapes.push_back(MakeShape(64 * (p + 1), 64, 64));
    return e;
  }
  static MeasureSpec Screen(const std::string& figure, const std::string& job = "") {
    MeasureSpec s;
    s.fidelity = v1::FIDELITY_SCREEN;
    s.figure = figure;
    s.keep_warm_for = job;
    return s;
  }
  static MeasureSpec Full(const std::string& job = "") {
    MeasureSpec s;
    s.fidelity = v1::FIDELITY_FULL;
    s.keep_warm_for = job;
    return s;
  }
  std::optional<sandbox::ScratchDir> dir_;
  RunnerHostOptions options_;
};

TEST(OrderByProblem, ItemsComeProblemByProblemInTheEntriesOrder) {
  BatchEntry a, b;
  a.candidate.set_layout(v1::LAYOUT_NT);
  b.candidate.set_layout(v1::LAYOUT_NT);
  a.shapes = {MakeShape(64, 64, 64), MakeShape(128, 64, 64)};
  b.shapes = {MakeShape(128, 64, 64), MakeShape(256, 64, 64), MakeShape(64, 64, 64)};
  std::vector<BatchItem> items = OrderByProblem({a, b});
  std::vector<std::pair<size_t, size_t>> got;
  for (const BatchItem& i : items) got.emplace_back(i.entry, i.shape);
  EXPECT_EQ(got, (std::vector<std::pair<size_t, size_t>>{{0, 0}, {1, 2}, {0, 1}, {1, 0}, {1, 1}}));
}

TEST_F(FakeBatchRunnerTest, OneProcessMeasuresTheWholeBatchWithItsFidelity) {
  RunnerHost host(options_);
  absl::StatusOr<std::vector<RunnerResults>> got = host.MeasureBatch(
      {Entry("good-a", 2), Entry("good-b", 2), Entry("good-c", 1)}, Screen("graph-cold"), {});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  std::set<std::string> processes;
  for (size_t i = 0; i < 3; ++i) {
    const RunnerResults& r = (*got)[i];
    ASSERT_EQ(r.measurements.size(), i == 2 ? 1u : 2u);
    for (size_t j = 0; j < r.measurements.size(); ++j) {
      const v1::Measurement& m = r.measurements[j];
      EXPECT_EQ(m.verdict(), v1::VERDICT_PASSED);
      EXPECT_EQ(m.fidelity(), v1::FIDELITY_SCREEN);
      EXPECT_EQ(m.problem().shape().m(), 64 * int(j + 1));  // answers shapes[j]
      processes.insert(m.gpu_uuid());
    }
    EXPECT_EQ(r.runner_starts, 1);
    EXPECT_GT(r.seconds, 0);
  }
  EXPECT_EQ(processes.size(), 1u);
}

TEST_F(FakeBatchRunnerTest, AFullMeasurementIsLabelledFull) {
  RunnerHost host(options_);
  absl::StatusOr<std::vector<RunnerResults>> got = host.MeasureBatch({Entry("good-a", 1)}, {}, {});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].measurements[0].fidelity(), v1::FIDELITY_FULL);
}

// Each hostile candidate costs only itself: its item has the verdict it would
// have alone, and the items after it are measured in a fresh process.
TEST_F(FakeBatchRunnerTest, AFailingCandidateCostsOnlyItselfAndTheRestRunFresh) {
  struct Case {
    std::string id;
    v1::Verdict verdict;
    std::string reason;
    bool rest_of_its_items_run;
  };
  std::vector<Case> cases = {{"crash-x", v1::VERDICT_CRASHED, "crashed", true},
                             {"sticky-x", v1::VERDICT_CRASHED, "cuda_error", true},
                             {"state-x", v1::VERDICT_PASSED, "", true},
                             {"hang-x", v1::VERDICT_TIMEOUT, "timeout", false},
                             {"flood-x", v1::VERDICT_CRASHED, "output_flood", false},
                             {"forge-x", v1::VERDICT_CHEAT, "forged_output", true}};
  for (const std::string job : {"", "job-1"}) {  // a process per batch, and one that stays up
  if (!job.empty()) cases.push_back({"early-x", v1::VERDICT_CHEAT, "forged_output", true});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.id + " " + job);
    RunnerHost host(options_);
    if (!job.empty()) {  // the runner that stays up has measured a batch before
      ASSERT_TRUE(host.MeasureBatch({Entry("good-0", 1)}, Screen("", job), {}).ok());
    }
    absl::StatusOr<std::vector<RunnerResults>> got =
        host.MeasureBatch({Entry("good-a", 2), Entry(c.id, 2), Entry("good-b", 2)}, Screen("", job), {});
    ASSERT_TRUE(got.ok()) << got.status();
    // Problem by problem: good-a, x, good-b on the first problem, then the second.
    const v1::Measurement& first = (*got)[1].measurements[0];
    EXPECT_EQ(first.verdict(), c.verdict) << first.detail();
    EXPECT_EQ(first.reason(), c.reason);
    for (size_t e : {0u, 2u}) {
      for (const v1::Measurement& m : (*got)[e].measurements) {
        EXPECT_EQ(m.verdict(), v1::VERDICT_PASSED) << m.detail();
        EXPECT_EQ(m.candidate_id(), e == 0 ? "good-a" : "good-b");
      }
    }
    const v1::Measurement& second = (*got)[1].measurements[1];
    if (c.rest_of_its_items_run) {
      EXPECT_FALSE(absl::StrContains(second.detail(), "not run")) << second.detail();
    } else {
      EXPECT_EQ(second.verdict(), c.verdict);
      EXPECT_TRUE(absl::StrContains(second.detail(), "not run")) << second.detail();
    }
    // good-b's first item ran in a process after the one that failed.
    EXPECT_NE((*got)[2].measurements[0].gpu_uuid(), (*got)[0].measurements[0].gpu_uuid());
    EXPECT_GE((*got)[0].runner_starts, job.empty() ? 2 : 1);
  }
  }
}

// A screen's baselines, once a runner timed them, go to the host's later
// runners that screen the problem in the same figure; never to a full
// measurement, never in another figure. (Whether the receiving runner uses
// one is its own check: BaselineCache::Usable, runner_logic_test.)
TEST_F(FakeBatchRunnerTest, LaterProcessesScreenWithTheBaselinesEarlierOnesTimed) {
  RunnerHost host(options_);
  auto details = [&](const std::string& id, const MeasureSpec& spec) {
    absl::StatusOr<std::vector<RunnerResults>> got = host.MeasureBatch({Entry(id, 2)}, spec, {});
    std::vector<std::string> out;
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return out;
    for (const v1::Measurement& m : (*got)[0].measurements) out.push_back(m.detail());
    return out;
  };
  const std::vector<std::string> none = {"had=0", "had=0"}, both = {"had=1", "had=1"};
  EXPECT_EQ(details("good-a", Screen("")), none);
  EXPECT_EQ(host.screened_size(), 2u);
  EXPECT_EQ(details("good-b", Screen("graph-cold")), both);
  EXPECT_EQ(details("good-c", Full()), none);
  EXPECT_EQ(details("good-d", Screen("device")), none);
  EXPECT_EQ(host.screened_size(), 4u);  // graph-cold and device, per problem
  EXPECT_EQ(details("good-e", Screen("device")), both);
}

TEST_F(FakeBatchRunnerTest, ACancelledBatchAnswersCancelled) {
  RunnerHost host(options_);
  absl::StatusOr<std::vector<RunnerResults>> got = host.MeasureBatch(
      {Entry("good-a", 1), Entry("hang-x", 1)}, Screen(""), {},
      [start = absl::Now()] { return absl::Now() - start > absl::Milliseconds(500); });
  EXPECT_TRUE(absl::IsCancelled(got.status())) << got.status();
  got = host.MeasureBatch({Entry("good-a", 1), Entry("hang-x", 1)}, Screen("", "job-1"), {},
                          [start = absl::Now()] { return absl::Now() - start > absl::Milliseconds(500); });
  EXPECT_TRUE(absl::IsCancelled(got.status())) << got.status();
  got = host.MeasureBatch({Entry("good-b", 1)}, Screen("", "job-1"), {});  // a fresh runner
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].measurements[0].verdict(), v1::VERDICT_PASSED);
}

// A job's screens go to one runner that stays up, batch after batch; another
// job, or a full measurement, gets a process of its own. The runner opens
// each library through a read-only directory of its own, never by the
// build's own path.
TEST_F(FakeBatchRunnerTest, AJobsScreensShareARunnerThatStaysUp) {
  RunnerHost host(options_);
  auto measure = [&](const std::string& id, const MeasureSpec& spec) -> std::optional<RunnerResults> {
    absl::StatusOr<std::vector<RunnerResults>> got = host.MeasureBatch({Entry(id, 2)}, spec, {});
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return std::nullopt;
    for (const v1::Measurement& m : (*got)[0].measurements) EXPECT_EQ(m.verdict(), v1::VERDICT_PASSED);
    return (*got)[0];
  };
  std::optional<RunnerResults> a = measure("good-a", Screen("", "job-1"));
  std::optional<RunnerResults> b = measure("good-b", Screen("", "job-1"));
  ASSERT_TRUE(a && b);
  const std::string opened = b->measurements[0].versions();  // the library path it was given
  EXPECT_FALSE(absl::StartsWith(opened, dir_->path())) << opened;
  std::ifstream in(opened);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "not a library") << opened;
  std::optional<RunnerResults> c = measure("good-c", Screen("", "job-2"));  // ends job-1's runner
  std::optional<RunnerResults> d = measure("good-d", Full("job-2"));
  ASSERT_TRUE(c && d);
  EXPECT_FALSE(std::filesystem::exists(opened));  // its directory went with it
  EXPECT_EQ(a->runner_starts, 1);
  EXPECT_EQ(b->runner_starts, 0);
  EXPECT_EQ(a->measurements[0].gpu_uuid(), b->measurements[1].gpu_uuid());
  EXPECT_NE(b->measurements[0].gpu_uuid(), c->measurements[0].gpu_uuid());
  EXPECT_NE(c->measurements[0].gpu_uuid(), d->measurements[0].gpu_uuid());
  EXPECT_TRUE(b->info.has_value());
  EXPECT_EQ(d->measurements[0].versions(), dir_->path() + "/good-d.so");
}

// A runner that stayed up and dies before its batch's first measurement
// failed as a process: the batch runs again in a fresh one, and its first
// candidate is not charged.
TEST_F(FakeBatchRunnerTest, AReusedRunnerThatDiesBeforeItsFirstItemIsReplacedNotBlamed) {
  RunnerHost host(options_);
  absl::StatusOr<std::vector<RunnerResults>> first =
      host.MeasureBatch({Entry("good-a", 1), Entry("poison-x", 1)}, Screen("", "job-1"), {});
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::vector<RunnerResults>> second =
      host.MeasureBatch({Entry("good-b", 2)}, Screen("", "job-1"), {});
  ASSERT_TRUE(second.ok()) << second.status();
  for (const v1::Measurement& m : (*second)[0].measurements) {
    EXPECT_EQ(m.verdict(), v1::VERDICT_PASSED) << m.detail();
    EXPECT_NE(m.gpu_uuid(), (*first)[0].measurements[0].gpu_uuid());
  }
  EXPECT_EQ((*second)[0].runner_starts, 1);
}

}  // namespace
}  // namespace anvil
