// Flags shared by the CUDA probes in this folder (CLI11): a problem shape given
// as MxNxK and a layout, nt or nn. Each probe is one .cu file and one target
// (bench/CMakeLists.txt).
#ifndef ANVIL_BENCH_PROBE_ARGS_H_
#define ANVIL_BENCH_PROBE_ARGS_H_

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

struct ProbeShape {
  int m = 0, n = 0, k = 0;
};

// --shape MxNxK (required) on app, parsed into *shape.
inline void AddShapeOption(CLI::App& app, ProbeShape* shape) {
  app.add_option_function<std::string>(
         "--shape",
         [shape](const std::string& s) {
           char x1 = 0, x2 = 0;
           if (std::sscanf(s.c_str(), "%d%c%d%c%d", &shape->m, &x1, &shape->n, &x2, &shape->k) != 5 ||
               x1 != 'x' || x2 != 'x' || shape->m < 1 || shape->n < 1 || shape->k < 1) {
             throw CLI::ValidationError("--shape", "expected MxNxK with positive sizes, got " + s);
           }
         },
         "problem shape MxNxK")
      ->required();
}

// --layout nt|nn on app (default nt); *nt is true for nt.
inline void AddLayoutOption(CLI::App& app, std::string* layout) {
  app.add_option("--layout", *layout, "nt: C = A B^T (B stored N x K); nn: C = A B")
      ->check(CLI::IsMember({"nt", "nn"}));
}

#endif  // ANVIL_BENCH_PROBE_ARGS_H_
