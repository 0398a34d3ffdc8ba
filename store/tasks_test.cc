// The fleet's task queue on a real SQLite file: leases, expiry, idempotent
// results, refusal of late results, restarts, quarantine, and a loop of
// simulated worker deaths checked against the tasks issued.
#include <atomic>
#include <map>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/store.h"
#include "store/store_test_util.h"

namespace anvil {
namespace {

using testing_util::TempDir;

constexpr char kGpu[] = "H100-SXM5-80GB";

struct Clock {
  std::shared_ptr<std::atomic<int64_t>> ms = std::make_shared<std::atomic<int64_t>>(1'000'000);
  Store::Options Options() const {
    Store::Options o;
    auto t = ms;
    o.now_unix_ms = [t] { return t->load(); };
    return o;
  }
  void Advance(int64_t d) { *ms += d; }
};

TaskRecord Measure(const std::string& id, const std::string& gpu = kGpu) {
  TaskRecord t;
  t.id = id;
  t.kind = "measure";
  t.candidate_id = absl::StrCat("cand-", id);
  t.gpu = gpu;
  t.payload = absl::StrCat("payload of ", id);
  return t;
}

TaskRecord BuildTask(const std::string& id) {
  TaskRecord t = Measure(id);
  t.kind = "build";
  t.gpu.clear();
  return t;
}

TaskLeaseRequest GpuSlot(const std::string& worker, int lease_ms = 1000) {
  TaskLeaseRequest r;
  r.worker_id = worker;
  r.slot = 0;
  r.gpu = kGpu;
  r.lease_ms = lease_ms;
  return r;
}

void AddWorker(Store& store, const std::string& id) {
  WorkerRecord w;
  w.id = id;
  w.hostname = absl::StrCat(id, ".node");
  ASSERT_TRUE(store.UpsertWorker(w).ok());
}

TEST(TasksTest, LeaseGoesOnlyToTheGpuModelAndBuildsOnlyToBuildSlots) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db")).value();
  ASSERT_TRUE(store->EnqueueTask(Measure("m1", "H200")).ok());
  ASSERT_TRUE(store->EnqueueTask(BuildTask("b1")).ok());
  auto none = store->LeaseTask(GpuSlot("w1"));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value()) << "an H100 slot took an H200 task or a build";
  TaskLeaseRequest builder;
  builder.worker_id = "b";
  builder.take_builds = true;
  auto b = store->LeaseTask(builder).value();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->id, "b1");
  EXPECT_EQ(b->attempt, 1);
  TaskLeaseRequest h200 = GpuSlot("w2");
  h200.gpu = "H200";
  auto m = store->LeaseTask(h200).value();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->id, "m1");
  EXPECT_EQ(m->payload, "payload of m1");
  EXPECT_EQ(m->lease_owner, "w2");
}

