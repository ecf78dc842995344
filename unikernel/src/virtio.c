/* fluidvim VNF — legacy virtio drivers: virtio-net (the NICs) and virtio-console (the control
 * channel), over one transport layer (virtio-mmio v1 and legacy virtio-pci I/O BAR0) and one
 * split-ring implementation (legacy layout, 4096 alignment).
 *
 * virtio-net: queues 0 = RX, 1 = TX. Negotiated: MAC, and the offloads a bump in the wire passes
 * through (CSUM, GUEST_CSUM, GUEST/HOST_TSO4/6, GUEST/HOST_ECN with MRG_RXBUF): partial checksums
 * and TCP superframes of up to 64 KiB travel from one tap to the other unsegmented, their
 * virtio_net_hdr handed to the engine (click_rx_vh) and back to plat_tx (see click.h).
 * RX: one descriptor per buffer; with MRG_RXBUF 4096-byte buffers and a 12-byte header, else 2048
 * bytes and 10. Buffers are posted in id order, always (rx_refill), so a frame the device wrote
 * into several buffers lies contiguous in memory unless it wraps past the last buffer (then it is
 * gathered into one copy).
 * TX: a received frame that leaves unchanged (the engine passes plat_tx the bytes it got from
 * click_rx) is sent from its RX buffers (zero copy): its header is rewritten in place, one
 * descriptor points at it, and the buffers go back to the device when that TX completes. Anything
 * else (Queue'd, rewritten, software checksum, a wrapped frame) is copied with its header into a
 * per-NIC byte ring (the arena, like the console's) and published as one descriptor. The notify
 * ("kick") is batched until the end of the main-loop round (or TX_KICK_BATCH frames). A frame
 * whose offloads the egress NIC did not negotiate gets its checksum completed in software
 * (partial checksum) or is dropped (GSO).
 * Interrupts: TX never interrupts; RX interrupts are suppressed while the main loop is busy and
 * re-enabled just before `hlt`. A virtio-mmio line of one device is edge-triggered and acked from
 * ring 3 (see virtio_setup_irqs); shared lines (PCI INTx) are level-triggered, and a ring-0 hook
 * run by the interrupt stub acks the ISR of every virtio device on the line before the EOI.
 *
 * virtio-console: no feature is negotiated (no MULTIPORT, SIZE, EMERG_WRITE), so only port 0
 * exists: queue 0 = receiveq (host -> guest), queue 1 = transmitq. CON_RX_BUFS buffers of
 * CON_RX_BUF bytes stay posted (QEMU hands over at most 4096 bytes per chardev read and
 * completes at least one buffer per read); the receive queue is kicked only when the device may
 * have found it empty. Each outgoing line is copied into a 64 KiB byte ring ("arena") and
 * published as one descriptor (a line longer than CON_TX_CHUNK as several), then kicked once.
 * RX interrupts stay enabled (requests are rare and must wake the guest from hlt); on virtio-mmio
 * the line is edge-triggered and acked after the reply went out (see virtio_setup_irqs). TX
 * completions are reaped when space is needed.
 *
 * Register access happens in ring 0 via kcall, one kcall per logical operation (see boot.S). */
#include "virtio.h"
#include "arch.h"
#include "apic.h"
#include "click.h"
#include "mem.h"
#include "pci.h"
#include "serial.h"
#include "time.h"

#define BUF_SIZE 2048          /* RX buffer without MRG_RXBUF */
#define MRG_BUF_SIZE 4096      /* RX buffer with MRG_RXBUF */
#define MAX_BUFS 256
#define TX_ARENA (2u << 20)    /* per NIC; power of two (smaller when RAM is short) */
#define TX_ARENA_MIN (128u << 10)
#define RX_BUDGET_BYTES (256u << 10) /* ... and bytes: a poll stops after the frame that crosses it */
/* RX waits unless every NIC has TX room for a whole poll (header + 64-byte alignment per frame) */
#define TX_ROOM (RX_BUDGET_BYTES + MAX_FRAME + RX_BUDGET * 128u)
#define TX_KICK_BATCH 64
#define MAX_FRAME 65535u
#define RX_BUDGET 64           /* frames per NIC per poll */
/* Received frames from this size on leave from their RX buffers (single-stream TCP +9 %, bench/
 * RESULTS.md); smaller ones are copied to the TX arena: the copy costs less than keeping their RX
 * buffer from the device until the TX completes (64-byte and IMIX rates fell 7-16 % when every
 * frame was sent in place). */
#define ZC_MIN_BYTES 2048u

#ifndef CON_TX_ARENA           /* (-D overrides exercise chunking and wrap-around in tests) */
#define CON_RX_BUFS 8
#define CON_RX_BUF 4096
#define CON_TX_ARENA 65536u   /* power of two */
#define CON_TX_CHUNK 32768u   /* <= CON_TX_ARENA / 2: a chunk always fits once the arena drained */
#endif
#define CON_TX_WAIT_US 200000

#define VIRTIO_ID_NET 1
#define VIRTIO_ID_CONSOLE 3
#define PCI_VENDOR_VIRTIO 0x1af4
#define PCI_DEV_NET 0x1000      /* transitional: 0x1000 + (device id - 1) */
#define PCI_DEV_CONSOLE 0x1003

#define VIRTIO_STATUS_ACK 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FAILED 128
#define VIRTIO_NET_F_CSUM (1u << 0)
#define VIRTIO_NET_F_GUEST_CSUM (1u << 1)
#define VIRTIO_NET_F_MAC (1u << 5)
#define VIRTIO_NET_F_GUEST_TSO4 (1u << 7)
#define VIRTIO_NET_F_GUEST_TSO6 (1u << 8)
#define VIRTIO_NET_F_GUEST_ECN (1u << 9)
#define VIRTIO_NET_F_HOST_TSO4 (1u << 11)
#define VIRTIO_NET_F_HOST_TSO6 (1u << 12)
#define VIRTIO_NET_F_HOST_ECN (1u << 13)
#define VIRTIO_NET_F_MRG_RXBUF (1u << 15)
#define NET_GUEST_GSO (VIRTIO_NET_F_GUEST_TSO4 | VIRTIO_NET_F_GUEST_TSO6 | VIRTIO_NET_F_GUEST_ECN)
#define NET_FEATURES (VIRTIO_NET_F_MAC | VIRTIO_NET_F_CSUM | VIRTIO_NET_F_GUEST_CSUM | NET_GUEST_GSO | \
		      VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_HOST_TSO6 | VIRTIO_NET_F_HOST_ECN | \
		      VIRTIO_NET_F_MRG_RXBUF)

#define VRING_DESC_F_WRITE 2
#define VRING_AVAIL_F_NO_INTERRUPT 1
#define VRING_USED_F_NO_NOTIFY 1

/* virtio-mmio v1 registers */
#define MMIO_MAGIC 0x000
#define MMIO_VERSION 0x004
#define MMIO_DEVICE_ID 0x008
#define MMIO_HOST_FEATURES 0x010
#define MMIO_HOST_FEATURES_SEL 0x014
#define MMIO_GUEST_FEATURES 0x020
#define MMIO_GUEST_FEATURES_SEL 0x024
#define MMIO_GUEST_PAGE_SIZE 0x028
#define MMIO_QUEUE_SEL 0x030
#define MMIO_QUEUE_NUM_MAX 0x034
#define MMIO_QUEUE_NUM 0x038
#define MMIO_QUEUE_ALIGN 0x03c
#define MMIO_QUEUE_PFN 0x040
#define MMIO_QUEUE_NOTIFY 0x050
#define MMIO_INTERRUPT_STATUS 0x060
#define MMIO_INTERRUPT_ACK 0x064
#define MMIO_STATUS 0x070
#define MMIO_CONFIG 0x100

/* legacy virtio-pci I/O BAR0 registers */
#define PCI_HOST_FEATURES 0x00
#define PCI_GUEST_FEATURES 0x04
#define PCI_QUEUE_PFN 0x08
#define PCI_QUEUE_NUM 0x0c
#define PCI_QUEUE_SEL 0x0e
#define PCI_QUEUE_NOTIFY 0x10
#define PCI_STATUS 0x12
#define PCI_ISR 0x13
#define PCI_CONFIG 0x14 /* MSI-X disabled */

