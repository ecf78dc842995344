/* fluidvim VNF — legacy (0.9.5) virtio-net over virtio-mmio v1 and virtio-pci (I/O BAR0). */
#ifndef FLUIDVIM_VIRTIO_H
#define FLUIDVIM_VIRTIO_H
#include "kstd.h"

#define NET_MAX_NICS 4

enum net_transport { NET_MMIO, NET_PCI };

struct mmio_hint { uint64_t base; int gsi; };   /* from virtio_mmio.device=SIZE@BASE:IRQ */

/* Find and initialise NICs. Discovery order defines NIC numbers (see README.md):
 * - mmio hints given (microvm): highest address first (= QEMU -device order);
 * - else PCI bus 0 if a host bridge answers: slot/function order;
 * - else scan 0xfeb00000 + 512*i, i = 0..23, highest address first.
 * Problems are written (one per line) into errbuf. Returns the number of working NICs. */
int net_init(const struct mmio_hint *hints, int nhints, char *errbuf, size_t errcap);
int net_count(void);
const uint8_t *net_mac(int nic);
const char *net_desc(int nic, char *buf, size_t cap);  /* "mmio@0xfeb00e00 irq 12" etc. */
/* Route device interrupts through the IO-APIC (after intr_init). */
void net_setup_irqs(void);
bool net_all_have_irq(void);

/* Data path (IF=0). Returns true if any frame was received. */
bool net_poll(void);
void net_flush_tx(void);          /* kick TX queues that got frames since the last kick */
/* Idle protocol: ack interrupts that fired, re-enable RX interrupts, then report whether
 * anything arrived meanwhile (then do not sleep). */
bool net_prepare_idle(void);
void net_end_idle(void);          /* disable RX interrupts again (we poll while busy) */

#endif
