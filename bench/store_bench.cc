// anvil-store-bench: throughput of the store's main writes and queries on a
// temporary database filled with realistic rows (measurements with three
// baselines and --samples samples per figure, spread over --problems
// problems). Prints a markdown table. Not a test: numbers depend on the disk.
//
//   anvil-store-bench --rows 20000 [--db PATH] [--problems 1000] [--samples 50]
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "proto/problem.h"
#include "store/store.h"

namespace anvil {
namespace {

struct Flags {
  int rows = 20000;
  int problems = 1000;
  int samples = 50;
  double query_seconds = 1.0;
  std::string db;
};

struct Row {
  std::string operation;
  int64_t count = 0;
  double seconds = 0;
};

void Die(const absl::Status& status, const char* what) {
  std::fprintf(stderr, "anvil-store-bench: %s: %s\n", what, status.ToString().c_str());
  std::exit(1);
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Runs op(i) for i = 0..count-1, or until `seconds` pass when count is 0.
Row Time(const std::string& name, int64_t count, double seconds,
         const std::function<void(int64_t)>& op) {
  auto start = std::chrono::steady_clock::now();
  int64_t done = 0;
  while (count > 0 ? done < count : (done < 10 || SecondsSince(start) < seconds)) op(done++);
  return Row{name, done, SecondsSince(start)};
}

v1::Problem BenchProblem(int index) {
  v1::Shape shape;
  shape.set_m(256 * (1 + index % 32));
  shape.set_n(256 * (1 + (index / 32) % 32));
  shape.set_k(1024 + 64 * (index / 1024));
  return MakeProblem("H100-SXM5-80GB", "sm_90a", shape, index % 2 ? v1::LAYOUT_NN : v1::LAYOUT_NT);
}

v1::Candidate BenchCandidate(int index) {
  v1::Candidate c;
  c.set_id(absl::StrCat("bench", index));
  c.set_name(absl::StrCat("sm90_wgmma_128x256x64_c2x1_s4_nt_coop_", index));
  std::string source = absl::StrCat("// candidate ", index, "\n");
  while (source.size() < 6000) source += "  asm volatile(\"wgmma.mma_async.sync.aligned\");\n";
  c.set_source(source);
  for (const char* knob : {"BM", "BN", "BK", "STAGES", "CLUSTER_M", "CLUSTER_N"}) {
    (*c.mutable_params())[knob] = absl::StrCat(64 << (index % 3));
  }
  c.set_proposer(index % 2 ? "llm" : "embedded");
  c.set_family("sm90_wgmma_tma");
  c.set_layout(v1::LAYOUT_NT);
  c.set_arch("sm_90a");
  return c;
}

void FillStats(double median, int samples, std::mt19937& rng, v1::TimingStats* s) {
  std::normal_distribution<double> noise(median, median * 0.01);
  for (int i = 0; i < samples; ++i) s->add_sample_us(noise(rng));
  s->set_median_us(median);
  s->set_min_us(median * 0.98);
  s->set_p90_us(median * 1.02);
  s->set_spread(0.03);
  s->set_samples(samples);
}

void FillTimings(double device_us, int samples, std::mt19937& rng, v1::Timings* t) {
  FillStats(device_us, samples, rng, t->mutable_device());
  FillStats(device_us * 1.3, samples, rng, t->mutable_cold());
  FillStats(device_us * 1.05, samples, rng, t->mutable_warm());
  FillStats(device_us * 1.2, samples, rng, t->mutable_call());
  t->set_first_call_us(device_us * 50);
}

v1::Measurement BenchMeasurement(const Flags& flags, std::mt19937& rng) {
  v1::Measurement m;
  m.set_verdict(v1::VERDICT_PASSED);
  m.set_rel_err(4e-4);
  FillTimings(100, flags.samples, rng, m.mutable_timings());
  for (const char* name : {"cublas", "cublaslt_heuristic", "cublaslt_auto"}) {
    v1::Baseline* b = m.add_baselines();
    b->set_name(name);
    FillTimings(110, flags.samples, rng, b->mutable_timings());
    b->set_kernels("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1");
  }
  m.set_sol_us(60);
  m.set_efficiency(0.6);
  m.set_graph_capturable(true);
  m.set_kernels_per_call(1);
  m.add_kernel_names("anvil_gemm_kernel");
  m.set_streams_per_call(1);
  (*m.mutable_profile())["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = 71.2;
  (*m.mutable_profile())["dram__throughput.avg.pct_of_peak_sustained_elapsed"] = 42.0;
  m.set_gpu_uuid("GPU-5f2c1e7a-0000-0000-0000-000000000000");
  m.set_worker("worker-1");
  m.set_seconds(3.2);
  m.set_versions("cuda=13.0 cublas=13.1.0 driver=580.159.04");
  return m;
}

// Gives the template measurement i its own candidate, problem and speed.
void Vary(const Flags& flags, int64_t i, int candidates, std::mt19937& rng, v1::Measurement* m) {
  m->set_candidate_id(absl::StrCat("bench", rng() % candidates));
  *m->mutable_problem() = BenchProblem(static_cast<int>(i % flags.problems));
  double us = 50 + static_cast<double>(rng() % 1000);
  m->mutable_timings()->mutable_device()->set_median_us(us);
  m->mutable_timings()->mutable_warm()->set_median_us(us * 1.05);
  m->set_verified(rng() % 5 == 0);
  m->set_measured_at_unix_ms(1763700000000 + i);
}

void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) Die(status, what);
}

// Candidates, then measurements one per transaction, then in batches of 64.
// Returns the number of measurements stored through `total`.
std::vector<Row> RunWrites(const Flags& flags, Store& store, std::mt19937& rng, int* total) {
  std::vector<Row> rows;
  const int candidates = std::max(100, flags.rows / 20);
  rows.push_back(Time("PutCandidate (own transaction)", candidates, 0, [&](int64_t i) {
    Check(store.PutCandidate(BenchCandidate(static_cast<int>(i))), "PutCandidate");
  }));
  v1::Measurement m = BenchMeasurement(flags, rng);
  const int64_t singles = std::max(1, flags.rows / 10);
  rows.push_back(Time("PutMeasurement (own transaction)", singles, 0, [&](int64_t i) {
    Vary(flags, i, candidates, rng, &m);
    Check(store.PutMeasurement(m).status(), "PutMeasurement");
  }));
  std::vector<v1::Measurement> batch(64, m);
  const int64_t batches = std::max<int64_t>(1, (flags.rows - singles) / 64);
  Row batched = Time("PutMeasurements (batch of 64), rows", batches, 0, [&](int64_t b) {
    for (int j = 0; j < 64; ++j) Vary(flags, singles + b * 64 + j, candidates, rng, &batch[j]);
    Check(store.PutMeasurements(batch).status(), "PutMeasurements");
  });
  batched.count *= 64;
  rows.push_back(batched);
  *total = static_cast<int>(singles + batched.count);
  rows.push_back(Time("MarkVerified (own transaction)", std::max(1, *total / 20), 0,
                      [&](int64_t) { store.MarkVerified(1 + rng() % *total).IgnoreError(); }));
  return rows;
}

// Each query kind on random problems for flags.query_seconds.
std::vector<Row> RunQueries(const Flags& flags, Store& store, std::mt19937& rng, int total) {
  std::vector<Row> rows;
  const double t = flags.query_seconds;
  auto problem = [&] { return BenchProblem(static_cast<int>(rng() % flags.problems)); };
  rows.push_back(Time("BestKernel (device)", 0, t, [&](int64_t) {
    Check(store.BestKernel(problem(), "device").status(), "BestKernel");
  }));
  rows.push_back(
      Time(absl::StrCat("SearchHistory (~", total / flags.problems, " rows)"), 0, t,
           [&](int64_t) { Check(store.SearchHistory(problem()).status(), "SearchHistory"); }));
  rows.push_back(Time("ListBestKernels (limit 100)", 0, t, [&](int64_t) {
    Check(store.ListBestKernels("", v1::LAYOUT_UNSPECIFIED, "device", 100).status(),
          "ListBestKernels");
  }));
  rows.push_back(Time("Exemplars (n=4)", 0, t, [&](int64_t) {
    Check(store.Exemplars(problem(), "device", 4).status(), "Exemplars");
  }));
  return rows;
}

void Print(const Flags& flags, int total, const std::string& path, const std::vector<Row>& rows) {
  std::error_code ec;
  double mib = static_cast<double>(std::filesystem::file_size(path, ec)) / (1 << 20);
  double wal = static_cast<double>(std::filesystem::file_size(path + "-wal", ec)) / (1 << 20);
  std::printf(
      "anvil-store-bench: %d measurements (3 baselines, %d samples per figure), "
      "%d problems; database %.1f MiB (+ %.1f MiB WAL)\n\n",
      total, flags.samples, flags.problems, mib, wal);
  std::printf("| operation | count | seconds | per second |\n|---|---:|---:|---:|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %lld | %.2f | %.0f |\n", r.operation.c_str(),
                static_cast<long long>(r.count), r.seconds, r.count / r.seconds);
  }
}

}  // namespace
}  // namespace anvil

