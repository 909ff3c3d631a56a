// docs/COMPOSITION.md, printed from the support table (`train --support-table`). A test keeps
// the file equal to this output, so the page cannot drift from what the flag checker refuses.
#include <algorithm>
#include <sstream>

#include "tools/train/support_table.h"

namespace tessera {
namespace train {

namespace {

// Whether `r` names `axis`.
bool names(const Refusal& r, const std::string& axis) {
  return std::any_of(r.when.begin(), r.when.end(),
                     [&](const Condition& c) { return c.axis == axis; });
}

// Whether `r` could hold where `values` hold: each of its conditions on an axis `values` assign
// includes that value (the others are left free).
bool could_match(const Refusal& r, const Assignment& values) {
  for (const Condition& c : r.when) {
    const std::string v = value_in(values, c.axis);
    if (!v.empty() && std::find(c.values.begin(), c.values.end(), v) == c.values.end()) {
      return false;
    }
  }
  return true;
}

std::string joined(const std::vector<std::string>& values, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) s += (i == 0 ? "" : sep) + values[i];
  return s;
}

// One cell: strategy x (axis = value). "yes", "—" (the axis does not apply), "no (k)" where a
// refusal naming only these two axes holds, "yes, not with (k)" where one naming more could,
// "starts fresh (rk)" where reset k could hold.
std::string cell(const std::string& strategy, const Axis& axis, const std::string& value) {
  const Assignment values = {{"strategy", strategy}, {axis.name, value}};
  Axis flag_only = axis;  // its flag's only_with, here; its applies_when, below
  flag_only.applies_when.clear();
  if (!applies(flag_only, values)) return "—";
  // An axis that needs another's value (error feedback, a compressor) applies where the strategy
  // takes one of those values.
  for (const Condition& c : axis.applies_when) {
    const bool some = std::any_of(c.values.begin(), c.values.end(), [&](const std::string& v) {
      return cell(strategy, support_axis(c.axis), v).rfind("yes", 0) == 0;
    });
    if (!some) return "—";
  }
  std::vector<std::string> refused, partly;
  const std::vector<Refusal>& refusals = support_refusals();
  for (size_t k = 0; k < refusals.size(); ++k) {
    const Refusal& r = refusals[k];
    if (!names(r, axis.name) || !could_match(r, values)) continue;
    const bool only_these = std::all_of(r.when.begin(), r.when.end(), [&](const Condition& c) {
      return c.axis == "strategy" || c.axis == axis.name;
    });
    (only_these ? refused : partly).push_back("(" + std::to_string(k + 1) + ")");
  }
  if (!refused.empty()) return "**no** " + joined(refused, " ");
  std::vector<std::string> fresh;  // resets that could hold here
  const std::vector<Reset>& resets = support_resets();
  for (size_t k = 0; k < resets.size(); ++k) {
    const Refusal as_rule{resets[k].when, ""};
    if (names(as_rule, axis.name) && could_match(as_rule, values)) {
      fresh.push_back("(r" + std::to_string(k + 1) + ")");
    }
  }
  std::string out = "yes";
  if (!partly.empty()) out += ", not with " + joined(partly, " ");
  if (!fresh.empty()) out += ", starts fresh " + joined(fresh, " ");
  return out;
}

}  // namespace

std::string composition_markdown() {
  std::ostringstream out;
  out << "# Composition: what combines with what\n\n"
         "Generated from the support table, `tools/train/support_table.cc`, by "
         "`bazel-bin/tools/train --support-table`; `//tests/tools:support_table_test` keeps this "
         "page equal to it. Do not edit it by hand: edit the table and run\n"
         "`bazel-bin/tools/train --support-table > docs/COMPOSITION.md`.\n\n"
         "The train tool's flag checker refuses, with exit code 2 naming the flags and the reason, "
         "exactly the combinations this table refuses; every other combination is supported, and "
         "`//tests/tools:composition_test` runs every pair of supported values (a pairwise "
         "covering set of runs generated from the table) against its reference. A cell is one "
         "strategy with one value of another axis: **no** (k) where refusal k names only those "
         "two, \"yes, not with (k)\" where refusal k needs a third value as well, — where the "
         "axis's flag does not apply to the strategy.\n\n";

  // The strategy table.
  const Axis& strategies = strategy_axis();
  out << "| axis | value |";
  for (const std::string& s : strategies.values) out << " " << s << " |";
  out << "\n| --- | --- |";
  for (size_t i = 0; i < strategies.values.size(); ++i) out << " --- |";
  out << "\n";
  for (const Axis& axis : support_axes()) {
    if (axis.name == "strategy") continue;
    for (const std::string& value : axis.values) {
      out << "| " << axis.name << " | " << value << " |";
      for (const std::string& s : strategies.values) out << " " << cell(s, axis, value) << " |";
      out << "\n";
    }
  }

  out << "\nThe axes' values: `compression` names the compressor's kind (`topk` for "
         "`--compression=topk:RATIO`); `error-feedback` is on by default for topk, sign and "
         "powersgd; `checkpoint` is the format written under `--checkpoint-dir` (none without "
         "one); `resume` is `--resume`; `tensor-parallel` is on for `--tensor-parallel` of 2 or "
         "more; `model` is plain (logistic, mlp) or batch-norm (the ResNets); `sequence-parallel` "
         "is `--sequence-parallel=true`, a GPT's under tensor parallelism; `restart` is "
         "`tools/launch` restarting the job after a failure from the newest committed checkpoint, "
         "on the same ranks or on fewer (the most that the hostfile's slots and the run's layout "
         "allow: whole pipelines of whole tensor-parallel groups, a worker beside the servers), "
         "which the launcher checks against this table before it starts the job.\n\n";

  out << "## Refusals\n\n";
  const std::vector<Refusal>& refusals = support_refusals();
  for (size_t k = 0; k < refusals.size(); ++k) {
    std::vector<std::string> conditions;
    for (const Condition& c : refusals[k].when) {
      conditions.push_back("`" + c.axis + "` " + joined(c.values, "|"));
    }
    out << k + 1 << ". " << joined(conditions, " with ") << ": " << refusals[k].why << ".\n";
  }

  out << "\n## What a restart on fewer ranks starts fresh\n\n"
         "On the same ranks a restart resumes every strategy exactly: the run ends as the "
         "uninterrupted one, bit for bit. On fewer ranks the model and the optimizer's state are "
         "read whole or resharded for the new world (each rank keeps its batch size, so the "
         "global batch shrinks), and the state that belongs to ranks starts fresh, which the run "
         "says:\n\n";
  const std::vector<Reset>& resets = support_resets();
  for (size_t k = 0; k < resets.size(); ++k) {
    std::vector<std::string> conditions;
    for (const Condition& c : resets[k].when) {
      conditions.push_back("`" + c.axis + "` " + joined(c.values, "|"));
    }
    out << "r" << k + 1 << ". " << joined(conditions, " with ") << ": " << resets[k].what << ".\n";
  }

  out << "\n## References\n\nWhat each strategy's runs are compared with in "
         "`//tests/tools:composition_test` (float32: 1e-5; half precision: the tolerance the "
         "test states):\n\n| strategy | reference |\n| --- | --- |\n";
  for (const std::string& s : strategies.values) out << "| " << s << " | " << reference_of(s) << " |\n";
  out << "\nA run with `resume` yes stops after its first epoch and resumes from that "
         "checkpoint; its trained model must equal the uninterrupted run's bit for bit. A run with "
         "`restart` runs under `tools/launch` with a rank killed in its second epoch: on the same "
         "ranks it must end as the uninterrupted run, bit for bit; on fewer (its hostfile shrunk "
         "before the restart) as its first epoch on more ranks resumed by hand on fewer, bit for "
         "bit, and as its reference resumed from the same checkpoint (float32: 1e-5), printing "
         "what starts fresh.\n";
  return out.str();
}

}  // namespace train
}  // namespace tessera
