// The fleet's end-to-end tests' fixture: a real anvil_test_server with
// fleet.enabled (ServeMain, the Fleet service, RemoteEvaluator, the
// coordinator's ScriptedProposer) and real anvil_test_worker processes
// (WorkerMain and FleetWorker with a test evaluator for the node) over
// loopback gRPC, on a real store, and the checks the tests share. Test-only.
#ifndef ANVIL_TESTS_FLEET_FLEET_FIXTURE_H_
#define ANVIL_TESTS_FLEET_FLEET_FIXTURE_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "proto/problem.h"
#include "server/rpc/client.h"
#include "store/store.h"
#include "tests/serve/server_process.h"

namespace anvil::testing_fleet {

using testing_serve::ServerProcess;


// One anvil_test_worker process.
class WorkerProcess {
 public:
  WorkerProcess(std::string dir, std::string name) : dir_(std::move(dir)), name_(std::move(name)) {}
  ~WorkerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void Start(const std::string& target, std::vector<std::string> extra = {},
             std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {ANVIL_TEST_WORKER, "--server", target, "--hostname", name_,
                                     "--cache-dir", absl::StrCat(dir_, "/cache-", name_)};
    if (std::find(extra.begin(), extra.end(), "--lease-wait") == extra.end()) {
      args.insert(args.end(), {"--lease-wait", "1"});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    env["TMPDIR"] = dir_;
    pid_ = fork();
    if (pid_ == 0) {
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      freopen(absl::StrCat(dir_, "/worker-", name_, ".log").c_str(), "a", stderr);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(args[0].c_str(), argv.data());
      _exit(127);
    }
  }
  void Signal(int sig) { kill(pid_, sig); }
  void KillAndReap() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Exit code after up to `seconds` (-1: still running).
  int Wait(double seconds) {
    for (int i = 0; i < seconds * 100; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  std::string log() const {
    std::ifstream in(absl::StrCat(dir_, "/worker-", name_, ".log"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string dir_, name_;
  pid_t pid_ = -1;
};

inline int64_t RawInt(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr);
  int64_t v = -1;
  if (sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(h);
  return v;
}

inline std::string RawText(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr);
  std::string v;
  if (sqlite3_step(s) == SQLITE_ROW) v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(h);
  return v;
}

// A command's standard output and error.
inline std::string Shell(const std::string& command) {
  std::string out;
  FILE* p = popen(absl::StrCat(command, " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/fleet_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    db_ = dir_ + "/anvil.db";
    server_ = std::make_unique<ServerProcess>(ANVIL_TEST_SERVER, db_, dir_);
  }

  bool StartServer(const std::string& lease = "2", std::map<std::string, std::string> env = {}) {
    return server_->Start({"--fleet-enabled", "true", "--fleet-lease-seconds", lease,
                           "--fleet-heartbeat-seconds", "0.3", "--fleet-gpu", "FAKE-GPU"},
                          env);
  }

  WorkerProcess& AddWorker(const std::string& name, std::vector<std::string> extra = {},
                           std::map<std::string, std::string> env = {}) {
    workers_.push_back(std::make_unique<WorkerProcess>(dir_, name));
    workers_.back()->Start(server_->target(), std::move(extra), std::move(env));
    return *workers_.back();
  }

  std::unique_ptr<KernelSearchClient> Client(const std::string& token = "") {
    ClientOptions o;
    o.target = server_->target();
    o.token = token;
    return *KernelSearchClient::Connect(o);
  }

  static v1::OptimizeKernelRequest Request(std::vector<std::string> shapes) {
    v1::OptimizeKernelRequest r;
    for (const std::string& s : shapes) {
      v1::Problem* p = r.add_problems();
      *p->mutable_shape() = *ParseShape(s);
      p->set_layout(v1::LAYOUT_NT);
    }
    return r;
  }

  // Starts the job and detaches at its first event; its id.
  std::string StartJob(const v1::OptimizeKernelRequest& r) {
    std::string job_id;
    auto c = Client();
    absl::Status st = c->OptimizeKernel(r, [&](const v1::JobProgress& p) {
      job_id = p.job().id();
      return false;  // detach at the first event
    });
    EXPECT_TRUE(st.ok()) << st;
    return job_id;
  }

  // The job once it reached `state`, polled (nullopt after `timeout_s`).
  std::optional<v1::Job> WaitForState(const std::string& job_id, v1::JobState state, double timeout_s) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::duration<double>(timeout_s)) {
      absl::StatusOr<v1::Job> j = Client()->GetJob(job_id);
      if (j.ok() && j->state() == state) return *j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  }

  // Waits until `sql` counts at least one row (false after `timeout_s`).
  bool WaitForRows(const std::string& sql, double timeout_s) {
    for (int i = 0; i < timeout_s * 20; ++i) {
      if (RawInt(db_, sql) > 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Starts the job, then polls it until it ends (any stream break is fine:
  // the server may be killed meanwhile). `during` runs once per poll.
  v1::Job RunJob(const v1::OptimizeKernelRequest& r, const std::function<void()>& during,
                 double timeout_s = 240) {
    const std::string job_id = StartJob(r);
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::duration<double>(timeout_s)) {
      during();
      auto c = Client();
      absl::StatusOr<v1::Job> j = c->GetJob(job_id);
      if (j.ok() && (j->state() == v1::JOB_STATE_SUCCEEDED || j->state() == v1::JOB_STATE_FAILED)) {
        return *j;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "job " << job_id << " did not end in " << timeout_s << " s";
    return v1::Job();
  }

  // Every measure task done has its result, the measurements stored are
  // exactly one per (candidate, problem) of the tasks, and no candidate's GPU
  // work was done twice (the scripted proposer measures each candidate on one
  // problem; a re-check's task id ends in "-<n>", the others' are "m-" and 20
  // hex digits): nothing lost, nothing twice. A job's tasks left when it ends
  // are cancelled: the queue is empty once the jobs are.
  void ExpectNothingLostOrDoubled() {
    for (int i = 0; i < 300 && RawInt(db_, "SELECT count(*) FROM tasks WHERE state IN ('queued', 'leased')") > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks WHERE state IN ('queued', 'leased')"), 0);
    EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM tasks WHERE state = 'done' AND result IS NULL"), 0);
    EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM (SELECT candidate_id, problem_id, count(*) c "
                          "FROM measurements GROUP BY candidate_id, problem_id, verified HAVING c > 1)"),
              0)
        << "a (candidate, problem) measured twice";
    EXPECT_EQ(RawInt(db_, "SELECT count(*) FROM (SELECT candidate_id, count(*) c FROM tasks WHERE kind = 'measure' "
                          "AND state = 'done' AND length(id) = 22 GROUP BY candidate_id HAVING c > 1)"),
              0)
        << "a candidate's GPU work done twice";
    EXPECT_EQ(RawText(db_, "PRAGMA integrity_check"), "ok");
  }

  std::string dir_, db_;
  std::unique_ptr<ServerProcess> server_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
};

// Soak knobs: ANVIL_FLEET_SOAK_KILLS worker kills (default 12) and
// ANVIL_FLEET_SOAK_SERVER_KILLS server kills (default 3); the jobs grow with
// them. The counts and the store's check print as one line each:
//   ANVIL_FLEET_SOAK_KILLS=1000 ANVIL_FLEET_SOAK_SERVER_KILLS=20 fleet_test --gtest_filter='*Killed*'
inline int SoakKnob(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}


}  // namespace anvil::testing_fleet

#endif  // ANVIL_TESTS_FLEET_FLEET_FIXTURE_H_
