/* fluidvim VNF — control channel (contract/PROTOCOL.md §2–4) on the virtio-console if there is one,
 * else on COM2. */
#ifndef FLUIDVIM_CONTROL_H
#define FLUIDVIM_CONTROL_H
#include "kstd.h"

struct vnf_info {
	const char *name;
	uint64_t boot_us;
	uint64_t tsc_base;  /* TSC value taken as "vCPU reset" (0 under KVM) */
	bool rx_irq;        /* COM2 interrupts work: wait for them instead of spinning mid-line */
	bool virtio;        /* the channel is the virtio-console (else COM2) */
	bool deadline_timer; /* TSC-deadline one-shot timer: what interrupt moderation needs */
	int nics;           /* virtio-net devices found (the length `configure`'s macs must have) */
};

void ctl_init(const struct vnf_info *info);
void ctl_send_line(const char *s, size_t n);    /* appends '\n' */
void ctl_send_ready(const uint8_t (*macs)[6], int nics, uint32_t slots, const char *clock);
void ctl_send_error_event(const char *message);
/* Consume what the channel has (virtio-console: every returned buffer; COM2: whatever the UART
 * has, and while a line is incomplete keep reading, bounded). Returns true if a request was
 * handled. */
bool ctl_poll(void);
uint64_t uptime_us(void);

/* Where the vCPU's time went since the main loop started (TSC ticks; stats "cpu"): rounds that
 * received frames, ran element tasks or handled a request (busy), rounds that found nothing to do
 * (busy polling after traffic, waiting for a TX ring to drain), time halted, and the time the
 * host kept the vCPU from running meanwhile (steal: KVM steal time, taken out of the other three,
 * so that the four add up to the loop's wall time). main.c counts (charge). */
struct cpu_use {
	uint64_t busy, poll, halt, steal, halts;
	/* what ended each halt (main.c idle): a NIC's RX interrupt, the timer, anything else (a
	 * control request); rx_no_irq: halts after which frames waited in an RX ring that no NIC
	 * interrupt announced (a lost wake-up: they waited for another one) */
	uint64_t wake_rx, wake_timer, wake_other, rx_no_irq;
	/* host run delay (KVM steal time, ns): total, the largest seen between two main-loop
	 * rounds, how many rounds waited >= 1 ms for a host CPU, and how often that paused busy
	 * polling (main.c STALL_US, BACKOFF_US) */
	uint64_t steal_ns, steal_max_ns, stalls, backoffs;
	/* interrupt moderation (main.c nap, the `poll` op's coalesce_us): naps on the timer with
	 * RX interrupts off (counted apart from `halts` and the wake counters; their time is in
	 * `halt`), and those after which no frame waited (each ends moderation until a frame) */
	uint64_t naps, naps_empty;
};
extern struct cpu_use cpu_use;

#endif
