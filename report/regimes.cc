#include "report/regimes.h"

#include <algorithm>

#include "absl/strings/str_replace.h"
#include "report/report.h"

namespace anvil::report {

std::vector<std::string> Regimes() {
  const google::protobuf::Descriptor* d = v1::Timings::descriptor();
  std::vector<std::string> graph, other;
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->message_type() != v1::TimingStats::descriptor()) continue;
    std::string name = absl::StrReplaceAll(f->name(), {{"_", "-"}});
    (name.rfind("graph", 0) == 0 ? graph : other).push_back(std::move(name));
  }
  // The default ranking regime (graph-cold) first, then the rest as declared.
  auto cold = std::find(graph.begin(), graph.end(), "graph-cold");
  if (cold != graph.end()) std::rotate(graph.begin(), cold, cold + 1);
  graph.insert(graph.end(), other.begin(), other.end());
  return graph;
}

const v1::TimingStats* RegimeStats(const v1::Timings& t, const std::string& regime) {
  const google::protobuf::FieldDescriptor* f =
      v1::Timings::descriptor()->FindFieldByName(absl::StrReplaceAll(regime, {{"-", "_"}}));
  if (f == nullptr || f->message_type() != v1::TimingStats::descriptor()) return nullptr;
  return static_cast<const v1::TimingStats*>(&t.GetReflection()->GetMessage(t, f));
}

double RegimeUs(const v1::Timings& t, const std::string& regime) {
  const v1::TimingStats* s = RegimeStats(t, regime);
  return s == nullptr ? 0 : s->median_us();
}

double BestBaselineUs(const v1::Measurement& m, const std::string& regime, std::string* name,
                      double* spread) {
  double best = 0;
  for (const v1::Baseline& b : m.baselines()) {
    const v1::TimingStats* s = RegimeStats(b.timings(), regime);
    if (s == nullptr || s->median_us() <= 0 || (best > 0 && s->median_us() >= best)) continue;
    best = s->median_us();
    if (name != nullptr) *name = b.name();
    if (spread != nullptr) *spread = s->spread();
  }
  return best;
}

double ProblemFlops(const v1::Problem& p) {
  return 2.0 * double(p.shape().m()) * double(p.shape().n()) * double(p.shape().k());
}

double ProblemBytes(const v1::Problem& p) {
  const double m = p.shape().m(), n = p.shape().n(), k = p.shape().k();
  return 2.0 * (m * k + n * k + m * n);
}

}  // namespace anvil::report
