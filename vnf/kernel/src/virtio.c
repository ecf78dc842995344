/* fluidvim VNF — legacy virtio-net driver.
 *
 * Queues: 0 = RX, 1 = TX, split rings with legacy layout (4096 alignment). One descriptor per
 * buffer, 2048 bytes each: the 10-byte virtio_net_hdr then the frame (no MRG_RXBUF, no offloads;
 * only VIRTIO_NET_F_MAC is negotiated). RX buffers are re-posted right after click_rx() returns
 * (the engine copies what it keeps). TX copies into a free buffer and publishes it at once; the
 * notify ("kick") is batched until the end of the main-loop round (or 32 frames).
 * Interrupts: TX never interrupts; RX interrupts are suppressed while the main loop is busy and
 * re-enabled just before `hlt`. Lines are level-triggered; a ring-0 hook run by the interrupt
 * stub acks the ISR of every NIC on the line before the EOI.
 * Register access happens in ring 0 via kcall, one kcall per logical operation (see boot.S). */
#include "virtio.h"
#include "arch.h"
#include "apic.h"
#include "click.h"
#include "mem.h"
#include "pci.h"
#include "serial.h"

#define BUF_SIZE 2048
#define MAX_BUFS 256
#define NET_HDR 10
#define TX_KICK_BATCH 32

#define VIRTIO_STATUS_ACK 1
#define VIRTIO_STATUS_DRIVER 2
#define VIRTIO_STATUS_DRIVER_OK 4
#define VIRTIO_STATUS_FAILED 128
#define VIRTIO_NET_F_MAC (1u << 5)

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
	uint16_t nbufs;       /* buffers we use (<= size, <= MAX_BUFS) */
	uint16_t qidx;
	struct vring_desc *desc;
	volatile struct vring_avail *avail;
	volatile struct vring_used *used;
	uint16_t avail_idx, last_used;
	uint16_t pending;     /* TX: published but not kicked */
	uint16_t nfree;       /* TX: free buffers */
	uint16_t free_ids[MAX_BUFS];
	uint8_t *bufs;
};

struct nic {
	enum net_transport tr;
	uintptr_t mmio;
	uint16_t io;
	unsigned pci_dev, pci_fn;
	int gsi;              /* -1: unknown */
	int vector;           /* -1: no interrupt, poll on the timer tick */
	uint8_t mac[6];
	struct vq rx, tx;
};

/* Rings of up to 256 entries come from this pool in .data: the guest's first touch of a page that
 * QEMU's loader already wrote is ~1000x cheaper under nested virtualisation than that of a fresh
 * page (~1 ms each, see boot.S), and the rings are written at boot. Larger rings use mem_alloc. */
#define POOL_RING_BYTES 12288 /* vring_bytes(256) */
static uint8_t ring_pool[NET_MAX_NICS * 2][POOL_RING_BYTES] __attribute__((aligned(4096), section(".data")));
static int ring_pool_used;

static struct nic nics[NET_MAX_NICS] __attribute__((section(".data"))); /* see boot.S on .bss */
static int nnics;

/* ---- transport: every register access runs in ring 0, one kcall per logical operation
 *      (under PVM a ring-3 MMIO access costs ~70 us, a kcall ~50 us plus ~5 us per access) ---- */
static void st_write(struct nic *n, uint8_t s)
{
	if (n->tr == NET_MMIO)
		mmio_write32(n->mmio + MMIO_STATUS, s);
	else
		outb(n->io + PCI_STATUS, s);
}

static uint64_t notify_k(uint64_t np, uint64_t q, uint64_t c)
{
	struct nic *n = (struct nic *)(uintptr_t)np;
	if (n->tr == NET_MMIO)
		mmio_write32(n->mmio + MMIO_QUEUE_NOTIFY, (uint32_t)q);
	else
		outw(n->io + PCI_QUEUE_NOTIFY, (uint16_t)q);
	return 0;
}

