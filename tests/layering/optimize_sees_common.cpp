// Must compile: the control case, so the others fail for the edge and not for the setup.
#include "zeus/common/errors.h"
#include "zeus/optimize/cost.h"
