// The train tool's flags, one row each: the name, the value it takes and the Config field it
// writes (flag_values.h), the help text, whether every rank must share it, and the strategies
// that accept it. parse_flags, usage() and settings_that_must_agree() are all read off this
// table, so adding a flag is adding a row:
//
//   Flag("micro-batches", integer(&Config::micro_batches, 1),
//        "M micro-batches per batch").only_with({"pipeline"}),
//
// The rows live in sections by topic (flag_table_*.cc), the order --help shows them in. The
// rules that relate several flags (--chunks needs --pipeline-schedule=interleaved) are beside
// the table in flag_rules.cc.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tools/train/flag_values.h"
#include "tools/train/flags.h"

namespace tessera {
namespace train {

struct Flag {
  Flag(std::string name, FlagValue value, std::string help)
      : name(std::move(name)), value(std::move(value)), help(std::move(help)) {}

  // Accepted only under these strategies: given with another, parse_flags refuses it naming
  // the flag, the strategies it needs and the one given. `why` (optional) says what the flag is
  // for in that message ("sizes DDP's first gradient bucket").
  Flag& only_with(std::vector<std::string> allowed, std::string why = "") {
    strategies = std::move(allowed);
    strategy_why = std::move(why);
    return *this;
  }
  // May differ from rank to rank (a thread count, an output file): not compared at start-up.
  Flag& per_rank() {
    must_agree = false;
    return *this;
  }
  // Compared at start-up as a setting derived from the flag rather than its value: "device
  // type" (cuda:0 and cuda:1 are alike), "checkpointing" on or off.
  Flag& agreed_as(std::string setting, std::function<std::string(const Config&)> value) {
    agreed_name = std::move(setting);
    agreed_value = std::move(value);
    return *this;
  }
  // Every flag's name, in --help's order (for "did you mean --strategy?").
std::vector<std::string> flag_names();
// The default --help shows when Config's value stands for something else (0 for "the model's").
  Flag& default_is(std::string text) {
    default_text = std::move(text);
    return *this;
  }

  std::string name;  // --name=VALUE
  FlagValue value;
  std::string help;
  std::vector<std::string> strategies;  // empty: every strategy
  std::string strategy_why;
  bool must_agree = true;  // a new flag is compared across ranks unless it says otherwise
  std::string agreed_name;  // empty: the flag's name
  std::function<std::string(const Config&)> agreed_value;  // null: value.show
  std::string default_text;  // empty: value.show of a default Config (nothing if that is "")
};

// A topic of --help: its heading, its flags, and an optional note printed after them.
struct FlagSection {
  std::string title;
  std::vector<Flag> flags;
  std::string note;
};

// Every flag, by topic, in --help's order.
const std::vector<FlagSection>& flag_sections();
// The flag called `name`, or null.
const Flag* find_flag(const std::string& name);
// Every flag's name, in --help's order (for "did you mean --strategy?").
std::vector<std::string> flag_names();
// The default --help shows for `flag` ("" for none).
std::string shown_default(const Flag& flag);
// Refuses a flag given with a strategy its row does not list (FlagError naming both).
void check_strategies(const Config& config);

// The sections, one file per family of flags.
std::vector<FlagSection> run_flag_sections();             // flag_table_run.cc
std::vector<FlagSection> data_parallel_flag_sections();   // flag_table_data_parallel.cc
std::vector<FlagSection> model_parallel_flag_sections();  // flag_table_model_parallel.cc

}  // namespace train
}  // namespace tessera
