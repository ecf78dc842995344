/* fluidvim VNF — legacy (0.9.5) virtio over virtio-mmio v1 and virtio-pci (I/O BAR0):
 * virtio-net NICs and one virtio-console (the control channel, when present). */
#ifndef FLUIDVIM_VIRTIO_H
#define FLUIDVIM_VIRTIO_H
#include "kstd.h"

#define NET_MAX_NICS 4

enum net_transport { NET_MMIO, NET_PCI };

struct mmio_hint { uint64_t base; int gsi; };   /* from virtio_mmio.device=SIZE@BASE:IRQ */

/* Find and initialise the NICs and the first virtio-console. Discovery order defines NIC
 * numbers (see README.md); a console device takes no NIC number wherever it sits:
 * - mmio hints given (microvm): highest address first (= QEMU -device order);
 * - else PCI bus 0 if a host bridge answers: slot/function order;
 * - else scan 0xfeb00000 + 512*i, i = 0..23, highest address first.
 * Problems are written (one per line) into errbuf. Returns the number of working NICs. */
int virtio_init(const struct mmio_hint *hints, int nhints, char *errbuf, size_t errcap);
int net_count(void);
const uint8_t *net_mac(int nic);
const char *net_desc(int nic, char *buf, size_t cap);  /* "mmio@0xfeb00e00 irq 12" etc. */
/* Route device interrupts (NICs and console) through the IO-APIC, level-triggered, with an ack hook. */
void virtio_setup_irqs(void);
bool virtio_all_have_irq(void);

/* Data path (IF=0). Returns true while the NICs want polling: a frame was received, a TX ring is
 * still draining, or the busy-poll window after the last frame is open. net_moved() tells
 * whether frames were received since it was last asked. */
bool net_poll(void);
bool net_moved(void);
uint64_t net_kicks(void);         /* notifications sent to the NICs (each one a VM exit) */
/* The busy-poll window after the last frame (us; 0 = halt as soon as nothing moves): the
 * control channel's `poll` op sets it (PROTOCOL.md §4 poll). */
void net_set_busy_poll_us(uint32_t us);
uint32_t net_busy_poll_us(void);
/* Stop (true) or resume busy polling after frames, whatever the window: main.c pauses it while
 * the host keeps this vCPU waiting (steal time), see there. */
void net_pause_busy_poll(bool pause);
bool net_busy_poll_paused(void);
void net_flush_tx(void);          /* kick TX queues that got frames since the last kick */
/* Interrupt moderation (us; 0 = off, the boot default; the `poll` op's coalesce_us, PROTOCOL.md
 * §4 poll): after a round that took frames, the next that finds none naps this long on the timer
 * with RX interrupts off (main.c nap) instead of polling or halting for the next frame's
 * interrupt. net_nap_prepare: kick what waits to be sent, reclaim TX, forget the NICs' noted
 * interrupts (a stale note would end the nap at once); RX interrupts stay off. */
void net_set_coalesce_us(uint32_t us);
uint32_t net_coalesce_us(void);
void net_nap_prepare(void);
bool net_rx_backlog(void);        /* the last net_poll stopped at its budget, frames left */
/* Idle protocol: forget noted interrupts of all virtio devices (the hook acked them), re-enable
 * NIC RX interrupts, then report whether anything (frames, console input) arrived meanwhile
 * (then do not sleep). */
bool virtio_prepare_idle(void);
void virtio_end_idle(void);       /* disable NIC RX interrupts again (we poll while busy) */
/* After a halt, before virtio_end_idle (main.c's wake counters): is `vector` a NIC's? Did a
 * NIC's interrupt come (noted, not yet taken)? Do frames wait in an RX ring? */
bool net_is_vector(int vector);
bool net_irq_noted(void);
bool net_rx_ready(void);

/* ---- virtio-console (port 0 only: VIRTIO_CONSOLE_F_MULTIPORT is not negotiated) ---- */
bool con_present(void);
const char *con_desc(char *buf, size_t cap);
/* Has the device returned receive buffers we have not looked at? (a memory read: cheap) */
bool con_rx_pending(void);
/* Hand every received chunk, in order, to fn (which returns true if it completed a request),
 * re-post the buffers, kick what needs a kick (one kcall). Returns true if fn did. */
bool con_rx(bool (*fn)(const char *data, size_t len));
/* Send s + '\n' (one descriptor up to 32 KiB, else several) with one kick. Returns false if it
 * was dropped (device stuck: no transmit space for 200 ms). */
bool con_send_line(const char *s, size_t n);

#endif
