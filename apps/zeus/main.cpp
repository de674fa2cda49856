#include <unistd.h>

#include <iostream>

#include "cli.h"

int main(int argc, char** argv) {
  return zeus::cli::run_cli(argc, argv, std::cout, std::cerr, ::isatty(STDOUT_FILENO) == 1);
}
