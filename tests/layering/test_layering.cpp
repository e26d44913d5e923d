// The layering rule (DESIGN.md §2): a file includes headers of its own layer and of layers below
// it only. The layer order and what each layer owns are read from the table in
// docs/architecture.md, so the page and the tree cannot drift apart.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Layer {
  int rank;
  std::string name;
};

/** `a/{x,y}.h` -> `a/x.h`, `a/y.h` (one brace group). */
std::vector<std::string> expand(const std::string& item) {
  const auto open = item.find('{'), close = item.find('}');
  if (open == std::string::npos || close == std::string::npos) return {item};
  std::vector<std::string> out;
  std::stringstream names(item.substr(open + 1, close - open - 1));
  std::string n;
  while (std::getline(names, n, ','))
    out.push_back(item.substr(0, open) + n + item.substr(close + 1));
  return out;
}

/** Owned path (a folder or a file, relative to the root) -> layer, from the table. */
std::map<std::string, Layer> read_layers(const fs::path& architecture_md) {
  std::ifstream in(architecture_md);
  std::map<std::string, Layer> owned;
  const std::regex row(R"(^\|\s*(\d+)\s*\|\s*([a-z]+)\s*\|(.*)\|\s*$)");
  const std::regex item("`([^`]+)`");
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    const Layer l{std::stoi(m[1]), m[2]};
    const std::string owns = m[3];
    for (auto it = std::sregex_iterator(owns.begin(), owns.end(), item);
         it != std::sregex_iterator(); ++it) {
      for (const auto& p : expand((*it)[1])) owned[p] = l;
    }
  }
  return owned;
}

/** The layer owning `rel` (a file path relative to the root): the longest owned prefix. */
std::optional<Layer> layer_of(const std::map<std::string, Layer>& owned, const std::string& rel) {
  std::optional<Layer> best;
  size_t best_len = 0;
  for (const auto& [path, l] : owned) {
    const bool match =
        rel == path || (rel.size() > path.size() && rel.compare(0, path.size(), path) == 0 &&
                        rel[path.size()] == '/');
    if (match && path.size() > best_len) {
      best = l;
      best_len = path.size();
    }
  }
  return best;
}

/** Every violation under `root`: "file (layer) includes header (layer)", and unowned files. */
std::vector<std::string> violations(const fs::path& root) {
  const auto owned = read_layers(root / "docs" / "architecture.md");
  std::vector<std::string> out;
  if (owned.empty()) {
    out.push_back("docs/architecture.md has no layer table");
    return out;
  }
  const std::regex include(R"(^\s*#\s*include\s*[<"]([^">]+)[">])");
  for (const char* top : {"src", "include", "tools"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      if (!e.is_regular_file()) continue;
      const std::string ext = e.path().extension().string();
      if (ext != ".h" && ext != ".cpp") continue;
      const std::string rel = fs::relative(e.path(), root).generic_string();
      const auto from = layer_of(owned, rel);
      if (!from) {
        out.push_back(rel + " belongs to no layer of docs/architecture.md");
        continue;
      }
      std::ifstream f(e.path());
      std::string line;
      int n = 0;
      while (std::getline(f, line)) {
        ++n;
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string inc = m[1];
        std::string target;
        if (inc.rfind("tessera/", 0) == 0) {
          target = "include/" + inc;
        } else if (fs::exists(root / "src" / inc)) {
          target = "src/" + inc;
        } else if (fs::exists(root / inc)) {
          target = inc;
        } else {
          continue;  // a system header, or one next to the file
        }
        const auto to = layer_of(owned, target);
        if (to && to->rank > from->rank) {
          out.push_back(rel + ":" + std::to_string(n) + " (" + from->name + ") includes " + target +
                        " (" + to->name + ", a layer above)");
        }
      }
    }
  }
  return out;
}

TEST(Layering, NoFileIncludesAHeaderOfALayerAboveItsOwn) {
  const auto v = violations(TESSERA_SOURCE_DIR);
  std::string all;
  for (const auto& s : v) all += "\n  " + s;
  EXPECT_TRUE(v.empty()) << v.size() << " violations:" << all;
}

TEST(Layering, TheCheckFindsAPlantedViolation) {
  const fs::path root =
      fs::temp_directory_path() / ("tessera-layering-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "docs");
  fs::create_directories(root / "src" / "low");
  fs::create_directories(root / "src" / "high");
  std::ofstream(root / "docs" / "architecture.md")
      << "| # | layer | owns |\n|---|---|---|\n| 0 | low | `src/low` |\n| 1 | high | `src/high` "
         "|\n";
  std::ofstream(root / "src" / "high" / "h.h") << "#pragma once\n#include \"low/l.h\"\n";
  std::ofstream(root / "src" / "low" / "l.h") << "#pragma once\n";
  EXPECT_TRUE(violations(root).empty());
  std::ofstream(root / "src" / "low" / "l.cpp") << "#include \"high/h.h\"\n";  // upward
  std::ofstream(root / "src" / "stray.cpp") << "\n";                           // unowned
  const auto v = violations(root);
  ASSERT_EQ(v.size(), 2u);
  std::string all = v[0] + "\n" + v[1];
  EXPECT_NE(all.find("src/low/l.cpp:1 (low) includes src/high/h.h (high, a layer above)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("src/stray.cpp belongs to no layer"), std::string::npos) << all;
  fs::remove_all(root);
}

}  // namespace
