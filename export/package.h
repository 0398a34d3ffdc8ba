// The files of an exported package: the fixed ones (export/package/, built
// into the binary by export/embed.cmake) and the generated ones (dispatch
// table, kernel translation units, kernels.cmake, manifest.json and .csv)
// from a PackageSpec. Deterministic: the same spec gives the same bytes.
// Pure functions; thread-safe. Internal to export/.
#ifndef ANVIL_EXPORT_PACKAGE_H_
#define ANVIL_EXPORT_PACKAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "anvil/v1/types.pb.h"
#include "export/select.h"
#include "proto/problem.h"

namespace anvil::exporter {

struct PackageFile {
  std::string path;  // relative to the package root
  std::string text;
};

// A kernel compiled into the package.
struct PackageKernel {
  std::string symbol;  // "anvil_k_<id8>": prefix of its renamed ABI symbols
  v1::Candidate candidate;
};

// One shape of the table (or of the problems asked for, when nothing serves it).
struct PackageShape {
  ShapeSpec spec;
  std::string path;     // "kernel", "cublaslt" or "cublas"
  int kernel = -1;      // index into PackageSpec::kernels when path == "kernel"
  std::string lt_algo;  // tuned cuBLASLt algorithm (64 bytes), empty when none
  std::string lt_figure;  // the figure it was tuned by, e.g. "graph-cold"
  std::optional<WinnerFigures> figures;  // the stored winner's figures, when there is one
  std::string winner;   // the stored winner's display name (shipped or not)
  std::string reason;   // why no kernel serves it
};

struct PackageSpec {
  std::string gpu, arch;
  std::string versions;  // the measurements' versions string
  int64_t driver = 0, cudart = 0, cublas = 0;
  int64_t measured_unix_ms = 0;  // newest measurement behind the table
  double margin = 0.02;
  std::vector<PackageKernel> kernels;  // sorted by symbol
  std::vector<PackageShape> shapes;    // sorted by (layout, m, n, k)
};

const std::vector<PackageFile>& FixedPackageFiles();
// Every file of the package, sorted by path.
std::vector<PackageFile> PackageFiles(const PackageSpec& spec);
// The marker that identifies a directory as an Anvil export.
inline constexpr char kMarkerFile[] = ".anvil-export";

}  // namespace anvil::exporter

#endif  // ANVIL_EXPORT_PACKAGE_H_
