/* src/io/safetensors_internal.h: what src/io/checkpoint.c asks of the safetensors writer
 * (src/io/safetensors.c) beyond the public ct_safetensors_save. */
#ifndef CUTTLE_IO_SAFETENSORS_INTERNAL_H
#define CUTTLE_IO_SAFETENSORS_INTERNAL_H

#include "core/internal.h"
#include "cuttle/io.h"

/* ct_safetensors_save, and the file's "__metadata__" records, after the caller's n_meta strings,
 * CT_SAFETENSORS_CHECKSUM_KEY = "xxh3_64:<16 lowercase hex digits>": XXH3_64bits (seed 0) of the
 * byte buffer, i.e. every tensor byte in file order, hashed as the tensors are streamed out (each is
 * still copied to the host once). The header is written first with a placeholder of the same width,
 * then rewritten in place (pwrite at offset 8) with the real value before the file is fsync'ed and
 * renamed, so the atomic-write guarantees of ct_safetensors_save hold unchanged. The caller's meta
 * must not hold the key (CT_EINVAL, as for ct_safetensors_save). ct_checkpoint_save's writer. */
ct_status ct__safetensors_save_checksummed(const char *path, int n, const char *const *names,
                                           ct_tensor *const *tensors, int n_meta, const ct_metadata_kv *meta);

#endif
