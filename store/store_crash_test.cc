// Crash safety: a child process writes batches of measurements through a
// Store and reports each batch to the parent before ('B') and right after
// ('C', with the ids) its commit. The parent SIGKILLs the child at random
// points, some of them just after a 'B' so that a transaction is open, then
// reopens the database as a restarted server would and checks that it is
// intact, that every batch reported committed is fully present, and that no
// batch is partly present.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "store/store.h"
#include "store/store_test_util.h"

namespace anvil {
namespace {

using testing_util::RawInt;
using testing_util::RawText;
using testing_util::TempDir;
using testing_util::TestCandidate;
using testing_util::TestMeasurement;
using testing_util::TestProblem;

constexpr int kRounds = 14;
constexpr int kMaxBatch = 48;

// One message on the pipe; fixed size, below PIPE_BUF, so writes are atomic.
struct Report {
  char kind;      // 'B': about to write batch, 'C': batch committed
  int32_t batch;  // batch number within the round
  int32_t count;  // measurements in the batch
  int64_t ids[kMaxBatch];
};
static_assert(sizeof(Report) < PIPE_BUF);

std::string BatchTag(int round, int batch) { return absl::StrCat("r", round, "-b", batch); }

// The child: writes batches forever. Never returns.
[[noreturn]] void WriterMain(const std::string& path, int round, int fd) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  if (!store.ok() || !(*store)->PutCandidate(TestCandidate("crash")).ok()) _exit(3);
  std::mt19937 rng(1000 + round);
  for (int batch = 0;; ++batch) {
    Report report{};
    report.kind = 'B';
    report.batch = batch;
    report.count = 16 + static_cast<int>(rng() % (kMaxBatch - 16 + 1));
    std::vector<v1::Measurement> measurements;
    for (int i = 0; i < report.count; ++i) {
      v1::Measurement m = TestMeasurement("crash", TestProblem(256, 256, 64 * (1 + i % 8)),
                                          10.0 + i, /*samples=*/20);
      m.set_worker(BatchTag(round, batch));
      m.set_detail(absl::StrCat(report.count));
      measurements.push_back(std::move(m));
    }
    if (write(fd, &report, sizeof(report)) != sizeof(report)) _exit(4);
    absl::StatusOr<std::vector<int64_t>> ids = (*store)->PutMeasurements(measurements);
    if (!ids.ok()) _exit(5);
    report.kind = 'C';
    for (int i = 0; i < report.count; ++i) report.ids[i] = (*ids)[i];
    if (write(fd, &report, sizeof(report)) != sizeof(report)) _exit(4);
  }
}

// Reads whole reports from fd until the deadline (or EOF with no deadline).
void ReadReports(int fd, std::chrono::steady_clock::time_point deadline, bool until_eof,
                 std::string* buffer, std::vector<Report>* reports) {
  while (true) {
    int timeout_ms = 0;
    if (!until_eof) {
      auto left = deadline - std::chrono::steady_clock::now();
      timeout_ms =
          static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(left).count());
      if (timeout_ms <= 0) return;
    }
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, until_eof ? -1 : timeout_ms) <= 0) return;
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n <= 0) return;  // EOF: the child is gone
    buffer->append(chunk, n);
    while (buffer->size() >= sizeof(Report)) {
      Report r;
      std::memcpy(&r, buffer->data(), sizeof(r));
      buffer->erase(0, sizeof(r));
      reports->push_back(r);
    }
  }
}

struct RoundResult {
  std::vector<Report> committed;  // 'C' reports
  bool batch_in_flight = false;   // last report was a 'B' with no 'C'
  int in_flight_batch = -1;
};

