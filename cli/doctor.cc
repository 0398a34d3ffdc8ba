// anvil doctor: what this machine offers Anvil, and what is missing.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "cli/cli.h"
#include "node/node_facts.h"
#include "sandbox/sandbox.h"
#include "seeds/seeds.h"
#include "store/store.h"
#include "worker/build_cache.h"
#include "worker/local_evaluator.h"
#include "worker/toolchain.h"

namespace anvil::cli {
namespace {

using nlohmann::json;

// CUPTI is loaded, not linked, so the doctor can report its absence.
json CuptiReport() {
  for (const char* name : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"}) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      using GetVersion = int (*)(uint32_t*);
      auto fn = reinterpret_cast<GetVersion>(dlsym(h, "cuptiGetVersion"));
      uint32_t v = 0;
      if (fn) fn(&v);
      return {{"found", true}, {"library", name}, {"api_version", v}};
    }
  }
  return {{"found", false}, {"why", "libcupti not found (LD_LIBRARY_PATH, /usr/local/cuda/lib64)"}};
}

json GpuReport() {
  json out = {{"count", 0}, {"devices", json::array()}};
  const node::Versions versions = node::ReadVersions();
  out["driver_cuda_version"] = versions.driver;
  out["runtime_version"] = versions.runtime;
  std::string why;
  int n = node::CountGpus(&why);
  out["count"] = n;
  if (n == 0) out["why"] = why;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out["devices"].push_back({{"ordinal", i}, {"name", p.name},
                              {"compute_capability", absl::StrCat(p.major, ".", p.minor)},
                              {"sms", p.multiProcessorCount},
                              {"memory_gib", p.totalGlobalMem / double(1 << 30)},
                              {"l2_mib", p.l2CacheSize / double(1 << 20)}});
  }
  return out;
}

json DatabaseReport(const std::string& path) {
  if (!std::filesystem::exists(path)) return {{"path", path}, {"exists", false}};
  StoreOptions o;
  o.read_only = true;
  o.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(path, o);
  if (!s.ok()) return {{"path", path}, {"exists", true}, {"error", std::string(s.status().message())}};
  json out = {{"path", path}, {"exists", true}, {"schema_version", (*s)->SchemaVersion()}};
  if (absl::StatusOr<StoreCounts> c = (*s)->Counts(); c.ok()) {
    out["candidates"] = c->candidates;
    out["measurements"] = c->measurements;
    out["problems"] = c->problems;
  }
  return out;
}

// Which isolation untrusted builds and runs get here, and why; whether the
// sandbox's uid reaches what it must (bundle, toolchain, build cache).
json SandboxReport(const Globals& g, const Toolchain& t) {
  const sandbox::Capabilities& caps = sandbox::Probe();
  json out = {{"namespaces", caps.namespaces}, {"cgroups", caps.cgroups},
              {"bwrap", caps.bwrap_path}, {"bwrap_found_by", caps.bwrap_found_by},
              {"why_not", caps.why_not}, {"job_uid", sandbox::DefaultJobUid()}};
  if (caps.namespaces) {
    out["isolation"] = "namespaces";
    out["isolation_why"] = "bubblewrap (" + caps.bwrap_found_by + ") works here: user, mount, pid, "
                           "network, ipc and uts namespaces for every build and run";
  } else if (g.allow_no_isolation) {
    out["isolation"] = "none";
    out["isolation_why"] = "namespaces refused (" + caps.why_not + "); --allow-no-isolation: "
                           "builds and runs get process-level protections only";
  } else {
    out["isolation"] = "refused";
    out["isolation_why"] = "namespaces refused (" + caps.why_not + "); builds and runs will not "
                           "start (fix the cause, or pass --allow-no-isolation)";
  }
  const std::string cache = DefaultBuildCacheDir();
  absl::Status ready = CheckNodeReady(t, cache, /*allow_no_isolation=*/true);
  out["build_cache"] = cache;
  out["reachable"] = ready.ok();
  if (!ready.ok()) out["reachable_why"] = std::string(ready.message());
  return out;
}

json Collect(const Globals& g) {
  json r;
  absl::StatusOr<Toolchain> t = Toolchain::Find();
  if (t.ok()) {
    r["nvcc"] = {{"path", t->nvcc}, {"version", t->nvcc_version}};
    r["cutlass"] = t->cutlass_dir.empty()
                       ? json{{"found", false}, {"why", "run scripts/setup.sh or set ANVIL_CUTLASS_DIR"}}
                       : json{{"found", true}, {"dir", t->cutlass_dir}, {"version", t->cutlass_version}};
    r["runner"] = {{"path", t->runner}, {"found", access(t->runner.c_str(), X_OK) == 0}};
  } else {
    r["nvcc"] = {{"found", false}, {"why", std::string(t.status().message())}};
  }
  int cublas = 0;
  cublasGetProperty(MAJOR_VERSION, &cublas);
  int minor = 0, patch = 0;
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  r["cublas"] = absl::StrCat(cublas, ".", minor, ".", patch);
  r["cupti"] = CuptiReport();
  r["gpus"] = GpuReport();
  r["sandbox"] = SandboxReport(g, t.ok() ? *t : Toolchain());
  std::string seeds_dir = DefaultSeedsDir(Toolchain::ExecutableDir());
  absl::StatusOr<std::vector<SeedFamily>> seeds = LoadSeeds(seeds_dir);
  r["seeds"] = {{"dir", seeds_dir}, {"families", seeds.ok() ? seeds->size() : 0}};
  if (!seeds.ok()) r["seeds"]["error"] = std::string(seeds.status().message());
  r["database"] = DatabaseReport(g.db);
  return r;
}

