/* fluidvim VNF — the Click-like packet engine: config language, elements, flow table, stats.
 * Freestanding; the kernel (or a host test) provides the platform hooks below. See contract/PROTOCOL.md §5. */
#ifndef FLUIDVIM_CLICK_H
#define FLUIDVIM_CLICK_H
#include "kstd.h"
#include "json.h"

#define CLICK_MAX_NICS 4
#define CLICK_MAX_SLOTS 65536

/* Offload metadata of a frame: the fields of its virtio-net header (host byte order). A NIC with
 * checksum/TSO offloads hands the engine frames whose L4 checksum is still partial (NEEDS_CSUM:
 * the device completes it) and TCP "superframes" of up to 64 KiB that the device segments into
 * gso_size-byte segments on the wire (GSO). The engine passes this through unchanged from the
 * receiving NIC to the transmitting one; the headers it matches on are the real ones (a superframe
 * carries the first segment's headers, with the total length). Counters count wire packets: a
 * superframe counts as its number of segments (click_segs), its bytes as the segments' bytes. */
struct click_vh { uint8_t flags, gso_type; uint16_t hdr_len, gso_size, csum_start, csum_offset; };
#define CLICK_VH_NEEDS_CSUM 1
#define CLICK_VH_DATA_VALID 2
#define CLICK_GSO_NONE 0
#define CLICK_GSO_TCPV4 1
#define CLICK_GSO_UDP 3
#define CLICK_GSO_TCPV6 4
#define CLICK_GSO_ECN 0x80

/* ---- platform hooks (implemented by the kernel, or by the host test harness) ---- */
/* Transmit a frame on NIC `nic`; copies the data before returning. vh: its offload metadata, or
 * NULL (a plain frame, complete checksums). Returns 0 on success, -1 if the NIC does not exist, its
 * TX ring is full, or it cannot take the frame's offloads (the engine counts it as a drop). */
int plat_tx(int nic, const uint8_t *data, uint16_t len, const struct click_vh *vh);
/* Monotonic nanoseconds. */
uint64_t plat_now_ns(void);
/* Host run delay of this vCPU so far (KVM steal time, ns; 0 without it): the QoE correction's
 * host wait (include/qoe.h). */
uint64_t plat_steal_ns(void);
/* Frames of up to CLICK_SRC_FRAME_ROOM bytes (with the NIC's header and alignment) that a source
 * element (FastUDPFlows) may hand plat_tx now, on any NIC, without taking the TX room the
 * forwarding of received frames needs (the kernel polls RX only while every NIC has room for a
 * whole poll): a generator sends no faster than its NICs drain and never blocks its own RX. */
#define CLICK_SRC_FRAME_ROOM 2048u
uint32_t plat_tx_room(void);

/* Each NIC's own MAC address: the one it answers ARP with (ARPResponder) and reports in `stats`.
 * The kernel sets the device's MAC at boot; `configure` may replace it (its `macs` field). */
void click_set_mac(int nic, const uint8_t mac[6]);
const uint8_t *click_mac(int nic);

/* ---- configuration ---- */
struct click_err { int line, col; char message[256]; };

/* Called once at boot. nics = number of NICs present; slots = flow-table capacity;
 * flow_timeout_ms = idle timeout for sessions. */
void click_init(int nics, uint32_t slots, uint32_t flow_timeout_ms);
/* Parse and build a new graph. On success swap it in (previous graph and its queued packets are
 * released; live flows are kept if the slot count is unchanged) and return 0. On error return -1,
 * fill *err, and leave the running graph untouched. slots == 0 keeps the current capacity. */
int click_configure(const char *text, size_t len, uint32_t slots, struct click_err *err);
bool click_configured(void);
uint32_t click_element_count(void);

/* ---- data path ---- */
/* One frame received on `nic`; the engine copies what it needs before returning. */
void click_rx(int nic, const uint8_t *data, uint16_t len);
/* The same with offload metadata (NULL = none, as click_rx). */
void click_rx_vh(int nic, const uint8_t *data, uint16_t len, const struct click_vh *vh);
/* Wire packets a frame stands for: 1, or a GSO superframe's number of segments; *wire_bytes
 * (may be NULL) gets their total length (each segment repeats the headers). */
uint32_t click_segs(const uint8_t *data, uint16_t len, const struct click_vh *vh, uint64_t *wire_bytes);
/* Scheduler round: drain Queues, expire idle flows (cheaply, amortised). Returns true if any work
 * was done (the kernel keeps polling while there is work, and may idle otherwise). */
bool click_run_tasks(void);
/* When the engine next needs to run although no packet arrives (plat_now_ns clock; 0 = never):
 * the earliest idle-flow expiry. The kernel sleeps until then (tickless), not on a periodic tick. */
uint64_t click_next_timer_ns(uint64_t now_ns);
/* A source element (a traffic generator) has frames to send: the kernel keeps polling instead of
 * halting between them, so the frames coming back are seen without an interrupt's wake-up. */
bool click_sources_active(void);

/* ---- stats: writes the members of the PROTOCOL.md `stats` result object after "uptime_us" and
 * "configured": keys "slots", "nics", "elements", "latency_ns" (the caller opened the object). */
void click_stats_json(struct jw *w);
/* Slot numbers for the ready/ping messages. */
uint32_t click_slots_total(void);
uint32_t click_slots_used(void);
/* Session slots at the service's QoE (include/qoe.h): set the probe's capacity (0 = off), the
 * VNF's latency budget at the quantile; the state as `"qoe":{...}`. */
void click_qoe_set(uint32_t probed, uint64_t budget_ns, uint32_t quantile_ppm, uint32_t wait_ppm);
void click_qoe_json(struct jw *w);

#endif