TEST(TasksTest, ResultIsIdempotentAndALateResultIsRefused) {
  TempDir dir;
  Clock clock;
  auto store = Store::Open(dir.File("a.db"), clock.Options()).value();
  ASSERT_TRUE(store->EnqueueTask(Measure("t")).ok());
  ASSERT_TRUE(store->EnqueueTask(Measure("t")).ok()) << "enqueue is idempotent";
  auto first = store->LeaseTask(GpuSlot("w1", 1000)).value().value();
  clock.Advance(1001);  // w1's lease runs out
  auto second = store->LeaseTask(GpuSlot("w2", 1000)).value().value();
  EXPECT_EQ(second.id, "t");
  EXPECT_EQ(second.attempt, 2);
  EXPECT_EQ(second.expired_leases, 1);
  EXPECT_EQ(store->ReportTaskResult("t", first.attempt, "w1", "late").value(),
            TaskResultOutcome::kRefused);
  EXPECT_EQ(store->ReportTaskResult("t", 2, "w2", "r2").value(), TaskResultOutcome::kAccepted);
  EXPECT_EQ(store->ReportTaskResult("t", 2, "w2", "r2").value(),
            TaskResultOutcome::kAlreadyAccepted);
  EXPECT_EQ(store->ReportTaskResult("t", 1, "w1", "late").value(), TaskResultOutcome::kRefused);
  TaskRecord t = store->GetTask("t").value();
  EXPECT_EQ(t.state, "done");
  EXPECT_EQ(t.result, "r2");
  EXPECT_EQ(t.result_attempt, 2);
  EXPECT_FALSE(store->LeaseTask(GpuSlot("w3")).value().has_value());
  EXPECT_EQ(store->ReportTaskResult("nope", 1, "w1", "x").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TasksTest, ExpiredButNotReleasedResultIsRefusedAndRequeued) {
  TempDir dir;
  Clock clock;
  auto store = Store::Open(dir.File("a.db"), clock.Options()).value();
  ASSERT_TRUE(store->EnqueueTask(Measure("t")).ok());
  auto lease = store->LeaseTask(GpuSlot("w1", 500)).value().value();
  clock.Advance(501);
  EXPECT_EQ(store->ReportTaskResult("t", lease.attempt, "w1", "late").value(),
            TaskResultOutcome::kRefused);
  EXPECT_EQ(store->GetTask("t").value().state, "queued");
}

TEST(TasksTest, HeartbeatExtendsLeasesAndNamesLostOnes) {
  TempDir dir;
  Clock clock;
  auto store = Store::Open(dir.File("a.db"), clock.Options()).value();
  AddWorker(*store, "w1");
  ASSERT_TRUE(store->EnqueueTask(Measure("a")).ok());
  ASSERT_TRUE(store->EnqueueTask(Measure("b")).ok());
  ASSERT_TRUE(store->LeaseTask(GpuSlot("w1", 1000)).value().has_value());
  ASSERT_TRUE(store->LeaseTask(GpuSlot("w1", 1000)).value().has_value());
  ASSERT_EQ(store->CancelTasks("").value(), 0);
  for (int i = 0; i < 5; ++i) {
    clock.Advance(800);
    auto lost = store->RenewLeases("w1", {"a", "b", "ghost"}, 1000);
    ASSERT_TRUE(lost.ok()) << lost.status();
    EXPECT_EQ(*lost, std::vector<std::string>{"ghost"});
  }
  EXPECT_EQ(store->ExpireLeases().value(), 0) << "renewed leases must not expire";
  clock.Advance(1001);
  EXPECT_EQ(store->ExpireLeases().value(), 2);
  EXPECT_EQ(store->RenewLeases("w1", {"a"}, 1000).value(), std::vector<std::string>{"a"});
  EXPECT_EQ(store->RenewLeases("nobody", {}, 1000).status().code(), absl::StatusCode::kNotFound);
}

TEST(TasksTest, CancelledTasksAreNotLeasedAndHeartbeatSaysAbandon) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db")).value();
  AddWorker(*store, "w1");
  TaskRecord a = Measure("a");
  a.job_id = "job-1";
  TaskRecord b = Measure("b");
  b.job_id = "job-1";
  ASSERT_TRUE(store->EnqueueTask(a).ok());
  ASSERT_TRUE(store->EnqueueTask(b).ok());
  ASSERT_TRUE(store->LeaseTask(GpuSlot("w1")).value().has_value());
  EXPECT_EQ(store->CancelTasks("job-1").value(), 2);
  EXPECT_FALSE(store->LeaseTask(GpuSlot("w1")).value().has_value());
  EXPECT_EQ(store->RenewLeases("w1", {"a"}, 1000).value(), std::vector<std::string>{"a"});
  EXPECT_EQ(store->CountTasks().value().cancelled, 2);
}

TEST(TasksTest, QueueSurvivesReopen) {
  TempDir dir;
  {
    auto store = Store::Open(dir.File("a.db")).value();
    ASSERT_TRUE(store->EnqueueTask(Measure("a")).ok());
    ASSERT_TRUE(store->EnqueueTask(Measure("b")).ok());
    auto l = store->LeaseTask(GpuSlot("w1", 60000)).value().value();
    ASSERT_EQ(store->ReportTaskResult(l.id, l.attempt, "w1", "ra").value(),
              TaskResultOutcome::kAccepted);
  }
  auto store = Store::Open(dir.File("a.db")).value();
  EXPECT_EQ(store->SchemaVersion(), Store::LatestSchemaVersion());
  TaskCounts c = store->CountTasks().value();
  EXPECT_EQ(c.done, 1);
  EXPECT_EQ(c.queued, 1);
  EXPECT_EQ(store->GetTask("a").value().result, "ra");
}

