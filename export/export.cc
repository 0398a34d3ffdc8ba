#include "export/export.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "export/package.h"
#include "export/select.h"

namespace anvil {
namespace {

namespace fs = std::filesystem;
using exporter::PackageKernel;
using exporter::PackageShape;
using exporter::PackageSpec;

absl::StatusOr<std::vector<ShapeSpec>> LoadProblems(const ExportOptions& o) {
  std::vector<ShapeSpec> out = o.problems;
  if (o.problems_file.empty()) return out;
  std::ifstream in(o.problems_file);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read problems file ", o.problems_file));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<ShapeSpec>> specs = ParseShapesFile(text.str());
  if (!specs.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(o.problems_file, ": ", specs.status().message()));
  }
  out.insert(out.end(), specs->begin(), specs->end());
  return out;
}

// The problems to export: those asked for, else every problem with a winner.
absl::StatusOr<std::vector<v1::Problem>> Problems(Store& store, const ExportOptions& o,
                                                  std::string* arch) {
  absl::StatusOr<std::vector<v1::Kernel>> all = store.ListBestKernels(
      "", v1::LAYOUT_UNSPECIFIED, exporter::RegimeFigure(exporter::Regime::kCold), 1000000);
  if (!all.ok()) return all.status();
  std::set<std::string> known;
  std::vector<v1::Problem> winners;
  for (const v1::Kernel& k : *all) {
    const v1::Problem& p = k.measurement().problem();
    known.insert(p.gpu());
    if (p.gpu() == o.gpu) winners.push_back(p), *arch = p.arch();
  }
  if (!known.count(o.gpu)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown GPU '", o.gpu, "': the store has winners for ",
        known.empty() ? "no GPU" : absl::StrJoin(known, ", ")));
  }
  absl::StatusOr<std::vector<ShapeSpec>> specs = LoadProblems(o);
  if (!specs.ok()) return specs.status();
  if (specs->empty()) return winners;
  std::vector<v1::Problem> out;
  for (const ShapeSpec& s : *specs) out.push_back(MakeProblem(o.gpu, *arch, s.shape, s.layout));
  return out;
}

// One problem's shape: its winner, figures and whether it clears the margin.
absl::Status Judge(Store& store, const v1::Problem& p, double margin, PackageShape* s,
                   v1::Candidate* winner) {
  s->spec = ShapeSpec{p.shape(), p.layout()};
  s->path = "cublas";
  absl::StatusOr<std::optional<v1::Kernel>> best =
      store.BestKernel(p, exporter::RegimeFigure(exporter::Regime::kCold));
  if (!best.ok()) return best.status();
  if (!best->has_value()) {
    s->reason = "no verified kernel stored";
    return absl::OkStatus();
  }
  *winner = (*best)->candidate();
  s->winner = winner->name();
  absl::StatusOr<exporter::WinnerFigures> f = exporter::FiguresOf(store, p, winner->id());
  if (absl::IsNotFound(f.status())) {
    s->reason = std::string(f.status().message());
    return absl::OkStatus();
  }
  if (!f.ok()) return f.status();
  s->figures = *f;
  if (exporter::ClearsMargin(*f, margin, &s->reason)) s->path = "kernel";
  return absl::OkStatus();
}

// The versions the table is validated against: the newest shipped kernel's.
// Kernels measured under other versions are not shipped.
void SettleVersions(PackageSpec* spec) {
  for (const PackageShape& s : spec->shapes) {
    if (s.path == "kernel" && s.figures->measured_unix_ms >= spec->measured_unix_ms) {
      spec->measured_unix_ms = s.figures->measured_unix_ms;
      spec->versions = s.figures->versions;
    }
  }
  for (PackageShape& s : spec->shapes) {
    if (s.path == "kernel" && s.figures->versions != spec->versions) {
      s.path = "cublas";
      s.reason = absl::StrCat("measured with ", s.figures->versions, ", the package's figures with ",
                              spec->versions);
    }
  }
  spec->driver = exporter::VersionOf(spec->versions, "driver");
  spec->cudart = exporter::VersionOf(spec->versions, "cudart");
  spec->cublas = exporter::VersionOf(spec->versions, "cublas");
}

// Kernels (one per distinct candidate, symbol from its id) and tuned cuBLASLt algorithms.
absl::Status Assign(Store& store, const std::vector<v1::Problem>& problems,
                    const std::vector<v1::Candidate>& winners, PackageSpec* spec) {
  std::map<std::string, int> by_id;
  std::set<std::string> symbols;
  for (size_t i = 0; i < spec->shapes.size(); ++i) {
    PackageShape& s = spec->shapes[i];
    if (s.path == "kernel") {
      const v1::Candidate& c = winners[i];
      if (!by_id.count(c.id())) {
        std::string symbol = "anvil_k_" + c.id().substr(0, 8);
        if (symbols.count(symbol)) symbol = "anvil_k_" + c.id().substr(0, 16);
        symbols.insert(symbol);
        by_id[c.id()] = static_cast<int>(spec->kernels.size());
        spec->kernels.push_back(PackageKernel{symbol, c});
      }
      s.kernel = by_id[c.id()];
      continue;
    }
    // The choice tuned in the deployment regime first (cold), then the others.
    for (const char* figure : {"graph-cold", "graph-hot", "device"}) {
      absl::StatusOr<std::optional<LtAlgo>> lt =
          store.GetLtAlgo(problems[i], std::to_string(spec->cublas), figure);
      if (!lt.ok()) return lt.status();
      if (lt->has_value() && (*lt)->algo.size() == 64) {
        s.path = "cublaslt";
        s.lt_algo = (*lt)->algo;
        s.lt_figure = figure;
        break;
      }
    }
  }
  // Kernels sorted by symbol; shape indexes follow.
  std::vector<int> order(spec->kernels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return spec->kernels[a].symbol < spec->kernels[b].symbol;
  });
  std::vector<int> rank(order.size());
  std::vector<PackageKernel> sorted;
  for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<int>(r), sorted.push_back(spec->kernels[order[r]]);
  spec->kernels = std::move(sorted);
  for (PackageShape& s : spec->shapes) {
    if (s.kernel >= 0) s.kernel = rank[s.kernel];
  }
  return absl::OkStatus();
}

