#include "proto/candidate.h"

#include <openssl/evp.h>

#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "proto/problem.h"

namespace anvil {

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

std::string NormaliseSource(absl::string_view source) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(source, '\n')) {
    absl::StrAppend(&out, absl::StripTrailingAsciiWhitespace(line), "\n");
  }
  return std::string(absl::StripTrailingAsciiWhitespace(out)) + "\n";
}

void AssignCandidateId(v1::Candidate& c) {
  std::map<std::string, std::string> params(c.params().begin(), c.params().end());
  std::string key = absl::StrCat("arch=", c.arch(), "\nlayout=", LayoutName(c.layout()),
                                 "\nflags=", c.flags(), "\n");
  for (const auto& [k, v] : params) absl::StrAppend(&key, "param ", k, "=", v, "\n");
  absl::StrAppend(&key, "source\n", NormaliseSource(c.source()));
  c.set_id(Sha256Hex(key));
}

std::string CandidateDisplayName(const v1::Candidate& c) {
  std::string name = c.family().empty() ? "kernel" : c.family();
  std::map<std::string, std::string> params(c.params().begin(), c.params().end());
  for (const auto& [k, v] : params) {
    absl::StrAppend(&name, "_", absl::AsciiStrToLower(k), v);
  }
  absl::StrAppend(&name, "_", LayoutName(c.layout()), "_", c.id().substr(0, 8));
  return name;
}

}  // namespace anvil
