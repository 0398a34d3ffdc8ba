// Internal to server/fleet/: helpers the Fleet's files share.
#ifndef ANVIL_SERVER_FLEET_FLEET_INTERNAL_H_
#define ANVIL_SERVER_FLEET_FLEET_INTERNAL_H_

#include <cstdint>
#include <string>

#include "store/records.h"

namespace anvil::fleet_internal {

std::string RandomHex(int bytes);
bool IsHexDigest(const std::string& s);
// Unquarantined and heard from within the lease.
bool Alive(const WorkerRecord& w, int64_t now_ms, int64_t lease_ms);
int64_t NowMs();

}  // namespace anvil::fleet_internal

#endif  // ANVIL_SERVER_FLEET_FLEET_INTERNAL_H_
