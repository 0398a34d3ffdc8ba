// What the GPU test suites (harness_gpu_test, batch_gpu_test) set up alike:
// where the test kernels are, a scratch folder the sandbox's jobs can reach,
// a builder caching below it, and runner options with the suites' limits.
#ifndef ANVIL_TESTS_GPU_FIXTURE_H_
#define ANVIL_TESTS_GPU_FIXTURE_H_

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "deploy/layout.h"
#include "sandbox/sandbox.h"
#include "worker/builder.h"
#include "worker/runner_host.h"

#ifndef ANVIL_SOURCE_DIR
#define ANVIL_SOURCE_DIR ""
#endif

namespace anvil::testing {

// ANVIL_TESTS_DIR, else the bundle's (run from libexec/tests), else the source tree's.
inline std::string TestsDir() {
  const char* d = std::getenv("ANVIL_TESTS_DIR");
  if (d != nullptr) return d;
  const std::string bundled = deploy::Installed("share/anvil/tests");
  return !bundled.empty() ? bundled : std::string(ANVIL_SOURCE_DIR) + "/tests";
}

// A scratch folder under /tmp that jobs, run as an unprivileged uid, can reach.
inline absl::StatusOr<std::unique_ptr<sandbox::ScratchDir>> NewScratch(const std::string& prefix) {
  absl::StatusOr<sandbox::ScratchDir> dir = sandbox::ScratchDir::Create("/tmp", prefix);
  if (!dir.ok()) return dir.status();
  std::filesystem::permissions(dir->path(), std::filesystem::perms(0755));
  return std::make_unique<sandbox::ScratchDir>(std::move(*dir));
}

// A builder with its cache and scratch below `scratch`.
inline std::unique_ptr<Builder> NewBuilder(const Toolchain& t, const sandbox::ScratchDir& scratch) {
  BuilderOptions b;
  b.toolchain = t;
  b.cache_dir = scratch.path() + "/cache";
  b.scratch_dir = scratch.path();
  return std::make_unique<Builder>(b);
}

// Runner options: scratch below `scratch`, 20 s limits.
inline RunnerHostOptions RunnerOptionsIn(const Toolchain& t, const sandbox::ScratchDir& scratch,
                                         v1::RunnerProtocol protocol) {
  RunnerHostOptions e;
  e.toolchain = t;
  e.scratch_dir = scratch.path();
  e.protocol = std::move(protocol);
  e.limits.problem_timeout = absl::Seconds(20);
  e.limits.startup_timeout = absl::Seconds(20);
  return e;
}

}  // namespace anvil::testing

#endif  // ANVIL_TESTS_GPU_FIXTURE_H_
