#pragma once
// In-place edits of encoded datagrams (wire/packet.hpp's format), for an
// engine that sends one encoding to several destinations.
#include <cstddef>

#include "wire/packet.hpp"

namespace ina {

// Rewrites the destination of an encoded datagram (at least kHeaderBytes long).
void set_wire_dst(std::byte* datagram, NodeId dst);
// The flags and job fields of an encoded datagram (at least kHeaderBytes
// long), read or written in place.
uint16_t wire_flags(const std::byte* datagram);
void set_wire_flags(std::byte* datagram, uint16_t flags);
uint16_t wire_job(const std::byte* datagram);

}  // namespace ina