struct vring_desc { uint64_t addr; uint32_t len; uint16_t flags, next; };
struct vring_avail { uint16_t flags, idx, ring[]; };
struct vring_used_elem { uint32_t id, len; };
struct vring_used { uint16_t flags, idx; struct vring_used_elem ring[]; };

struct vq {
	uint16_t size;        /* ring size (device's) */
	uint16_t nbufs;       /* descriptors we use (<= size, <= MAX_BUFS) */
	uint16_t qidx;
	struct vring_desc *desc;
	volatile struct vring_avail *avail;
	volatile struct vring_used *used;
	uint16_t avail_idx, last_used;
	uint16_t pending;     /* TX: published but not kicked */
	uint16_t nfree;       /* net TX: free buffers */
	uint16_t free_ids[MAX_BUFS];
	uint8_t *bufs;
	uint32_t buf_size;
};

/* one virtio device: transport and the two queues we use (0 and 1) */
struct vdev {
	enum net_transport tr;
	uintptr_t mmio;
	uint16_t io;
	unsigned pci_dev, pci_fn;
	int gsi;              /* -1: unknown */
	int vector;           /* -1: no interrupt, poll on the timer tick */
	uint32_t features;    /* negotiated */
	uint8_t cfg[8];       /* first bytes of the device config space (net: the MAC) */
	struct vq q[2];
};

struct nic {
	struct vdev d;
	uint8_t mac[6];
	uint8_t hdr;                     /* virtio_net_hdr bytes: 12 with MRG_RXBUF, else 10 */
	uint8_t *gather;                 /* RX: a frame spanning several buffers (MRG_RXBUF) */
	uint8_t *arena;                  /* TX byte ring, as the console's */
	uint32_t asz, room;              /* arena size (power of two); free space RX waits for */
	uint32_t wpos, rpos;
	uint16_t tx_head, tx_inflight;
	uint32_t tx_end[MAX_BUFS];
	uint8_t tx_done[MAX_BUFS];
	uint64_t tx_first;               /* TSC when the oldest unkicked frame was published */
	/* zero copy: per TX descriptor, the RX NIC + 1 whose buffers it sends (0: arena) and the
	 * frame's first buffer there */
	uint8_t tx_zc_nic[MAX_BUFS];
	uint16_t tx_zc_buf[MAX_BUFS];
	/* per RX buffer: TX descriptors still sending the frame that starts here, and its buffers */
	uint8_t rx_refs[MAX_BUFS];
	uint8_t rx_nb[MAX_BUFS];
	uint8_t rx_free[MAX_BUFS];       /* consumed and not being sent from: may go back to the device */
	uint16_t rx_next;                /* the next buffer to post (posted in id order) */
	uint16_t rx_held;                /* frames being sent from their RX buffers */
	bool edge;                       /* edge-triggered line, acked before idling (virtio_setup_irqs) */
};

/* the received frame being pushed through the engine, which plat_tx may send without a copy */
static struct {
	int nic;                         /* -1: none */
	uint16_t first;                  /* its first RX buffer */
	const uint8_t *start;            /* that buffer (room for the egress header) */
	const uint8_t *lo, *hi;          /* the frame's bytes */
} rx_cur = { -1, 0, NULL, NULL, NULL };

struct con {
	struct vdev d;
	bool present;
	uint8_t *arena;                  /* TX byte ring */
	uint32_t wpos, rpos;             /* arena bytes allocated / released (free-running) */
	uint16_t tx_head, tx_inflight;   /* oldest in-flight descriptor, count (FIFO ids) */
	uint32_t tx_end[MAX_BUFS];       /* per descriptor: wpos after it */
	uint8_t tx_done[MAX_BUFS];
	bool tx_kick;
	bool edge;                       /* edge-triggered, acked by con_rx (see virtio_setup_irqs) */
	uint32_t dropped;
};

/* Rings of up to 256 entries come from this pool in .data: the guest's first touch of a page that
 * QEMU's loader already wrote is ~1000x cheaper under PVM (shadow paging) than that of a fresh
 * page (~1 ms each, see boot.S), and the rings are written at boot. Larger rings use mem_alloc.
 * Two per NIC, two for the console. */
#define POOL_RING_BYTES 12288 /* vring_bytes(256) */
static uint8_t ring_pool[NET_MAX_NICS * 2 + 2][POOL_RING_BYTES] __attribute__((aligned(4096), section(".data")));
static int ring_pool_used;

static struct nic nics[NET_MAX_NICS] __attribute__((section(".data"))); /* see boot.S on .bss */
static int nnics;
static struct con con __attribute__((section(".data")));

#ifndef NET_BUSY_POLL_US
#define NET_BUSY_POLL_US 1000   /* keep polling the NICs this long after the last frame */
#endif
#ifndef TX_KICK_DELAY_US
#define TX_KICK_DELAY_US 50     /* see net_flush_tx */
#endif
static uint64_t last_rx_tsc, busy_poll_tsc, tx_kick_delay_tsc;
static uint64_t kicks;            /* NIC notifications sent (stats "cpu") */
static bool kick_due;             /* a TX kick waits for the frame in the engine (tx_kick_due) */
static bool moved;                /* frames received since net_moved() last looked */
static bool rx_backlog;           /* the last net_poll left frames that were there already */

/* ---- transport: every register access runs in ring 0, one kcall per logical operation
 *      (under PVM a ring-3 MMIO access costs ~70 us, a kcall ~50 us plus ~5 us per access) ---- */
static void st_write(struct vdev *d, uint8_t s)
{
	if (d->tr == NET_MMIO)
		mmio_write32(d->mmio + MMIO_STATUS, s);
	else
		outb(d->io + PCI_STATUS, s);
}

static void notify(struct vdev *d, uint16_t q)
{
	if (d->tr == NET_MMIO)
		mmio_write32(d->mmio + MMIO_QUEUE_NOTIFY, q);
	else
		outw(d->io + PCI_QUEUE_NOTIFY, q);
}

/* ring 0: notify the queues whose bit is set in mask (bit q = queue q) */
static uint64_t notify_k(uint64_t dp, uint64_t mask, uint64_t c)
{
	struct vdev *d = (struct vdev *)(uintptr_t)dp;
	for (uint16_t q = 0; q < 2; q++)
		if (mask & (1u << q))
			notify(d, q);
	return 0;
}

static uint64_t ack_irq_k(uint64_t dp, uint64_t b, uint64_t c)
{
	struct vdev *d = (struct vdev *)(uintptr_t)dp;
	if (d->tr == NET_MMIO) {
		uint32_t st = mmio_read32(d->mmio + MMIO_INTERRUPT_STATUS);
		if (st)
			mmio_write32(d->mmio + MMIO_INTERRUPT_ACK, st);
	} else
		(void)inb(d->io + PCI_ISR); /* reading clears and deasserts INTx */
	return 0;
}

static void tr_notify(struct vdev *d, unsigned mask) { KCALL(notify_k, d, mask, 0); }
static void tr_ack_irq(struct vdev *d) { KCALL(ack_irq_k, d, 0, 0); }

/* Phase 1 (ring 0): reset, ACK|DRIVER, features (host & want), the first cfg_len bytes of the
 * config space, sizes of queues 0 and 1. */
