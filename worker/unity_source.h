// What a unity build needs to know about one candidate source before it puts
// several configurations of it into one translation unit (worker/BUILDS.md).
//
// A unity translation unit includes the source's headers once, at global
// scope, ahead of every configuration (the prelude); each configuration's copy
// of the source then finds them already included. That is only the same as
// compiling the source alone when the headers see what they would have seen
// alone. UnitySource checks the source once for what would break this (code
// before the last #include, a conditional there on a name a header could
// define, #undef of a header's macro, __COUNTER__, ...) and, per
// configuration, evaluates the directives before the last #include as the
// preprocessor would with that configuration's -D macros: which headers it
// includes, and which of the source's own non-ANVIL_ macros are defined at
// each (03_wgmma_tma defines CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED before the
// CuTe header for some tile widths). The resulting prelude text is part of the
// group key: configurations are grouped only with others whose headers see
// exactly the same. Anything it cannot evaluate exactly (a function-like macro
// in #if, a name that is not ANVIL_ and not the source's own) makes the source
// or the configuration build alone.
//
// Pure; thread-safe once constructed (const).
#ifndef ANVIL_WORKER_UNITY_SOURCE_H_
#define ANVIL_WORKER_UNITY_SOURCE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace anvil {

// Macro name -> body, as `-DNAME=BODY` defines it ("1" for `-DNAME`), in flag order.
using MacroDefines = std::vector<std::pair<std::string, std::string>>;

class UnitySource {
 public:
  // Reads `source` (it has passed the source policy). Never fails: a source it
  // cannot group says why in ineligible().
  explicit UnitySource(absl::string_view source);

  // Empty when configurations of this source may share a translation unit;
  // otherwise why each is compiled alone.
  const std::string& ineligible() const { return ineligible_; }

  // The prelude for the configuration whose -D macros are `defines`: its
  // active #include lines in order, each preceded by the source's non-ANVIL_
  // macros in force there, then #undef of those. FailedPrecondition when this
  // configuration must be compiled alone (an #error it reaches, a conditional
  // it cannot evaluate exactly). REQUIRES: ineligible() is empty.
  absl::StatusOr<std::string> Prelude(const MacroDefines& defines) const;

  // Every macro name the source #defines anywhere (sorted): undefined after
  // each configuration, so the next starts as the source alone would.
  const std::vector<std::string>& defined_macros() const { return defined_; }
  // Names the source declares at global scope after its includes, sorted:
  // functions, variables, namespaces, aliases (global_names) and classes and
  // enumerations (global_types). Inside a configuration's namespace such a
  // name would hide a header's global of the same name instead of overloading
  // or clashing with it, so the translation unit declares each at global scope
  // first: a clash there fails the unity compile (and the group falls back to
  // building alone).
  const std::vector<std::string>& global_names() const { return global_names_; }
  const std::vector<std::string>& global_types() const { return global_types_; }

 private:
  struct Directive {
    std::string name;  // "define", "if", "include", ...
    std::string rest;  // the text after the name, comments removed, trimmed
    int line = 0;
  };
  void ReadPreamble(absl::string_view source);

  std::string ineligible_;
  std::vector<Directive> preamble_;  // the directives up to the last #include
  std::vector<std::string> defined_;
  std::vector<std::string> global_names_;
  std::vector<std::string> global_types_;
};

}  // namespace anvil

#endif  // ANVIL_WORKER_UNITY_SOURCE_H_
