// ExportLibrary: the per-GPU kernel package, written on the server's
// filesystem below export.root by the code of `anvil export` (export/).
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "export/export.h"
#include "proto/problem.h"
#include "server/rpc/service.h"

namespace anvil::rpc {
namespace {

// The package folder: below export.root, however the request spells it.
absl::StatusOr<std::string> OutputDir(const std::string& root_option, const std::string& wanted) {
  if (root_option.empty()) {
    return absl::FailedPreconditionError(
        "ExportLibrary is off on this server: set export.root (--export-root) to the folder it may write in");
  }
  if (wanted.empty()) return absl::InvalidArgumentError("output_dir is empty");
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::weakly_canonical(root_option, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("export.root ", root_option, ": ", ec.message()));
  const std::filesystem::path given(wanted);
  const std::filesystem::path dir =
      std::filesystem::weakly_canonical(given.is_absolute() ? given : root / given, ec);
  const std::filesystem::path below = dir.lexically_relative(root);
  if (ec || below.empty() || below == "." || *below.begin() == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("output_dir ", wanted, " is not a folder below the server's export.root ", root.string()));
  }
  return dir.string();
}

absl::StatusOr<ExportOptions> Options(const ServerOptions& server, const v1::ExportLibraryRequest& r) {
  ExportOptions o;
  absl::StatusOr<std::string> dir = OutputDir(server.export_root, r.output_dir());
  if (!dir.ok()) return dir.status();
  o.out_dir = *dir;
  o.gpu = r.gpu();
  if (r.has_margin()) {
    if (!(r.margin() >= 0 && r.margin() < 1)) return absl::InvalidArgumentError("margin must be in [0, 1)");
    o.margin = r.margin();
  }
  for (v1::Problem p : r.problems()) {
    if (p.dtype() == v1::DTYPE_UNSPECIFIED) p.set_dtype(v1::DTYPE_F16_F32ACC);
    if (absl::Status st = ValidateProblem(p); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("problem ", o.problems.size(), ": ", st.message()));
    }
    o.problems.push_back({p.shape(), p.layout()});
  }
  return o;
}

}  // namespace

grpc::ServerUnaryReactor* KernelSearchService::ExportLibrary(
    grpc::CallbackServerContext* context, const v1::ExportLibraryRequest* request,
    v1::ExportLibraryResponse* response) {
  absl::StatusOr<ExportOptions> options = Options(*deps_.options, *request);
  return Unary(context, "ExportLibrary", options.status(),
               [this, o = options.value_or(ExportOptions()), response]() mutable {
    if (o.gpu.empty()) o.gpu = deps_.gpu ? deps_.gpu() : "";
    if (o.gpu.empty()) {
      return absl::FailedPreconditionError("name the GPU (gpu): this server has not measured on one yet");
    }
    absl::StatusOr<ExportReport> report = anvil::ExportLibrary(*deps_.store, o);
    if (!report.ok()) return report.status();
    *response = ExportResponse(*report);
    return absl::OkStatus();
  });
}

}  // namespace anvil::rpc