static uint64_t ack_irq_k(uint64_t np, uint64_t b, uint64_t c)
{
	struct nic *n = (struct nic *)(uintptr_t)np;
	if (n->tr == NET_MMIO) {
		uint32_t st = mmio_read32(n->mmio + MMIO_INTERRUPT_STATUS);
		if (st)
			mmio_write32(n->mmio + MMIO_INTERRUPT_ACK, st);
	} else
		(void)inb(n->io + PCI_ISR); /* reading clears and deasserts INTx */
	return 0;
}

static void tr_notify(struct nic *n, uint16_t q) { KCALL(notify_k, n, q, 0); }
static void tr_ack_irq(struct nic *n) { KCALL(ack_irq_k, n, 0, 0); }

/* Phase 1 (ring 0): reset, ACK|DRIVER, features (MAC only), MAC, queue sizes. */
static uint64_t nic_probe_k(uint64_t np, uint64_t idx, uint64_t c)
{
	struct nic *n = (struct nic *)(uintptr_t)np;
	uint32_t host;
	st_write(n, 0); /* reset */
	st_write(n, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER);
	if (n->tr == NET_MMIO) {
		mmio_write32(n->mmio + MMIO_HOST_FEATURES_SEL, 0);
		host = mmio_read32(n->mmio + MMIO_HOST_FEATURES);
		mmio_write32(n->mmio + MMIO_GUEST_FEATURES_SEL, 0);
		mmio_write32(n->mmio + MMIO_GUEST_FEATURES, host & VIRTIO_NET_F_MAC);
		mmio_write32(n->mmio + MMIO_GUEST_PAGE_SIZE, 4096);
	} else {
		host = inl(n->io + PCI_HOST_FEATURES);
		outl(n->io + PCI_GUEST_FEATURES, host & VIRTIO_NET_F_MAC);
	}
	for (int i = 0; i < 6; i++) {
		if (!(host & VIRTIO_NET_F_MAC))
			n->mac[i] = (uint8_t)(i == 0 ? 0x52 : i == 1 ? 0x54 : i == 5 ? idx + 1 : 0);
		else if (n->tr == NET_MMIO)
			n->mac[i] = mmio_read8(n->mmio + MMIO_CONFIG + i);
		else
			n->mac[i] = inb((uint16_t)(n->io + PCI_CONFIG + i));
	}
	for (uint16_t q = 0; q < 2; q++) {
		uint32_t size;
		if (n->tr == NET_MMIO) {
			mmio_write32(n->mmio + MMIO_QUEUE_SEL, q);
			size = mmio_read32(n->mmio + MMIO_QUEUE_NUM_MAX);
			if (size > MAX_BUFS)
				size = MAX_BUFS; /* mmio lets the driver pick a smaller ring */
		} else {
			outw(n->io + PCI_QUEUE_SEL, q);
			size = inw(n->io + PCI_QUEUE_NUM);
		}
		(q ? &n->tx : &n->rx)->size = (uint16_t)size;
	}
	return 0;
}

/* Phase 2 (ring 0): tell the device where the rings are, DRIVER_OK, kick RX. */
static uint64_t nic_start_k(uint64_t np, uint64_t b, uint64_t c)
{
	struct nic *n = (struct nic *)(uintptr_t)np;
	for (uint16_t q = 0; q < 2; q++) {
		struct vq *v = q ? &n->tx : &n->rx;
		uint32_t pfn = (uint32_t)((uintptr_t)v->desc >> 12);
		if (n->tr == NET_MMIO) {
			mmio_write32(n->mmio + MMIO_QUEUE_SEL, q);
			mmio_write32(n->mmio + MMIO_QUEUE_NUM, v->size);
			mmio_write32(n->mmio + MMIO_QUEUE_ALIGN, 4096);
			mmio_write32(n->mmio + MMIO_QUEUE_PFN, pfn);
		} else {
			outw(n->io + PCI_QUEUE_SEL, q);
			outl(n->io + PCI_QUEUE_PFN, pfn);
		}
	}
	st_write(n, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DRIVER_OK);
	notify_k(np, 0, 0); /* RX buffers are there */
	return 0;
}