TEST(TasksTest, QuarantineAfterConsecutiveInfrastructureFailures) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db")).value();
  AddWorker(*store, "w1");
  ASSERT_TRUE(store->RecordWorkerRun("w1", "measure", 2.0, true, "driver error", 3).ok());
  ASSERT_TRUE(store->RecordWorkerRun("w1", "measure", 2.0, false, "", 3).ok());
  EXPECT_EQ(store->GetWorker("w1").value().infra_failures, 0) << "a clean run resets the count";
  for (int i = 0; i < 2; ++i) {
    auto w = store->RecordWorkerRun("w1", "measure", 1.0, true, "runner crashed before the kernel", 3);
    EXPECT_TRUE(w->quarantine_reason.empty());
    // Its build slots building fine does not excuse its GPU slot.
    ASSERT_TRUE(store->RecordWorkerRun("w1", "build", 4.0, false, "", 3).ok());
  }
  auto w = store->RecordWorkerRun("w1", "measure", 1.0, true, "runner crashed before the kernel", 3);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->quarantine_reason, "runner crashed before the kernel");
  EXPECT_EQ(w->state, "quarantined");
  EXPECT_EQ(w->measures, 5);
  EXPECT_DOUBLE_EQ(w->measure_seconds, 7.0);
  EXPECT_EQ(w->builds, 2);
  ASSERT_TRUE(store->ClearQuarantine("w1").ok());
  EXPECT_TRUE(store->GetWorker("w1").value().quarantine_reason.empty());
}

// A run of a job that stops leaves its queued tasks; the next run parks them
// (nobody leases them) and takes over those it submits again, whatever their
// state; a cancel reaches parked tasks too.
TEST(TasksTest, ParkedTasksWaitForTheirJobToSubmitThemAgain) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db")).value();
  TaskRecord a = Measure("a"), b = Measure("b");
  a.job_id = b.job_id = "job-1";
  ASSERT_TRUE(store->EnqueueTask(a).ok());
  ASSERT_TRUE(store->EnqueueTask(b).ok());
  EXPECT_EQ(store->ParkTasks("job-1").value(), 2);
  EXPECT_FALSE(store->LeaseTask(GpuSlot("w1"))->has_value()) << "a parked task was leased";
  ASSERT_TRUE(store->EnqueueTask(a).ok());  // the new run wants `a` again
  auto got = store->LeaseTask(GpuSlot("w1"));
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->id, "a");
  EXPECT_EQ((*got)->lease_gpu, "");
  ASSERT_TRUE(store->ReportTaskResult("a", 1, "w1", "ra").ok());
  ASSERT_TRUE(store->EnqueueTask(a).ok());  // submitted again once done: the result stands
  EXPECT_EQ(store->GetTask("a")->state, "done");
  EXPECT_FALSE(store->GetTask("a")->collected);
  ASSERT_TRUE(store->MarkTaskCollected("a").ok());
  EXPECT_TRUE(store->GetTask("a")->collected);
  EXPECT_EQ(store->CancelTasks("job-1").value(), 1);
  EXPECT_EQ(store->GetTask("b")->state, "cancelled");
}

// A re-check avoids the GPUs that measured its candidate while another GPU
// of the model is live, and takes any when none is.
TEST(TasksTest, ARecheckAvoidsItsGpusWhileAnotherIsLive) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db")).value();
  TaskRecord r = Measure("r");
  r.avoid_gpus = "GPU-a,GPU-c";
  ASSERT_TRUE(store->EnqueueTask(r).ok());
  TaskLeaseRequest a = GpuSlot("wa");
  a.gpu_uuid = "GPU-a";
  a.others_alive = true;
  EXPECT_FALSE(store->LeaseTask(a)->has_value());
  TaskLeaseRequest b = GpuSlot("wb");
  b.gpu_uuid = "GPU-b";
  b.others_alive = true;
  auto got = store->LeaseTask(b);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->lease_gpu, "GPU-b");
  ASSERT_TRUE(store->ReleaseTask("r", 1, "wb").value());
  a.others_alive = false;  // GPU-a is the only one left
  got = store->LeaseTask(a);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->lease_gpu, "GPU-a");
}

// Disagreements quarantine the odd one out (against two or more others),
// never one side of a pair; clearing settles the evidence.
TEST(TasksTest, DisagreementsQuarantineOnlyTheOddOneOut) {
  TempDir dir;
  auto store = Store::Open(dir.File("a.db")).value();
  for (const char* id : {"liar", "a", "b"}) AddWorker(*store, id);
  auto disagree = [&](const std::string& who, const std::string& other) {
    WorkerEvidence e{who, "disagreement", "", "cand", "128x128x128 nt", other, who + " vs " + other};
    return store->RecordEvidence(e, 3).value();
  };
  for (int i = 0; i < 5; ++i) {
    disagree("a", "liar");
    EXPECT_TRUE(disagree("liar", "a").quarantine_reason.empty()) << "one side of a pair is not the odd one out";
  }
  EXPECT_TRUE(disagree("b", "liar").quarantine_reason.empty());
  const WorkerRecord liar = disagree("liar", "b");
  EXPECT_NE(liar.quarantine_reason.find("2 other workers"), std::string::npos) << liar.quarantine_reason;
  EXPECT_EQ(liar.disagreements, 6);
  EXPECT_TRUE(store->GetWorker("a")->quarantine_reason.empty());
  ASSERT_TRUE(store->ClearQuarantine("liar").ok());
  EXPECT_EQ(store->GetWorker("liar")->disagreements, 0);
  EXPECT_EQ(store->ListEvidence("liar").value().size(), 6u) << "the evidence is kept";
  WorkerEvidence bad{"liar", "gossip", "", "", "", "", "x"};
  EXPECT_TRUE(absl::IsInvalidArgument(store->RecordEvidence(bad, 3).status()));
}

