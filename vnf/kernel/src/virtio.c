/* fluidvim VNF — legacy virtio-net driver.
 *
 * Queues: 0 = RX, 1 = TX, split rings with legacy layout (4096 alignment). One descriptor per
 * buffer, 2048 bytes each: the 10-byte virtio_net_hdr then the frame (no MRG_RXBUF, no offloads;
 * only VIRTIO_NET_F_MAC is negotiated). RX buffers are re-posted right after click_rx() returns
 * (the engine copies what it keeps). TX copies into a free buffer and publishes it at once; the
 * notify ("kick") is batched until the end of the main-loop round (or 32 frames).
 * Interrupts: TX never interrupts; RX interrupts are suppressed while the main loop is busy and
 * re-enabled just before `hlt`. */
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

static struct nic nics[NET_MAX_NICS];
static int nnics;

/* ---- transport ---- */
static void tr_set_status(struct nic *n, uint8_t s)
{
	if (n->tr == NET_MMIO)
		mmio_write32(n->mmio + MMIO_STATUS, s);
	else
		outb(n->io + PCI_STATUS, s);
}

static void tr_notify(struct nic *n, uint16_t q)
{
	if (n->tr == NET_MMIO)
		mmio_write32(n->mmio + MMIO_QUEUE_NOTIFY, q);
	else
		outw(n->io + PCI_QUEUE_NOTIFY, q);
}

static void tr_ack_irq(struct nic *n)
{
	if (n->tr == NET_MMIO) {
		uint32_t st = mmio_read32(n->mmio + MMIO_INTERRUPT_STATUS);
		if (st)
			mmio_write32(n->mmio + MMIO_INTERRUPT_ACK, st);
	} else
		(void)inb(n->io + PCI_ISR); /* reading clears and deasserts INTx */
}

static size_t vring_bytes(uint16_t size)
{
	size_t a = 16u * size + 2u * (3u + size);
	a = (a + 4095) & ~(size_t)4095;
	return a + ((2u * 3u + 8u * size + 4095) & ~(size_t)4095);
}

static int vq_setup(struct nic *n, struct vq *q, uint16_t qidx, bool rx, char *err, size_t ecap, int idx)
{
	uint16_t size;
	q->qidx = qidx;
	if (n->tr == NET_MMIO) {
		mmio_write32(n->mmio + MMIO_QUEUE_SEL, qidx);
		uint32_t max = mmio_read32(n->mmio + MMIO_QUEUE_NUM_MAX);
		size = (uint16_t)(max > MAX_BUFS ? MAX_BUFS : max);
	} else {
		outw(n->io + PCI_QUEUE_SEL, qidx);
		size = inw(n->io + PCI_QUEUE_NUM);
	}
	if (size == 0 || (size & (size - 1))) {
		ksnprintf(err, ecap, "virtio-net %d: queue %u size %u", idx, qidx, size);
		return -1;
	}
	size_t rb = vring_bytes(size);
	uint16_t nbufs = size > MAX_BUFS ? MAX_BUFS : size;
	uint8_t *ring = mem_alloc(rb, 4096);
	uint8_t *bufs = mem_alloc((size_t)nbufs * BUF_SIZE, 4096);
	if (!ring || !bufs) {
		ksnprintf(err, ecap, "virtio-net %d: out of memory for queue %u", idx, qidx);
		return -1;
	}
	memset(ring, 0, rb);
	q->size = size;
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
	uint32_t pfn = (uint32_t)((uintptr_t)ring >> 12);
	if (n->tr == NET_MMIO) {
		mmio_write32(n->mmio + MMIO_QUEUE_NUM, size);
		mmio_write32(n->mmio + MMIO_QUEUE_ALIGN, 4096);
		mmio_write32(n->mmio + MMIO_QUEUE_PFN, pfn);
	} else
		outl(n->io + PCI_QUEUE_PFN, pfn);
	return 0;
}

