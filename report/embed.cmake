# Writes OUT, a C++ source defining `std::string anvil::report::<NAME>()`
# that returns the bytes of IN, as raw string literals of at most 30000
# bytes each (under the 65536 ISO C++ guarantees). Run at build time:
#   cmake -DIN=file -DOUT=file.cc -DNAME=Function -P embed.cmake
file(READ "${IN}" content)
string(LENGTH "${content}" size)
string(FIND "${content}" ")anvil_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )anvil_embed\"")
endif()
set(chunk 30000)
set(text "// Generated from ${IN} by report/embed.cmake; do not edit.\n#include <string>\n\n")
string(APPEND text "namespace anvil::report {\n\nstd::string ${NAME}() {\n  static const char* const kChunks[] = {\n")
set(pos 0)
while(pos LESS size)
  string(SUBSTRING "${content}" ${pos} ${chunk} piece)
  string(APPEND text "R\"anvil_embed(${piece})anvil_embed\",\n")
  math(EXPR pos "${pos} + ${chunk}")
endwhile()
string(APPEND text "      nullptr};\n  std::string out;\n  out.reserve(${size});\n")
string(APPEND text "  for (const char* const* c = kChunks; *c != nullptr; ++c) out += *c;\n  return out;\n}\n\n")
string(APPEND text "}  // namespace anvil::report\n")
file(WRITE "${OUT}.tmp" "${text}")
file(RENAME "${OUT}.tmp" "${OUT}")
