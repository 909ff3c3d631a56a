// All of nn in one include.
#pragma once

#include "nn/activation.h"
#include "nn/batch_norm.h"
#include "nn/causal_self_attention.h"
#include "nn/conv2d.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/flatten.h"
#include "nn/init.h"
#include "nn/layer_norm.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/metrics.h"
#include "nn/module.h"
#include "nn/pooling.h"
#include "nn/sequential.h"
#include "nn/serialize.h"
