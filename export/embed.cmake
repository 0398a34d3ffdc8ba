# Writes a C++ file holding the package's fixed files (export/package/) as
# string literals, so `anvil export` needs no source tree at run time.
#   cmake -DROOT=<package dir> -DFILES="a|b" -DOUT=<file.cc> -P embed.cmake
string(REPLACE "|" ";" files "${FILES}")
set(body "// Generated from export/package/ by export/embed.cmake. Do not edit.\n")
string(APPEND body "#include \"export/package.h\"\n\nnamespace anvil::exporter {\n\n")
string(APPEND body "const std::vector<PackageFile>& FixedPackageFiles() {\n")
string(APPEND body "  static const std::vector<PackageFile> files = {\n")
foreach(f IN LISTS files)
  file(READ "${ROOT}/${f}" text)
  string(APPEND body "      {\"${f}\", R\"anvil_pkg(${text})anvil_pkg\"},\n")
endforeach()
string(APPEND body "  };\n  return files;\n}\n\n}  // namespace anvil::exporter\n")
file(WRITE "${OUT}.tmp" "${body}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
