// ExportResponse: an ExportReport as the ExportLibrary RPC's answer.
#include "export/export.h"

namespace anvil {

v1::ExportLibraryResponse ExportResponse(const ExportReport& report) {
  v1::ExportLibraryResponse r;
  r.set_output_dir(report.out_dir);
  r.set_kernels(report.kernels);
  r.set_fallbacks(report.fallbacks);
  for (const ExportedShape& s : report.shapes) {
    v1::ExportedShape* e = r.add_shapes();
    *e->mutable_problem()->mutable_shape() = s.spec.shape;
    e->mutable_problem()->set_layout(s.spec.layout);
    e->set_path(s.path);
    e->set_kernel(s.kernel);
    e->set_reason(s.reason);
  }
  return r;
}

}  // namespace anvil
