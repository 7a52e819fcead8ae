// "Did you mean ...?" for mistyped names (config keys, subcommands): the
// closest candidate by edit distance when it is plausibly a typo.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace gw {

// Edit distance counting an insertion, deletion, substitution or swap of two
// adjacent characters as one edit (optimal string alignment), so that the
// typical typos "treshold" and "prot" are one edit from their key.
inline std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The candidate closest to `word` (case-insensitive) when it is plausibly a
// typo of it: a few edits (a third of the candidate's length, 1 to 3), or one
// word a prefix of the other (3 characters or more). Empty when none is.
inline std::string closest_match(const std::string& word,
                                 const std::vector<std::string>& candidates) {
  auto lowercase = [](std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  const std::string needle = lowercase(word);
  std::string best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const std::string& candidate : candidates) {
    const std::string hay = lowercase(candidate);
    std::size_t distance = edit_distance(needle, hay);
    const std::size_t allowed = std::max<std::size_t>(1, std::min<std::size_t>(3, hay.size() / 3));
    const bool prefix =
        needle.size() >= 3 && (hay.rfind(needle, 0) == 0 || needle.rfind(hay, 0) == 0);
    if (distance > allowed && !prefix) continue;
    if (prefix) distance = std::min<std::size_t>(distance, allowed);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

}  // namespace gw
