#pragma once
// In-place edits of encoded datagrams (wire/packet.hpp's format), for an
// engine that sends one encoding to several destinations.
#include <cstddef>

#include "wire/packet.hpp"

namespace ina {

// Rewrites the destination of an encoded datagram (at least kHeaderBytes long).
void set_wire_dst(std::byte* datagram, NodeId dst);

}  // namespace ina
