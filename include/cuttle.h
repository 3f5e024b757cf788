/* cuttle.h: the whole public API of cuttle, a deep-learning runtime in C. */
#ifndef CUTTLE_H
#define CUTTLE_H
#include "cuttle/version.h"
#include "cuttle/status.h"
#include "cuttle/device.h"
#include "cuttle/tensor.h"
#include "cuttle/cuda.h"
#include "cuttle/ops.h"
#include "cuttle/autograd.h"
#include "cuttle/autocast.h"
#include "cuttle/nn.h"
#include "cuttle/gpt2.h"
#include "cuttle/optim.h"
#include "cuttle/io.h"
#include "cuttle/dlpack.h"
#include "cuttle/tensorboard.h"
#include "cuttle/data.h"
#include "cuttle/datasets.h"
#include "cuttle/monitor.h"
#include "cuttle/profiler.h"
#include "cuttle/dist.h"
#include "cuttle/data_parallel.h"
#endif
