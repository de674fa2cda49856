// Test helper: prints, for the ABI named by argv[1] (24, 25 or 26), the sizes and the offsets of
// the fields zeus-cpp reads of each AMD SMI structure it declares (amdsmi_api.h), as JSON, for
// tests/amd_abi/check_layouts.py to hold to AMD's own bindings. "optional": a structure whose
// call zeus-cpp treats as optional (older libraries lack it).
#include <cstddef>
#include <cstdio>
#include <string>

#include "zeus/device/amdsmi/amdsmi_api.h"

namespace {

std::string field(const char* name, size_t offset, bool last = false) {
  return "\"" + std::string(name) + "\": " + std::to_string(offset) + (last ? "" : ", ");
}

// One structure's entry: its size and its fields' offsets (`fields`, from ZEUS_AT/ZEUS_LAST).
std::string structure(const char* name, size_t size, const std::string& fields,
                      bool optional = false) {
  return "\"" + std::string(name) + "\": {" + (optional ? "\"optional\": true, " : "") +
         "\"size\": " + std::to_string(size) + ", \"offsets\": {" + fields + "}}";
}

}  // namespace

#define ZEUS_AT(type, member) field(#member, offsetof(type, member))
#define ZEUS_LAST(type, member) field(#member, offsetof(type, member), true)

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s 24|25|26\n", argv[0]);
    return 2;
  }
  const std::string abi = argv[1];
  std::string out = "{";
  if (abi == "26") {
    out +=
        structure("amdsmi_version_t", sizeof(amdsmi_version_abi26_t),
                  ZEUS_AT(amdsmi_version_abi26_t, major) + ZEUS_AT(amdsmi_version_abi26_t, minor) +
                      ZEUS_AT(amdsmi_version_abi26_t, release) +
                      ZEUS_LAST(amdsmi_version_abi26_t, build)) +
        ", ";
    out += structure("amdsmi_power_info_t", sizeof(amdsmi_power_info_abi26_t),
                     ZEUS_AT(amdsmi_power_info_abi26_t, socket_power) +
                         ZEUS_AT(amdsmi_power_info_abi26_t, current_socket_power) +
                         ZEUS_AT(amdsmi_power_info_abi26_t, average_socket_power) +
                         ZEUS_LAST(amdsmi_power_info_abi26_t, power_limit)) +
           ", ";
    out += structure("amdsmi_proc_info_t", sizeof(amdsmi_proc_info_abi26_t),
                     ZEUS_LAST(amdsmi_proc_info_abi26_t, pid)) +
           ", ";
  } else if (abi == "24" || abi == "25") {
    out +=
        structure("amdsmi_version_t", sizeof(amdsmi_version_abi25_t),
                  ZEUS_AT(amdsmi_version_abi25_t, year) + ZEUS_AT(amdsmi_version_abi25_t, major) +
                      ZEUS_AT(amdsmi_version_abi25_t, minor) +
                      ZEUS_AT(amdsmi_version_abi25_t, release) +
                      ZEUS_LAST(amdsmi_version_abi25_t, build)) +
        ", ";
    if (abi == "24") {
      out += structure("amdsmi_power_info_t", sizeof(amdsmi_power_info_abi24_t),
                       ZEUS_AT(amdsmi_power_info_abi24_t, current_socket_power) +
                           ZEUS_AT(amdsmi_power_info_abi24_t, average_socket_power) +
                           ZEUS_LAST(amdsmi_power_info_abi24_t, power_limit)) +
             ", ";
    } else {
      out += structure("amdsmi_power_info_t", sizeof(amdsmi_power_info_abi25_t),
                       ZEUS_AT(amdsmi_power_info_abi25_t, socket_power) +
                           ZEUS_AT(amdsmi_power_info_abi25_t, current_socket_power) +
                           ZEUS_AT(amdsmi_power_info_abi25_t, average_socket_power) +
                           ZEUS_LAST(amdsmi_power_info_abi25_t, power_limit)) +
             ", ";
    }
  } else {
    std::fprintf(stderr, "ABI %s: zeus-cpp reads 24, 25 and 26\n", abi.c_str());
    return 2;
  }
  // The structures every ABI shares.
  out += structure("amdsmi_power_cap_info_t", sizeof(amdsmi_power_cap_info_t),
                   ZEUS_AT(amdsmi_power_cap_info_t, power_cap) +
                       ZEUS_AT(amdsmi_power_cap_info_t, default_power_cap) +
                       ZEUS_AT(amdsmi_power_cap_info_t, min_power_cap) +
                       ZEUS_LAST(amdsmi_power_cap_info_t, max_power_cap)) +
         ", ";
  out += structure("amdsmi_clk_info_t", sizeof(amdsmi_clk_info_t),
                   ZEUS_AT(amdsmi_clk_info_t, clk) + ZEUS_AT(amdsmi_clk_info_t, min_clk) +
                       ZEUS_LAST(amdsmi_clk_info_t, max_clk)) +
         ", ";
  out += structure("amdsmi_kfd_info_t", sizeof(amdsmi_kfd_info_t),
                   ZEUS_AT(amdsmi_kfd_info_t, kfd_id) + ZEUS_LAST(amdsmi_kfd_info_t, node_id)) +
         ", ";
  out += structure("amdsmi_enumeration_info_t", sizeof(amdsmi_enumeration_info_t),
                   ZEUS_LAST(amdsmi_enumeration_info_t, hip_id), /*optional=*/true);
  out += "}";
  std::printf("%s\n", out.c_str());
  return 0;
}
