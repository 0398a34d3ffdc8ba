# Sourced by the bundle's wrappers (bin/anvil-gpu-tests, bin/anvil-node-checks)
# with $here set to the bundle root: points Anvil's programs and tests at the
# bundle's own runner, CUTLASS headers, seeds, test candidates and sandbox
# helper, and at the node's bubblewrap, nvcc and C++ compiler. Variables
# already set win.
: "${here:?set here to the bundle root before sourcing anvil-env.sh}"
export ANVIL_BUNDLE_DIR="$here"
export ANVIL_SANDBOX_BWRAP=${ANVIL_SANDBOX_BWRAP:-$(command -v bwrap || echo "$here/bin/bwrap")}
export ANVIL_RUNNER=${ANVIL_RUNNER:-$here/bin/anvil-runner}
export ANVIL_CUTLASS_DIR=${ANVIL_CUTLASS_DIR:-$here/share/anvil/cutlass}
export ANVIL_SEEDS_DIR=${ANVIL_SEEDS_DIR:-$here/share/anvil/seeds}
export ANVIL_TESTS_DIR=${ANVIL_TESTS_DIR:-$here/share/anvil/tests}
# sandbox_test runs this helper inside the sandbox; its libraries are the bundle's.
export ANVIL_SANDBOX_TEST_HELPER=${ANVIL_SANDBOX_TEST_HELPER:-$here/libexec/helpers/sandbox_test_helper}
export ANVIL_SANDBOX_TEST_LIBS=${ANVIL_SANDBOX_TEST_LIBS:-$here/lib}
# Compilers the sandbox tests drive (unset: the build machine's paths, usually absent).
if [ -z "${ANVIL_TEST_NVCC:-}" ]; then
  for n in "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" "$(command -v nvcc)"; do
    [ -x "$n" ] && export ANVIL_TEST_NVCC="$n" && break
  done
fi
if [ -z "${ANVIL_TEST_CXX:-}" ]; then
  cxx=$(command -v g++ || command -v c++) && export ANVIL_TEST_CXX="$cxx"
fi
