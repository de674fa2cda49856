#include "support/http_client.h"

#include <curl/curl.h>

namespace zeus::test {

namespace {

size_t append_body(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

}  // namespace

HttpReply http_call(const std::string& method, const std::string& url, const std::string& body,
                    const std::vector<std::string>& headers, const HttpTls& tls) {
  HttpReply reply;
  CURL* curl = curl_easy_init();
  curl_slist* list = nullptr;
  bool typed = false;
  for (const std::string& h : headers) {
    list = curl_slist_append(list, h.c_str());
    typed = typed || h.rfind("Content-Type:", 0) == 0;
  }
  if (!typed) {
    list = curl_slist_append(list, "Content-Type: application/json");
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
  if (!tls.cacert.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, tls.cacert.c_str());
  }
  if (!tls.cert.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, tls.cert.c_str());
    curl_easy_setopt(curl, CURLOPT_SSLKEY, tls.key.c_str());
  }
  if (!body.empty()) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  if (curl_easy_perform(curl) == CURLE_OK) {
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    reply.status = static_cast<int>(status);
    char* type = nullptr;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
    reply.content_type = type != nullptr ? type : "";
  }
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return reply;
}

}  // namespace zeus::test