static uint64_t vdev_probe_k(uint64_t dp, uint64_t want, uint64_t cfg_len)
{
	struct vdev *d = (struct vdev *)(uintptr_t)dp;
	uint32_t host;
	st_write(d, 0); /* reset */
	st_write(d, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER);
	if (d->tr == NET_MMIO) {
		mmio_write32(d->mmio + MMIO_HOST_FEATURES_SEL, 0);
		host = mmio_read32(d->mmio + MMIO_HOST_FEATURES);
	} else
		host = inl(d->io + PCI_HOST_FEATURES);
	uint32_t f = host & (uint32_t)want;
	if (!(f & VIRTIO_NET_F_MRG_RXBUF))
		f &= ~(uint32_t)NET_GUEST_GSO;   /* 64 KiB frames need mergeable buffers (or huge ones) */
	if (!(f & VIRTIO_NET_F_GUEST_CSUM))
		f &= ~(uint32_t)NET_GUEST_GSO;
	if (!(f & VIRTIO_NET_F_CSUM))
		f &= ~(uint32_t)(VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_HOST_TSO6 | VIRTIO_NET_F_HOST_ECN);
	if (d->tr == NET_MMIO) {
		mmio_write32(d->mmio + MMIO_GUEST_FEATURES_SEL, 0);
		mmio_write32(d->mmio + MMIO_GUEST_FEATURES, f);
		mmio_write32(d->mmio + MMIO_GUEST_PAGE_SIZE, 4096);
	} else
		outl(d->io + PCI_GUEST_FEATURES, f);
	d->features = f;
	for (unsigned i = 0; i < cfg_len && i < sizeof d->cfg; i++)
		d->cfg[i] = d->tr == NET_MMIO ? mmio_read8(d->mmio + MMIO_CONFIG + i)
					      : inb((uint16_t)(d->io + PCI_CONFIG + i));
	for (uint16_t q = 0; q < 2; q++) {
		uint32_t size;
		if (d->tr == NET_MMIO) {
			mmio_write32(d->mmio + MMIO_QUEUE_SEL, q);
			size = mmio_read32(d->mmio + MMIO_QUEUE_NUM_MAX);
			if (size > MAX_BUFS)
				size = MAX_BUFS; /* mmio lets the driver pick a smaller ring */
		} else {
			outw(d->io + PCI_QUEUE_SEL, q);
			size = inw(d->io + PCI_QUEUE_NUM);
		}
		d->q[q].size = (uint16_t)size;
	}
	return 0;
}

/* Phase 2 (ring 0): tell the device where the rings are, DRIVER_OK, kick queue 0 (RX buffers). */
static uint64_t vdev_start_k(uint64_t dp, uint64_t b, uint64_t c)
{
	struct vdev *d = (struct vdev *)(uintptr_t)dp;
	for (uint16_t q = 0; q < 2; q++) {
		struct vq *v = &d->q[q];
		uint32_t pfn = (uint32_t)((uintptr_t)v->desc >> 12);
		if (d->tr == NET_MMIO) {
			mmio_write32(d->mmio + MMIO_QUEUE_SEL, q);
			mmio_write32(d->mmio + MMIO_QUEUE_NUM, v->size);
			mmio_write32(d->mmio + MMIO_QUEUE_ALIGN, 4096);
			mmio_write32(d->mmio + MMIO_QUEUE_PFN, pfn);
		} else {
			outw(d->io + PCI_QUEUE_SEL, q);
			outl(d->io + PCI_QUEUE_PFN, pfn);
		}
	}
	st_write(d, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DRIVER_OK);
	notify(d, 0); /* RX buffers are there */
	return 0;
}

static uint64_t vdev_fail_k(uint64_t dp, uint64_t b, uint64_t c)
{
	st_write((struct vdev *)(uintptr_t)dp, VIRTIO_STATUS_FAILED);
	return 0;
}

static size_t vring_bytes(uint16_t size)
{
	size_t a = 16u * size + 2u * (3u + size);
	a = (a + 4095) & ~(size_t)4095;
	return a + ((2u * 3u + 8u * size + 4095) & ~(size_t)4095);
}

/* ring 3: memory for queue qidx of d (size set by vdev_probe_k). RX queues get nbufs posted
 * device-writable buffers of buf_size bytes; TX queues nbufs buffers (free list), or none when
 * buf_size is 0 (the caller points the descriptors at its data). */
static int vq_alloc(struct vdev *d, uint16_t qidx, bool rx, uint16_t maxbufs, uint32_t buf_size,
		    const char *what, char *err, size_t ecap)
{
	struct vq *q = &d->q[qidx];
	uint16_t size = q->size;
	q->qidx = qidx;
	if (size == 0 || (size & (size - 1))) {
		ksnprintf(err, ecap, "%s: queue %u size %u", what, qidx, size);
		return -1;
	}
	size_t rb = vring_bytes(size);
	uint16_t nbufs = size > maxbufs ? maxbufs : size;
	bool pooled = rb <= POOL_RING_BYTES && ring_pool_used < (int)ARRAY_SIZE(ring_pool);
	uint8_t *ring = pooled ? ring_pool[ring_pool_used++] : mem_alloc(rb, 4096);
	uint8_t *bufs = buf_size ? mem_alloc((size_t)nbufs * buf_size, 4096) : NULL;
	if (buf_size > BUF_SIZE && !bufs && d != &con.d) { /* NIC short of RAM: 2 KiB mergeable buffers do */
		buf_size = BUF_SIZE;
		bufs = mem_alloc((size_t)nbufs * buf_size, 4096);
	}
	if (!ring || (buf_size && !bufs)) {
		ksnprintf(err, ecap, "%s: out of memory for queue %u", what, qidx);
		return -1;
	}
	if (!pooled)
		memset(ring, 0, rb);
	q->nbufs = nbufs;
	q->desc = (struct vring_desc *)ring;
	q->avail = (volatile struct vring_avail *)(ring + 16u * size);
	q->used = (volatile struct vring_used *)(ring + ((16u * size + 2u * (3u + size) + 4095) & ~4095u));
	q->bufs = bufs;
	q->buf_size = buf_size;
	q->avail_idx = q->last_used = q->pending = 0;
	for (uint16_t i = 0; i < nbufs; i++) {
		q->desc[i].addr = bufs ? (uint64_t)(uintptr_t)(bufs + (size_t)i * buf_size) : 0;
		q->desc[i].len = rx ? buf_size : 0;
		q->desc[i].flags = rx ? VRING_DESC_F_WRITE : 0;
		q->desc[i].next = 0;
	}
	if (rx) {
		for (uint16_t i = 0; i < nbufs; i++)
			q->avail->ring[i] = i;
		q->avail_idx = nbufs;
		q->avail->idx = nbufs;
		q->nfree = 0;
	} else {
		for (uint16_t i = 0; i < nbufs; i++)
			q->free_ids[i] = (uint16_t)(nbufs - 1 - i);
		q->nfree = nbufs;
	}
	/* TX completions are reaped by polling; NIC RX interrupts are enabled only around hlt */
	q->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
	return 0;
}

static int nic_init(struct nic *n, int idx, char *err, size_t ecap)
{
	char what[24];
	ksnprintf(what, sizeof what, "virtio-net %d", idx);
	KCALL(vdev_probe_k, &n->d, NET_FEATURES, 6);
	for (int i = 0; i < 6; i++)
		n->mac[i] = (n->d.features & VIRTIO_NET_F_MAC) ? n->d.cfg[i]
			    : (uint8_t)(i == 0 ? 0x52 : i == 1 ? 0x54 : i == 5 ? idx + 1 : 0);
	bool mrg = n->d.features & VIRTIO_NET_F_MRG_RXBUF;
	n->hdr = mrg ? 12 : 10;
	/* RAM left (mem_alloc(0, 1) = where the next allocation starts): 4 KiB mergeable RX buffers
	 * (fewer per superframe) only when there is plenty, as in the default 32 MiB */
	uintptr_t here = (uintptr_t)mem_alloc(0, 1);
	bool roomy = here && mem_ram_top() > here && mem_ram_top() - here >= (8u << 20);
	if (vq_alloc(&n->d, 0, true, MAX_BUFS, mrg && roomy ? MRG_BUF_SIZE : BUF_SIZE, what, err, ecap) ||
	    vq_alloc(&n->d, 1, false, MAX_BUFS, 0, what, err, ecap)) {
		KCALL(vdev_fail_k, &n->d, 0, 0);
		return -1;
	}
	n->rx_next = n->rx_held = 0;  /* vq_alloc posted every RX buffer, in id order */
	memset(n->rx_refs, 0, sizeof n->rx_refs);
	memset(n->rx_free, 0, sizeof n->rx_free);
	memset(n->tx_zc_nic, 0, sizeof n->tx_zc_nic);
	n->gather = mrg ? mem_alloc(MAX_FRAME + 1, 64) : NULL;
	/* the arena takes at most a quarter of the RAM left (later NICs and the console need some) */
	struct vq *rq = &n->d.q[0];
	uint64_t used_to = n->gather ? (uint64_t)(uintptr_t)n->gather + MAX_FRAME + 1
			 : (uint64_t)(uintptr_t)rq->bufs + (uint64_t)rq->nbufs * rq->buf_size;
	uint64_t left = mem_ram_top() > used_to ? mem_ram_top() - used_to : 0;
	n->asz = TX_ARENA;
	while (n->asz > TX_ARENA_MIN && n->asz > left / 4)
		n->asz /= 2;
	n->arena = mem_alloc(n->asz, 4096);
	if (!n->arena || (mrg && !n->gather)) {
		ksnprintf(err, ecap, "%s: out of memory", what);
		KCALL(vdev_fail_k, &n->d, 0, 0);
		return -1;
	}
	/* a small arena (little RAM) still takes a whole superframe per poll, not a whole poll */
	n->room = n->asz >= 2 * TX_ROOM ? TX_ROOM : MAX_FRAME + 64u + RX_BUDGET * 128u;
	KCALL(vdev_start_k, &n->d, 0, 0);
	return 0;
}

