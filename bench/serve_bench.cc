// serve_bench: load on `anvil serve` over gRPC. Against a server running the
// evaluator test double (tests/serve/anvil_test_server; bench/serve_bench.sh
// starts one), it measures what the server itself sustains: jobs per second
// (OptimizeKernel to the job's end) and progress events per second delivered
// to clients, at several client counts, plus one job fanned out to many
// watchers. Prints a table.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "proto/problem.h"
#include "server/rpc/client.h"

namespace anvil {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string what;
  int clients = 0, jobs = 0, failed = 0;
  long events = 0;
  double seconds = 0, p50_ms = 0, p99_ms = 0;
  std::map<std::string, long> kinds;  // events by JobProgress.event
};

v1::OptimizeKernelRequest Request(int problems, int salt) {
  v1::OptimizeKernelRequest r;
  for (int i = 0; i < problems; ++i) {
    v1::Problem* p = r.add_problems();
    *p->mutable_shape() = MakeShape(64 * (salt + 1), 128 * (i + 1), 256);
    p->set_layout(i % 2 ? v1::LAYOUT_NN : v1::LAYOUT_NT);
  }
  return r;
}

Row Jobs(KernelSearchClient& client, int clients, int jobs_each, int problems) {
  std::atomic<long> events{0};
  static std::atomic<int> salt{0};  // every job of the run searches new problems
  std::atomic<int> failed{0};
  std::vector<std::vector<double>> ms(clients);
  std::vector<std::map<std::string, long>> kinds(clients);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (int j = 0; j < jobs_each; ++j) {
        const auto t0 = Clock::now();
        v1::JobState end = v1::JOB_STATE_UNSPECIFIED;
        absl::Status st = client.OptimizeKernel(Request(problems, salt++), [&](const v1::JobProgress& p) {
          ++events;
          ++kinds[c][p.event()];
          end = p.job().state();
          return true;
        });
        if (!st.ok() || end != v1::JOB_STATE_SUCCEEDED) ++failed;
        ms[c].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  Row r;
  r.what = "jobs";
  r.clients = clients;
  r.jobs = clients * jobs_each;
  r.failed = failed.load();
  r.events = events.load();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> all;
  for (const auto& v : ms) all.insert(all.end(), v.begin(), v.end());
  for (const auto& k : kinds) {
    for (const auto& [kind, n] : k) r.kinds[kind] += n;
  }
  std::sort(all.begin(), all.end());
  r.p50_ms = all[all.size() / 2];
  r.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  return r;
}

// One job, `watchers` clients watching it from its start to its end.
Row FanOut(KernelSearchClient& client, int watchers, int problems) {
  std::string job_id;
  absl::Status st = client.OptimizeKernel(Request(problems, 7777), [&](const v1::JobProgress& p) {
    job_id = p.job().id();
    return false;  // detach; the watchers follow it
  });
  Row r;
  r.what = "fan-out";
  r.clients = watchers;
  r.jobs = 1;
  if (!st.ok()) {
    r.failed = 1;
    return r;
  }
  std::atomic<long> events{0};
  std::atomic<int> failed{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < watchers; ++w) {
    threads.emplace_back([&] {
      if (!client.WatchJob(job_id, [&](const v1::JobProgress&) { ++events; return true; }).ok()) ++failed;
    });
  }
  for (std::thread& t : threads) t.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.events = events.load();
  r.failed = failed.load();
  return r;
}

}  // namespace
}  // namespace anvil

int main(int argc, char** argv) {
  CLI::App app{"serve_bench: jobs/s and progress events/s that anvil serve sustains"};
  std::string target, clients_text = "1,4,16";
  int jobs_each = 20, problems = 2, watchers = 32, fanout_problems = 64;
  app.add_option("--target", target, "HOST:PORT of the server")->required();
  app.add_option("--clients", clients_text, "client counts to run, comma separated");
  app.add_option("--jobs-per-client", jobs_each, "jobs each client runs to their end");
  app.add_option("--problems", problems, "problems per job");
  app.add_option("--watchers", watchers, "watchers of the fan-out job (0: skip)");
  app.add_option("--fanout-problems", fanout_problems, "problems of the fan-out job (it must outlast the attach)");
  CLI11_PARSE(app, argc, argv);
  anvil::ClientOptions o;
  o.target = target;
  auto client = anvil::KernelSearchClient::Connect(o);
  if (!client.ok()) {
    std::fprintf(stderr, "serve_bench: %s\n", std::string(client.status().message()).c_str());
    return 2;
  }
  std::vector<anvil::Row> rows;
  for (absl::string_view c : absl::StrSplit(clients_text, ',')) {
    rows.push_back(anvil::Jobs(**client, std::stoi(std::string(c)), jobs_each, problems));
  }
  if (watchers > 0) rows.push_back(anvil::FanOut(**client, watchers, fanout_problems));
  std::printf("%-8s %7s %6s %6s %8s %8s %9s %11s %9s %9s\n", "load", "clients", "jobs", "failed",
              "events", "seconds", "jobs/s", "events/s", "p50 ms", "p99 ms");
  for (const anvil::Row& r : rows) {
    std::printf("%-8s %7d %6d %6d %8ld %8.2f %9.1f %11.0f %9.1f %9.1f\n", r.what.c_str(), r.clients,
                r.jobs, r.failed, r.events, r.seconds, r.jobs / r.seconds, r.events / r.seconds,
                r.p50_ms, r.p99_ms);
  }
  std::printf("events per job by kind:");
  for (const anvil::Row& r : rows) {
    if (r.what != "jobs") continue;
    std::printf("\n  %2d clients:", r.clients);
    for (const auto& [kind, n] : r.kinds) std::printf(" %s %.1f", kind.c_str(), static_cast<double>(n) / r.jobs);
  }
  std::printf("\n");
  int failed = 0;
  for (const anvil::Row& r : rows) failed += r.failed;
  return failed == 0 ? 0 : 1;
}
