// ina-sparse-trace: train::sparse_trace_main (sparse_trace.cpp), which
// lives in the training layer so that <torch/torch.h> compiles once for
// the layer and this executable.
#include "train/train.hpp"

int main(int argc, char** argv) { return ina::train::sparse_trace_main(argc, argv); }