int main(int argc, char** argv) {
  anvil::Flags flags;
  CLI::App app{"Measures the throughput of Anvil's SQLite store."};
  app.add_option("--rows", flags.rows, "measurements to insert")->check(CLI::Range(100, 10000000));
  app.add_option("--db", flags.db, "database file to create (default: a temporary one)");
  app.add_option("--problems", flags.problems, "distinct problems")->check(CLI::Range(1, 1000000));
  app.add_option("--samples", flags.samples, "samples per timing figure")
      ->check(CLI::Range(0, 10000));
  app.add_option("--query-seconds", flags.query_seconds, "time spent on each query kind");
  CLI11_PARSE(app, argc, argv);
  std::string dir;
  std::string path = flags.db;
  if (path.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/anvil-store-bench-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) return 1;
    dir = pattern;
    path = dir + "/bench.db";
  } else if (struct stat st; stat(path.c_str(), &st) == 0) {
    std::fprintf(stderr, "anvil-store-bench: %s exists; give a new path\n", path.c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<anvil::Store>> store = anvil::Store::Open(path);
  if (!store.ok()) anvil::Die(store.status(), "opening the database");
  std::mt19937 rng(42);
  int total = 0;
  std::vector<anvil::Row> rows = anvil::RunWrites(flags, **store, rng, &total);
  std::vector<anvil::Row> queries = anvil::RunQueries(flags, **store, rng, total);
  rows.insert(rows.end(), queries.begin(), queries.end());
  anvil::Print(flags, total, path, rows);
  store->reset();
  if (!dir.empty()) std::filesystem::remove_all(dir);
  return 0;
}
