#include "server/rpc/client.h"

#include <fstream>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "anvil/v1/fleet.grpc.pb.h"
#include "anvil/v1/kernel_search.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "proto/grpc_status.h"

namespace anvil {

struct KernelSearchClient::Impl {
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::KernelSearch::Stub> stub;
  std::unique_ptr<v1::Fleet::Stub> fleet;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;

  void Prepare(grpc::ClientContext& ctx, absl::Duration timeout) const {
    if (!options.token.empty()) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", options.token));
    if (timeout != absl::InfiniteDuration()) ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }

  template <class Req, class Resp, class Call>
  absl::StatusOr<Resp> Unary(const Req& request, Call call) {
    return UnaryOn<Req, Resp>(*stub, request, call);
  }

  template <class Req, class Resp, class Stub, class Call>
  absl::StatusOr<Resp> UnaryOn(Stub& on, const Req& request, Call call) {
    grpc::ClientContext ctx;
    Prepare(ctx, options.timeout);
    Resp response;
    grpc::Status st = (on.*call)(&ctx, request, &response);
    if (!st.ok()) return rpc::FromGrpc(st);
    return response;
  }

  absl::Status Read(grpc::ClientContext& ctx, grpc::ClientReader<v1::JobProgress>& reader,
                    const ProgressHandler& on) {
    v1::JobProgress p;
    while (reader.Read(&p)) {
      if (!on(p)) {
        ctx.TryCancel();  // detach: the job goes on
        reader.Finish().IgnoreError();
        return absl::OkStatus();
      }
    }
    return rpc::FromGrpc(reader.Finish());
  }
};

KernelSearchClient::KernelSearchClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelSearchClient::~KernelSearchClient() = default;

absl::StatusOr<std::unique_ptr<KernelSearchClient>> KernelSearchClient::Connect(
    const ClientOptions& options) {
  if (options.target.empty()) return absl::InvalidArgumentError("--server needs HOST:PORT");
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      std::ifstream in(options.ca_file);
      if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read CA file ", options.ca_file));
      std::stringstream ss;
      ss << in.rdbuf();
      ssl.pem_root_certs = ss.str();
    }
    creds = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);  // keeps a long watch alive through idle NATs
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->channel = grpc::CreateCustomChannel(options.target, creds, args);
  impl->stub = v1::KernelSearch::NewStub(impl->channel);
  impl->fleet = v1::Fleet::NewStub(impl->channel);
  impl->health = grpc::health::v1::Health::NewStub(impl->channel);
  return std::unique_ptr<KernelSearchClient>(new KernelSearchClient(std::move(impl)));
}

absl::Status KernelSearchClient::OptimizeKernel(const v1::OptimizeKernelRequest& request,
                                                const ProgressHandler& on) {
  grpc::ClientContext ctx;
  impl_->Prepare(ctx, impl_->options.stream_timeout);
  std::unique_ptr<grpc::ClientReader<v1::JobProgress>> reader = impl_->stub->OptimizeKernel(&ctx, request);
  return impl_->Read(ctx, *reader, on);
}

absl::Status KernelSearchClient::WatchJob(const std::string& job_id, const ProgressHandler& on) {
  grpc::ClientContext ctx;
  impl_->Prepare(ctx, impl_->options.stream_timeout);
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  std::unique_ptr<grpc::ClientReader<v1::JobProgress>> reader = impl_->stub->WatchJob(&ctx, request);
  return impl_->Read(ctx, *reader, on);
}

absl::StatusOr<v1::Job> KernelSearchClient::GetJob(const std::string& job_id) {
  v1::GetJobRequest r;
  r.set_job_id(job_id);
  return impl_->Unary<v1::GetJobRequest, v1::Job>(r, &v1::KernelSearch::Stub::GetJob);
}

absl::StatusOr<v1::ListJobsResponse> KernelSearchClient::ListJobs(const v1::ListJobsRequest& r) {
  return impl_->Unary<v1::ListJobsRequest, v1::ListJobsResponse>(r, &v1::KernelSearch::Stub::ListJobs);
}

absl::StatusOr<v1::Job> KernelSearchClient::CancelJob(const std::string& job_id) {
  v1::CancelJobRequest r;
  r.set_job_id(job_id);
  return impl_->Unary<v1::CancelJobRequest, v1::Job>(r, &v1::KernelSearch::Stub::CancelJob);
}

absl::StatusOr<v1::ListKernelsResponse> KernelSearchClient::ListKernels(const v1::ListKernelsRequest& r) {
  return impl_->Unary<v1::ListKernelsRequest, v1::ListKernelsResponse>(
      r, &v1::KernelSearch::Stub::ListKernels);
}

absl::StatusOr<v1::ListWorkersResponse> KernelSearchClient::ListWorkers() {
  return impl_->UnaryOn<v1::ListWorkersRequest, v1::ListWorkersResponse>(
      *impl_->fleet, v1::ListWorkersRequest(), &v1::Fleet::Stub::ListWorkers);
}

absl::StatusOr<v1::WorkerStatus> KernelSearchClient::ClearQuarantine(const std::string& worker_id) {
  v1::ClearQuarantineRequest r;
  r.set_worker_id(worker_id);
  return impl_->UnaryOn<v1::ClearQuarantineRequest, v1::WorkerStatus>(*impl_->fleet, r,
                                                                      &v1::Fleet::Stub::ClearQuarantine);
}

absl::StatusOr<v1::Kernel> KernelSearchClient::GetKernel(const v1::GetKernelRequest& r) {
  return impl_->Unary<v1::GetKernelRequest, v1::Kernel>(r, &v1::KernelSearch::Stub::GetKernel);
}

absl::StatusOr<v1::ExportLibraryResponse> KernelSearchClient::ExportLibrary(
    const v1::ExportLibraryRequest& r) {
  return impl_->Unary<v1::ExportLibraryRequest, v1::ExportLibraryResponse>(
      r, &v1::KernelSearch::Stub::ExportLibrary);
}

absl::StatusOr<bool> KernelSearchClient::Serving() {
  grpc::ClientContext ctx;
  impl_->Prepare(ctx, impl_->options.timeout);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("anvil.v1.KernelSearch");
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status st = impl_->health->Check(&ctx, request, &response);
  if (!st.ok()) return rpc::FromGrpc(st);
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

}  // namespace anvil
