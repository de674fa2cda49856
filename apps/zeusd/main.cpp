#include <exception>
#include <iostream>

#include "zeusd_cli.h"

int main(int argc, char** argv) {
  try {
    return zeus::zeusd::run_zeusd(argc, argv, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "zeusd: error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "zeusd: error: an exception of unknown type; please report it\n";
  }
  return 1;
}
