// The one HTTP client (http_client/client.h) against a peer that misbehaves on purpose: a reply
// too large (declared, or streamed without a length), headers without end, silence. Each is an
// IoError naming the URL, within the timeouts, and nothing of it is kept.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "support/test_support.h"
#include "zeus/bso_client/client.h"
#include "zeus/common/errors.h"
#include "zeus/device/zeusd/zeusd_client.h"
#include "zeus/http_client/client.h"

namespace zeus::http_client {
namespace {

using ::testing::HasSubstr;

// One peer on loopback (TCP, or a Unix socket): reads a request head, then writes `head`, then
// `chunk` `repeat` times (or until the client leaves), then closes.
class Peer {
 public:
  Peer(std::string head, std::string chunk, long repeat, const std::string& unix_path = "")
      : head_(std::move(head)), chunk_(std::move(chunk)), repeat_(repeat) {
    if (unix_path.empty()) {
      fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      socklen_t len = sizeof addr;
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
      port_ = ntohs(addr.sin_port);
    } else {
      fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", unix_path.c_str());
      ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    }
    ::listen(fd_, 4);
    thread_ = std::thread([this] { serve(); });
  }
  ~Peer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string url(const std::string& path = "/") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  void serve() {
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      return;
    }
    std::string got;
    char buf[4096];
    while (got.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) {
        break;
      }
      got.append(buf, static_cast<size_t>(n));
    }
    bool ok = ::send(c, head_.data(), head_.size(), MSG_NOSIGNAL) >= 0;
    for (long i = 0; ok && !stop_ && i < repeat_; ++i) {
      ok = ::send(c, chunk_.data(), chunk_.size(), MSG_NOSIGNAL) >= 0;
    }
    if (repeat_ < 0) {  // silence until the client gives up
      while (!stop_ && ::recv(c, buf, sizeof buf, 0) > 0) {
      }
    }
    ::close(c);
  }

  std::string head_, chunk_;
  long repeat_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

const std::string kMiB(1 << 20, 'x');

TEST(HttpClient, ABodyOverTheBoundIsAnErrorNamingThePeer) {
  // Declared: refused from its Content-Length.
  Peer declared("HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n", kMiB, 1024);
  Client client({.max_body_bytes = 64 * 1024});
  try {
    client.perform({.url = declared.url("/big")});
    FAIL() << "a 1 GiB body was accepted";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr(declared.url("/big")));
    EXPECT_THAT(e.what(), HasSubstr("65536 bytes"));
  }
  // Streamed without a length (a hostile or broken peer): cut at the bound.
  Peer streamed("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", kMiB, 1024);
  Client other({.max_body_bytes = 64 * 1024});
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(other.perform({.url = streamed.url()}), IoError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(HttpClient, HeadersWithoutEndAreCut) {
  Peer peer("HTTP/1.1 200 OK\r\n", "X-Filler: " + std::string(1000, 'y') + "\r\n", 100'000);
  Client client({.max_header_bytes = 16 * 1024});
  try {
    client.perform({.url = peer.url()});
    FAIL();
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("headers over 16384 bytes"));
  }
}

TEST(HttpClient, ASilentPeerTimesOut) {
  Peer peer("", "", -1);
  Client client({.total_timeout = std::chrono::milliseconds(300)});
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(client.perform({.url = peer.url()}), IoError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(HttpClient, AnswersWithinTheBoundsAreReadOverTcpAndUnixSockets) {
  Peer tcp("HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\n", "nope!", 1);
  const Reply r = Client().perform({.url = tcp.url("/x")});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "nope!");

  test::TempDir dir;
  const std::string socket = (dir / "s.sock").string();
  Peer unix_peer("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", "ok", 1, socket);
  const Reply u = Client({.unix_socket = socket}).perform({.method = "POST", .url = "http://x/y"});
  EXPECT_EQ(u.status, 200);
  EXPECT_EQ(u.body, "ok");
  EXPECT_EQ(percent_encode("job 1/ä"), "job%201%2F%C3%A4");
}

// The clients written over it inherit the bound: zeusd's (on its socket) and the batch-size
// service's (over TCP) each refuse a 1 GiB answer, naming where it came from.
TEST(HttpClient, ZeusdAndBatchSizeClientsAreBoundedToo) {
  test::TempDir dir;
  const std::string socket = (dir / "zeusd.sock").string();
  Peer zeusd("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", kMiB, 1024, socket);
  device::zeusd::ZeusdClient client({.socket_path = socket});
  try {
    client.request("GET", "/discover");
    FAIL() << "zeusd's client took 1 GiB";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr(socket));
  }
  Peer bso("HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n", kMiB, 1024);
  bso::BsoClient service({.url = bso.url("")});
  try {
    service.next_trial("job");
    FAIL() << "the batch-size client took 1 GiB";
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("batch-size service"));
  }
}

}  // namespace
}  // namespace zeus::http_client