void PrintLine(const std::string& what, const std::string& text) {
  std::cout << "  " << what << std::string(what.size() < 10 ? 10 - what.size() : 1, ' ') << text << "\n";
}

}  // namespace

// --migrate: the store opened read-write once, which applies the schema
// steps it lacks (store/SCHEMA.md); the commands that only read it refuse an
// older schema rather than change a file behind the user's back.
int MigrateStore(const Globals& g) {
  StoreOptions o;
  o.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(g.db, o);
  if (!s.ok()) return Report(s.status(), kDatabase);
  std::cout << "anvil doctor: " << g.db << " is at schema version " << (*s)->SchemaVersion()
            << ", this Anvil's\n";
  return kOk;
}

int RunDoctor(const Globals& g, bool migrate) {
  if (migrate) return MigrateStore(g);
  json r = Collect(g);
  if (g.json) {
    std::cout << r.dump() << "\n";
    return kOk;
  }
  std::cout << "anvil doctor\n";
  PrintLine("nvcc", r["nvcc"].value("path", "not found") + " " + r["nvcc"].value("version", r["nvcc"].value("why", "")));
  PrintLine("cutlass", r["cutlass"].value("found", false) ? r["cutlass"]["dir"].get<std::string>() + " (" + r["cutlass"]["version"].get<std::string>() + ")" : "not found: " + r["cutlass"].value("why", ""));
  PrintLine("cublas", r["cublas"].get<std::string>());
  PrintLine("cupti", r["cupti"]["found"].get<bool>() ? r["cupti"]["library"].get<std::string>() + " (API " + std::to_string(r["cupti"]["api_version"].get<uint32_t>()) + ")" : "not found: " + r["cupti"]["why"].get<std::string>());
  const json& gpus = r["gpus"];
  PrintLine("driver", gpus["driver_cuda_version"].get<int>() ? "CUDA " + std::to_string(gpus["driver_cuda_version"].get<int>()) : "no NVIDIA driver");
  if (gpus["count"].get<int>() == 0) {
    PrintLine("gpus", "none (" + gpus.value("why", "") + ")");
    std::cout << "            " << NoGpuAdvice() << "\n";
  }
  for (const json& d : gpus["devices"]) {
    PrintLine("gpu " + std::to_string(d["ordinal"].get<int>()), d["name"].get<std::string>() + ", sm_" + d["compute_capability"].get<std::string>() + ", " + std::to_string(d["sms"].get<int>()) + " SMs, " + std::to_string(int(d["memory_gib"].get<double>())) + " GiB");
  }
  PrintLine("runner", r.contains("runner") ? r["runner"]["path"].get<std::string>() + (r["runner"]["found"].get<bool>() ? "" : " (missing)") : "?");
  const json& sb = r["sandbox"];
  PrintLine("isolation", sb["isolation"].get<std::string>() + ": " + sb["isolation_why"].get<std::string>());
  PrintLine("sandbox", std::string(sb["namespaces"].get<bool>() ? "namespaces" : "no namespaces") + ", " + (sb["cgroups"].get<bool>() ? "cgroups" : "no cgroups") + "; bwrap " + (sb["bwrap"].get<std::string>().empty() ? "not found" : sb["bwrap"].get<std::string>() + " (" + sb["bwrap_found_by"].get<std::string>() + ")") + (sb["why_not"].get<std::string>().empty() ? "" : " (" + sb["why_not"].get<std::string>() + ")"));
  PrintLine("jobs", "run as uid " + std::to_string(sb["job_uid"].get<int64_t>()) + "; build cache " + sb["build_cache"].get<std::string>() + (sb["reachable"].get<bool>() ? "" : "\n            NOT USABLE: " + sb["reachable_why"].get<std::string>()));
  PrintLine("seeds", r["seeds"]["dir"].get<std::string>() + " (" + std::to_string(r["seeds"]["families"].get<size_t>()) + " families)");
  const json& db = r["database"];
  PrintLine("database", db["path"].get<std::string>() + (!db["exists"].get<bool>() ? " (not created yet)" : db.contains("error") ? " (" + db["error"].get<std::string>() + ")" : " (schema v" + std::to_string(db["schema_version"].get<int>()) + ", " + std::to_string(db.value("measurements", 0)) + " measurements)"));
  return kOk;
}

}  // namespace anvil::cli
