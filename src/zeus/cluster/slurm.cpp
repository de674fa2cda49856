#include "zeus/cluster/slurm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

namespace zeus::cluster {
namespace {

// Splits at commas that are not inside brackets.
std::vector<std::string_view> split_top_level(std::string_view list) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == '[') {
      ++depth;
    } else if (list[i] == ']') {
      --depth;
    } else if (list[i] == ',' && depth == 0) {
      out.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(list.substr(start));
  return out;
}

void expand_host(std::string_view host, std::string_view whole, std::vector<std::string>& out) {
  const size_t open = host.find('[');
  if (open == std::string_view::npos) {
    if (host.find(']') != std::string_view::npos || host.empty()) {
      throw ConfigError(fmt::format("Slurm node list '{}': bad host '{}'", whole, host));
    }
    out.emplace_back(host);
    return;
  }
  const size_t close = host.find(']', open);
  if (close == std::string_view::npos) {
    throw ConfigError(fmt::format("Slurm node list '{}': '[' without ']'", whole));
  }
  const std::string_view prefix = host.substr(0, open);
  const std::string_view ranges = host.substr(open + 1, close - open - 1);
  const std::string_view suffix = host.substr(close + 1);
  size_t start = 0;
  while (start <= ranges.size()) {
    const size_t comma = std::min(ranges.find(',', start), ranges.size());
    const std::string_view range = ranges.substr(start, comma - start);
    const size_t dash = range.find('-');
    const std::string_view lo_text = range.substr(0, dash);
    const std::string_view hi_text =
        dash == std::string_view::npos ? lo_text : range.substr(dash + 1);
    const int lo = parse_int_or_throw(lo_text, "Slurm node list range");
    const int hi = parse_int_or_throw(hi_text, "Slurm node list range");
    if (lo < 0 || hi < lo || hi - lo > 100'000) {
      throw ConfigError(fmt::format("Slurm node list '{}': bad range '{}'", whole, range));
    }
    for (int n = lo; n <= hi; ++n) {
      // Zero padding follows the width of the lower bound ("01-04").
      expand_host(fmt::format("{}{:0{}}{}", prefix, n, lo_text.size(), suffix), whole, out);
    }
    start = comma + 1;
  }
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(std::string_view list) {
  std::vector<std::string> out;
  for (const std::string_view host : split_top_level(list)) {
    expand_host(host, list, out);
  }
  return out;
}

std::vector<int> expand_slurm_tasks_per_node(std::string_view list) {
  std::vector<int> out;
  for (const std::string_view item : split_top_level(list)) {
    const size_t paren = item.find("(x");
    if (paren == std::string_view::npos) {
      out.push_back(parse_int_or_throw(item, "Slurm tasks per node"));
      continue;
    }
    if (item.back() != ')') {
      throw ConfigError(fmt::format("Slurm tasks-per-node list '{}': '{}' lacks ')'", list, item));
    }
    const int count = parse_int_or_throw(item.substr(0, paren), "Slurm tasks per node");
    const int repeat =
        parse_int_or_throw(item.substr(paren + 2, item.size() - paren - 3), "Slurm tasks per node");
    if (repeat < 1 || repeat > 100'000) {
      throw ConfigError(
          fmt::format("Slurm tasks-per-node list '{}': bad repeat in '{}'", list, item));
    }
    out.insert(out.end(), static_cast<size_t>(repeat), count);
  }
  return out;
}

int slurm_default_port(std::string_view job_id, std::string_view step_id) {
  // A non-numeric id (none seen in practice) counts as 0.
  const uint64_t job = parse_number<uint64_t>(job_id).value_or(0);
  const uint64_t step = parse_number<uint64_t>(step_id).value_or(0);
  return 15000 + static_cast<int>((job * 131 + step) % 20000);
}

int SlurmStep::tasks_on_node(int node) const {
  if (tasks_per_node.empty()) {
    return ntasks;
  }
  return tasks_per_node.at(
      std::min<size_t>(static_cast<size_t>(std::max(node, 0)), tasks_per_node.size() - 1));
}

std::optional<SlurmStep> read_slurm(const EnvLookup& lookup) {
  const auto job_id = lookup("SLURM_JOB_ID");
  if (!job_id) {
    return std::nullopt;
  }
  const auto get_int = [&](std::string_view name) -> std::optional<int> {
    if (auto v = lookup(name)) {
      return parse_int_or_throw(*v, name);
    }
    return std::nullopt;
  };
  SlurmStep s;
  s.job_id = *job_id;
  s.step_id = lookup("SLURM_STEP_ID");
  s.procid = get_int("SLURM_PROCID");
  s.localid = get_int("SLURM_LOCALID");
  s.nodeid = get_int("SLURM_NODEID");
  s.ntasks = get_int("SLURM_NTASKS").value_or(1);
  s.nnodes = get_int("SLURM_NNODES").value_or(1);
  for (const char* var :
       {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE"}) {
    if (auto v = lookup(var)) {
      s.tasks_per_node = expand_slurm_tasks_per_node(*v);
      s.tasks_per_node_var = var;
      break;
    }
  }
  for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (auto v = lookup(var)) {
      s.nodes = expand_slurm_nodelist(*v);
      s.nodes_var = var;
      break;
    }
  }
  return s;
}

}  // namespace zeus::cluster
