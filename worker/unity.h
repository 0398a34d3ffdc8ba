// The unity translation unit: several configurations of one candidate source
// compiled by a single nvcc run, each in a namespace of its own, and what
// turns its output back into one shared object and one ptxas report per
// configuration (worker/BUILDS.md). Pure functions; thread-safe.
#ifndef ANVIL_WORKER_UNITY_H_
#define ANVIL_WORKER_UNITY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "anvil/v1/types.pb.h"
#include "worker/unity_source.h"

namespace anvil {

// The functions a candidate exports with C linkage (docs/DESIGN.md, "A
// candidate"; the runner's CandidateLibrary::Open looks these names up).
// extern "C" ignores namespaces, so in a unity translation unit each
// configuration's copy is renamed by a macro and its shared object maps the
// real name back at link time.
inline constexpr const char* kCandidateAbi[] = {"anvil_workspace_bytes", "anvil_gemm"};

// "anvil_unity_<i>": the namespace around configuration i's copy of the source.
std::string UnityNamespace(size_t i);
// Configuration i's name for an ABI function: "anvil_unity_<i>_anvil_gemm".
std::string UnitySymbol(size_t i, absl::string_view abi);

// The translation unit: `prelude` (UnitySource::Prelude, the same for every
// configuration) at global scope; a check that no macro the source defines
// comes from a header; a global declaration of each of the source's
// global-scope names (UnitySource::global_names and global_types: a clash
// with a header's of the same name fails the compile); then for
// each configuration i: #define of its macros (`configs[i]`, exactly what its
// -D flags give) and of the ABI renames, `namespace anvil_unity_<i> {`,
// `#line 1 "<file_name>"`, the source, `}`, and #undef of all those macros and
// of every macro the source defines.
std::string UnityTranslationUnit(const UnitySource& analysis, absl::string_view source,
                                 absl::string_view prelude, const std::vector<MacroDefines>& configs,
                                 absl::string_view file_name = "candidate.cu");

// nvcc arguments for configuration i's link: its renamed ABI functions
// exported under their real names (a linker alias, --defsym). A configuration
// that does not define one fails its link.
std::vector<std::string> UnityLinkAliases(size_t i);

// The configuration a kernel belongs to: the i of the anvil_unity_<i>
// namespace in its mangled name, or -1 when it carries none.
int UnityConfigOf(absl::string_view mangled);

// A unity compile's ptxas report split per configuration, in report order:
// each kernel goes to the configuration whose namespace its name carries; one
// that carries none (a header's template instantiated with global types only)
// goes to every configuration, since any of them may launch it.
std::vector<std::vector<v1::KernelUsage>> SplitUsage(const std::vector<v1::KernelUsage>& usage,
                                                     size_t configs);

}  // namespace anvil

#endif  // ANVIL_WORKER_UNITY_H_
