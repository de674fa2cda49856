// The batch-size service's embedded database: one SQLite file (libsqlite3), in WAL mode with
// synchronous=FULL, so a committed report survives the server's SIGKILL and the machine's crash.
// Every transaction is BEGIN IMMEDIATE: SQLite has one writer at a time, and taking the write
// lock first is what makes lock_job exclusive across processes sharing the file.
#pragma once

#include <filesystem>
#include <memory>

#include "zeus/bso/store.h"

namespace zeus::bso {

// Opens (creating it and its schema if missing) the database file at `path`. Throws
// DatabaseError naming the path when it cannot be opened, is not a database, or is newer.
std::unique_ptr<Store> open_sqlite_store(const std::filesystem::path& path,
                                         const StoreOptions& options);

}  // namespace zeus::bso