static int nic_init(struct nic *n, int idx, char *err, size_t ecap)
{
	uint32_t host;
	tr_set_status(n, 0); /* reset */
	tr_set_status(n, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER);
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
	if (vq_setup(n, &n->rx, 0, true, err, ecap, idx) || vq_setup(n, &n->tx, 1, false, err, ecap, idx)) {
		tr_set_status(n, VIRTIO_STATUS_FAILED);
		return -1;
	}
	tr_set_status(n, VIRTIO_STATUS_ACK | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_DRIVER_OK);
	tr_notify(n, 0); /* RX buffers are there */
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
	if (mmio_read32(base + MMIO_MAGIC) != 0x74726976u)
		return false;
	if (mmio_read32(base + MMIO_DEVICE_ID) != 1)
		return false;
	return mmio_read32(base + MMIO_VERSION) == 1;
}

struct pci_ctx { char *errbuf; size_t errcap; uint16_t next_io; };

static void pci_cb(const struct pci_dev *d, void *arg)
{
	struct pci_ctx *c = arg;
	if (d->vendor != 0x1af4 || d->device != 0x1000)
		return;
	struct nic n = { .tr = NET_PCI, .pci_dev = d->dev, .pci_fn = d->fn, .gsi = -1, .vector = -1 };
	uint32_t bar0 = pci_read32(d->dev, d->fn, 0x10);
	if (!(bar0 & 1)) {
		add_err(c->errbuf, c->errcap, "virtio-net-pci: BAR0 is not an I/O BAR (modern-only device?)");
		return;
	}
	if ((bar0 & ~3u) == 0) { /* unassigned: place it ourselves */
		pci_write32(d->dev, d->fn, 0x10, c->next_io);
		bar0 = pci_read32(d->dev, d->fn, 0x10);
		c->next_io += 0x100;
	}
	n.io = (uint16_t)(bar0 & ~3u);
	uint16_t cmd = pci_read16(d->dev, d->fn, 0x04);
	if ((cmd & 0x5) != 0x5)
		pci_write16(d->dev, d->fn, 0x04, cmd | 0x5); /* I/O space + bus master */
	uint8_t line = (uint8_t)pci_read32(d->dev, d->fn, 0x3c);
	if (line > 0 && line < 16 && line != 2)
		n.gsi = line;
	try_add(n, c->errbuf, c->errcap);
}

int net_init(const struct mmio_hint *hints, int nhints, char *errbuf, size_t errcap)
{
	errbuf[0] = 0;
	nnics = 0;
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
			if (!mmio_is_net((uintptr_t)h[i].base))
				continue;
			struct nic n = { .tr = NET_MMIO, .mmio = (uintptr_t)h[i].base, .gsi = h[i].gsi, .vector = -1 };
			try_add(n, errbuf, errcap);
		}
		return nnics;
	}
	if (pci_present()) {
		struct pci_ctx c = { errbuf, errcap, 0xc000 };
		pci_scan(pci_cb, &c);
		return nnics;
	}
	for (int i = 23; i >= 0; i--) {
		uintptr_t base = 0xfeb00000u + 512u * (unsigned)i;
		if (!mmio_is_net(base))
			continue;
		struct nic n = { .tr = NET_MMIO, .mmio = base, .gsi = -1, .vector = -1 };
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

void net_setup_irqs(void)
{
	for (int i = 0; i < nnics; i++) {
		struct nic *n = &nics[i];
		if (n->gsi >= 0)
			n->vector = ioapic_route((unsigned)n->gsi);
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
	bool acked[MAX_GSI + 0x21] = { 0 };
	for (int i = 0; i < nnics; i++) {
		int v = nics[i].vector;
		if (v < 0)
			continue;
		if (!acked[v] && irq_take(v))
			acked[v] = true;
		if (acked[v])
			tr_ack_irq(&nics[i]); /* every NIC sharing the line */
	}
	for (int i = 0; i < nnics; i++)
		nics[i].rx.avail->flags = 0;
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
