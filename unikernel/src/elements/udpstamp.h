/* fluidvim VNF — the stamp FastUDPFlows writes at the start of each frame's UDP payload and
 * TimestampDiff reads back: magic, sequence number, send time (plat_now_ns), big-endian.
 *
 *   payload[0..2)   0xF1D0
 *   payload[2..10)  sequence number (0, 1, ... per FastUDPFlows since its graph started)
 *   payload[10..18) send time, ns of the sending VNF's clock
 *
 * So the smallest stamped frame is 14 + 20 + 8 + 18 = 60 bytes (Ethernet without FCS). */
#ifndef FLUIDVIM_UDPSTAMP_H
#define FLUIDVIM_UDPSTAMP_H
#include "kstd.h"

#define UDPSTAMP_MAGIC 0xF1D0u
#define UDPSTAMP_LEN 18u
#define UDPSTAMP_MIN_FRAME (14u + 20u + 8u + UDPSTAMP_LEN)

static inline void udpstamp_put64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static inline uint64_t udpstamp_get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

#endif
