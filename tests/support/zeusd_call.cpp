// Test helper: a zeusd client process. Sends each request to the daemon of ZEUSD_SOCK_PATH (or
// ZEUSD_HOST_PORT with ZEUSD_TOKEN) and prints "status=<code> body=<body>" per request, then,
// with --hold, "ready" and sleeps until killed (a client process that keeps its leases):
//   zeus_test_zeusd_call [--hold] METHOD TARGET [METHOD TARGET...]
#include <unistd.h>

#include <cstdio>
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
    zeus::device::zeusd::ZeusdClient client(*endpoint);
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
