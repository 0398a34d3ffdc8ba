#include "server/rpc/metrics.h"

#include <exception>
#include <filesystem>

#include <CivetServer.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"

namespace anvil::rpc {
namespace {

// Build and measure latencies span milliseconds (a fake evaluator, a cache
// hit) to minutes (nvcc on a large template, a slow runner).
const prometheus::Histogram::BucketBoundaries kSecondsBuckets = {
    0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320};
const prometheus::Histogram::BucketBoundaries kRewardBuckets = {
    -2, -1, -0.5, 0, 0.5, 0.8, 0.9, 1, 1.05, 1.1, 1.2, 1.5, 2};

}  // namespace

// The registry, and at each scrape the gauges refreshed from the snapshot.
struct ServerMetrics::Impl : prometheus::Collectable {
  std::function<MetricsSnapshot()> snapshot;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Gauge>& jobs =
      prometheus::BuildGauge().Name("anvil_jobs").Help("Jobs in the store by state").Register(*registry);
  prometheus::Gauge& queue = prometheus::BuildGauge().Name("anvil_job_queue_depth")
      .Help("Jobs accepted and waiting for a slot").Register(*registry).Add({});
  prometheus::Gauge& streams = prometheus::BuildGauge().Name("anvil_progress_streams")
      .Help("Open OptimizeKernel and WatchJob streams").Register(*registry).Add({});
  prometheus::Gauge& store = prometheus::BuildGauge().Name("anvil_store_bytes")
      .Help("Size of the SQLite store with its WAL").Register(*registry).Add({});
  prometheus::Family<prometheus::Counter>& built = prometheus::BuildCounter()
      .Name("anvil_candidates_built_total").Help("Candidates built, by outcome").Register(*registry);
  prometheus::Family<prometheus::Counter>& measured = prometheus::BuildCounter()
      .Name("anvil_candidates_measured_total").Help("Measurements taken, by verdict").Register(*registry);
  prometheus::Histogram& build_s = prometheus::BuildHistogram().Name("anvil_build_seconds")
      .Help("Wall time of one candidate's build").Register(*registry).Add({}, kSecondsBuckets);
  prometheus::Histogram& measure_s = prometheus::BuildHistogram().Name("anvil_measure_seconds")
      .Help("Wall time of one measurement").Register(*registry).Add({}, kSecondsBuckets);
  prometheus::Histogram& reward = prometheus::BuildHistogram().Name("anvil_reward")
      .Help("Rewards given to candidates").Register(*registry).Add({}, kRewardBuckets);
  prometheus::Family<prometheus::Counter>& rpcs = prometheus::BuildCounter()
      .Name("anvil_rpcs_total").Help("Finished RPCs by method and status code").Register(*registry);
  HttpPages pages;
  std::unique_ptr<CivetServer> http;
  std::unique_ptr<CivetHandler> handler;

  std::vector<prometheus::MetricFamily> Collect() const override {
    if (snapshot) {
      MetricsSnapshot s = snapshot();
      for (const auto& [state, n] : s.jobs_by_state) jobs.Add({{"state", state}}).Set(static_cast<double>(n));
      queue.Set(static_cast<double>(s.queue_depth));
      store.Set(static_cast<double>(s.store_bytes));
    }
    return registry->Collect();
  }
};

namespace {

void Answer(mg_connection* conn, const HttpAnswer& a, bool head) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            a.code, mg_get_response_code_text(conn, a.code), a.content_type.c_str(), a.body.size());
  if (!head) mg_write(conn, a.body.data(), a.body.size());
}

// Every path of the port: /metrics from the registry, the rest from `pages`.
class MetricsHandler : public CivetHandler {
 public:
  explicit MetricsHandler(ServerMetrics::Impl* impl) : impl_(impl) {}
  bool handleGet(CivetServer*, mg_connection* conn) override { return Handle(conn, "GET"); }
  bool handleHead(CivetServer*, mg_connection* conn) override { return Handle(conn, "HEAD"); }

 private:
  bool Handle(mg_connection* conn, const char* method);
  ServerMetrics::Impl* impl_;
};

}  // namespace

bool MetricsHandler::Handle(mg_connection* conn, const char* method) {
  const mg_request_info* info = mg_get_request_info(conn);
  HttpGet get{method, info->local_uri ? info->local_uri : "", info->query_string ? info->query_string : "", ""};
  if (const char* auth = mg_get_header(conn, "Authorization")) get.authorization = auth;
  HttpAnswer a;
  if (get.path == "/metrics") {
    a = {true, 200, "text/plain; version=0.0.4; charset=utf-8",
         prometheus::TextSerializer().Serialize(impl_->Collect())};
  } else if (impl_->pages) {
    a = impl_->pages(get);
  }
  if (!a.handled) a = {true, 404, "text/plain; charset=utf-8", "not found: /metrics, /status\n"};
  Answer(conn, a, get.method == "HEAD");
  return true;
}

absl::StatusOr<std::unique_ptr<ServerMetrics>> ServerMetrics::Start(
    const std::string& listen, std::function<MetricsSnapshot()> snapshot, HttpPages pages) {
  auto impl = std::make_shared<Impl>();
  impl->snapshot = std::move(snapshot);
  impl->pages = std::move(pages);
  if (!listen.empty()) {
    try {  // civetweb reports a port it cannot bind by throwing
      impl->http = std::make_unique<CivetServer>(
          std::vector<std::string>{"listening_ports", listen, "num_threads", "4"});
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("metrics.listen ", listen, ": ", e.what()));
    }
    impl->handler = std::make_unique<MetricsHandler>(impl.get());
    impl->http->addHandler("/", impl->handler.get());
  }
  return std::unique_ptr<ServerMetrics>(new ServerMetrics(std::move(impl)));
}

// The HTTP server stops (joining its threads) before the registry goes away.
ServerMetrics::~ServerMetrics() { impl_->http.reset(); }

int ServerMetrics::port() const {
  if (!impl_->http) return 0;
  std::vector<int> ports = impl_->http->getListeningPorts();
  return ports.empty() ? 0 : ports[0];
}

void ServerMetrics::CandidateBuilt(bool ok, double seconds) {
  impl_->built.Add({{"outcome", ok ? "ok" : "failed"}}).Increment();
  impl_->build_s.Observe(seconds);
}

void ServerMetrics::CandidateMeasured(const std::string& verdict, double seconds) {
  impl_->measured.Add({{"verdict", verdict}}).Increment();
  impl_->measure_s.Observe(seconds);
}

void ServerMetrics::Rewarded(double value) { impl_->reward.Observe(value); }

void ServerMetrics::RpcFinished(const std::string& method, const std::string& code) {
  impl_->rpcs.Add({{"method", method}, {"code", code}}).Increment();
}

void ServerMetrics::StreamOpened() { impl_->streams.Increment(); }
void ServerMetrics::StreamClosed() { impl_->streams.Decrement(); }

std::string ServerMetrics::Text() {
  return prometheus::TextSerializer().Serialize(impl_->Collect());
}

int64_t StoreBytes(const std::string& db_path) {
  std::error_code ec;
  int64_t total = 0;
  for (const std::string& p : {db_path, db_path + "-wal"}) {
    const auto n = std::filesystem::file_size(p, ec);
    if (!ec) total += static_cast<int64_t>(n);
  }
  return total;
}

}  // namespace anvil::rpc
