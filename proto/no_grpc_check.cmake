# Fails when BINARY depends on a gRPC shared library (ldd) or holds gRPC
# symbols (nm): the sandboxed runner must not link gRPC (proto/CMakeLists.txt).
execute_process(COMMAND ldd ${BINARY} OUTPUT_VARIABLE libs RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${BINARY} failed")
endif()
if(libs MATCHES "libgrpc")
  message(FATAL_ERROR "${BINARY} links gRPC:\n${libs}")
endif()
execute_process(COMMAND nm -C ${BINARY} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(syms MATCHES "grpc::")
  message(FATAL_ERROR "${BINARY} holds gRPC symbols")
endif()
message(STATUS "${BINARY}: no gRPC")
