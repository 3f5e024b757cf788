/* src/optim/internal.h: what the files of src/optim share and the public API does not show. */
#ifndef CUTTLE_OPTIM_INTERNAL_H
#define CUTTLE_OPTIM_INTERNAL_H

#include "core/internal.h"

/* The parameters of o (borrowed from its module, which o borrows) and their count in *n, for the
 * GradScaler (grad_scaler.c), which unscales their gradients. o must not be NULL. */
ct_named_tensor *ct__optimizer_params(ct_optimizer *o, int *n);

#endif