static int con_init(char *err, size_t ecap)
{
	struct vdev *d = &con.d;
	KCALL(vdev_probe_k, d, 0, 0); /* no features: port 0 only */
	con.arena = mem_alloc(CON_TX_ARENA, 4096);
	if (!con.arena) {
		ksnprintf(err, ecap, "virtio-console: out of memory");
		KCALL(vdev_fail_k, d, 0, 0);
		return -1;
	}
	if (vq_alloc(d, 0, true, CON_RX_BUFS, CON_RX_BUF, "virtio-console", err, ecap) ||
	    vq_alloc(d, 1, false, MAX_BUFS, 0, "virtio-console", err, ecap)) {
		KCALL(vdev_fail_k, d, 0, 0);
		return -1;
	}
	d->q[0].avail->flags = 0; /* input must interrupt: it wakes the guest from hlt */
	con.wpos = con.rpos = 0;
	con.tx_head = con.tx_inflight = 0;
	KCALL(vdev_start_k, d, 0, 0);
	return 0;
}

/* ---- discovery ---- */
static void add_err(char *errbuf, size_t errcap, const char *msg)
{
	size_t l = strlen(errbuf);
	ksnprintf(errbuf + l, errcap - l, "%s\n", msg);
}

static void try_add(const struct vdev *cand, int id, char *errbuf, size_t errcap)
{
	char err[128];
	err[0] = 0;
	if (id == VIRTIO_ID_CONSOLE) {
		if (con.present) {
			add_err(errbuf, errcap, "more than one virtio-console device: extra ones ignored");
			return;
		}
		con.d = *cand;
		if (con_init(err, sizeof err) == 0)
			con.present = true;
		else
			add_err(errbuf, errcap, err);
		return;
	}
	if (nnics >= NET_MAX_NICS) {
		add_err(errbuf, errcap, "more than 4 virtio-net devices: extra ones ignored");
		return;
	}
	memset(&nics[nnics], 0, sizeof nics[nnics]);
	nics[nnics].d = *cand;
	if (nic_init(&nics[nnics], nnics, err, sizeof err) == 0)
		nnics++;
	else
		add_err(errbuf, errcap, err);
}

/* ring 0: device id of the legacy virtio-mmio transport at each base (0: none/empty) */
static uint64_t mmio_probe_k(uint64_t basesp, uint64_t n, uint64_t idsp)
{
	const uint64_t *bases = (const uint64_t *)(uintptr_t)basesp;
	uint8_t *ids = (uint8_t *)(uintptr_t)idsp;
	for (uint64_t i = 0; i < n; i++) {
		uintptr_t b = (uintptr_t)bases[i];
		ids[i] = 0;
		if (mmio_read32(b + MMIO_MAGIC) == 0x74726976u && mmio_read32(b + MMIO_VERSION) == 1)
			ids[i] = (uint8_t)mmio_read32(b + MMIO_DEVICE_ID);
	}
	return 0;
}

/* ring 0: number of virtio-mmio transports microvm created (8 or 24) */
static uint64_t mmio_layout_k(uint64_t a, uint64_t b, uint64_t c)
{
	return mmio_read32(0xfeb00000u + 512u * 8 + MMIO_MAGIC) == 0x74726976u ? 24 : 8;
}

static void add_pci(const struct pci_dev *p, char *errbuf, size_t errcap)
{
	struct vdev d = { .tr = NET_PCI, .pci_dev = p->dev, .pci_fn = p->fn, .gsi = -1, .vector = -1 };
	int id = p->device == PCI_DEV_CONSOLE ? VIRTIO_ID_CONSOLE : VIRTIO_ID_NET;
	if (!(p->bar0 & 1) || (p->bar0 & ~3u) == 0) {
		add_err(errbuf, errcap, id == VIRTIO_ID_NET
			? "virtio-net-pci: no legacy I/O BAR0 (modern-only device? use disable-legacy=off)"
			: "virtio-serial-pci: no legacy I/O BAR0 (modern-only device? use disable-legacy=off)");
		return;
	}
	d.io = (uint16_t)(p->bar0 & ~3u);
	if (p->irq_line > 0 && p->irq_line < 16 && p->irq_line != 2)
		d.gsi = p->irq_line;
	try_add(&d, id, errbuf, errcap);
}

static uint32_t busy_poll_us = NET_BUSY_POLL_US;

void net_set_busy_poll_us(uint32_t us)
{
	busy_poll_us = us;
	busy_poll_tsc = ns_to_tsc(us * 1000ull);
}

uint32_t net_busy_poll_us(void)
{
	return busy_poll_us;
}

static uint32_t coalesce_us;   /* interrupt moderation (net_set_coalesce_us; main.c nap) */
void net_set_coalesce_us(uint32_t us) { coalesce_us = us; }
uint32_t net_coalesce_us(void) { return coalesce_us; }

static bool busy_poll_paused;
void net_pause_busy_poll(bool pause) { busy_poll_paused = pause; }
bool net_busy_poll_paused(void) { return busy_poll_paused; }

int virtio_init(const struct mmio_hint *hints, int nhints, char *errbuf, size_t errcap)
{
	errbuf[0] = 0;
	nnics = 0;
	busy_poll_tsc = ns_to_tsc(busy_poll_us * 1000ull);
	tx_kick_delay_tsc = ns_to_tsc(TX_KICK_DELAY_US * 1000ull);
	con.present = false;
	uint64_t bases[32];
	int gsis[32], nb = 0;
	if (nhints > 0) {
		/* QEMU fills virtio-mmio transports from the top slot down in -device order */
		struct mmio_hint h[32];
		int nh = nhints > 32 ? 32 : nhints;
		memcpy(h, hints, sizeof h[0] * (size_t)nh);
		for (int i = 1; i < nh; i++)
			for (int j = i; j > 0 && h[j].base > h[j - 1].base; j--) {
				struct mmio_hint t = h[j];
				h[j] = h[j - 1];
				h[j - 1] = t;
			}
		for (int i = 0; i < nh; i++) {
			bases[nb] = h[i].base;
			gsis[nb++] = h[i].gsi;
		}
	} else if (pci_present()) {
		/* one bus scan for both (config-space access is slow under PVM); slot order */
		struct pci_dev devs[12];
		int nd = pci_find(PCI_VENDOR_VIRTIO, PCI_DEV_NET, PCI_DEV_CONSOLE, devs, (int)ARRAY_SIZE(devs));
		for (int i = 0; i < nd; i++)
			if (devs[i].device == PCI_DEV_NET || devs[i].device == PCI_DEV_CONSOLE)
				add_pci(&devs[i], errbuf, errcap);
		return nnics;
	} else {
		/* microvm (no PCI): QEMU creates 8 transports on GSI 5..12, or 24 on GSI 24..47 when
		 * it adds the second IO-APIC (the default with ACPI), and fills them from the highest
		 * address down in -device order: NIC 0 = highest address. The command line QEMU
		 * passes to a PVH kernel carries no virtio_mmio.device= entries, so infer the IRQ. */
		int slots = (int)KCALL(mmio_layout_k, 0, 0, 0);
		int gsi_base = slots == 24 ? 24 : 5;
		for (int i = slots - 1; i >= 0; i--) {
			bases[nb] = 0xfeb00000u + 512u * (unsigned)i;
			gsis[nb++] = gsi_base + i;
		}
	}
	uint8_t ids[32];
	KCALL(mmio_probe_k, bases, nb, ids);
	for (int i = 0; i < nb; i++) {
		if (ids[i] != VIRTIO_ID_NET && ids[i] != VIRTIO_ID_CONSOLE)
			continue;
		struct vdev d = { .tr = NET_MMIO, .mmio = (uintptr_t)bases[i], .gsi = gsis[i], .vector = -1 };
		try_add(&d, ids[i], errbuf, errcap);
	}
	return nnics;
}

