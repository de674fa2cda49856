#include "zeus/daemon/leases.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

#include "zeus/common/errors.h"
#include "zeus/common/json.h"

namespace zeus::daemon {

namespace {
constexpr std::string_view kSettingNames[] = {"power_limit", "persistence_mode",
                                              "gpu_locked_clocks", "mem_locked_clocks"};
constexpr int kJournalVersion = 1;
}  // namespace

std::string_view setting_name(Setting setting) {
  return kSettingNames[static_cast<size_t>(setting)];
}

Setting setting_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kSettingNames); ++i) {
    if (kSettingNames[i] == name) {
      return static_cast<Setting>(i);
    }
  }
  throw ConfigError(fmt::format("unknown GPU setting '{}'", name));
}

std::optional<Holder> LeaseBook::conflict(const Actor& actor, int gpu) const {
  if (actor.admin) {
    return std::nullopt;
  }
  for (const Lease& lease : leases_) {
    if (lease.gpu != gpu) {
      continue;
    }
    for (const Holder& h : lease.holders) {
      if (h.uid != actor.uid) {
        return h;
      }
    }
  }
  return std::nullopt;
}

bool LeaseBook::acquire(const Actor& actor, int gpu, Setting setting, int64_t original) {
  if (actor.admin || !actor.process) {
    throw InternalError("LeaseBook::acquire: only a non-admin process holds leases");
  }
  auto it = std::find_if(leases_.begin(), leases_.end(),
                         [&](const Lease& l) { return l.gpu == gpu && l.setting == setting; });
  if (it == leases_.end()) {
    leases_.push_back(Lease{gpu, setting, original, {}});
    it = std::prev(leases_.end());
  } else if (it->restore_pending) {
    // Taken over: the setting is still changed, so its first original is what goes back.
    it->restore_pending = false;
    it->holders.clear();
  }
  if (std::find(it->holders.begin(), it->holders.end(), *actor.process) != it->holders.end()) {
    return false;
  }
  it->holders.push_back(*actor.process);
  return true;
}

std::vector<Lease> LeaseBook::end(int gpu, Setting setting) {
  std::vector<Lease> ended;
  std::erase_if(leases_, [&](const Lease& l) {
    if (l.gpu == gpu && l.setting == setting) {
      ended.push_back(l);
      return true;
    }
    return false;
  });
  return ended;
}

std::vector<Lease> LeaseBook::release(const Holder& holder) {
  std::vector<Lease> freed;
  for (Lease& l : leases_) {
    if (l.restore_pending) {
      continue;
    }
    const size_t before = l.holders.size();
    std::erase(l.holders, holder);
    if (l.holders.empty() && before > 0) {
      l.holders = {holder};
      l.restore_pending = true;
      freed.push_back(l);
    }
  }
  return freed;
}

void LeaseBook::restored(int gpu, Setting setting) {
  std::erase_if(leases_, [&](const Lease& l) {
    return l.restore_pending && l.gpu == gpu && l.setting == setting;
  });
}

void LeaseBook::put_back(int gpu, Setting setting, const std::vector<Lease>& leases) {
  std::erase_if(leases_, [&](const Lease& l) { return l.gpu == gpu && l.setting == setting; });
  for (const Lease& l : leases) {
    if (l.gpu == gpu && l.setting == setting) {
      leases_.push_back(l);
    }
  }
}

std::optional<Lease> LeaseBook::find(int gpu, Setting setting) const {
  for (const Lease& l : leases_) {
    if (l.gpu == gpu && l.setting == setting) {
      return l;
    }
  }
  return std::nullopt;
}

std::vector<Lease> LeaseBook::pending() const {
  std::vector<Lease> out;
  std::copy_if(leases_.begin(), leases_.end(), std::back_inserter(out),
               [](const Lease& l) { return l.restore_pending; });
  return out;
}

std::vector<Holder> LeaseBook::holders() const {
  std::vector<Holder> out;
  for (const Lease& l : leases_) {
    if (l.restore_pending) {
      continue;
    }
    for (const Holder& h : l.holders) {
      if (std::find(out.begin(), out.end(), h) == out.end()) {
        out.push_back(h);
      }
    }
  }
  return out;
}

nlohmann::json LeaseBook::to_json() const {
  nlohmann::json leases = nlohmann::json::array();
  for (const Lease& l : leases_) {
    nlohmann::json holders = nlohmann::json::array();
    for (const Holder& h : l.holders) {
      nlohmann::json holder = {{"uid", h.uid}, {"pid", h.pid}, {"start_ticks", h.start_ticks}};
      if (h.pidfd_id != 0) {
        holder["pidfd_id"] = h.pidfd_id;
      }
      holders.push_back(std::move(holder));
    }
    leases.push_back({{"gpu", l.gpu},
                      {"setting", setting_name(l.setting)},
                      {"original", l.original},
                      {"holders", std::move(holders)},
                      {"restore_pending", l.restore_pending}});
  }
  return {{"version", kJournalVersion}, {"leases", std::move(leases)}};
}

LeaseBook LeaseBook::from_json(const nlohmann::json& j, std::string_view where) {
  LeaseBook book;
  try {
    if (j.at("version").get<int>() != kJournalVersion) {
      throw ConfigError(
          fmt::format("version {} (this zeusd reads {})", j.at("version").dump(), kJournalVersion));
    }
    for (const auto& l : j.at("leases")) {
      Lease lease;
      lease.gpu = static_cast<int>(json_int(l.at("gpu"), "gpu"));
      lease.setting = setting_from_name(l.at("setting").get<std::string>());
      lease.original = json_int(l.at("original"), "original");
      for (const auto& h : l.at("holders")) {
        lease.holders.push_back(Holder{static_cast<uid_t>(json_int(h.at("uid"), "uid")),
                                       static_cast<pid_t>(json_int(h.at("pid"), "pid")),
                                       h.at("start_ticks").get<unsigned long long>(),
                                       h.value("pidfd_id", uint64_t{0})});
      }
      // Absent in the journals of zeusd before the restore rule: none was pending then.
      lease.restore_pending = l.value("restore_pending", false);
      if (lease.gpu < 0 || lease.holders.empty()) {
        throw ConfigError("a lease without a GPU or holders");
      }
      book.leases_.push_back(std::move(lease));
    }
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("lease journal {} is not one: {}", where, e.what()));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("lease journal {} is not one: {}", where, e.what()));
  }
  return book;
}

}  // namespace zeus::daemon
