// zeus bso-server: the batch-size service on the HTTP module zeusd uses.
#include <fmt/format.h>

#include <csignal>
#include <ostream>

#include "cli.h"
#include "zeus/common/env.h"
#include "zeus/common/errors.h"

#ifdef ZEUS_HAVE_BSO_SERVER
#include "zeus/bso/service.h"
#include "zeus/bso/store.h"
#include "zeus/common/signal_pipe.h"
#include "zeus/http/server.h"
#endif

namespace zeus::cli {

#ifdef ZEUS_HAVE_BSO_SERVER

int run_bso_server(const BsoServerCommandOptions& options, std::ostream& out, std::ostream& err) {
  const auto fail = [&err](int code, const std::string& what) {
    err << "zeus bso-server: error: " << what << "\n";
    return code;
  };
  const std::string url =
      options.database.empty() ? get_env_or_default(kEnvBsoDatabaseUrl) : options.database;
  bso::ServiceOptions service_options;
  try {
    service_options.default_policy = optimize::parse_policy_choice(options.policy, options.lean);
  } catch (const ConfigError& e) {
    return fail(kExitUsage, e.what());
  }
  // Signals are caught before the store opens, so a SIGTERM during a long migration wait still
  // ends the server cleanly.
  SignalPipe signals({SIGINT, SIGTERM});
  std::unique_ptr<bso::Store> store;
  try {
    store = bso::open_store(url);
  } catch (const ConfigError& e) {
    return fail(kExitUsage, e.what());
  } catch (const bso::DatabaseError& e) {
    return fail(kExitUsage, e.what());
  }
  service_options.dispatched_timeout =
      std::chrono::duration_cast<std::chrono::seconds>(options.trial_timeout);
  bso::Service service(*store, service_options);

  http::ServerOptions server_options;
  server_options.mode = http::ServerOptions::Mode::kTcp;
  server_options.tcp_address = fmt::format("{}:{}", options.host, options.port);
  server_options.max_body_bytes = options.max_body_bytes;
  server_options.max_connections = options.max_connections;
  server_options.idle_timeout =
      std::chrono::duration_cast<std::chrono::seconds>(options.idle_timeout);
  std::unique_ptr<http::Server> server;
  try {
    server = std::make_unique<http::Server>(
        server_options, [&service](const http::Request& r) { return service.handle(r); });
  } catch (const Error& e) {
    return fail(kExitUsage, e.what());
  }
  out << fmt::format(
             "zeus bso-server: serving Zeus 0.16's batch-size API on http://{} "
             "(database {})\n",
             server->address(), store->describe())
      << std::flush;
  while (signals.wait_for(std::chrono::seconds(1)) == 0) {
  }
  server.reset();  // in-flight requests finish; their transactions commit or roll back
  out << "zeus bso-server: stopped\n";
  return kExitOk;
}

#else

int run_bso_server(const BsoServerCommandOptions& /*options*/, std::ostream& /*out*/,
                   std::ostream& err) {
  err << "zeus bso-server: error: this zeus was built without the batch-size service "
         "(ZEUS_BUILD_BSO_SERVER=OFF, or ZEUS_BUILD_ZEUSD=OFF); rebuild with libsqlite3-dev, "
         "libpq-dev and libmicrohttpd-dev installed\n";
  return kExitUsage;
}

#endif

}  // namespace zeus::cli
