// Authentication of the rendezvous: a shared secret that every node's launcher reads from
// --rdzv-conf token_file=PATH (or ZEUS_RDZV_TOKEN_FILE), and HMAC-SHA256 signatures with it.
//
// Note [rendezvous authentication]
// Without the secret, a party that reaches the rendezvous can neither join the run, nor change
// a round's master (the address every worker connects to), nor end a round.
//   - c10d/: every message of a connection is signed with a key of that connection and a
//     counter (c10d/channel.h), so a message recorded on one connection fails on any other and
//     a repeat on the same one fails its counter.
//   - etcd/: every record the run keeps in etcd is signed for its key (sign_record), so a record
//     cannot be forged or moved to another key; a node's record also names the lease it lives
//     by, so a dead node's record cannot be replayed; the run's state only moves forward
//     (etcd/round_logic.h). Deleting keys is what a writer without the secret can still do
//     there: etcd's own authentication (TLS client certificates, users) is what stops it.
// A node with a token refuses a rendezvous without one and the other way round, naming which
// side lacks it; a node with a wrong token is refused, saying so, and the run goes on.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "zeus/common/mac.h"

namespace zeus::launch {

// The rendezvous's MACs: HMAC-SHA256 as hex, compared in constant time (common/mac.h).
inline std::string hmac_hex(std::string_view key, std::string_view data) {
  return hmac_sha256_hex(key, data);
}
inline bool same_mac(std::string_view a, std::string_view b) {
  return constant_time_equal(a, b);
}
// 16 random bytes (getrandom) as 32 hex digits. Throws IoError.
std::string random_hex16();

// A record's signature for `key` (so that it cannot be moved to another key). Without a secret,
// nothing is signed: sign_record returns "", and verify_record accepts only "".
std::string sign_record(const std::optional<std::string>& secret, std::string_view key,
                        std::string_view body);
bool verify_record(const std::optional<std::string>& secret, std::string_view key,
                   std::string_view body, std::string_view mac);

}  // namespace zeus::launch
