// A build without libpq (the pip wheel, or ZEUS_WITH_POSTGRESQL=OFF): a postgresql:// store is a
// ConfigError saying which build has it; SQLite stores are unaffected.
#include "zeus/bso/postgres/postgres_store.h"
#include "zeus/common/build_info.h"
#include "zeus/common/errors.h"

namespace zeus::bso {

std::unique_ptr<Store> open_postgres_store(const std::string&, const StoreOptions&) {
  throw ConfigError(left_out_message("postgresql", "--database postgresql://"));
}

}  // namespace zeus::bso
