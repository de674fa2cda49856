"""Zeus 0.16's optimizers over zeus-cpp's engine: ``zeus_cpp.optimizer.power_limit``."""
