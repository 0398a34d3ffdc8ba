// Candidate identity: the id is a hash of normalised source, flags and arch,
// so the same kernel proposed twice is recognised; the display name is built
// from its parameters. Pure functions; thread-safe.
#ifndef ANVIL_PROTO_CANDIDATE_H_
#define ANVIL_PROTO_CANDIDATE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "anvil/v1/types.pb.h"

namespace anvil {

// Hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

// Source with CRLF turned to LF and trailing white space on each line and at
// the end removed: edits that change nothing a compiler sees hash the same.
std::string NormaliseSource(absl::string_view source);

// Sets candidate.id from its normalised source, params, layout, flags and arch.
void AssignCandidateId(v1::Candidate& candidate);

// "<family>_<k1><v1>_<k2><v2>..._<layout>_<id8>", params in name order;
// "<family>" defaults to "kernel".
std::string CandidateDisplayName(const v1::Candidate& candidate);

}  // namespace anvil

#endif  // ANVIL_PROTO_CANDIDATE_H_
