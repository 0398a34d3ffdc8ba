// anvil-soak's GPU-free parts: the fixtures' EXPECT headers, the job plan,
// the command line, the leak scanner (on a fake /proc) and the report.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "tools/soak/fixtures.h"
#include "tools/soak/leaks.h"
#include "tools/soak/options.h"
#include "tools/soak/plan.h"
#include "tools/soak/report.h"

#ifndef ANVIL_SOURCE_DIR
#define ANVIL_SOURCE_DIR ""
#endif

namespace anvil {
namespace {
namespace fs = std::filesystem;

TEST(Fixtures, ExpectAndPolicyLinesAreParsed) {
  std::optional<Expectation> e = ParseExpectation(
      "// ATTACK: x\n// EXPECT: verdict=CHEAT reason=extra_stream|early_return\n// POLICY: rejected\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->verdict, "CHEAT");
  EXPECT_EQ(e->reasons, (std::vector<std::string>{"extra_stream", "early_return"}));
  EXPECT_TRUE(e->policy_rejects);
  EXPECT_TRUE(MeetsExpectation(*e, v1::VERDICT_CHEAT, "early_return"));
  EXPECT_FALSE(MeetsExpectation(*e, v1::VERDICT_CHEAT, "host_thread"));
  EXPECT_FALSE(MeetsExpectation(*e, v1::VERDICT_INCORRECT, "extra_stream"));
  EXPECT_EQ(DescribeExpectation(*e), "CHEAT extra_stream|early_return");

  e = ParseExpectation("// EXPECT: verdict=TIMEOUT\n// the POLICY: word inside a sentence does not count\n");
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->reasons.empty());
  EXPECT_FALSE(e->policy_rejects);
  EXPECT_TRUE(MeetsExpectation(*e, v1::VERDICT_TIMEOUT, "anything"));
  EXPECT_FALSE(ParseExpectation("// no expectation here\n"));
}

TEST(Fixtures, TheRepositoryFixturesAllCarryExpectations) {
  absl::StatusOr<std::vector<Fixture>> adversarial =
      LoadFixtures(std::string(ANVIL_SOURCE_DIR) + "/tests", "adversarial");
  ASSERT_TRUE(adversarial.ok()) << adversarial.status();
  auto find = [&](const std::string& name) {
    return std::find_if(adversarial->begin(), adversarial->end(), [&](const Fixture& f) { return f.name == name; });
  };
  ASSERT_NE(find("adversarial/infinite_loop"), adversarial->end());
  EXPECT_EQ(find("adversarial/infinite_loop")->expect.verdict, "TIMEOUT");
  EXPECT_TRUE(find("adversarial/socket")->expect.policy_rejects);
  EXPECT_FALSE(find("adversarial/socket_evasive")->expect.policy_rejects);
  EXPECT_EQ(FixtureCandidate(*find("adversarial/socket")).family(), "socket");
  EXPECT_TRUE(LoadFixtures(std::string(ANVIL_SOURCE_DIR) + "/tests", "broken").ok());
  EXPECT_FALSE(LoadFixtures(std::string(ANVIL_SOURCE_DIR) + "/tests", "no_such_folder").ok());
}

Fixture F(const std::string& name, const std::string& verdict) {
  return {name, "", {verdict, {}, false}};
}

TEST(Plan, JobsSplitByShareWithAPassingJobAfterEachHostileOne) {
  JobMix m = SplitJobs(1000, 0.2, 0.064);
  EXPECT_EQ(m.builds, 736);
  EXPECT_EQ(m.evals, 200);
  EXPECT_EQ(m.hostile, 64);
  m = SplitJobs(10, 0.0, 0.9);  // hostile jobs capped at half, evaluations raised to match
  EXPECT_EQ(m.hostile, 5);
  EXPECT_EQ(m.evals, 5);
  EXPECT_EQ(m.builds, 0);
  m = SplitJobs(1, 0.2, 0.064);
  EXPECT_EQ(m.builds + m.evals + m.hostile, 1);
}

TEST(Plan, HostileRoundPutsHangsAndCrashesFirstAndSpreadsThem) {
  std::vector<Fixture> fx = {F("a", "CHEAT"), F("b", "INCORRECT"), F("hang", "TIMEOUT"), F("c", "CHEAT"),
                             F("crash", "CRASHED"), F("d", "UNSUPPORTED")};
  fx.push_back({"policy_hang", "", {"TIMEOUT", {}, true}});  // refused before nvcc: no recovery
  const std::vector<int> round = HostileRound(fx, 2);
  ASSERT_FALSE(round.empty());
  EXPECT_EQ(round[0], 2);
  EXPECT_EQ(std::count(round.begin(), round.end(), 2), 2);
  EXPECT_EQ(std::count(round.begin(), round.end(), 4), 2);
  for (int other : {0, 1, 3, 5, 6}) EXPECT_EQ(std::count(round.begin(), round.end(), other), 1) << other;
  for (size_t i = 1; i < round.size(); ++i) {
    EXPECT_FALSE(IsRecoveryFixture(fx[round[i]].expect) && IsRecoveryFixture(fx[round[i - 1]].expect))
        << "two recovery fixtures in a row at " << i;
  }
  EXPECT_EQ(HostileRound({F("a", "CHEAT")}, 3), std::vector<int>{0});
}

TEST(Plan, GpuLaneFollowsEveryHostileJobWithAPassingOne) {
  const std::vector<int> round = {7, 8, 9};
  for (auto [evals, hostile] : {std::pair{200, 64}, std::pair{5, 5}, std::pair{10, 0}, std::pair{3, 1}}) {
    const std::vector<GpuJob> lane = PlanGpuLane(evals, hostile, round);
    ASSERT_EQ(static_cast<int>(lane.size()), evals + hostile);
    int h = 0, next_eval = 0;
    for (size_t i = 0; i < lane.size(); ++i) {
      if (!lane[i].hostile) {
        EXPECT_EQ(lane[i].index, next_eval++);
        continue;
      }
      EXPECT_EQ(lane[i].index, round[h++ % round.size()]);
      ASSERT_LT(i + 1, lane.size()) << "a hostile job came last";
      EXPECT_FALSE(lane[i + 1].hostile) << "two hostile jobs in a row at " << i;
    }
    EXPECT_EQ(h, hostile);
  }
}

TEST(Options, DefaultsOverridesAndErrors) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine({"anvil-soak"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->options.jobs, 1000);
  EXPECT_TRUE(cl->help.empty());
  cl = ParseCommandLine({"anvil-soak", "--jobs", "60", "--build-jobs", "8", "--out", "s.json", "--json",
                         "--startup-timeout", "3.5", "--cpu-only"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->options.jobs, 60);
  EXPECT_EQ(cl->options.build_jobs, 8);
  EXPECT_EQ(cl->options.out_file, "s.json");
  EXPECT_TRUE(cl->options.json);
  EXPECT_TRUE(cl->options.cpu_only);
  EXPECT_DOUBLE_EQ(cl->options.startup_timeout_s, 3.5);
  EXPECT_FALSE(ParseCommandLine({"anvil-soak", "--jobs", "0"}).ok());
  EXPECT_FALSE(ParseCommandLine({"anvil-soak", "--jobs", "many"}).ok());
  EXPECT_FALSE(ParseCommandLine({"anvil-soak", "--no-such-flag"}).ok());
  EXPECT_FALSE(ParseCommandLine({"anvil-soak", "--eval-share", "0.9", "--hostile-share", "0.2"}).ok());
  cl = ParseCommandLine({"anvil-soak", "--help"});
  ASSERT_TRUE(cl.ok());
  EXPECT_NE(cl->help.find("--build-jobs"), std::string::npos);
}

// A fake /proc: one directory per process with stat, status, cmdline, cwd.
class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / absl::StrCat("soak-test-proc-", getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Add(int pid, int ppid, int uid, char state, uint64_t start, const std::string& comm,
           const std::string& cwd, const std::string& cmdline = "cmd") {
    const fs::path d = root_ / std::to_string(pid);
    fs::create_directories(d);
    std::ofstream(d / "stat") << pid << " (" << comm << ") " << state << " " << ppid
                              << " 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 " << start << " 1 1\n";
    std::ofstream(d / "status") << "Name:\t" << comm << "\nUid:\t" << uid << "\t" << uid << "\t" << uid << "\t"
                                << uid << "\n";
    std::string args = cmdline;
    std::replace(args.begin(), args.end(), ' ', '\0');
    std::ofstream(d / "cmdline", std::ios::binary) << args << '\0';
    fs::create_directory_symlink(cwd, d / "cwd");
  }
  fs::path root_;
};

TEST_F(FakeProc, ReadsStatWithAwkwardNames) {
  Add(42, 1, 1000, 'S', 777, "a (weird) name", "/home/x", "prog --flag value");
  std::optional<ProcessInfo> p = ReadProcess(root_.string(), 42);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->comm, "a (weird) name");
  EXPECT_EQ(p->ppid, 1);
  EXPECT_EQ(p->uid, 1000);
  EXPECT_EQ(p->state, 'S');
  EXPECT_EQ(p->start_ticks, 777u);
  EXPECT_EQ(p->cmdline, "prog --flag value");
  EXPECT_EQ(p->cwd, "/home/x");
  EXPECT_FALSE(ReadProcess(root_.string(), 43));
}

TEST_F(FakeProc, FindsOurLeftoversAndSetsApartOthers) {
  const std::string scratch = "/tmp/anvil-soak-abc";
  Add(100, 1, 0, 'S', 5000, "anvil-soak", "/work");
  Add(101, 100, 0, 'S', 5100, "bwrap", "/work");                               // our child
  Add(102, 101, 65534, 'Z', 5200, "nvcc", "/");                                // its zombie child
  Add(200, 1, 65534, 'S', 6000, "sleep", scratch + "/jobs/anvil-run-1 (deleted)");  // escaped job
  Add(201, 1, 1000, 'S', 6000, "cicc", "/", "cicc " + scratch + "/jobs/x.cu");  // named in its arguments
  Add(300, 1, 65534, 'S', 6000, "sleep", "/");                                  // the uid's, not shown ours
  Add(301, 1, 1000, 'S', 7000, "anvil-runner", "/other");                       // someone else's runner
  Add(302, 1, 65534, 'S', 1000, "daemon", "/");                                 // started before the soak
  Add(303, 1, 1000, 'S', 9000, "bash", "/home/x");                              // unrelated
  LeftoverRules rules;
  rules.self_pid = 100;
  rules.self_start_ticks = 5000;
  rules.scratch_root = scratch;
  const Leftovers left = FindLeftovers(ListProcesses(root_.string()), rules);
  std::vector<int> ours, suspects;
  for (const ProcessInfo& p : left.ours) ours.push_back(p.pid);
  for (const ProcessInfo& p : left.suspects) suspects.push_back(p.pid);
  EXPECT_EQ(ours, (std::vector<int>{101, 102, 200, 201}));
  EXPECT_EQ(suspects, (std::vector<int>{300, 301}));
}

TEST_F(FakeProc, CountsEntriesDescriptorsAndJobCgroups) {
  EXPECT_EQ(CountEntries(root_.string()), 0);
  EXPECT_EQ(CountEntries((root_ / "missing").string()), -1);
  fs::create_directories(root_ / "fd");
  fs::create_symlink("/dev/null", root_ / "fd" / "10");
  fs::create_symlink("/dev/nvidia0", root_ / "fd" / "9");
  EXPECT_EQ(ListOpenFds((root_ / "fd").string()),
            (std::vector<std::string>{"9 -> /dev/nvidia0", "10 -> /dev/null"}));
  for (const char* d : {"anvil-77-1", "anvil-77-12", "anvil-770-1", "other"}) fs::create_directories(root_ / "cg" / d);
  const std::string cg = (root_ / "cg").string();
  EXPECT_EQ(LeftoverJobCgroups(cg, 77), (std::vector<std::string>{cg + "/anvil-77-1", cg + "/anvil-77-12"}));
  EXPECT_TRUE(LeftoverJobCgroups("", 77).empty());
  EXPECT_EQ(CountEntries(cg), 4);
}

TEST(SelfScan, ThisProcessIsVisibleAndHasNoLeftovers) {
  std::optional<ProcessInfo> self = ReadProcess("/proc", getpid());
  ASSERT_TRUE(self);
  EXPECT_GT(self->start_ticks, 0u);
  LeftoverRules rules;
  rules.self_pid = getpid();
  rules.self_start_ticks = self->start_ticks;
  EXPECT_TRUE(FindLeftovers(ListProcesses("/proc"), rules).ours.empty());
  EXPECT_FALSE(ListOpenFds("/proc/self/fd").empty());
}

TEST(Report, SummariesVerdictAndJson) {
  EXPECT_EQ(Summarize({}).n, 0);
  const Summary odd = Summarize({3, 1, 2});
  EXPECT_EQ(odd.n, 3);
  EXPECT_DOUBLE_EQ(odd.median, 2);
  EXPECT_DOUBLE_EQ(odd.min, 1);
  EXPECT_DOUBLE_EQ(odd.max, 3);
  EXPECT_DOUBLE_EQ(Summarize({4, 1, 2, 3}).median, 2.5);

  SoakReport r;
  r.mix = {2, 1, 1};
  r.jobs_done = 4;
  r.memory.source = "cudaMemGetInfo";
  r.memory.slack_mib = 16;
  r.memory.before_mib = 500;
  r.memory.end_mib = 504;
  r.kinds.push_back({"adversarial/infinite_loop", "TIMEOUT timeout", 1, 1, {4.7}, {{"TIMEOUT timeout", 1}}});
  r.recovery.push_back({"adversarial/infinite_loop", "TIMEOUT", 4.7, 0.7, 0.9, 0.8, 0.3, 0.1});
  EXPECT_TRUE(r.ok());
  EXPECT_NE(FormatReport(r).find("RESULT: PASS"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(ReportJson(r));
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_DOUBLE_EQ(j["recovery"]["all"]["total_s"]["median"].get<double>(), 0.9);
  EXPECT_EQ(j["recovery"]["TIMEOUT"]["n"].get<int>(), 1);
  EXPECT_EQ(j["recovery"]["CRASHED"]["n"].get<int>(), 0);
  EXPECT_EQ(j["kinds"][0]["observed"]["TIMEOUT timeout"].get<int>(), 1);

  SoakReport leaked = r;
  leaked.leaks.scratch_after = 1;
  EXPECT_FALSE(leaked.ok());
  SoakReport fd = r;
  fd.leaks.fds_before = {"0 -> /dev/null", "3 -> /dev/nvidiactl"};
  fd.leaks.fds_after = {"0 -> /dev/null", "4 -> pipe:[12]"};
  EXPECT_FALSE(fd.ok());
  fd.leaks.fds_after = {"0 -> /dev/null"};
  EXPECT_TRUE(fd.ok());
  SoakReport memory = r;
  memory.memory.end_mib = 900;
  EXPECT_FALSE(memory.ok());
  SoakReport short_run = r;
  short_run.jobs_done = 3;
  EXPECT_FALSE(short_run.ok());
  EXPECT_NE(FormatReport(short_run).find("RESULT: FAIL"), std::string::npos);
}

}  // namespace
}  // namespace anvil
