/* cuttle/version.h: the version of the headers a program was compiled against, and of the library
 * it runs with.
 *
 * This file is the one place the version is written: CMakeLists.txt reads the three numbers below
 * for project(VERSION), the shared library's SONAME (libcuttle.so.MAJOR), cuttle.pc, the CMake
 * package and the Debian package. The macros give the version at compile time; ct_version() gives
 * the version of the library actually loaded, so a program can tell the two apart after an upgrade
 * of libcuttle.so. */
#ifndef CUTTLE_VERSION_H
#define CUTTLE_VERSION_H

#include "cuttle/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_VERSION_MAJOR 0
#define CT_VERSION_MINOR 1
#define CT_VERSION_PATCH 0

/* One integer that orders versions: CT_VERSION_HEX >= 0x000100 means at least 0.1.0. */
#define CT_VERSION_HEX ((CT_VERSION_MAJOR << 16) | (CT_VERSION_MINOR << 8) | CT_VERSION_PATCH)

/* The library's version as "MAJOR.MINOR.PATCH" (for instance "0.1.0"). The string has static
 * storage: the caller must not free or modify it. Never fails, never touches ct_last_error(). */
CT_API const char *ct_version(void);

#ifdef __cplusplus
}
#endif
#endif
