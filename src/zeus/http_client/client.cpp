#include "zeus/http_client/client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <string>

#include "zeus/common/build_info.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"

namespace zeus::http_client {
namespace {

struct Transfer {
  const ClientOptions* options = nullptr;
  const Request* request = nullptr;
  Reply* reply = nullptr;
  size_t header_bytes = 0;
  std::string over;  // which bound was passed, when one was
};

size_t on_body(char* data, size_t size, size_t n, void* cls) {
  auto* t = static_cast<Transfer*>(cls);
  const size_t bytes = size * n;
  if (t->reply->body.size() + bytes > t->options->max_body_bytes) {
    t->over = fmt::format("a body over {} bytes", t->options->max_body_bytes);
    return 0;  // libcurl aborts the transfer (CURLE_WRITE_ERROR)
  }
  t->reply->body.append(data, bytes);
  return bytes;
}

size_t on_header(char* /*data*/, size_t size, size_t n, void* cls) {
  auto* t = static_cast<Transfer*>(cls);
  t->header_bytes += size * n;
  if (t->header_bytes > t->options->max_header_bytes) {
    t->over = fmt::format("headers over {} bytes", t->options->max_header_bytes);
    return 0;
  }
  return size * n;
}

int on_progress(void* cls, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* t = static_cast<Transfer*>(cls);
  return t->request->abort && t->request->abort() ? 1 : 0;
}

std::string where_of(const ClientOptions& o, const Request& r) {
  return o.unix_socket.empty() ? r.url : fmt::format("{} (socket {})", r.url, o.unix_socket);
}

// The CA certificates for https:// in the pip wheel, whose libcurl and OpenSSL are built for
// every distribution and so have no bundle compiled in that fits them all: with SSL_CERT_FILE or
// SSL_CERT_DIR set, OpenSSL's defaults (which read them); else the first distribution bundle
// there is. nullptr in a source build (the system libcurl knows its own) and where none is found.
const char* wheel_ca_bundle() {
  static const std::string bundle = []() -> std::string {
    if (!is_wheel_build() || get_env_set(kEnvSslCertFile) || get_env_set(kEnvSslCertDir)) {
      return "";
    }
    constexpr std::array kBundles = {
        "/etc/ssl/certs/ca-certificates.crt",                 // Debian, Ubuntu
        "/etc/pki/tls/certs/ca-bundle.crt",                   // RHEL, Rocky, Alma, Fedora
        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  // RHEL's source of the above
        "/etc/ssl/ca-bundle.pem",                             // SUSE
        "/etc/ssl/cert.pem",                                  // Alpine, Arch
    };
    for (const char* path : kBundles) {
      std::error_code ec;
      if (std::filesystem::is_regular_file(path, ec)) {
        return path;
      }
    }
    return "";
  }();
  return bundle.empty() ? nullptr : bundle.c_str();
}

}  // namespace

bool available() {
  return true;
}

Client::Client(ClientOptions options) : options_(std::move(options)) {
  static const CURLcode init = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (init != CURLE_OK || (curl_ = curl_easy_init()) == nullptr) {
    throw InternalError("libcurl failed to initialize");
  }
}

Client::~Client() {
  curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Reply Client::perform(const Request& request) {
  std::lock_guard lock(mu_);
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);  // keeps the connection, forgets the last request's options
  Reply reply;
  Transfer t{&options_, &request, &reply, 0, {}};
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  if (const char* ca = wheel_ca_bundle(); ca != nullptr && request.url.starts_with("https:")) {
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
  }
  if (!options_.unix_socket.empty()) {
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, options_.unix_socket.c_str());
  }
  if (request.method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  if (request.method != "GET" && request.method != "HEAD") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(request.body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.c_str());
  }
  curl_slist* headers = nullptr;
  for (const auto& h : request.headers) {
    headers = curl_slist_append(headers, h.c_str());
  }
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  if (request.abort) {
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  }
  // A declared body over the bound is refused before any of it is read.
  curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options_.max_body_bytes));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.total_timeout.count()));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_NODELAY, options_.tcp_nodelay ? 1L : 0L);
  if (!options_.use_proxy) {
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  }
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  if (!options_.ca_file.empty()) {
    curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str());
  }
  if (!options_.cert_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, options_.cert_file.c_str());
  }
  if (!options_.key_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLKEY, options_.key_file.c_str());
  }
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (!t.over.empty() || rc == CURLE_FILESIZE_EXCEEDED) {
    throw IoError(fmt::format(
        "{} answered {}, more than a reply may hold; is it the service "
        "you meant?",
        where_of(options_, request),
        t.over.empty() ? fmt::format("a body over {} bytes", options_.max_body_bytes) : t.over));
  }
  if (rc == CURLE_ABORTED_BY_CALLBACK) {
    throw IoError(fmt::format("{}: the request was aborted", where_of(options_, request)));
  }
  if (rc != CURLE_OK) {
    throw IoError(
        fmt::format("cannot reach {}: {}", where_of(options_, request), curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
  return reply;
}

}  // namespace zeus::http_client
