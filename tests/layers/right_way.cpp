// A file of dataplane/ may include the layers below it (wire, core, proto).
#include "proto/node.hpp"
#include "wire/packet.hpp"
