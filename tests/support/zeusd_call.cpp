// Test helper: a zeusd client process. Sends each request to the daemon of ZEUSD_SOCK_PATH (or
// ZEUSD_HOST_PORT with ZEUSD_TOKEN) and prints "status=<code> body=<body>" per request, then,
// with --hold, "ready" and sleeps until killed (a client process that keeps its leases); with
// ZEUSD_TEST_ADMIN_TOKEN it sends that as zeusd's admin token:
//   zeus_test_zeusd_call [--hold] METHOD TARGET [METHOD TARGET...]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "zeus/common/errors.h"
#include "zeus/device/zeusd/zeusd_client.h"

int main(int argc, char** argv) {
  int i = 1;
  const bool hold = argc > 1 && std::strcmp(argv[1], "--hold") == 0;
  i += hold ? 1 : 0;
  try {
    const auto endpoint = zeus::device::zeusd::ZeusdEndpoint::from_env();
    if (!endpoint) {
      std::fprintf(stderr, "zeusd_call: set ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT\n");
      return 2;
    }
    auto with_admin = *endpoint;
    if (const char* token = std::getenv("ZEUSD_TEST_ADMIN_TOKEN"); token != nullptr) {
      with_admin.admin_token = token;  // an administrator's client (the tests of the token)
    }
    zeus::device::zeusd::ZeusdClient client(with_admin);
    for (; i + 1 < argc; i += 2) {
      const auto reply = client.request(argv[i], argv[i + 1]);
      std::printf("status=%ld body=%s\n", reply.status, reply.body.c_str());
    }
    std::printf("ready\n");
    std::fflush(stdout);
    while (hold) {
      ::pause();
    }
  } catch (const zeus::Error& e) {
    std::fprintf(stderr, "zeusd_call: %s\n", e.what());
    return 1;
  }
  return 0;
}
