// anvil-soak: the sandbox soak and recovery test on one GPU node (see
// --help and sandbox/SANDBOX.md, "Soak"). Prints the report (markdown) and
// optionally writes it as JSON. Exit codes: 0 everything as expected;
// 1 a job did not get its verdict, something leaked or memory did not come
// back; 2 the soak could not run; 77 no GPU (skipped, as ctest counts it).
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "deploy/layout.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "tools/soak/gpu_memory.h"
#include "tools/soak/options.h"
#include "tools/soak/soak.h"

#ifndef ANVIL_SOURCE_DIR
#define ANVIL_SOURCE_DIR ""
#endif

int main(int argc, char** argv) {
  absl::StatusOr<anvil::CommandLine> cl = anvil::ParseCommandLine(std::vector<std::string>(argv, argv + argc));
  if (!cl.ok()) {
    std::fprintf(stderr, "anvil-soak: %s (see --help)\n", std::string(cl.status().message()).c_str());
    return 2;
  }
  if (!cl->help.empty()) {
    std::printf("%s", cl->help.c_str());
    return 0;
  }
  anvil::SoakOptions o = cl->options;
  if (o.tests_dir.empty()) {
    const char* d = std::getenv("ANVIL_TESTS_DIR");
    const std::string bundled = anvil::deploy::Installed("share/anvil/tests");
    o.tests_dir = d ? d : !bundled.empty() ? bundled : std::string(ANVIL_SOURCE_DIR) + "/tests";
  }
  if (!o.cpu_only) {
    if (std::string why = anvil::NoGpuReason(o.device); !why.empty()) {
      std::printf("SKIPPED: %s; run anvil-soak on a GPU node (or --cpu-only)\n", why.c_str());
      return 77;
    }
  }
  // Progress on stderr: stdout carries the report (or the JSON).
  spdlog::set_default_logger(spdlog::stderr_color_mt("anvil-soak"));
  spdlog::set_pattern("[%H:%M:%S] %v");
  absl::StatusOr<anvil::SoakReport> report = anvil::RunSoak(o);
  if (!report.ok()) {
    std::fprintf(stderr, "anvil-soak: cannot run: %s\n", report.status().ToString().c_str());
    return 2;
  }
  const std::string table = anvil::FormatReport(*report);
  const std::string json = anvil::ReportJson(*report);
  std::fprintf(o.json ? stderr : stdout, "%s", table.c_str());
  if (o.json) std::printf("%s\n", json.c_str());
  if (!o.out_file.empty()) {
    std::ofstream out(o.out_file);
    out << json << "\n";
    if (!out) {
      std::fprintf(stderr, "anvil-soak: cannot write %s\n", o.out_file.c_str());
      return 2;
    }
  }
  return report->ok() ? 0 : 1;
}
