// ExportLibrary: the per-shape kernel library for a set of problems. The
// exporter (export/) is not part of this build yet: the call says so.
#include "server/rpc/service.h"

namespace anvil::rpc {

grpc::ServerUnaryReactor* KernelSearchService::ExportLibrary(
    grpc::CallbackServerContext* context, const v1::ExportLibraryRequest* request,
    v1::ExportLibraryResponse* response) {
  return Unary(context, "ExportLibrary", absl::OkStatus(), [] {
    return absl::UnimplementedError(
        "ExportLibrary: the library exporter is not built into this server yet; "
        "ListKernels and GetKernel return the winners and their sources");
  });
}

}  // namespace anvil::rpc
