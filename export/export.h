// Exporter: writes a self-contained source package for one GPU model from the
// store: each problem's verified best kernel where it beats the best vendor
// baseline by the margin in both graph regimes (see export/select.h), one
// dispatch table, a C ABI (anvil_hgemm.h) that sends every other shape to
// cuBLASLt (with Anvil's tuned algorithm) or cuBLAS, load-time validators, a
// manifest, a CMake package, an example and a Python module. The package
// format is documented in export/PACKAGE.md.
//
// The same store and options give byte-identical files. Nothing partial is
// ever left at `out_dir`: the package is written to a temporary directory
// beside it and renamed into place; a previous export there (marked by the
// file `.anvil-export`) or an empty directory is replaced, anything else is
// refused.
//
// Thread-safety: ExportLibrary may run on several threads at once for
// different output directories (the Store serialises its own calls).
// REQUIRES: the store holds the winners (read-only opens are fine).
#ifndef ANVIL_EXPORT_EXPORT_H_
#define ANVIL_EXPORT_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/problem.h"
#include "store/store.h"

namespace anvil {

struct ExportOptions {
  std::string gpu;                  // device model as the store names it, e.g. "H100-80GB-HBM3"
  std::vector<ShapeSpec> problems;  // shapes to include; empty with no problems_file: every winner
  std::string problems_file;        // "M N K layout" lines (added to `problems`)
  std::string out_dir;              // the package directory (created or replaced)
  double margin = 0.02;             // a kernel must beat the best baseline by this in both regimes
};

// What the package holds, one entry per shape in the dispatch table.
struct ExportedShape {
  ShapeSpec spec;
  std::string path;    // "kernel", "cublaslt" or "cublas"
  std::string kernel;  // kernel display name, when path == "kernel"
  std::string reason;  // why the shape is not served by a kernel (empty when it is)
};

struct ExportReport {
  std::string out_dir;                // where the package was written
  int kernels = 0;                    // shapes served by a searched kernel
  int fallbacks = 0;                  // shapes that go to cuBLASLt or cuBLAS
  std::vector<ExportedShape> shapes;  // in dispatch-table order
  std::vector<std::string> files;     // relative paths written, sorted
};

// Errors: InvalidArgument (unknown GPU: the message lists the known ones; a
// malformed problems file: the message names the line; a bad margin),
// NotFound (problems file missing), FailedPrecondition (no kernel clears
// the margin for that GPU; out_dir exists and is not a previous export),
// and the store's own errors.
absl::StatusOr<ExportReport> ExportLibrary(Store& store, const ExportOptions& options);

}  // namespace anvil

#endif  // ANVIL_EXPORT_EXPORT_H_
