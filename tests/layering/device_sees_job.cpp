// Must not compile: device/ is below job/ (dependencies point down only).
#include "zeus/job/energy_job.h"