int net_count(void) { return nnics; }
const uint8_t *net_mac(int i) { return nics[i].mac; }

static const char *vdev_desc(const struct vdev *d, char *buf, size_t cap)
{
	if (d->tr == NET_MMIO)
		ksnprintf(buf, cap, "virtio-mmio@0x%lx gsi %d%s, rx %u/tx %u", (uint64_t)d->mmio, d->gsi,
			  d->vector < 0 ? " (polled)" : "", d->q[0].size, d->q[1].size);
	else
		ksnprintf(buf, cap, "virtio-pci 00:%02x.%u io 0x%x gsi %d%s, rx %u/tx %u", d->pci_dev, d->pci_fn,
			  d->io, d->gsi, d->vector < 0 ? " (polled)" : "", d->q[0].size, d->q[1].size);
	return buf;
}

const char *net_desc(int i, char *buf, size_t cap)
{
	const struct nic *n = &nics[i];
	uint32_t f = n->d.features;
	vdev_desc(&n->d, buf, cap);
	size_t l = strlen(buf);
	/* (main.c prints it into 96 bytes) */
	ksnprintf(buf + l, cap - l, ", rxbuf %u, arena %uK%s%s%s%s", n->d.q[0].buf_size, n->asz >> 10,
		  (f & VIRTIO_NET_F_CSUM) ? " csum" : "", (f & VIRTIO_NET_F_HOST_TSO4) ? " tso" : "",
		  (f & VIRTIO_NET_F_GUEST_TSO4) ? " gtso" : "", (f & VIRTIO_NET_F_MRG_RXBUF) ? " mrg" : "");
	return buf;
}
bool con_present(void) { return con.present; }
const char *con_desc(char *buf, size_t cap) { return vdev_desc(&con.d, buf, cap); }

/* ring 0, from the interrupt stub: ack every virtio device on this (possibly shared, level) line */
static void vdev_irq_hook(int vector)
{
	for (int i = 0; i < nnics; i++)
		if (nics[i].d.vector == vector)
			ack_irq_k((uint64_t)(uintptr_t)&nics[i].d, 0, 0);
	if (con.present && con.d.vector == vector)
		ack_irq_k((uint64_t)(uintptr_t)&con.d, 0, 0);
}

static void vdev_setup_irq(struct vdev *d)
{
	if (d->gsi >= 0 && d->gsi < MAX_GSI) {
		d->vector = VEC_GSI(d->gsi); /* hook first: the line may already be up */
		irq_set_hook(d->vector, vdev_irq_hook);
		if (ioapic_route((unsigned)d->gsi, true) < 0)
			d->vector = -1; /* keep polling on the tick (the hook may be shared) */
	}
	tr_ack_irq(d);
}

/* A virtio-mmio device with a line of its own (the console, and the NICs) is routed
 * edge-triggered, without a hook, and acked from ring 3: the console after the reply went out
 * (con_rx), a NIC when it re-enables its RX interrupts before idling (virtio_prepare_idle). The
 * ring-0 ack before the EOI that a level-triggered line needs (an MMIO exit that waits for QEMU's
 * big lock, which its main thread holds while it moves frames), plus the EOI round trip to QEMU's
 * userspace IO-APIC (microvm), cost ~0.3 ms per wake-up under PVM. PCI INTx lines may be shared:
 * level + hook. */
static bool line_shared(const struct vdev *d)
{
	int users = 0;
	for (int i = 0; i < nnics; i++)
		users += nics[i].d.gsi == d->gsi;
	users += con.present && con.d.gsi == d->gsi;
	return users > 1;
}

/* route d's line edge-triggered if it can be (see above); false: level + hook (vdev_setup_irq) */
static bool vdev_setup_edge(struct vdev *d)
{
	if (d->tr != NET_MMIO || d->gsi < 0 || d->gsi >= MAX_GSI || line_shared(d))
		return false;
	if (ioapic_route((unsigned)d->gsi, false) >= 0)
		d->vector = VEC_GSI(d->gsi);
	tr_ack_irq(d);
	return d->vector >= 0;
}

void virtio_setup_irqs(void)
{
	for (int i = 0; i < nnics; i++) {
		nics[i].edge = vdev_setup_edge(&nics[i].d);
		if (!nics[i].edge)
			vdev_setup_irq(&nics[i].d);
	}
	if (!con.present)
		return;
	con.edge = vdev_setup_edge(&con.d);
	if (!con.edge)
		vdev_setup_irq(&con.d);
}

bool virtio_all_have_irq(void)
{
	for (int i = 0; i < nnics; i++)
		if (nics[i].d.vector < 0)
			return false;
	return !con.present || con.d.vector >= 0;
}

/* ---- net data path ---- */
static void vq_kick(struct vdev *d, struct vq *q)
{
	mb(); /* publish avail->idx before reading the device's NO_NOTIFY flag */
	if (!(q->used->flags & VRING_USED_F_NO_NOTIFY)) {
		tr_notify(d, 1u << q->qidx);
		kicks++;
	}
	q->pending = 0;
}

uint64_t net_kicks(void) { return kicks; }

bool net_moved(void)
{
	bool m = moved;
	moved = false;
	return m;
}

static void rx_release(struct nic *rn, uint16_t first);

static void tx_reclaim(struct nic *n)
{
	struct vq *q = &n->d.q[1];
	uint16_t used = q->used->idx;
	barrier();
	while (q->last_used != used) {
		uint16_t id = (uint16_t)q->used->ring[q->last_used & (q->size - 1)].id;
		if (id < q->nbufs) {
			n->tx_done[id] = 1;
			if (n->tx_zc_nic[id]) {
				rx_release(&nics[n->tx_zc_nic[id] - 1], n->tx_zc_buf[id]);
				n->tx_zc_nic[id] = 0;
			}
		}
		q->last_used++;
	}
	/* release arena space in submission order (QEMU completes in order anyway) */
	while (n->tx_inflight && n->tx_done[n->tx_head]) {
		n->tx_done[n->tx_head] = 0;
		n->rpos = n->tx_end[n->tx_head];
		n->tx_head = (uint16_t)((n->tx_head + 1) % q->nbufs);
		n->tx_inflight--;
	}
	if (!n->tx_inflight)
		n->wpos = n->rpos = 0;
}

/* a descriptor and `len` contiguous arena bytes (64-byte aligned), or -1 */
static int tx_alloc(struct nic *n, uint32_t len, uint8_t **buf)
{
	struct vq *q = &n->d.q[1];
	len = (len + 63u) & ~63u;
	for (int tries = 0; tries < 2; tries++) {
		uint32_t o = n->wpos & (n->asz - 1);
		uint32_t pad = o + len > n->asz ? n->asz - o : 0;
		if (n->tx_inflight < q->nbufs && (n->wpos - n->rpos) + pad + len <= n->asz) {
			n->wpos += pad;
			*buf = n->arena + (n->wpos & (n->asz - 1));
			n->wpos += len;
			int id = (n->tx_head + n->tx_inflight) % q->nbufs;
			n->tx_end[id] = n->wpos;
			n->tx_inflight++;
			return id;
		}
		tx_reclaim(n);
	}
	return -1;
}

