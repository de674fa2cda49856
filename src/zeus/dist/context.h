// Forwarding header: the distributed runtime is zeus/distributed/ (namespace zeus::distributed);
// zeus::dist is an alias of it, so code that includes this header builds unchanged.
#pragma once

#include "zeus/distributed/context.h"
#include "zeus/distributed/dist_alias.h"
