#include "zeus/launch/c10d/channel.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/common/overloaded.h"
#include "zeus/launch/rendezvous_auth.h"

namespace zeus::launch::c10d {
namespace {

constexpr std::string_view kToClient = "s2c";
constexpr std::string_view kToServer = "c2s";

}  // namespace

Channel::Channel(Side side, std::optional<std::string> secret)
    : side_(side), secret_(std::move(secret)), nonce_(random_hex16()) {}

void Channel::begin(const std::string& client_nonce) {
  derive(client_nonce, nonce_);
}

void Channel::derive(const std::string& client_nonce, const std::string& server_nonce) {
  if (secret_) {
    key_ = hmac_hex(*secret_, fmt::format("zeus-rdzv|{}|{}", client_nonce, server_nonce));
  }
}

std::string Channel::mac_of(std::string_view direction, int64_t seq, std::string_view body) const {
  return hmac_hex(key_, fmt::format("{}|{}|{}", direction, seq, body));
}

std::string Channel::seal(Message message) {
  std::visit(Overloaded{[&](Hello& m) {
                          m.nonce = nonce_;
                          m.auth = keyed();
                        },
                        [&](Welcome& m) {
                          m.nonce = nonce_;
                          m.auth = keyed();
                        },
                        [](auto&) {}},
             message);
  if (!begun()) {
    return encode(message);
  }
  const int64_t seq = ++sent_;
  const std::string_view direction = side_ == Side::kClient ? kToServer : kToClient;
  return encode(message, Seal{seq, mac_of(direction, seq, encode(message))});
}

Message Channel::open(std::string_view line) {
  Decoded d = decode_sealed(line);
  if (!keyed()) {
    if (d.seal) {
      throw AuthError(fmt::format(
          "'{}' is signed, and this side has no rendezvous token: give every node the same "
          "--rdzv-conf token_file (or none)",
          op_name(d.message)));
    }
    return std::move(d.message);
  }
  if (!begun()) {
    if (side_ == Side::kServer || std::holds_alternative<Refused>(d.message)) {
      return std::move(d.message);  // the Hello (the shell begins), or a refusal before any key
    }
    const auto* welcome = std::get_if<Welcome>(&d.message);
    if (welcome == nullptr) {
      throw AuthError(fmt::format("the endpoint sent '{}' before its welcome", op_name(d.message)));
    }
    if (!welcome->auth) {
      throw AuthError(
          "the endpoint has no rendezvous token and this node has one: give every node the same "
          "--rdzv-conf token_file (or ZEUS_RDZV_TOKEN_FILE), or none");
    }
    derive(nonce_, welcome->nonce);
  }
  const std::string_view direction = side_ == Side::kClient ? kToClient : kToServer;
  const std::string_view op = op_name(d.message);
  if (!d.seal) {
    throw AuthError(fmt::format("'{}' is not signed, and this rendezvous requires its token", op));
  }
  if (!same_mac(d.seal->mac, mac_of(direction, d.seal->seq, encode(d.message)))) {
    throw AuthError(fmt::format(
        "'{}' carries a wrong signature: the sender's rendezvous token differs from this one's, "
        "or the message was recorded on another connection",
        op));
  }
  if (d.seal->seq != received_ + 1) {
    throw AuthError(fmt::format("'{}' has counter {} where {} was due: a replayed message", op,
                                d.seal->seq, received_ + 1));
  }
  ++received_;
  return std::move(d.message);
}

}  // namespace zeus::launch::c10d
