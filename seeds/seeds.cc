#include "seeds/seeds.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "proto/candidate.h"
#include "proto/problem.h"
#include "seeds/display_name.h"

#ifndef ANVIL_SOURCE_SEEDS_DIR
#define ANVIL_SOURCE_SEEDS_DIR ""
#endif

namespace anvil {
namespace fs = std::filesystem;
namespace {

std::string Text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

SeedKnob ParseKnob(const std::string& name, const nlohmann::json& j) {
  SeedKnob k;
  absl::string_view n = name;
  absl::ConsumePrefix(&n, "ANVIL_");
  k.name = std::string(n);
  k.default_value = Text(j.at("default"));
  k.reason = j.value("reason", "");
  k.label = j.value("label", absl::AsciiStrToLower(k.name));
  if (j.contains("names")) {
    for (const auto& [value, value_name] : j.at("names").items()) {
      k.value_names[value] = value_name.get<std::string>();
    }
  }
  const std::string search = j.value("search", "");
  k.late = search == "late";
  k.shape = j.value("shape", "");
  k.searched = search != "off" && k.shape.empty();
  if (j.contains("values")) {
    for (const auto& v : j.at("values")) k.values.push_back(Text(v));
  } else if (j.contains("min")) {
    int step = j.value("step", 1);
    for (int v = j.at("min").get<int>(); v <= j.at("max").get<int>(); v += std::max(1, step)) {
      k.values.push_back(absl::StrCat(v));
    }
  }
  return k;
}

absl::Status Malformed(const fs::path& dir, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat((dir / "seed.json").string(), ": ", why));
}

absl::StatusOr<SeedFamily> LoadOne(const fs::path& dir) {
  std::ifstream meta(dir / "seed.json");
  SeedFamily f;
  try {
    nlohmann::json j = nlohmann::json::parse(meta);
    f.name = dir.filename().string();
    f.description = j.value("description", "");
    f.arch = j.value("arch", "sm_90a");
    f.searchable = j.value("searchable", true);
    f.name_pattern = j.value("name_pattern", "");
    for (const auto& l : j.at("layouts")) {
      absl::StatusOr<v1::Layout> layout = ParseLayout(l.get<std::string>());
      if (!layout.ok()) return layout.status();
      f.layouts.push_back(*layout);
    }
    for (const auto& [name, knob] : j.at("knobs").items()) {
      f.knobs.push_back(ParseKnob(name, knob));
      const SeedKnob& k = f.knobs.back();
      if (!k.shape.empty() && ((k.shape != "M" && k.shape != "N" && k.shape != "K") ||
                               k.default_value != "0" || !k.values.empty())) {
        return Malformed(dir, absl::StrCat("knob ", name, ": a shape knob names \"M\", \"N\" or "
                                           "\"K\", defaults to 0 and lists no values"));
      }
    }
    for (const auto& c : j.value("constraints", nlohmann::json::array())) {
      absl::StatusOr<Expr> e = Expr::Parse(c.value("rule", ""));
      if (!e.ok()) return Malformed(dir, e.status().message());
      f.constraints.push_back({*e, c.value("reason", "")});
    }
    for (const auto& s : j.value("suggested", nlohmann::json::array())) {
      std::map<std::string, std::string> params;
      for (const auto& [name, v] : s.items()) {
        absl::string_view n = name;
        absl::ConsumePrefix(&n, "ANVIL_");
        params[std::string(n)] = Text(v);
      }
      f.suggested.push_back(std::move(params));
    }
    const nlohmann::json model = j.value("model", nlohmann::json::object());
    for (const auto& [name, v] : model.items()) {
      if (name == "about") continue;
      if (v.is_number()) {
        f.model_constants[name] = v.get<double>();
        continue;
      }
      absl::StatusOr<Expr> e = Expr::Parse(Text(v));
      if (!e.ok()) return Malformed(dir, e.status().message());
      f.model.emplace(name, *e);
    }
    std::ifstream src(dir / j.value("file", "kernel.cu"));
    std::stringstream ss;
    ss << src.rdbuf();
    f.source = ss.str();
  } catch (const nlohmann::json::exception& e) {
    return Malformed(dir, e.what());
  }
  if (absl::Status s = CheckNamePattern(f); !s.ok()) return Malformed(dir, s.message());
  if (f.source.empty()) return absl::NotFoundError(absl::StrCat("no kernel source in ", dir.string()));
  return f;
}

}  // namespace

std::string DefaultSeedsDir(const std::string& executable_dir) {
  if (const char* env = std::getenv("ANVIL_SEEDS_DIR")) return env;
  for (const char* up : {"/..", "/../.."}) {  // bin/ or libexec/<kind>/
    const std::string bundled = executable_dir + up + "/share/anvil/seeds";
    if (fs::exists(bundled)) return fs::canonical(bundled).string();
  }
  return ANVIL_SOURCE_SEEDS_DIR;
}

absl::StatusOr<std::vector<SeedFamily>> LoadSeeds(const std::string& dir) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory() && fs::exists(e.path() / "seed.json")) dirs.push_back(e.path());
  }
  if (ec) return absl::NotFoundError(absl::StrCat("seeds directory ", dir, ": ", ec.message()));
  std::sort(dirs.begin(), dirs.end());
  std::vector<SeedFamily> families;
  for (const fs::path& d : dirs) {
    absl::StatusOr<SeedFamily> f = LoadOne(d);
    if (!f.ok()) return f.status();
    families.push_back(std::move(*f));
  }
  return families;
}

v1::Candidate MakeSeedCandidate(const SeedFamily& family, v1::Layout layout,
                                const std::map<std::string, std::string>& params) {
  v1::Candidate c;
  c.set_source(family.source);
  c.set_family(family.name);
  c.set_layout(layout);
  c.set_arch(family.arch);
  c.set_proposer("seed");
  for (const SeedKnob& k : family.knobs) (*c.mutable_params())[k.name] = k.default_value;
  for (const auto& [k, v] : params) (*c.mutable_params())[k] = v;
  // A shape knob left free (0) is not mentioned: a general configuration's
  // name and build flags read as they did before the family had shape knobs.
  for (const SeedKnob& k : family.knobs) {
    if (!k.shape.empty() && c.params().at(k.name) == "0") c.mutable_params()->erase(k.name);
  }
  AssignCandidateId(c);
  c.set_name(SeedDisplayName(family, c));
  return c;
}

}  // namespace anvil
