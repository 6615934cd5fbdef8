// A file of dataplane/ including a layer above it: compiled with dataplane's
// include root (build/layers/dataplane), this must fail ("No such file").
#include "proto/node.hpp"
#include "experiment/runner.hpp"
