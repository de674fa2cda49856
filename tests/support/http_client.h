// A small HTTP client for the tests of zeus-cpp's servers (libcurl): one request, its status and
// body.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace zeus::test {

struct HttpReply {
  int status = 0;  // 0: no answer (connection refused, reset, timeout)
  std::string body;
  std::string content_type;
};

// An https server's CA, and the client's certificate and key (PEM files; empty: none).
struct HttpTls {
  std::string cacert;
  std::string cert;
  std::string key;
};

// One request; `body` sent as application/json when not empty (or with the Content-Type given
// in `headers`, "Name: value" lines).
HttpReply http_call(const std::string& method, const std::string& url, const std::string& body = "",
                    const std::vector<std::string>& headers = {}, const HttpTls& tls = {});

}  // namespace zeus::test
