// anvil-build-bench: how build throughput scales with parallel nvcc jobs and
// unity groups. Builds the same N distinct configurations of a seed family
// (legal, spread over its space) with 1, 2, 4, ... parallel jobs and each
// unity group size (configurations per nvcc run; 1: each alone) into a fresh
// cache each time, through the real sandboxed Builder, and prints candidates
// per minute.
//   anvil-build-bench [--family 03_wgmma_tma] [--configs 16] [--jobs 1,4,8,16] [--unity 1,8]
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "absl/strings/str_format.h"
#include "proto/problem.h"
#include "seeds/space.h"
#include "worker/builder.h"

namespace anvil {
namespace {

// `n` configurations evenly spaced through the legal space, so the set mixes
// tile sizes.
std::vector<v1::Candidate> SpreadConfigs(const SeedFamily& f, v1::Layout layout, int n) {
  const std::vector<KnobParams> space = LegalConfigs(f, layout);
  std::vector<v1::Candidate> out;
  for (int i = 0; i < n && !space.empty(); ++i) {
    out.push_back(MakeSeedCandidate(f, layout, space[i * space.size() / n]));
  }
  return out;
}

// in_group: builds made in a unity group; groups: how many unity compiles made them.
void PrintHeader() {
  std::printf("%6s %6s %10s %14s %12s %9s %7s %8s\n", "jobs", "unity", "wall_s", "builds_per_min",
              "mean_nvcc_s", "in_group", "groups", "failed");
}

}  // namespace
}  // namespace anvil

int main(int argc, char** argv) {
  using namespace anvil;
  CLI::App app{"anvil-build-bench: build throughput against parallel nvcc jobs"};
  std::string family = "03_wgmma_tma", layout_name = "nt";
  int configs = 16;
  std::vector<int> jobs = {1, 2, 4, 8};
  std::vector<int> unity = {1};
  app.add_option("--family", family, "seed family folder");
  app.add_option("--layout", layout_name, "nt or nn");
  app.add_option("--configs", configs, "distinct configurations per run")->check(CLI::Range(1, 1000));
  app.add_option("--jobs", jobs, "parallel nvcc jobs to try")->delimiter(',');
  app.add_option("--unity", unity, "configurations per nvcc run to try (BuilderOptions::unity; 1: alone)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<Toolchain> toolchain = Toolchain::Find();
  if (!toolchain.ok()) {
    std::cerr << "anvil-build-bench: " << toolchain.status() << "\n";
    return 3;
  }
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(DefaultSeedsDir(Toolchain::ExecutableDir()));
  if (!seeds.ok()) {
    std::cerr << "anvil-build-bench: " << seeds.status() << "\n";
    return 1;
  }
  const SeedFamily* f = nullptr;
  for (const SeedFamily& s : *seeds) f = s.name == family ? &s : f;
  absl::StatusOr<v1::Layout> layout = ParseLayout(layout_name);
  if (f == nullptr || !layout.ok()) {
    std::cerr << "anvil-build-bench: unknown family or layout\n";
    return 2;
  }
  const std::vector<v1::Candidate> candidates = SpreadConfigs(*f, *layout, configs);
  std::printf("%s %s: %zu configurations of %zu legal; this machine has %u cores\n", family.c_str(),
              layout_name.c_str(), candidates.size(), LegalConfigs(*f, *layout).size(),
              std::thread::hardware_concurrency());
  PrintHeader();
  for (int j : jobs) {
    for (int u : unity) {
      BuilderOptions o;
      o.toolchain = *toolchain;
      o.cache_dir = absl::StrFormat("%s/anvil-build-bench-%d-%d-%d",
                                    std::filesystem::temp_directory_path().string(), getpid(), j, u);
      o.jobs = j;
      o.unity = u;
      Builder builder(o);
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<absl::StatusOr<v1::Build>> builds = builder.BuildAll(candidates);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double nvcc = 0;
      int failed = 0, grouped = 0;
      double groups = 0;
      std::string first_error;
      for (const auto& b : builds) {
        if (!b.ok() || b->verdict() != v1::VERDICT_PASSED) {
          if (failed++ == 0) first_error = b.ok() ? b->error() : std::string(b.status().message());
        }
        if (!b.ok()) continue;
        nvcc += b->seconds();  // a unity build's share of its group's compile, plus its link
        std::ifstream log(std::filesystem::path(b->artifact()).parent_path() / "build.log");
        std::string first_line;
        std::getline(log, first_line);
        const size_t at = first_line.find("unity group of ");
        if (at != std::string::npos) {
          ++grouped;
          groups += 1.0 / std::atoi(first_line.c_str() + at + 15);
        }
      }
      std::printf("%6d %6d %10.1f %14.1f %12.2f %9d %7.0f %8d\n", j, u, wall, candidates.size() * 60.0 / wall,
                  nvcc / candidates.size(), grouped, groups, failed);
      if (!first_error.empty()) std::printf("  first failure: %s\n", first_error.substr(0, 400).c_str());
      std::fflush(stdout);
      std::error_code ec;
      std::filesystem::remove_all(o.cache_dir, ec);
    }
  }
  return 0;
}
