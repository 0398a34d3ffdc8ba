// anvil export-trajectories: a job's LLM samples (prompt, response, reward,
// advantage) as JSON Lines for RL fine-tuning. Format:
// server/proposers/llm/TRAJECTORIES.md.
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "server/proposers/llm/trajectories.h"
#include "store/store.h"

namespace anvil::cli {

int RunExportTrajectories(const Globals& g, const std::string& job, const std::string& format,
                          const std::string& out_path) {
  if (format != "jsonl") {
    return Report(absl::InvalidArgumentError(absl::StrCat("unknown format '", format, "' (jsonl)")), kUsage);
  }
  StoreOptions opts;
  opts.read_only = true;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(g.db, opts);
  if (!store.ok()) return Report(store.status(), kDatabase);
  std::ofstream file;
  if (!out_path.empty() && out_path != "-") {
    file.open(out_path);
    if (!file) return Report(absl::InvalidArgumentError(absl::StrCat("cannot write ", out_path)), kUsage);
  }
  std::ostream& out = file.is_open() ? file : std::cout;
  absl::StatusOr<TrajectoryCounts> counts = WriteTrajectories(**store, job, out);
  if (!counts.ok()) return Report(counts.status(), absl::IsNotFound(counts.status()) ? kUsage : kFailed);
  std::cerr << absl::StrCat("anvil export-trajectories: ", counts->written, " samples from ",
                            counts->exchanges, " exchanges of job ", job, " (", counts->unrewarded,
                            " without a reward left out)\n");
  return kOk;
}

}  // namespace anvil::cli