absl::StatusOr<PackageSpec> BuildSpec(Store& store, const ExportOptions& o) {
  PackageSpec spec;
  spec.gpu = o.gpu;
  spec.margin = o.margin;
  absl::StatusOr<std::vector<v1::Problem>> problems = Problems(store, o, &spec.arch);
  if (!problems.ok()) return problems.status();
  std::sort(problems->begin(), problems->end(), [](const v1::Problem& a, const v1::Problem& b) {
    auto key = [](const v1::Problem& p) {
      return std::make_tuple(int(p.layout()), p.shape().m(), p.shape().n(), p.shape().k());
    };
    return key(a) < key(b);
  });
  problems->erase(std::unique(problems->begin(), problems->end(),
                              [](const v1::Problem& a, const v1::Problem& b) {
                                return ProblemName(a) == ProblemName(b);
                              }),
                  problems->end());
  std::vector<v1::Candidate> winners(problems->size());
  spec.shapes.resize(problems->size());
  for (size_t i = 0; i < problems->size(); ++i) {
    absl::Status st = Judge(store, (*problems)[i], o.margin, &spec.shapes[i], &winners[i]);
    if (!st.ok()) return st;
  }
  SettleVersions(&spec);
  absl::Status st = Assign(store, *problems, winners, &spec);
  if (!st.ok()) return st;
  if (spec.kernels.empty()) {
    std::string why;
    for (const PackageShape& s : spec.shapes) {
      if (why.empty() && !s.reason.empty()) why = absl::StrCat(" (", ShapeName(s.spec.shape), " ", LayoutName(s.spec.layout), ": ", s.reason, ")");
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "no winners for ", o.gpu, ": no kernel of the ", spec.shapes.size(),
        " problems beats the best baseline by ", o.margin * 100, "% in both regimes", why));
  }
  return spec;
}

absl::Status WriteFiles(const std::vector<exporter::PackageFile>& files, const fs::path& dir) {
  for (const exporter::PackageFile& f : files) {
    const fs::path path = dir / f.path;
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    std::ofstream out(path, std::ios::binary);
    out << f.text;
    out.close();
    if (ec || !out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  }
  return absl::OkStatus();
}

// Writes the package beside `out` and renames it into place.
absl::Status Publish(const std::vector<exporter::PackageFile>& files, const fs::path& out) {
  std::error_code ec;
  const bool replace = fs::exists(out, ec);
  const bool empty_dir = replace && fs::is_directory(out, ec) && fs::is_empty(out, ec);
  if (replace && !empty_dir && !fs::exists(out / exporter::kMarkerFile, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        out.string(), " exists and is not a previous export (no ", exporter::kMarkerFile,
        "); choose another --out or remove it"));
  }
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  std::string pattern = (parent / ("." + out.filename().string() + ".tmp-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create a directory beside ", out.string()));
  }
  const fs::path tmp = pattern;
  absl::Status st = WriteFiles(files, tmp);
  fs::path old;
  if (st.ok() && replace) {
    old = fs::path(pattern + ".old");
    fs::rename(out, old, ec);
    if (ec) st = absl::InternalError(absl::StrCat("cannot move the previous export aside: ", ec.message()));
  }
  if (st.ok()) {
    fs::rename(tmp, out, ec);
    if (ec) {
      st = absl::InternalError(absl::StrCat("cannot rename into ", out.string(), ": ", ec.message()));
      if (!old.empty()) fs::rename(old, out, ec);
    }
  }
  fs::remove_all(tmp, ec);
  if (!old.empty()) fs::remove_all(old, ec);
  return st;
}

}  // namespace

absl::StatusOr<ExportReport> ExportLibrary(Store& store, const ExportOptions& options) {
  if (options.gpu.empty()) return absl::InvalidArgumentError("a GPU model is required (--gpu)");
  if (options.out_dir.empty()) return absl::InvalidArgumentError("an output directory is required (--out)");
  if (!(options.margin >= 0 && options.margin < 1)) {
    return absl::InvalidArgumentError("the margin must be in [0, 1)");
  }
  absl::StatusOr<PackageSpec> spec = BuildSpec(store, options);
  if (!spec.ok()) return spec.status();
  const std::vector<exporter::PackageFile> files = exporter::PackageFiles(*spec);
  absl::Status st = Publish(files, options.out_dir);
  if (!st.ok()) return st;
  ExportReport report;
  report.out_dir = options.out_dir;
  for (const PackageShape& s : spec->shapes) {
    const bool kernel = s.path == "kernel";
    (kernel ? report.kernels : report.fallbacks) += 1;
    report.shapes.push_back({s.spec, s.path, kernel ? spec->kernels[s.kernel].candidate.name() : "",
                             s.reason});
  }
  for (const exporter::PackageFile& f : files) report.files.push_back(f.path);
  return report;
}

}  // namespace anvil
