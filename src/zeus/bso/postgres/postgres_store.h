// The batch-size service on PostgreSQL (libpq), for a cluster: several `zeus bso-server`s may
// share one database. lock_job is SELECT ... FOR UPDATE on the job's row, so requests for one job
// take turns across servers while other jobs go on; migrations run under an advisory lock.
#pragma once

#include <memory>
#include <string>

#include "zeus/bso/store.h"

namespace zeus::bso {

// Connects to `conninfo` (a postgresql:// URL or libpq key=value string) and applies the
// migrations. Throws DatabaseError naming the server (without its password) when it cannot.
std::unique_ptr<Store> open_postgres_store(const std::string& conninfo,
                                           const StoreOptions& options);

}  // namespace zeus::bso
