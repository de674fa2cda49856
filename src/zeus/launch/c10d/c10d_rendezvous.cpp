#include "zeus/launch/c10d/c10d_rendezvous.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"

namespace zeus::launch::c10d {
namespace {

std::unique_ptr<Server> maybe_serve(const C10dOptions& o) {
  if (!o.serve) {
    return nullptr;
  }
  try {
    auto server = std::make_unique<Server>(o.endpoint_host, o.endpoint_port, o.rendezvous);
    if (o.say) {
      o.say(fmt::format("serving rendezvous '{}' on {}:{} for {}..{} nodes", o.rendezvous.run_id,
                        o.endpoint_host, o.endpoint_port, o.rendezvous.min_nodes,
                        o.rendezvous.max_nodes));
    }
    return server;
  } catch (const IoError&) {
    return nullptr;  // another launcher on this host serves it: join it as a client
  }
}

}  // namespace

C10dRendezvous::C10dRendezvous(C10dOptions options)
    : server_(maybe_serve(options)),
      client_(options.endpoint_host, options.endpoint_port, options.rendezvous, options.node) {}

}  // namespace zeus::launch::c10d
