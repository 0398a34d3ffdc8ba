#include "server/rpc/metrics.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include <httplib.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/numbers.h"
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
  prometheus::Counter& overhead_s = prometheus::BuildCounter().Name("anvil_coordinator_overhead_seconds_total")
      .Help("Job threads' time outside the evaluator and the proposers").Register(*registry).Add({});
  prometheus::Counter& coordinated = prometheus::BuildCounter().Name("anvil_coordinator_candidates_total")
      .Help("Candidates sent to the evaluator by job threads").Register(*registry).Add({});
  prometheus::Counter& evaluator_s = prometheus::BuildCounter().Name("anvil_evaluator_wait_seconds_total")
      .Help("Job threads' time waiting on builds and measurements").Register(*registry).Add({});
  HttpPages pages;
  std::unique_ptr<httplib::Server> http;
  std::thread http_thread;  // runs http's accept loop
  int port = 0;

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

// Every path of the port: /metrics from the registry, the rest from `pages`.
void Handle(ServerMetrics::Impl& impl, const httplib::Request& req, httplib::Response& res) {
  const size_t q = req.target.find('?');
  HttpGet get{req.method, req.path, q == std::string::npos ? "" : req.target.substr(q + 1),
              req.get_header_value("Authorization")};
  HttpAnswer a;
  if (get.path == "/metrics") {
    a = {true, 200, "text/plain; version=0.0.4; charset=utf-8",
         prometheus::TextSerializer().Serialize(impl.Collect())};
  } else if (impl.pages) {
    a = impl.pages(get);
  }
  if (!a.handled) a = {true, 404, "text/plain; charset=utf-8", "not found: /metrics, /status\n"};
  res.status = a.code;
  res.set_header("Cache-Control", "no-store");
  res.set_content(a.body, a.content_type.c_str());
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerMetrics>> ServerMetrics::Start(
    const std::string& listen, std::function<MetricsSnapshot()> snapshot, HttpPages pages) {
  auto impl = std::make_shared<Impl>();
  impl->snapshot = std::move(snapshot);
  impl->pages = std::move(pages);
  if (!listen.empty()) {
    const size_t colon = listen.rfind(':');
    int port = -1;
    if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0) {
      return absl::InvalidArgumentError(absl::StrCat("metrics.listen ", listen, ": not host:port"));
    }
    std::string host = listen.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    impl->http = std::make_unique<httplib::Server>();
    Impl* raw = impl.get();
    impl->http->Get(".*", [raw](const httplib::Request& req, httplib::Response& res) { Handle(*raw, req, res); });
    impl->port = port == 0 ? impl->http->bind_to_any_port(host) : impl->http->bind_to_port(host, port) ? port : -1;
    if (impl->port <= 0) {
      return absl::UnavailableError(absl::StrCat("metrics.listen ", listen, ": cannot listen there"));
    }
    impl->http_thread = std::thread([raw] { raw->http->listen_after_bind(); });
    // stop() before the loop runs would be lost (and the destructor's join hang).
    while (!impl->http->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<ServerMetrics>(new ServerMetrics(std::move(impl)));
}

// The HTTP server stops (joining its threads) before the registry goes away.
ServerMetrics::~ServerMetrics() {
  if (!impl_->http) return;
  impl_->http->stop();
  if (impl_->http_thread.joinable()) impl_->http_thread.join();
  impl_->http.reset();
}

int ServerMetrics::port() const { return impl_->http ? impl_->port : 0; }

void ServerMetrics::CandidateBuilt(bool ok, double seconds) {
  impl_->built.Add({{"outcome", ok ? "ok" : "failed"}}).Increment();
  impl_->build_s.Observe(seconds);
}

void ServerMetrics::CandidateMeasured(const std::string& verdict, double seconds) {
  impl_->measured.Add({{"verdict", verdict}}).Increment();
  impl_->measure_s.Observe(seconds);
}

void ServerMetrics::Rewarded(double value) { impl_->reward.Observe(value); }

void ServerMetrics::CoordinatorSpent(double overhead_seconds, double evaluator_seconds, int candidates) {
  if (overhead_seconds > 0) impl_->overhead_s.Increment(overhead_seconds);
  if (evaluator_seconds > 0) impl_->evaluator_s.Increment(evaluator_seconds);
  if (candidates > 0) impl_->coordinated.Increment(candidates);
}

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
