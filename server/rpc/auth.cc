#include "server/rpc/auth.h"

#include <fstream>
#include <sstream>

#include <grpcpp/server_context.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace anvil::rpc {
namespace {

std::array<unsigned char, 32> Digest(absl::string_view text) {
  std::array<unsigned char, 32> d;
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d.data());
  return d;
}

}  // namespace

TokenAuth TokenAuth::ForToken(const std::string& token) {
  TokenAuth a;
  a.digest_ = Digest(token);
  return a;
}

absl::StatusOr<TokenAuth> TokenAuth::Load(const std::string& token_file,
                                          const std::map<std::string, std::string>& env) {
  std::string token;
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read auth.token_file ", token_file));
    std::stringstream ss;
    ss << in.rdbuf();
    token = std::string(absl::StripAsciiWhitespace(ss.str()));
    if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("auth.token_file ", token_file, " is empty"));
  } else if (auto it = env.find("ANVIL_AUTH_TOKEN"); it != env.end() && !it->second.empty()) {
    token = it->second;
  } else {
    return Off();
  }
  return ForToken(token);
}

absl::Status TokenAuth::CheckHeader(std::optional<std::string> header) const {
  if (!enabled()) return absl::OkStatus();
  if (!header) return absl::UnauthenticatedError("this server requires a bearer token (authorization metadata)");
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWithIgnoreCase(*header, kBearer)) {
    return absl::UnauthenticatedError("authorization metadata must be 'Bearer <token>'");
  }
  const std::array<unsigned char, 32> got = Digest(absl::string_view(*header).substr(kBearer.size()));
  if (CRYPTO_memcmp(got.data(), digest_->data(), got.size()) != 0) {
    return absl::UnauthenticatedError("the bearer token is not this server's");
  }
  return absl::OkStatus();
}

absl::Status TokenAuth::Check(const grpc::CallbackServerContext& context) const {
  if (!enabled()) return absl::OkStatus();
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return CheckHeader(std::nullopt);
  return CheckHeader(std::string(it->second.data(), it->second.size()));
}

}  // namespace anvil::rpc
