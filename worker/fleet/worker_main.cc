#include "worker/fleet/worker_main.h"

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "worker/build_cache.h"

namespace anvil {
namespace {

std::string ReadToken(const std::string& file) {
  if (file.empty()) {
    const char* env = std::getenv("ANVIL_AUTH_TOKEN");
    return env != nullptr ? env : "";
  }
  std::ifstream in(file);
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return std::string(absl::StripTrailingAsciiWhitespace(token));
}

// Beside the build cache (worker/build_cache.h): $ANVIL_CACHE/artifacts; for
// root /var/tmp/anvil-0/artifacts (the sandbox's uid must read them).
std::string DefaultCacheDir() {
  if (const char* c = std::getenv("ANVIL_CACHE"); c && *c) return absl::StrCat(c, "/artifacts");
  const std::string builds = DefaultBuildCacheDir();
  return absl::StrCat(absl::StripSuffix(builds, "/builds"), "/artifacts");
}

}  // namespace

int WorkerMain(const std::vector<std::string>& args, const FleetWorkerComponents& components,
               const std::string& program) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  spdlog::set_default_logger(spdlog::stderr_color_mt("anvil-worker"));

  FleetWorkerOptions o;
  std::string token_file;
  o.cache_dir = DefaultCacheDir();
  if (const char* s = std::getenv("ANVIL_SERVER")) o.server = s;
  CLI::App app(absl::StrCat(program, ": lease build and measure tasks from anvil serve's fleet"), program);
  app.add_option("--server", o.server, "HOST:PORT of anvil serve (default: $ANVIL_SERVER)");
  app.add_option("--token-file", token_file, "bearer token file (default: $ANVIL_AUTH_TOKEN)");
  app.add_flag("--tls", o.tls, "the server speaks TLS (system roots)");
  app.add_option("--tls-ca", o.tls_ca, "PEM roots to trust for the server (implies --tls)");
  app.add_option("--hostname", o.hostname, "name shown for this node (default: the host name)");
  app.add_flag("--build-only", o.build_only, "no GPU: take build tasks only");
  app.add_option("--build-slots", o.build_slots,
                 "build tasks at once beside the GPU slots (default: one per two cores; 0: none, "
                 "the GPU slots build when no worker of the fleet has a build slot)")
      ->check(CLI::Range(0, 256));
  app.add_option("--cache-dir", o.cache_dir, "built and fetched artifacts, by SHA-256");
  app.add_option("--lease-wait", o.lease_wait_s, "seconds each lease call waits for work")
      ->check(CLI::Range(0.0, 60.0));
  std::vector<std::string> argv_rev(args.rbegin(), args.rend());
  try {
    app.parse(argv_rev);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.server.empty()) {
    spdlog::error("{}: needs --server HOST:PORT (or $ANVIL_SERVER)", program);
    return 2;
  }
  if (!o.tls_ca.empty() && !std::ifstream(o.tls_ca)) {
    spdlog::error("{}: cannot read --tls-ca {}", program, o.tls_ca);
    return 2;
  }
  o.token = ReadToken(token_file);
  FleetWorker worker(o, components);
  std::thread([&worker, set] {
    int sig = 0;
    sigwait(&set, &sig);
    spdlog::info("anvil worker: {} received; finishing the tasks in hand", strsignal(sig));
    worker.Stop();
  }).detach();
  absl::Status st = worker.Run();
  if (!st.ok()) {
    spdlog::error("{}: {}", program, std::string(st.message()));
    if (absl::IsInvalidArgument(st)) return 2;  // options that cannot work together
    // This node cannot work: no namespace isolation, or a path the sandbox's
    // uid cannot reach (CheckNodeReady says which and the fix).
    if (absl::IsFailedPrecondition(st)) return 4;
    return absl::IsUnavailable(st) && absl::StrContains(st.message(), "GPU") ? 4 : 3;
  }
  return 0;
}

}  // namespace anvil