// Runs one writer and kills it; `mode` 0: at a random time, 1: shortly after
// the k-th 'B' (inside that batch's transaction, most likely).
RoundResult RunRound(const std::string& path, int round, std::mt19937& rng) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    WriterMain(path, round, fds[1]);
  }
  close(fds[1]);
  std::vector<Report> reports;
  std::string buffer;
  auto start = std::chrono::steady_clock::now();
  if (round % 2 == 0) {
    int delay_ms = round == 0 ? 2 : static_cast<int>(rng() % 120);
    ReadReports(fds[0], start + std::chrono::milliseconds(delay_ms), false, &buffer, &reports);
  } else {
    int target = static_cast<int>(rng() % 6);
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
      ReadReports(fds[0], std::chrono::steady_clock::now() + std::chrono::milliseconds(5), false,
                  &buffer, &reports);
      if (!reports.empty() && reports.back().kind == 'B' && reports.back().batch >= target) break;
    }
    usleep(static_cast<useconds_t>(rng() % 400));
  }
  kill(pid, SIGKILL);
  int wait_status = 0;
  waitpid(pid, &wait_status, 0);
  EXPECT_TRUE(WIFSIGNALED(wait_status))
      << "writer exited by itself with status " << WEXITSTATUS(wait_status);
  ReadReports(fds[0], {}, true, &buffer, &reports);
  close(fds[0]);
  RoundResult result;
  for (const Report& r : reports) {
    if (r.kind == 'C') result.committed.push_back(r);
  }
  if (!reports.empty() && reports.back().kind == 'B') {
    result.batch_in_flight = true;
    result.in_flight_batch = reports.back().batch;
  }
  return result;
}

// Every batch in the file is whole: its measurement count equals the size
// written in each row's detail, and every measurement has 3 baselines and
// 4 sample rows.
void ExpectNoPartialBatch(const std::string& path) {
  EXPECT_EQ(RawInt(path,
                   "SELECT count(*) FROM (SELECT worker, count(*) AS n, max(detail) AS d "
                   "FROM measurements GROUP BY worker HAVING n != CAST(d AS INTEGER))"),
            0);
  EXPECT_EQ(RawInt(path,
                   "SELECT count(*) FROM measurements m WHERE "
                   "(SELECT count(*) FROM baselines b WHERE b.measurement_id = m.id) != 3"),
            0);
  EXPECT_EQ(RawInt(path,
                   "SELECT count(*) FROM measurements m WHERE "
                   "(SELECT count(*) FROM samples s WHERE s.measurement_id = m.id) != 4"),
            0);
}

TEST(StoreCrashTest, KilledWriterLosesNoCommittedBatchAndLeavesNoHalfBatch) {
  TempDir dir;
  const std::string path = dir.File("crash.db");
  std::mt19937 rng(20261121);
  int64_t total_committed = 0;
  int killed_in_transaction = 0;
  for (int round = 0; round < kRounds; ++round) {
    RoundResult result = RunRound(path, round, rng);
    // Restart: a read-write open recovers the WAL, as the server would.
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << "round " << round << ": " << store.status();
    EXPECT_EQ(RawText(path, "PRAGMA integrity_check"), "ok") << "round " << round;
    for (const Report& r : result.committed) {
      for (int i = 0; i < r.count; ++i) {
        absl::StatusOr<StoredMeasurement> m = (*store)->GetMeasurement(r.ids[i]);
        ASSERT_TRUE(m.ok()) << "round " << round << " batch " << r.batch << ": " << m.status();
        EXPECT_EQ(m->measurement.worker(), BatchTag(round, r.batch));
        EXPECT_EQ(m->measurement.baselines_size(), 3);
        EXPECT_EQ(m->measurement.timings().device().sample_us_size(), 20);
      }
      total_committed += r.count;
    }
    ExpectNoPartialBatch(path);
    if (result.batch_in_flight &&
        RawInt(path, absl::StrCat("SELECT count(*) FROM measurements WHERE worker = '",
                                  BatchTag(round, result.in_flight_batch), "'")) == 0) {
      ++killed_in_transaction;  // the batch began but never committed
    }
  }
  EXPECT_GT(total_committed, 0);
  EXPECT_GE(killed_in_transaction, 1) << "no kill landed inside a transaction";
  RecordProperty("committed_measurements", static_cast<int>(total_committed));
  RecordProperty("killed_in_transaction", killed_in_transaction);
  std::printf("committed %lld measurements over %d kills; %d kills inside a transaction\n",
              static_cast<long long>(total_committed), kRounds, killed_in_transaction);
}

}  // namespace
}  // namespace anvil
