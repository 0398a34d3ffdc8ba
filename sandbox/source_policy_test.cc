// CheckSource: what the policy accepts, each rule it enforces with its line
// and reason, tricks it sees through, and what slips past it by design.
#include "gtest/gtest.h"
#include "sandbox/sandbox.h"

namespace anvil::sandbox {
namespace {

std::vector<PolicyViolation> Check(const std::string& source) {
  absl::StatusOr<std::vector<PolicyViolation>> v = CheckSource(source, SourcePolicy{});
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<PolicyViolation>{};
}

// The rule of the only violation, or a description of what was found.
std::string OnlyRule(const std::string& source) {
  std::vector<PolicyViolation> v = Check(source);
  if (v.size() != 1) {
    std::string all = "violations:" + std::to_string(v.size());
    for (const PolicyViolation& x : v) all += " [" + x.message + "]";
    return all;
  }
  return v[0].rule;
}

TEST(SourcePolicyTest, AcceptsATypicalKernel) {
  const std::string kernel = R"(#include <cuda_fp16.h>
#include <cuda/barrier>
#include "cute/tensor.hpp"
#include <cutlass/numeric_types.h>
#include <cstdint>
#pragma once
// system("no") in a comment is fine, so is "fork(" in a string:
static const char* kNote = "fork(";
__global__ void k(const __half* a, __half* c, int n) {
  #pragma unroll 4
  for (int i = 0; i < 4; ++i) {
    unsigned r;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));
    c[i] = a[i];
  }
  int x = 1'000'000;  // digit separators are not character literals
  (void)x;
}
extern "C" size_t anvil_workspace_bytes(int M, int N, int K) { return 0; }
)";
  std::vector<PolicyViolation> v = Check(kernel);
  EXPECT_TRUE(v.empty()) << v[0].message;
}

TEST(SourcePolicyTest, ExplainsARejectedInclude) {
  std::vector<PolicyViolation> v = Check("#include <cuda_fp16.h>\n\n#include <sys/socket.h>\n");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rule, "include");
  EXPECT_EQ(v[0].line, 3);
  EXPECT_EQ(v[0].excerpt, "#include <sys/socket.h>");
  EXPECT_EQ(v[0].message, "line 3: #include <sys/socket.h> is not allowed: only CUDA toolkit, "
                          "CUTLASS/CuTe and OS-free standard headers are");
}

TEST(SourcePolicyTest, RejectsIncludeTricks) {
  EXPECT_EQ(OnlyRule("#include \"/dev/zero\"\n"), "include");
  EXPECT_EQ(OnlyRule("#include \"/dev/random\"\n"), "include");
  EXPECT_EQ(OnlyRule("#include <cuda/../../../etc/passwd>\n"), "include");
  EXPECT_EQ(OnlyRule("#define H <unistd.h>\n#include H\n"), "include");
  EXPECT_EQ(OnlyRule("#include_next <cstdint>\n"), "include");
  EXPECT_EQ(OnlyRule("#inc\\\nlude <unistd.h>\n"), "include");    // line continuation
  EXPECT_EQ(OnlyRule("%:include <unistd.h>\n"), "include");        // digraph
  EXPECT_EQ(OnlyRule("/* a */ # /* b */ include <dlfcn.h>\n"), "include");
  EXPECT_EQ(OnlyRule("#include <cstdlib>\n"), "include");
  EXPECT_EQ(OnlyRule("#embed \"/dev/urandom\"\n"), "directive");
}

TEST(SourcePolicyTest, RejectsPragmasThatChangeLinkageOrOptions) {
  EXPECT_EQ(OnlyRule("#pragma redefine_extname anvil_gemm system\n"), "pragma");
  EXPECT_EQ(OnlyRule("#pragma GCC optimize(\"O0\")\n"), "pragma");
  EXPECT_EQ(OnlyRule("_Pragma(\"push_macro(\\\"x\\\")\") int x;\n"), "pragma");
  EXPECT_TRUE(Check("#pragma nv_diag_suppress 177\n#pragma GCC diagnostic push\n").empty());
}

