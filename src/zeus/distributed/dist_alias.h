// zeus::dist, the distributed runtime's name before it was zeus::distributed: an alias, so code
// written against it (zeus::dist::init(), zeus::dist::Context) builds unchanged. The headers under
// zeus/dist/ forward to zeus/distributed/ and bring this alias.
#pragma once

namespace zeus {
namespace distributed {}
namespace dist = distributed;
}  // namespace zeus
