#include "zeus/common/env.h"

#include <array>
#include <cstdlib>
#include <mutex>
#include <set>

#include "zeus/common/logging.h"
#include "zeus/common/parse.h"

namespace zeus {

std::span<const EnvVar> all_env_vars() {
  static constexpr std::array kAll{kEnvNvmlLibrary,
                                   kEnvCarbonIntensity,
                                   kEnvCarbonLocation,
                                   kEnvElectricityPrice,
                                   kEnvMaxCarbonIntensity,
                                   kEnvMaxPrice,
                                   kEnvGridInterval,
                                   kEnvGridPoll,
                                   kEnvElectricityMapsToken,
                                   kEnvElectricityMapsUrl,
                                   kEnvOpenEiUrl,
                                   kEnvOpenEiApiKey,
                                   kEnvZeusdSockPath,
                                   kEnvZeusdHostPort,
                                   kEnvZeusdToken,
                                   kEnvZeusdAdminTokenFile,
                                   kEnvBsoDatabaseUrl,
                                   kEnvBsoServerUrl,
                                   kEnvBsoBatchSizes,
                                   kEnvPushgatewayUrl,
                                   kEnvRdzvTokenFile,
                                   kEnvTraceDir,
                                   kEnvSimGpus,
                                   kEnvSimState,
                                   kEnvRaplRoot,
                                   kEnvLogLevel,
                                   kEnvSpawnWorker,
                                   kEnvSpawnErrorDir,
                                   kEnvPython,
                                   kEnvLogDir,
                                   kEnvJobId,
                                   kEnvTargetMetric,
                                   kEnvCostThresh,
                                   kEnvEtaKnob,
                                   kEnvProfileParams,
                                   kEnvUseOptimalPl,
                                   kEnvMeasureOnly,
                                   kEnvPowerLimitPlan,
                                   kEnvDevice,
                                   kEnvSimClock,
                                   kEnvMaxEpochs,
                                   kEnvJournalDir,
                                   kEnvRestartCount,
                                   kEnvCudaVisibleDevices,
                                   kEnvCudaDeviceOrder,
                                   kEnvAmdsmiLibrary,
                                   kEnvAmdsmiLibDir,
                                   kEnvRocmPath,
                                   kEnvRocrVisibleDevices,
                                   kEnvHipVisibleDevices,
                                   kEnvRank,
                                   kEnvLocalRank,
                                   kEnvWorldSize,
                                   kEnvLocalWorldSize,
                                   kEnvGroupRank,
                                   kEnvGroupWorldSize,
                                   kEnvRoleName,
                                   kEnvRoleRank,
                                   kEnvRoleWorldSize,
                                   kEnvMasterAddr,
                                   kEnvMasterPort,
                                   kEnvTorchelasticRunId,
                                   kEnvTorchelasticMaxRestarts,
                                   kEnvTorchelasticRestartCount,
                                   kEnvTorchelasticUseAgentStore,
                                   kEnvPath,
                                   kEnvSslCertFile,
                                   kEnvSslCertDir,
                                   kEnvGlibcTunables};
  return kAll;
}

std::optional<std::string> get_env(const EnvVar& var) {
  const char* value = std::getenv(std::string(var.name).c_str());
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  static std::mutex mu;
  static std::set<std::string, std::less<>> logged;
  {
    std::lock_guard lock(mu);
    if (logged.insert(std::string(var.name)).second) {
      logger().debug("{}={} ({})", var.name, value, var.doc);
    }
  }
  return std::string(value);
}

std::optional<std::string> get_env_set(const EnvVar& var) {
  const char* value = std::getenv(std::string(var.name).c_str());
  if (value == nullptr) {
    return std::nullopt;
  }
  return std::string(value);
}

std::optional<std::string> get_launcher_env(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

std::string get_env_or_default(const EnvVar& var) {
  return get_env(var).value_or(std::string(var.default_value));
}

std::optional<int> lookup_int(const EnvLookup& lookup, std::string_view name) {
  if (auto value = lookup(name)) {
    return parse_int_or_throw(*value, name);
  }
  return std::nullopt;
}

}  // namespace zeus