TEST(SourcePolicyTest, RejectsOsAccessByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"void f() { system(\"rm -rf /\"); }", "process"},
      {"void f() { popen(\"x\", \"r\"); }", "process"},
      {"void f() { fork(); }", "process"},
      {"void f() { execve(0, 0, 0); }", "process"},
      {"void f() { std::system(\"x\"); }", "process"},
      {"void f() { ::execvp(\"x\", 0); }", "process"},
      {"void* f() { return dlopen(\"x.so\", 2); }", "dlopen"},
      {"int f() { return socket(2, 1, 0); }", "socket"},
      {"int f() { return connect(3, 0, 0); }", "socket"},
      {"void f() { fopen(\"/etc/passwd\", \"r\"); }", "file_io"},
      {"void f() { open(\"/x\", 0); }", "file_io"},
      {"std::ofstream out;", "file_io"},
      {"std::ifstream in(\"/etc/passwd\");", "file_io"},
      {"const char* f() { return getenv(\"HOME\"); }", "environment"},
      {"char** f() { return environ; }", "environment"},
      {"void f() { std::thread t([] {}); }", "thread"},
      {"void f() { pthread_create(0, 0, 0, 0); }", "thread"},
      {"long f() { return syscall(41, 2, 1, 0); }", "syscall"},
      {"void f() { asm volatile(\"syscall\"); }", "inline_asm_host"},
      {"void f() { __asm__ __volatile__(\".byte 0x0f, 0x05\"); }", "inline_asm_host"},
      {"void f() { asm(\n\"movq $41, %%rax\\n\"\n); }", "inline_asm_host"},
      {"void f() { asm volatile (\n  \"int $0x80\"); }", "inline_asm_host"},
      {"#define RUN(x) system(x)\n", "process"},
  };
  for (const auto& [source, rule] : cases) EXPECT_EQ(OnlyRule(source), rule) << source;
}

TEST(SourcePolicyTest, LeavesMembersAndOtherNamespacesAlone) {
  EXPECT_TRUE(Check("void f(P p) { p.open(1); p->connect(); cute::bind(1); mine::fork(); }").empty());
  EXPECT_TRUE(Check("int exit_code; int opened; int system_id = 3;").empty());
}

TEST(SourcePolicyTest, ReportsTheRightLineAcrossCommentsAndRawStrings) {
  const std::string source =
      "/* line 1\n   line 2 */\n"
      "const char* s = R\"x(\n fork( \n)x\";\n"  // lines 3-5: a raw string
      "\n"
      "void f() { fork(); }\n";  // line 7
  std::vector<PolicyViolation> v = Check(source);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].line, 7);
  EXPECT_EQ(v[0].excerpt, "void f() { fork(); }");
}

TEST(SourcePolicyTest, RejectsOversizedSources) {
  SourcePolicy small;
  small.max_bytes = 100;
  absl::StatusOr<std::vector<PolicyViolation>> v = CheckSource(std::string(101, ' '), small);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 1u);
  EXPECT_EQ((*v)[0].rule, "size");
  small.max_bytes = 0;
  EXPECT_FALSE(CheckSource("", small).ok());
}

TEST(SourcePolicyTest, CustomIncludeListReplacesTheDefaults) {
  SourcePolicy p;
  p.allowed_include_prefixes = {"mylib/"};
  absl::StatusOr<std::vector<PolicyViolation>> v =
      CheckSource("#include <mylib/a.h>\n#include <cstdint>\n", p);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 1u);
  EXPECT_EQ((*v)[0].line, 2);
}

// The policy does not expand macros: these pass, and isolation plus seccomp
// must contain them (seccomp_test.cc runs such code).
TEST(SourcePolicyTest, MacroTricksSlipPastByDesign) {
  EXPECT_TRUE(Check("#define CAT(a, b) a##b\nvoid f() { CAT(sys, tem)(\"id\"); }").empty());
  EXPECT_TRUE(Check("#define S(x) #x\n#define X(x) S(x)\n#define C(a, b) a##b\n"
                    "void f() { asm(X(C(sys, call))); }").empty());
}

}  // namespace
}  // namespace anvil::sandbox
