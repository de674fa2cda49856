# The pip wheel's toolchain (scripts/wheels/build-wheels.sh, docs/packaging.md): zig's clang
# for glibc 2.28 with its own libc++ linked in, and every find_package, find_library and
# pkg-config lookup confined to ZEUS_WHEEL_PREFIX, the third-party libraries built by the same
# toolchain (scripts/wheels/build-deps.sh): nothing of the build machine's reaches the wheel.
#   -DCMAKE_TOOLCHAIN_FILE=cmake/zig-toolchain.cmake -DZEUS_WHEEL_TOOLS=DIR -DZEUS_WHEEL_PREFIX=DIR
# ZEUS_WHEEL_TOOLS holds the wrappers cc, c++, ar, ranlib and the file `triple`.
set(CMAKE_SYSTEM_NAME Linux)
if(NOT ZEUS_WHEEL_TOOLS OR NOT ZEUS_WHEEL_PREFIX)
  message(FATAL_ERROR "zig-toolchain.cmake needs -DZEUS_WHEEL_TOOLS=DIR -DZEUS_WHEEL_PREFIX=DIR "
                      "(scripts/wheels/build-wheels.sh passes them)")
endif()
# try_compile projects see the same two variables.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ZEUS_WHEEL_TOOLS ZEUS_WHEEL_PREFIX)
file(STRINGS ${ZEUS_WHEEL_TOOLS}/triple zeus_wheel_triple LIMIT_COUNT 1)
string(REGEX MATCH "^[^-]+" CMAKE_SYSTEM_PROCESSOR "${zeus_wheel_triple}")
set(CMAKE_C_COMPILER ${ZEUS_WHEEL_TOOLS}/cc)
set(CMAKE_CXX_COMPILER ${ZEUS_WHEEL_TOOLS}/c++)
set(CMAKE_AR ${ZEUS_WHEEL_TOOLS}/ar CACHE FILEPATH "zig ar")
set(CMAKE_RANLIB ${ZEUS_WHEEL_TOOLS}/ranlib CACHE FILEPATH "zig ranlib")
# No debug information (the wheels' size; the source build keeps it) and stripped links. No
# fused multiply-adds either (clang contracts a*b+c by default where the target has FMA, as
# aarch64 has): the simulator's arithmetic, and so `zeus simulate`'s numbers, are the same on
# both architectures and as the source build's.
set(CMAKE_C_FLAGS_INIT "-g0 -ffp-contract=off")
set(CMAKE_CXX_FLAGS_INIT "-g0 -ffp-contract=off")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-s")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-s")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-s")
set(CMAKE_FIND_ROOT_PATH ${ZEUS_WHEEL_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} ${ZEUS_WHEEL_PREFIX}/lib/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
set(OPENSSL_ROOT_DIR ${ZEUS_WHEEL_PREFIX})
set(OPENSSL_USE_STATIC_LIBS ON)
