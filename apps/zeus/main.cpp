#include <unistd.h>

#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "zeus/launch/guardian.h"

int main(int argc, char** argv) {
  // `zeus run`'s sentinel: this program again, by exec (Note [the guardian]); not a subcommand
  // of the CLI (hidden from help, and no CLI parsing between the exec and the watch).
  if (argc >= 2 && argv[1] == zeus::launch::kGuardianCommand) {
    try {
      return zeus::launch::guardian_main(
          zeus::launch::parse_guardian_args(std::vector<std::string>(argv + 2, argv + argc)));
    } catch (const std::exception& e) {
      std::cerr << "zeus guardian: error: " << e.what() << "\n";
      return 2;
    }
  }
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
