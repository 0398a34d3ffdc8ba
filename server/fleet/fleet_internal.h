// Internal to server/fleet/: helpers the Fleet's files share.
#ifndef ANVIL_SERVER_FLEET_FLEET_INTERNAL_H_
#define ANVIL_SERVER_FLEET_FLEET_INTERNAL_H_

#include <cstdint>
#include <string>


namespace anvil::fleet_internal {

bool IsHexDigest(const std::string& s);  // 64 lowercase hex digits
int64_t NowMs();

}  // namespace anvil::fleet_internal

#endif  // ANVIL_SERVER_FLEET_FLEET_INTERNAL_H_
