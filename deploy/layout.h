// layout: where an installed Anvil finds its own pieces -- bubblewrap, the
// runner, the CUTLASS headers, the seeds, the prompts, the test candidates --
// relative to the running executable (/proc/self/exe), so that every program
// of an unpacked bundle works with no environment variable set:
//   anvil/bin/{anvil,anvil-runner,anvil-server,anvil-worker,bwrap}
//   anvil/libexec/{tests,cpu-tests,helpers,bench}/<test programs>
//   anvil/lib/<libraries>   anvil/share/anvil/{cutlass,seeds,prompts,tests}
// Environment variables (ANVIL_RUNNER, ANVIL_CUTLASS_DIR, ...) still win
// where a module reads them; this only answers "where am I installed".
// Thread-safe (reads /proc/self/exe; no state).
#ifndef ANVIL_DEPLOY_LAYOUT_H_
#define ANVIL_DEPLOY_LAYOUT_H_

#include <string>
#include <string_view>

namespace anvil::deploy {

// Directory of the running executable ("." if /proc/self/exe is unreadable).
std::string ExecutableDir();

// The install root the running executable belongs to: its directory's
// nearest ancestor (up to two levels up) that holds share/anvil. Empty when
// the program runs from a build tree.
std::string InstallRoot();

// <InstallRoot()>/<relative> when that exists, else empty.
std::string Installed(std::string_view relative);

}  // namespace anvil::deploy

#endif  // ANVIL_DEPLOY_LAYOUT_H_