// Many workers, each of which may die holding its lease (it never reports)
// or report twice; the clock runs on; every task ends done exactly once, with
// the result of the attempt that was accepted, and the re-leases match the
// deaths.
TEST(TasksTest, SimulatedWorkerDeathsLoseAndDoubleNothing) {
  TempDir dir;
  Clock clock;
  auto store = Store::Open(dir.File("a.db"), clock.Options()).value();
  constexpr int kTasks = 400;
  for (int i = 0; i < kTasks; ++i) ASSERT_TRUE(store->EnqueueTask(Measure(absl::StrCat("t", i))).ok());
  std::mt19937 rng(7);
  int kills = 0, late_refused = 0, duplicates = 0, accepted = 0, worker = 0;
  std::map<std::string, std::string> accepted_results;
  std::vector<TaskRecord> zombies;  // leases of killed workers, which may wake late
  while (accepted < kTasks) {
    clock.Advance(static_cast<int64_t>(rng() % 30));  // leases of 100 ms run out as time goes on
    auto lease = store->LeaseTask(GpuSlot(absl::StrCat("w", ++worker), 100));
    ASSERT_TRUE(lease.ok()) << lease.status();
    if (!lease->has_value()) {
      clock.Advance(101);  // everyone left holds a dead lease: let them run out
      continue;
    }
    TaskRecord t = **lease;
    if (rng() % 3 == 0) {
      ++kills;
      zombies.push_back(t);
      continue;
    }
    std::string result = absl::StrCat(t.id, "#", t.attempt);
    ASSERT_EQ(store->ReportTaskResult(t.id, t.attempt, t.lease_owner, result).value(),
              TaskResultOutcome::kAccepted);
    ++accepted;
    ASSERT_TRUE(accepted_results.emplace(t.id, result).second) << t.id << " accepted twice";
    if (rng() % 4 == 0) {  // the acknowledgement was lost: the worker retries
      ASSERT_EQ(store->ReportTaskResult(t.id, t.attempt, t.lease_owner, result).value(),
                TaskResultOutcome::kAlreadyAccepted);
      ++duplicates;
    }
    if (!zombies.empty() && rng() % 2 == 0) {  // a killed worker's result arrives late
      TaskRecord z = zombies.back();
      zombies.pop_back();
      auto outcome = store->ReportTaskResult(z.id, z.attempt, z.lease_owner, "zombie");
      ASSERT_TRUE(outcome.ok());
      if (*outcome == TaskResultOutcome::kRefused) ++late_refused;
      if (*outcome == TaskResultOutcome::kAccepted) {
        ++accepted;  // its lease had not run out yet: a legitimate result
        ASSERT_TRUE(accepted_results.emplace(z.id, "zombie").second);
      }
    }
  }
  TaskCounts c = store->CountTasks().value();
  EXPECT_EQ(c.done, kTasks);
  EXPECT_EQ(c.queued + c.leased, 0);
  EXPECT_GT(kills, 50);
  EXPECT_GT(late_refused, 0);
  EXPECT_GT(duplicates, 0);
  std::vector<TaskRecord> all = store->ListTasks("done", kTasks + 10).value();
  ASSERT_EQ(all.size(), static_cast<size_t>(kTasks));
  int64_t expired = 0;
  for (const TaskRecord& t : all) {
    EXPECT_EQ(t.result, accepted_results[t.id]) << t.id;
    expired += t.expired_leases;
  }
  // Every kill whose result did not land in time cost exactly one re-lease.
  int accepted_zombies = 0;
  for (const auto& [id, r] : accepted_results) accepted_zombies += r == "zombie";
  EXPECT_EQ(expired + accepted_zombies, kills);
  std::printf("tasks %d, kills %d, re-leases %lld, late results refused %d, retries %d\n", kTasks,
              kills, static_cast<long long>(expired), late_refused, duplicates);
}

}  // namespace
}  // namespace anvil
