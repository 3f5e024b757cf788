/* core/version.c: ct_version(), the version of the library that is loaded (cuttle/version.h). */
#include "cuttle/version.h"

#define CT__STR2(x) #x
#define CT__STR(x) CT__STR2(x)

/* Built from the header's macros, so the string cannot disagree with them. */
const char *ct_version(void) {
  return CT__STR(CT_VERSION_MAJOR) "." CT__STR(CT_VERSION_MINOR) "." CT__STR(CT_VERSION_PATCH);
}
