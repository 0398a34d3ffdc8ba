// Bearer-token authentication for the KernelSearch service. With a token
// configured (auth.token_file, or $ANVIL_AUTH_TOKEN), every KernelSearch call
// must carry `authorization: Bearer <token>`; the comparison is constant-time
// (SHA-256 of both sides, CRYPTO_memcmp). Health checks and reflection stay
// open so probes need no secret. Without a token every call is accepted.
// Thread-safe after construction (read-only).
#ifndef ANVIL_SERVER_RPC_AUTH_H_
#define ANVIL_SERVER_RPC_AUTH_H_

#include <array>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace grpc {
class CallbackServerContext;
}  // namespace grpc

namespace anvil::rpc {

class TokenAuth {
 public:
  // The token from `token_file` (trailing whitespace trimmed) or else
  // env["ANVIL_AUTH_TOKEN"]; none: auth off. An empty or unreadable file is an error.
  static absl::StatusOr<TokenAuth> Load(const std::string& token_file,
                                        const std::map<std::string, std::string>& env);
  static TokenAuth Off() { return TokenAuth(); }
  static TokenAuth ForToken(const std::string& token);

  bool enabled() const { return digest_.has_value(); }
  // OK, or UNAUTHENTICATED naming what is missing (never the expected token).
  absl::Status Check(const grpc::CallbackServerContext& context) const;
  // The same check on a header value ("Bearer <token>").
  absl::Status CheckHeader(std::optional<std::string> header) const;

 private:
  std::optional<std::array<unsigned char, 32>> digest_;
};

}  // namespace anvil::rpc

#endif  // ANVIL_SERVER_RPC_AUTH_H_
