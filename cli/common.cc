
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cli/cli.h"

namespace anvil::cli {

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, o);
  return json;
}

int Report(const absl::Status& status, ExitCode code) {
  std::cerr << "anvil: " << status.message() << "\n";
  return code;
}

std::string NoGpuAdvice() {
  return "Measuring needs an NVIDIA GPU (Hopper, sm_90a). Run Anvil on a GPU node: build "
         "there, or pack this build with `deploy/bundle` and run the bundle's `bin/anvil` "
         "on the node (see README.md, \"Workers on GPU nodes\").";
}

absl::StatusOr<std::string> ClientToken(const Globals& g) {
  if (!g.token_file.empty()) {
    std::ifstream in(g.token_file);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read --token-file ", g.token_file));
    std::stringstream ss;
    ss << in.rdbuf();
    return std::string(absl::StripAsciiWhitespace(ss.str()));
  }
  const char* env = std::getenv("ANVIL_AUTH_TOKEN");
  return std::string(env ? env : "");
}

int RunNotYet(const Globals& g, const std::string& what, const std::string& instead) {
  if (g.json) {
    std::cout << "{\"available\":false,\"command\":\"" << what << "\"}\n";
  }
  std::cerr << "anvil: " << what << " is not built yet; " << instead << ".\n";
  return kUnavailable;
}

}  // namespace anvil::cli
