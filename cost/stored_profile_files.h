// The files under cost/profiles/, compiled in by cost/BUILD's genrule (stored_profiles.cc): each
// its path in the repository and its text. cost/stored_profile.h reads them.
#pragma once

#include <utility>
#include <vector>

namespace tessera {
namespace cost {

const std::vector<std::pair<const char*, const char*>>& stored_profile_files();

}  // namespace cost
}  // namespace tessera
