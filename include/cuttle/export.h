/* cuttle/export.h: CT_API, the mark of a public function.
 *
 * The library is compiled with -fvisibility=hidden, so only the functions declared with CT_API
 * (every ct_ function of the public headers) are exported from libcuttle.so; the internal ct__
 * functions stay hidden, which keeps them out of the ABI and lets the compiler call them directly
 * rather than through the PLT. Hidden symbols still link from the static library libcuttle.a.
 * Every public header includes this file. */
#ifndef CUTTLE_EXPORT_H
#define CUTTLE_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define CT_API __attribute__((visibility("default")))
#else
#define CT_API
#endif

#endif
