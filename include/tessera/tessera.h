/** \file
 * The whole public surface of tessera.
 */
#pragma once

#include "tessera/autograd.h"
#include "tessera/device.h"
#include "tessera/dispatch.h"
#include "tessera/dlpack.h"
#include "tessera/dtype.h"
#include "tessera/env.h"
#include "tessera/error.h"
#include "tessera/flop_counter.h"
#include "tessera/ops.h"
#include "tessera/scalar.h"
#include "tessera/symint.h"
#include "tessera/tensor.h"
#include "tessera/version.h"
