#include <unistd.h>

#include <exception>
#include <iostream>

#include "cli.h"

int main(int argc, char** argv) {
  // run_cli() maps errors to exit codes itself; this is the last line before std::terminate().
  try {
    return zeus::cli::run_cli(argc, argv, std::cout, std::cerr, ::isatty(STDOUT_FILENO) == 1);
  } catch (const std::exception& e) {
    std::cerr << "zeus: error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "zeus: error: an exception of unknown type; please report it\n";
  }
  return 1;
}