static uint64_t nic_fail_k(uint64_t np, uint64_t b, uint64_t c)
{
	st_write((struct nic *)(uintptr_t)np, VIRTIO_STATUS_FAILED);
	return 0;
}

static size_t vring_bytes(uint16_t size)
{
	size_t a = 16u * size + 2u * (3u + size);
	a = (a + 4095) & ~(size_t)4095;
	return a + ((2u * 3u + 8u * size + 4095) & ~(size_t)4095);
}

/* ring 3: memory for one queue (q->size set by nic_probe_k) */
static int vq_alloc(struct vq *q, uint16_t qidx, bool rx, char *err, size_t ecap, int idx)
{
	uint16_t size = q->size;
	q->qidx = qidx;
	if (size == 0 || (size & (size - 1))) {
		ksnprintf(err, ecap, "virtio-net %d: queue %u size %u", idx, qidx, size);
		return -1;
	}
	size_t rb = vring_bytes(size);
	uint16_t nbufs = size > MAX_BUFS ? MAX_BUFS : size;
	bool pooled = rb <= POOL_RING_BYTES && ring_pool_used < (int)ARRAY_SIZE(ring_pool);
	uint8_t *ring = pooled ? ring_pool[ring_pool_used++] : mem_alloc(rb, 4096);
	uint8_t *bufs = mem_alloc((size_t)nbufs * BUF_SIZE, 4096);
	if (!ring || !bufs) {
		ksnprintf(err, ecap, "virtio-net %d: out of memory for queue %u", idx, qidx);
		return -1;
	}
	if (!pooled)
		memset(ring, 0, rb);
	q->nbufs = nbufs;
	q->desc = (struct vring_desc *)ring;
	q->avail = (volatile struct vring_avail *)(ring + 16u * size);
	q->used = (volatile struct vring_used *)(ring + ((16u * size + 2u * (3u + size) + 4095) & ~4095u));
	q->bufs = bufs;
	q->avail_idx = q->last_used = q->pending = 0;
	for (uint16_t i = 0; i < nbufs; i++) {
		q->desc[i].addr = (uint64_t)(uintptr_t)(bufs + (size_t)i * BUF_SIZE);
		q->desc[i].len = rx ? BUF_SIZE : 0;
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
	/* TX completions are reaped by polling; RX interrupts are enabled only around hlt */
	q->avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
	return 0;
}

static int nic_init(struct nic *n, int idx, char *err, size_t ecap)
{
	KCALL(nic_probe_k, n, idx, 0);
	if (vq_alloc(&n->rx, 0, true, err, ecap, idx) || vq_alloc(&n->tx, 1, false, err, ecap, idx)) {
		KCALL(nic_fail_k, n, 0, 0);
		return -1;
	}
	KCALL(nic_start_k, n, 0, 0);
	return 0;
}

/* ---- discovery ---- */
static void add_err(char *errbuf, size_t errcap, const char *msg)
{
	size_t l = strlen(errbuf);
	ksnprintf(errbuf + l, errcap - l, "%s\n", msg);
}

static void try_add(struct nic cand, char *errbuf, size_t errcap)
{
	char err[128];
	if (nnics >= NET_MAX_NICS) {
		add_err(errbuf, errcap, "more than 4 virtio-net devices: extra ones ignored");
		return;
	}
	err[0] = 0;
	nics[nnics] = cand;
	if (nic_init(&nics[nnics], nnics, err, sizeof err) == 0)
		nnics++;
	else
		add_err(errbuf, errcap, err);
}

static bool mmio_is_net(uintptr_t base)
{
	return mmio_read32(base + MMIO_MAGIC) == 0x74726976u && mmio_read32(base + MMIO_DEVICE_ID) == 1 &&
	       mmio_read32(base + MMIO_VERSION) == 1;
}

/* ring 0: which of the given bases hold a legacy virtio-net device (bit mask) */
static uint64_t mmio_probe_k(uint64_t basesp, uint64_t n, uint64_t c)
{
	const uint64_t *bases = (const uint64_t *)(uintptr_t)basesp;
	uint64_t mask = 0;
	for (uint64_t i = 0; i < n && i < 64; i++)
		if (mmio_is_net((uintptr_t)bases[i]))
			mask |= 1ull << i;
	return mask;
}

/* ring 0: number of virtio-mmio transports microvm created (8 or 24) */
static uint64_t mmio_layout_k(uint64_t a, uint64_t b, uint64_t c)
{
	return mmio_read32(0xfeb00000u + 512u * 8 + MMIO_MAGIC) == 0x74726976u ? 24 : 8;
}

static void add_pci(const struct pci_dev *d, char *errbuf, size_t errcap)
{
	struct nic n = { .tr = NET_PCI, .pci_dev = d->dev, .pci_fn = d->fn, .gsi = -1, .vector = -1 };
	if (!(d->bar0 & 1) || (d->bar0 & ~3u) == 0) {
		add_err(errbuf, errcap, "virtio-net-pci: no legacy I/O BAR0 (modern-only device? use disable-legacy=off)");
		return;
	}
	n.io = (uint16_t)(d->bar0 & ~3u);
	if (d->irq_line > 0 && d->irq_line < 16 && d->irq_line != 2)
		n.gsi = d->irq_line;
	try_add(n, errbuf, errcap);
}

int net_init(const struct mmio_hint *hints, int nhints, char *errbuf, size_t errcap)
{
	errbuf[0] = 0;
	nnics = 0;
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
		struct pci_dev devs[8];
		int nd = pci_find(0x1af4, 0x1000, devs, (int)ARRAY_SIZE(devs));
		for (int i = 0; i < nd; i++)
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
	uint64_t mask = KCALL(mmio_probe_k, bases, nb, 0);
	for (int i = 0; i < nb; i++) {
		if (!(mask & (1ull << i)))
			continue;
		struct nic n = { .tr = NET_MMIO, .mmio = (uintptr_t)bases[i], .gsi = gsis[i], .vector = -1 };
		try_add(n, errbuf, errcap);
	}
	return nnics;
}

int net_count(void) { return nnics; }
const uint8_t *net_mac(int i) { return nics[i].mac; }

const char *net_desc(int i, char *buf, size_t cap)
{
	struct nic *n = &nics[i];
	if (n->tr == NET_MMIO)
		ksnprintf(buf, cap, "virtio-mmio@0x%lx gsi %d%s, rx %u/tx %u", (uint64_t)n->mmio, n->gsi,
			  n->vector < 0 ? " (polled)" : "", n->rx.size, n->tx.size);
	else
		ksnprintf(buf, cap, "virtio-pci 00:%02x.%u io 0x%x gsi %d%s, rx %u/tx %u", n->pci_dev, n->pci_fn,
			  n->io, n->gsi, n->vector < 0 ? " (polled)" : "", n->rx.size, n->tx.size);
	return buf;
}

/* ring 0, from the interrupt stub: ack every NIC on this (possibly shared, level) line */
static void nic_irq_hook(int vector)
{
	for (int i = 0; i < nnics; i++)
		if (nics[i].vector == vector)
			ack_irq_k((uint64_t)(uintptr_t)&nics[i], 0, 0);
}

void net_setup_irqs(void)
{
	for (int i = 0; i < nnics; i++) {
		struct nic *n = &nics[i];
		if (n->gsi >= 0 && n->gsi < MAX_GSI) {
			n->vector = VEC_GSI(n->gsi); /* hook first: the line may already be up */
			irq_set_hook(n->vector, nic_irq_hook);
			if (ioapic_route((unsigned)n->gsi, true) < 0)
				n->vector = -1; /* keep polling on the tick (the hook may be shared) */
		}
		tr_ack_irq(n);
	}
}

bool net_all_have_irq(void)
{
	for (int i = 0; i < nnics; i++)
		if (nics[i].vector < 0)
			return false;
	return true;
}

/* ---- data path ---- */
static void vq_kick(struct nic *n, struct vq *q)
{
	mb(); /* publish avail->idx before reading the device's NO_NOTIFY flag */
	if (!(q->used->flags & VRING_USED_F_NO_NOTIFY))
		tr_notify(n, q->qidx);
	q->pending = 0;
}

static void tx_reclaim(struct vq *q)
{
	uint16_t used = q->used->idx;
	barrier();
	while (q->last_used != used) {
		uint16_t id = (uint16_t)q->used->ring[q->last_used & (q->size - 1)].id;
		if (id < q->nbufs && q->nfree < q->nbufs)
			q->free_ids[q->nfree++] = id;
		q->last_used++;
	}
}

int plat_tx(int nic, const uint8_t *data, uint16_t len)
{
	if (nic < 0 || nic >= nnics || len > BUF_SIZE - NET_HDR)
		return -1;
	struct nic *n = &nics[nic];
	struct vq *q = &n->tx;
	if (q->nfree < 16)
		tx_reclaim(q);
	if (q->nfree == 0) {
		if (q->pending)
			vq_kick(n, q);
		return -1;
	}
	uint16_t id = q->free_ids[--q->nfree];
	uint8_t *buf = q->bufs + (size_t)id * BUF_SIZE;
	memset(buf, 0, NET_HDR);
	memcpy(buf + NET_HDR, data, len);
	q->desc[id].len = (uint32_t)len + NET_HDR;
	q->avail->ring[q->avail_idx & (q->size - 1)] = id;
	q->avail_idx++;
	barrier();
	q->avail->idx = q->avail_idx;
	if (++q->pending >= TX_KICK_BATCH)
		vq_kick(n, q);
	return 0;
}

static bool rx_poll(int i)
{
	struct nic *n = &nics[i];
	struct vq *q = &n->rx;
	uint16_t used = q->used->idx;
	if (used == q->last_used)
		return false;
	barrier();
	int budget = 64;
	while (q->last_used != used && budget--) {
		volatile struct vring_used_elem *e = &q->used->ring[q->last_used & (q->size - 1)];
		uint16_t id = (uint16_t)e->id;
		uint32_t len = e->len;
		if (id < q->nbufs) {
			if (len > NET_HDR && len <= BUF_SIZE)
				click_rx(i, q->bufs + (size_t)id * BUF_SIZE + NET_HDR, (uint16_t)(len - NET_HDR));
			q->avail->ring[q->avail_idx & (q->size - 1)] = id;
			q->avail_idx++;
		}
		q->last_used++;
	}
	barrier();
	q->avail->idx = q->avail_idx;
	vq_kick(n, q);
	return true;
}

bool net_poll(void)
{
	bool work = false;
	for (int i = 0; i < nnics; i++) {
		work |= rx_poll(i);
		if (nics[i].tx.nfree < nics[i].tx.nbufs)
			tx_reclaim(&nics[i].tx);
	}
	return work;
}

void net_flush_tx(void)
{
	for (int i = 0; i < nnics; i++)
		if (nics[i].tx.pending)
			vq_kick(&nics[i], &nics[i].tx);
}

bool net_prepare_idle(void)
{
	/* the interrupt hook acked the devices; polled NICs need no ack (their lines stay masked
	 * off at the IO-APIC, and the device keeps working with ISR set) */
	for (int i = 0; i < nnics; i++) {
		irq_take(nics[i].vector);
		nics[i].rx.avail->flags = 0;
	}
	mb();
	for (int i = 0; i < nnics; i++)
		if (nics[i].rx.used->idx != nics[i].rx.last_used)
			return true;
	return false;
}

void net_end_idle(void)
{
	for (int i = 0; i < nnics; i++)
		nics[i].rx.avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
}
