// One c10d rendezvous connection's signing and checking (Note [rendezvous authentication] in
// rendezvous_auth.h).
//
// Note [c10d channel]
//   1. The client's Hello carries a fresh random nonce Nc and whether it has a token; the server
//      answers with a Welcome carrying its own nonce Ns (or refuses a peer whose token presence
//      differs from its own, naming which side lacks one).
//   2. With a token, from the Welcome on both sides sign every message with the session key
//      K = HMAC(secret, "zeus-rdzv|" Nc "|" Ns), over the direction, a counter that starts at 1
//      and grows by one per message in that direction, and the message's canonical encoding.
//   3. The Welcome, the server's first signed message, proves to the node that the endpoint
//      knows the secret (a stranger cannot pose as the rendezvous and hand out a master
//      address); the node's Join proves the same to the server.
//   4. A message recorded on one connection fails on any other (another Ns, another K); a
//      repeat on the same connection fails the counter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "zeus/launch/c10d/protocol.h"

namespace zeus::launch::c10d {

// Contract: one thread at a time (callers lock).
class Channel {
 public:
  enum class Side { kClient, kServer };
  Channel(Side side, std::optional<std::string> secret);

  bool keyed() const { return secret_.has_value(); }
  bool begun() const { return !key_.empty(); }
  const std::string& nonce() const { return nonce_; }
  // Signed messages this side checked (0 until the first one after the handshake).
  int64_t received() const { return received_; }

  // One line (no newline). Hello and Welcome carry this side's nonce and whether it is keyed;
  // once begun, every message is signed with the next counter.
  std::string seal(Message message);
  // Decodes and, once begun, checks the signature and counter. A client begins the session on
  // the server's Welcome. Throws AuthError naming why (unsigned where a signature is due, a bad
  // signature, a repeated or skipped counter), VersionMismatch or DistError for a line that is
  // not a message of this protocol.
  Message open(std::string_view line);
  // The server, on a keyed Hello: derives the session key from the client's nonce and its own.
  void begin(const std::string& client_nonce);

 private:
  void derive(const std::string& client_nonce, const std::string& server_nonce);
  std::string mac_of(std::string_view direction, int64_t seq, std::string_view body) const;

  Side side_;
  std::optional<std::string> secret_;
  std::string nonce_;
  std::string key_;  // empty until begun
  int64_t sent_ = 0;
  int64_t received_ = 0;
};

}  // namespace zeus::launch::c10d
