// anvil-sandbox-bench: the sandbox's own cost per job. Runs /bin/true N times
// (default 50) per mode -- a bare fork+exec for reference, Run with kNone, Run
// with kNamespaces where the node allows it -- and prints a markdown table of
// wall time per job (median, p90, min).
//   anvil-sandbox-bench [--runs N]
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sandbox/sandbox.h"
#include "spdlog/spdlog.h"

namespace {

using anvil::sandbox::Isolation;

struct Row {
  std::string mode;
  std::vector<double> ms;
  std::string note;
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

std::string TruePath() { return access("/usr/bin/true", X_OK) == 0 ? "/usr/bin/true" : "/bin/true"; }

// Milliseconds per call of job, n times; false as soon as one call fails.
bool Time(int n, const std::function<bool()>& job, std::vector<double>* ms) {
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!job()) return false;
    ms->push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return true;
}

bool BareSpawn() {
  const std::string path = TruePath();
  char* const argv[] = {const_cast<char*>(path.c_str()), nullptr};
  char* const envp[] = {nullptr};
  pid_t pid;
  if (posix_spawn(&pid, path.c_str(), nullptr, nullptr, argv, envp) != 0) return false;
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool SandboxRun(Isolation isolation, const std::string& dir, std::string* protections) {
  anvil::sandbox::Spec spec;
  spec.argv = {TruePath()};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.work_dir = dir;
  spec.isolation = isolation;
  absl::StatusOr<anvil::sandbox::Result> r = anvil::sandbox::Run(spec);
  if (!r.ok() || r->exit_code != 0) {
    std::fprintf(stderr, "run failed: %s\n", r.ok() ? r->stderr_text.c_str() : r.status().ToString().c_str());
    return false;
  }
  *protections = absl::StrJoin(r->protections, ", ");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"anvil-sandbox-bench: the sandbox's own cost per job"};
  int runs = 50;
  app.add_option("--runs", runs, "jobs per mode")->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  const anvil::sandbox::Capabilities& caps = anvil::sandbox::Probe();
  const char* tmp = std::getenv("TMPDIR");
  absl::StatusOr<anvil::sandbox::ScratchDir> dir =
      anvil::sandbox::ScratchDir::Create(tmp != nullptr && *tmp == '/' ? tmp : "/tmp", "anvil-bench-");
  if (!dir.ok()) return 1;
  std::vector<Row> rows;
  Row bare{"fork+exec (posix_spawn, no sandbox)", {}, "reference"};
  if (Time(runs, BareSpawn, &bare.ms)) rows.push_back(bare);
  for (Isolation iso : {Isolation::kNone, Isolation::kNamespaces}) {
    if (iso == Isolation::kNamespaces && !caps.namespaces) {
      rows.push_back({"Run, kNamespaces", {}, "unavailable: " + caps.why_not});
      continue;
    }
    Row row{iso == Isolation::kNone ? "Run, kNone" : "Run, kNamespaces (bwrap)", {}, ""};
    if (Time(runs, [&] { return SandboxRun(iso, dir->path(), &row.note); }, &row.ms)) rows.push_back(row);
  }
  std::printf("| mode | median ms | p90 ms | min ms | active protections |\n|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    if (r.ms.empty()) {
      std::printf("| %s | - | - | - | %s |\n", r.mode.c_str(), r.note.c_str());
      continue;
    }
    std::printf("%s", absl::StrFormat("| %s | %.2f | %.2f | %.2f | %s |\n", r.mode, Percentile(r.ms, 0.5),
                                      Percentile(r.ms, 0.9), *std::min_element(r.ms.begin(), r.ms.end()),
                                      r.note).c_str());
  }
  std::printf("\n%d runs per mode of %s; capabilities: namespaces=%d cgroup_kill=%d cgroup_memory=%d%s%s\n",
              runs, TruePath().c_str(), caps.namespaces, caps.cgroup_kill, caps.cgroups,
              caps.why_not.empty() ? "" : "; ", caps.why_not.c_str());
  return 0;
}
