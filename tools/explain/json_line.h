// explain's --json output: one compact JSON object per line (JSON Lines), doubles to 10
// significant digits so that figures read back as printed.
//
//   json::Object(kJsonLine).add("ranks", 8).add("algorithm", "ring").str()
//       ->  {"ranks":8,"algorithm":"ring"}
#pragma once

#include "tools/json/json_writer.h"

namespace tessera {
namespace explain {

inline constexpr json::Format kJsonLine{10, true};

}  // namespace explain
}  // namespace tessera
