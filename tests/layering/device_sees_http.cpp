// Must not compile: device/ (and all of zeus_core) is below the daemon and its HTTP server.
#include "zeus/http/server.h"