static inline void put16le(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline uint16_t get16le(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* complete a partial checksum (the device cannot): ones' complement sum from csum_start, which
 * the sender seeded with the pseudo-header sum at csum_start + csum_offset */
static void sw_csum(uint8_t *f, uint32_t len, const struct click_vh *vh)
{
	uint32_t st = vh->csum_start, at = st + vh->csum_offset;   /* checked by plat_tx */
	uint64_t sum = 0;
	uint32_t i = st;
	for (; i + 1 < len; i += 2)
		sum += (uint32_t)(f[i] << 8 | f[i + 1]);
	if (i < len)
		sum += (uint32_t)f[i] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	uint16_t c = (uint16_t)~sum;
	f[at] = (uint8_t)(c >> 8);
	f[at + 1] = (uint8_t)c;
}

int plat_tx(int nic, const uint8_t *data, uint16_t len, const struct click_vh *vh)
{
	if (nic < 0 || nic >= nnics)
		return -1;
	struct nic *n = &nics[nic];
	struct vq *q = &n->d.q[1];
	uint32_t feat = n->d.features;
	bool sw = false;
	if (vh) {
		uint8_t t = (uint8_t)(vh->gso_type & ~CLICK_GSO_ECN);
		if (t != CLICK_GSO_NONE) {
			uint32_t need = t == CLICK_GSO_TCPV4 ? VIRTIO_NET_F_HOST_TSO4
				      : t == CLICK_GSO_TCPV6 ? VIRTIO_NET_F_HOST_TSO6 : 0;
			if (vh->gso_type & CLICK_GSO_ECN)
				need |= VIRTIO_NET_F_HOST_ECN;
			if (!need || (feat & need) != need)
				return -1;  /* the egress device cannot segment it (no software GSO) */
		}
		sw = (vh->flags & CLICK_VH_NEEDS_CSUM) && !(feat & VIRTIO_NET_F_CSUM);
		if (sw && (vh->csum_start >= len || (uint32_t)vh->csum_start + vh->csum_offset + 2u > len))
			return -1;
	}
	if (q->last_used != q->used->idx && n->tx_inflight > q->nbufs / 2)
		tx_reclaim(n);
	uint8_t h[12];
	memset(h, 0, sizeof h);
	if (vh && !sw) {
		h[0] = vh->flags & CLICK_VH_NEEDS_CSUM;
		h[1] = vh->gso_type;
		put16le(h + 2, vh->hdr_len);
		put16le(h + 4, vh->gso_size);
		put16le(h + 6, vh->csum_start);
		put16le(h + 8, vh->csum_offset);
	}
	/* the received frame itself, unchanged, with room for our header before it (the bytes before
	 * it are the ingress header, already parsed): send it from its RX buffers (a second TX of the
	 * same frame only when it carries the same header) */
	struct nic *rn = rx_cur.nic >= 0 ? &nics[rx_cur.nic] : NULL;
	uint8_t *zc = (uint8_t *)(uintptr_t)(data - n->hdr);
	bool zero_copy = rn && !sw && len >= ZC_MIN_BYTES && data == rx_cur.lo &&
			 len <= rx_cur.hi - rx_cur.lo && zc >= rx_cur.start &&
			 rn->rx_refs[rx_cur.first] < 255 &&
			 (!rn->rx_refs[rx_cur.first] || !memcmp(zc, h, n->hdr));
	uint8_t *buf;
	int id = tx_alloc(n, zero_copy ? 0 : (uint32_t)n->hdr + len, &buf);
	if (id < 0) {
		if (q->pending)
			vq_kick(&n->d, q);
		return -1;
	}
	if (zero_copy) {
		buf = zc;
		n->tx_zc_nic[id] = (uint8_t)(rx_cur.nic + 1);
		n->tx_zc_buf[id] = rx_cur.first;
		if (rn->rx_refs[rx_cur.first]++ == 0)
			rn->rx_held++;
	} else
		memcpy(buf + n->hdr, data, len);
	memcpy(buf, h, n->hdr);
	if (sw)
		sw_csum(buf + n->hdr, len, vh);
	q->desc[id].addr = (uint64_t)(uintptr_t)buf;
	q->desc[id].len = (uint32_t)len + n->hdr;
	q->desc[id].flags = 0;
	q->desc[id].next = 0;
	q->avail->ring[q->avail_idx & (q->size - 1)] = (uint16_t)id;
	q->avail_idx++;
	barrier();
	q->avail->idx = q->avail_idx;
	if (q->pending++ == 0)
		n->tx_first = rdtsc();
	if (q->pending >= TX_KICK_BATCH) {
		if (rx_cur.nic >= 0)
			kick_due = true;  /* once the frame is through (tx_kick_due) */
		else
			vq_kick(&n->d, q);
	}
	return 0;
}

/* The kick a received frame's plat_tx made due (TX_KICK_BATCH frames waiting), sent once the
 * engine is done with the frame: its VM exit (tens of us under PVM) then delays the frames still
 * in the RX ring, as any wait there, instead of landing in the latency of the one frame in
 * TX_KICK_BATCH that happened to fill the batch: 1 in 64 is over 1 %, which set the p99 of a
 * capped VNF that finds full rings (64-128 us, where its other frames took 1-4 us;
 * bench/results/powercap.md). */
static void tx_kick_due(void)
{
	if (!kick_due)
		return;
	kick_due = false;
	for (int i = 0; i < nnics; i++)
		if (nics[i].d.q[1].pending >= TX_KICK_BATCH)
			vq_kick(&nics[i].d, &nics[i].d.q[1]);
}

/* Give the device back every consumed buffer from rx_next on, in id order, up to the first one
 * still being sent from (published; kicked by rx_poll or net_poll when the device asks for it). */
static void rx_refill(struct nic *n)
{
	struct vq *q = &n->d.q[0];
	uint16_t before = q->avail_idx;
	while (n->rx_free[n->rx_next]) {
		n->rx_free[n->rx_next] = 0;
		q->avail->ring[q->avail_idx & (q->size - 1)] = n->rx_next;
		q->avail_idx++;
		n->rx_next = (uint16_t)((n->rx_next + 1) % q->nbufs);
	}
	if (q->avail_idx != before) {
		barrier();
		q->avail->idx = q->avail_idx;
		q->pending = 1;
	}
}

/* nb consumed buffers from first on may go back to the device */
static void rx_done(struct nic *n, uint16_t first, uint16_t nb)
{
	for (uint16_t k = 0; k < nb; k++)
		n->rx_free[(first + k) % n->d.q[0].nbufs] = 1;
}

/* a TX that sent the frame starting at RX buffer `first` of rn completed */
static void rx_release(struct nic *rn, uint16_t first)
{
	if (rn->rx_refs[first] && --rn->rx_refs[first] == 0) {
		rn->rx_held--;
		rx_done(rn, first, rn->rx_nb[first]);
		rx_refill(rn);
	}
}

/* push one frame; nb > 0: its bytes are where the device wrote them, in the nb buffers from first
 * on (plat_tx may send them as they are; they go back to the device once no TX uses them) */
static void rx_deliver(int i, const uint8_t *hdr, const uint8_t *frame, uint32_t len, uint16_t first,
		       uint16_t nb)
{
	struct nic *n = &nics[i];
	struct click_vh vh;
	vh.flags = hdr[0];
	vh.gso_type = hdr[1];
	vh.hdr_len = get16le(hdr + 2);
	vh.gso_size = get16le(hdr + 4);
	vh.csum_start = get16le(hdr + 6);
	vh.csum_offset = get16le(hdr + 8);
	if (nb) {
		rx_cur.nic = i;
		rx_cur.first = first;
		rx_cur.start = n->d.q[0].bufs + (size_t)first * n->d.q[0].buf_size;
		rx_cur.lo = frame;
		rx_cur.hi = frame + len;
		n->rx_nb[first] = (uint8_t)nb;
	}
	click_rx_vh(i, frame, (uint16_t)len, (vh.flags | vh.gso_type) ? &vh : NULL);
	rx_cur.nic = -1;
	tx_kick_due();
	if (nb && !n->rx_refs[first])
		rx_done(n, first, nb);
}

static bool rx_poll(int i)
{
	struct nic *n = &nics[i];
	struct vq *q = &n->d.q[0];
	uint16_t used = q->used->idx;
	if (used == q->last_used)
		return false;
	barrier();
	int budget = RX_BUDGET;
	uint32_t hl = n->hdr, bs = q->buf_size, bytes = 0;
	while (q->last_used != used && budget-- && bytes < RX_BUDGET_BYTES) {
		volatile struct vring_used_elem *e = &q->used->ring[q->last_used & (q->size - 1)];
		uint16_t id = (uint16_t)e->id;
		uint32_t len = e->len;
		if (id >= q->nbufs) {
			q->last_used++;
			continue;
		}
		uint8_t *b = q->bufs + (size_t)id * bs;
		uint16_t nb = hl == 12 ? get16le(b + 10) : 1;
		if (nb <= 1) {
			q->last_used++;
			if (len > hl && len <= bs)
				rx_deliver(i, b, b + hl, len - hl, id, 1);
			else
				rx_done(n, id, 1);
			bytes += len;
			continue;
		}
		/* a frame in nb buffers (MRG_RXBUF): the device publishes them together, in the order
		 * they were posted, each but the last full */
		if ((uint16_t)(used - q->last_used) < nb)
			break;
		uint8_t h[12];
		memcpy(h, b, sizeof h);
		uint16_t first = id;
		uint32_t tot = 0;
		bool ok = true, seq = first + nb <= q->nbufs;
		for (uint16_t k = 0; k < nb; k++) {
			e = &q->used->ring[q->last_used & (q->size - 1)];
			id = (uint16_t)e->id;
			len = e->len;
			q->last_used++;
			if (id >= q->nbufs) {
				ok = false;
				continue;
			}
			uint32_t skip = k == 0 ? hl : 0;
			if (len > bs || len < skip || tot + (len - skip) > MAX_FRAME)
				ok = false;
			seq = seq && id == first + k && (k + 1 == nb || len == bs);
			tot += ok ? len - skip : 0;
		}
		uint16_t at = (uint16_t)(q->last_used - nb);
		if (ok && seq && tot)
			rx_deliver(i, h, q->bufs + (size_t)first * bs + hl, tot, first, nb);
		else {
			/* wrapped past the last buffer (or not as posted): gather into one copy; the
			 * buffers may go back at once */
			uint32_t off = 0;
			for (uint16_t k = 0; k < nb; k++) {
				e = &q->used->ring[(uint16_t)(at + k) & (q->size - 1)];
				if (e->id >= q->nbufs)
					continue;
				uint32_t skip = k == 0 ? hl : 0;
				if (ok) {
					memcpy(n->gather + off, q->bufs + (size_t)e->id * bs + skip, e->len - skip);
					off += e->len - skip;
				}
				rx_done(n, (uint16_t)e->id, 1);
			}
			if (ok && tot)
				rx_deliver(i, h, n->gather, tot, first, 0);
		}
		bytes += tot;
	}
	rx_backlog |= q->last_used != used;   /* the budget stopped it: frames left from before */
	rx_refill(n);
	if (q->pending)
		vq_kick(&n->d, q);
	return true;
}

/* Can every NIC take a full RX batch (rx_poll's budget of frames, one of them up to 64 KiB)? If
 * not, RX waits (frames stay in the device's RX ring, then in the tap's queue): backpressure
 * instead of dropping what the egress device is still busy with. */
static bool tx_room(void)
{
	for (int i = 0; i < nnics; i++) {
		struct nic *n = &nics[i];
		struct vq *q = &n->d.q[1];
		if (n->tx_inflight)
			tx_reclaim(n);
		if (n->tx_inflight + RX_BUDGET > q->nbufs || n->asz - (n->wpos - n->rpos) < n->room) {
			if (q->pending)
				vq_kick(&n->d, q);
			return false;
		}
	}
	return true;
}

/* The platform hook of a source element (include/click.h): frames it may send now and still leave
 * every NIC the room RX waits for (tx_room), so a generator never stops this VNF's own receiving.
 * A frame is counted as one descriptor and CLICK_SRC_FRAME_ROOM bytes of arena. */
uint32_t plat_tx_room(void)
{
	uint32_t room = nnics ? UINT32_MAX : 0;
	for (int i = 0; i < nnics; i++) {
		struct nic *n = &nics[i];
		struct vq *q = &n->d.q[1];
		if (n->tx_inflight)
			tx_reclaim(n);
		uint32_t busy = (uint32_t)n->tx_inflight + RX_BUDGET, afree = n->asz - (n->wpos - n->rpos);
		uint32_t d = busy < q->nbufs ? q->nbufs - busy : 0;
		uint32_t a = afree > n->room ? (afree - n->room) / CLICK_SRC_FRAME_ROOM : 0;
		if (d < room)
			room = d;
		if (a < room)
			room = a;
	}
	return room;
}

bool net_rx_backlog(void) { return rx_backlog; }

bool net_poll(void)
{
	rx_backlog = false;
	if (!tx_room())
		return true;  /* busy: the device is draining a TX ring */
	bool work = false;
	for (int i = 0; i < nnics; i++) {
		work |= rx_poll(i);
		if (nics[i].d.q[0].pending)   /* buffers a completed TX gave back */
			vq_kick(&nics[i].d, &nics[i].d.q[0]);
	}
	/* Busy-poll for a while after the last frame: waking a halted vCPU with an RX interrupt
	 * costs ~0.5-1 ms under PVM (several VM exits), far more than the next frame of a flow
	 * takes to arrive; sleeping between the frames of a TCP flow halved its throughput. */
	uint64_t now = rdtsc();
	moved |= work;
	if (work)
		last_rx_tsc = now;
	else if (!busy_poll_paused && now - last_rx_tsc < busy_poll_tsc)
		work = true;
	return work;
}

/* A kick is a kcall plus a VM exit (~tens of us of vCPU time under PVM); QEMU re-enables TX
 * notifications whenever it has drained the ring, so at moderate rates every main-loop round
 * would kick for one or two frames. While more frames wait in an RX ring, unkicked frames wait
 * up to TX_KICK_DELAY_US for company; when none does, they go at once (idling flushes them too). */
void net_flush_tx(void)
{
	bool rx_more = false;   /* no frame waiting: nothing to batch with, kick now (latency) */
	for (int i = 0; i < nnics; i++)
		rx_more |= nics[i].d.q[0].used->idx != nics[i].d.q[0].last_used;
	uint64_t now = rdtsc();
	for (int i = 0; i < nnics; i++) {
		struct vq *q = &nics[i].d.q[1];
		if (q->pending && (!rx_more || now - nics[i].tx_first >= tx_kick_delay_tsc))
			vq_kick(&nics[i].d, q);
	}
}

static void net_flush_tx_now(void)
{
	for (int i = 0; i < nnics; i++)
		if (nics[i].d.q[1].pending)
			vq_kick(&nics[i].d, &nics[i].d.q[1]);
}

bool virtio_prepare_idle(void)
{
	net_flush_tx_now();
	/* RX buffers still being sent from must come back before we sleep: TX completions do not
	 * interrupt, and a device out of RX buffers would never wake us */
	for (int i = 0; i < nnics; i++)
		if (nics[i].tx_inflight)
			tx_reclaim(&nics[i]);
	for (int i = 0; i < nnics; i++) {
		if (nics[i].rx_held)
			return true;
		if (nics[i].d.q[0].pending)
			vq_kick(&nics[i].d, &nics[i].d.q[0]);
	}
	/* the interrupt hook acked the devices; polled devices need no ack (their lines stay masked
	 * off at the IO-APIC, and the device keeps working with ISR set). Take every note first,
	 * then look at the rings: a line may be shared by a NIC and the console. */
	for (int i = 0; i < nnics; i++) {
		nics[i].d.q[0].avail->flags = 0;
		/* an edge line that fired stays up until the device is acked: lower it now, so that
		 * the next frame raises it again (one that came before the ack is in the ring) */
		if (irq_take(nics[i].d.vector) && nics[i].edge)
			tr_ack_irq(&nics[i].d);
	}
	if (con.present && !con.edge)
		irq_take(con.d.vector); /* an edge note stays for con_rx, which acks the device */
	mb();
	for (int i = 0; i < nnics; i++)
		if (nics[i].d.q[0].used->idx != nics[i].d.q[0].last_used)
			return true;
	return con_rx_pending();
}

void net_nap_prepare(void)
{
	net_flush_tx_now();
	for (int i = 0; i < nnics; i++) {
		if (nics[i].tx_inflight)
			tx_reclaim(&nics[i]);
		if (nics[i].d.q[0].pending)   /* buffers a completed TX gave back */
			vq_kick(&nics[i].d, &nics[i].d.q[0]);
		/* a note from before (the halt that took the batch's first frame): an edge line
		 * stays up until acked; RX interrupts are off (avail flags), none comes meanwhile */
		if (irq_take(nics[i].d.vector) && nics[i].edge)
			tr_ack_irq(&nics[i].d);
	}
}

bool net_is_vector(int vector)
{
	for (int i = 0; i < nnics; i++)
		if (nics[i].d.vector >= 0 && nics[i].d.vector == vector)
			return true;
	return false;
}

bool net_irq_noted(void)
{
	for (int i = 0; i < nnics; i++)
		if (irq_peek(nics[i].d.vector))
			return true;
	return false;
}

bool net_rx_ready(void)
{
	for (int i = 0; i < nnics; i++)
		if (nics[i].d.q[0].used->idx != nics[i].d.q[0].last_used)
			return true;
	return false;
}

void virtio_end_idle(void)
{
	for (int i = 0; i < nnics; i++)
		nics[i].d.q[0].avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
}

/* ---- virtio-console ---- */
bool con_rx_pending(void)
{
	return con.present && (con.d.q[0].used->idx != con.d.q[0].last_used || (con.edge && irq_peek(con.d.vector)));
}

/* One kcall for whatever needs a notify: published output (queue 1), and the receive queue when
 * the device may have run out of buffers (QEMU then stops reading the chardev until a kick). */
static void con_kick(bool rx)
{
	unsigned mask = 0;
	mb(); /* publish avail->idx before reading NO_NOTIFY */
	if (con.tx_kick && !(con.d.q[1].used->flags & VRING_USED_F_NO_NOTIFY))
		mask |= 2;
	if (rx && !(con.d.q[0].used->flags & VRING_USED_F_NO_NOTIFY))
		mask |= 1;
	con.tx_kick = false;
	if (mask)
		tr_notify(&con.d, mask);
}

bool con_rx(bool (*fn)(const char *data, size_t len))
{
	struct vq *q = &con.d.q[0];
	if (!con.present)
		return false;
	bool irq = con.edge && irq_take(con.d.vector);
	uint16_t used = q->used->idx;
	if (used == q->last_used) {
		if (irq)
			tr_ack_irq(&con.d);
		return false;
	}
	barrier();
	uint16_t posted = q->avail_idx; /* everything the device could see before the re-post */
	bool handled = false;
	while (q->last_used != used) {
		volatile struct vring_used_elem *e = &q->used->ring[q->last_used & (q->size - 1)];
		uint16_t id = (uint16_t)e->id;
		uint32_t len = e->len;
		if (id < q->nbufs) {
			if (len > q->buf_size)
				len = q->buf_size;
			if (len)
				handled |= fn((const char *)q->bufs + (size_t)id * q->buf_size, len);
			q->avail->ring[q->avail_idx & (q->size - 1)] = id;
			q->avail_idx++;
		}
		q->last_used++;
	}
	barrier();
	q->avail->idx = q->avail_idx;
	mb();
	/* The device stops reading the chardev only after it found the ring empty, i.e. after it
	 * used every buffer posted before this re-post; it sees the new ones if it looks later. */
	con_kick(q->used->idx == posted);
	/* edge: ack only now (the reply is out); whatever arrives before the ack is in the ring,
	 * which the main loop looks at again, whatever arrives after raises a new interrupt */
	if (irq)
		tr_ack_irq(&con.d);
	return handled;
}

static void con_tx_reclaim(void)
{
	struct vq *q = &con.d.q[1];
	uint16_t used = q->used->idx;
	barrier();
	while (q->last_used != used) {
		uint16_t id = (uint16_t)q->used->ring[q->last_used & (q->size - 1)].id;
		if (id < q->nbufs)
			con.tx_done[id] = 1;
		q->last_used++;
	}
	/* release arena space in submission order (QEMU completes in order anyway) */
	while (con.tx_inflight && con.tx_done[con.tx_head]) {
		con.tx_done[con.tx_head] = 0;
		con.rpos = con.tx_end[con.tx_head];
		con.tx_head = (uint16_t)((con.tx_head + 1) % q->nbufs);
		con.tx_inflight--;
	}
	if (!con.tx_inflight)
		con.wpos = con.rpos = 0;
}

/* Reserve len (<= CON_TX_CHUNK) contiguous arena bytes and a descriptor; waits (bounded) for
 * the device to return space. Returns the descriptor id, or -1. */
static int con_tx_alloc(uint32_t len, uint32_t *off)
{
	struct vq *q = &con.d.q[1];
	uint64_t t0 = 0, limit = 0;
	for (;;) {
		con_tx_reclaim();
		uint32_t o = con.wpos & (CON_TX_ARENA - 1);
		uint32_t pad = o + len > CON_TX_ARENA ? CON_TX_ARENA - o : 0;
		if (con.tx_inflight < q->nbufs && (con.wpos - con.rpos) + pad + len <= CON_TX_ARENA) {
			con.wpos += pad;
			*off = con.wpos & (CON_TX_ARENA - 1);
			con.wpos += len;
			int id = (con.tx_head + con.tx_inflight) % q->nbufs;
			con.tx_end[id] = con.wpos;
			con.tx_inflight++;
			return id;
		}
		if (!t0) {
			t0 = rdtsc();
			limit = ns_to_tsc(CON_TX_WAIT_US * 1000ull);
			if (con.tx_kick)
				con_kick(false); /* what is waiting for space must be on its way */
		} else if (rdtsc() - t0 > limit)
			return -1;
		cpu_relax();
	}
}

bool con_send_line(const char *s, size_t n)
{
	struct vq *q = &con.d.q[1];
	if (!con.present)
		return false;
	size_t total = n + 1, done = 0; /* the line, then '\n' */
	while (done < total) {
		uint32_t len = total - done > CON_TX_CHUNK ? CON_TX_CHUNK : (uint32_t)(total - done);
		uint32_t off;
		int id = con_tx_alloc(len, &off);
		if (id < 0) {
			con.dropped++;
			kprintf_later("virtio-console: no transmit space for 200 ms, output dropped (%u times)\n", con.dropped);
			return false;
		}
		uint8_t *dst = con.arena + off;
		size_t body = done < n ? (n - done < len ? n - done : len) : 0;
		memcpy(dst, s + done, body);
		if (body < len)
			dst[body] = '\n';
		q->desc[id].addr = (uint64_t)(uintptr_t)dst;
		q->desc[id].len = len;
		q->desc[id].flags = 0;
		q->desc[id].next = 0;
		q->avail->ring[q->avail_idx & (q->size - 1)] = (uint16_t)id;
		q->avail_idx++;
		barrier();
		q->avail->idx = q->avail_idx;
		con.tx_kick = true;
		done += len;
	}
	con_kick(false); /* one notify per line, at once */
	return true;
}
