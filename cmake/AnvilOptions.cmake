# Compile options for project code. anvil_target_options(<target>) gives a
# target our warning level (errors unless ANVIL_WERROR is off; with clang,
# -Wthread-safety too) and, with ANVIL_SANITIZE, AddressSanitizer and UBSan on
# host code.

set(ANVIL_SANITIZE_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer
    -fno-sanitize-recover=undefined)

function(anvil_target_options target)
  set(warn -Wall -Wextra -Wpedantic -Wno-unused-parameter)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # ABSL_GUARDED_BY and its kin, checked (GCC ignores them; with GCC,
    # thread_safety_test runs clang over the sources instead).
    list(APPEND warn -Wthread-safety)
  endif()
  if(ANVIL_WERROR)
    list(APPEND warn -Werror)
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${warn}>)
  if(ANVIL_SANITIZE)
    target_compile_options(${target} PRIVATE
        $<$<COMPILE_LANGUAGE:CXX>:${ANVIL_SANITIZE_FLAGS}>)
    target_link_options(${target} PRIVATE ${ANVIL_SANITIZE_FLAGS})
  endif()
endfunction()

# Test labels: tests needing a GPU carry "gpu" and skip without one.
function(anvil_add_test name)
  cmake_parse_arguments(T "GPU" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  anvil_target_options(${name})
  if(T_GPU)
    # gpu_test_main exits 77 (ctest: skipped) with a message when no GPU is present.
    target_link_libraries(${name} PRIVATE ${T_LIBS} anvil_gpu_test_main GTest::gtest)
  else()
    target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(T_GPU)
    set_tests_properties(${name} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
  else()
    set_tests_properties(${name} PROPERTIES LABELS cpu)
  endif()
endfunction()
