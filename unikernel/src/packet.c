/* fluidvim VNF — packets: the pool that holds packets while they wait in Queues, the writable copy
 * of a received frame, the NIC counters (transmission: click_pkt_tx, inline in click_internal.h),
 * the NICs' own addresses. The services
 * the runtime (click.c) and the elements (elements/) use on a packet; it calls neither of them.
 */
#include "click_internal.h"

struct nicstat click_nicst[CLICK_MAX_NICS + 1];
static uint8_t nic_mac[CLICK_MAX_NICS][6];   /* each NIC's own address (click_set_mac) */

/* Packet pool for packets held in Queues: a free list threaded through ->next. A frame longer than
 * CLICK_BUF_SIZE (a GSO superframe) takes a chain of buffers linked through ->cont, and is gathered
 * into the mirror buffer when it leaves the Queue. */
struct pbuf {
	int32_t next, cont;
	uint16_t len;
	uint8_t nic;
	bool has_vh;
	uint32_t segs;
	uint64_t t0, wbytes;
	struct click_vh vh;
};
static struct pbuf pmeta[CLICK_POOL_BUFS];
static uint8_t pdata[CLICK_POOL_BUFS][CLICK_BUF_SIZE] __attribute__((aligned(64)));
static int32_t pfree = -1;
static uint32_t pnfree;

/* Writable copy of a received frame for EtherMirror (rx data is const), and where a chained
 * (longer than one pool buffer) frame is gathered when it leaves a Queue. */
static uint8_t mirror_buf[65536] __attribute__((aligned(64)));

static void pool_init(void)
{
	for (int i = 0; i < CLICK_POOL_BUFS; i++) {
		pmeta[i].next = (i + 1 < CLICK_POOL_BUFS) ? i + 1 : -1;
		pmeta[i].cont = -1;
	}
	pfree = 0;
	pnfree = CLICK_POOL_BUFS;
}

void click_pkt_init(void)
{
	memset(click_nicst, 0, sizeof(click_nicst));
	memset(nic_mac, 0, sizeof(nic_mac));
	pool_init();
}

void click_set_mac(int nic, const uint8_t mac[6])
{
	if (nic >= 0 && nic < CLICK_MAX_NICS)
		memcpy(nic_mac[nic], mac, 6);
}

const uint8_t *click_mac(int nic) { return nic_mac[nic >= 0 && nic < CLICK_MAX_NICS ? nic : 0]; }

/* free buffer b and the rest of its chain */
static void pool_put(int32_t b)
{
	while (b >= 0) {
		int32_t c = pmeta[b].cont;
		pmeta[b].cont = -1;
		pmeta[b].next = pfree;
		pfree = b;
		pnfree++;
		b = c;
	}
}

static int32_t pool_get(void)
{
	int32_t b = pfree;
	pfree = pmeta[b].next;
	pnfree--;
	pmeta[b].cont = -1;
	return b;
}

uint8_t *click_pkt_writable(struct pkt *p)
{
	if (!p->wdata) {
		memcpy(mirror_buf, p->data, p->len);
		p->wdata = mirror_buf;
		p->data = mirror_buf;
	}
	return p->wdata;
}

bool click_pkt_hold(struct pkt *p, int32_t *head, int32_t *tail)
{
	if (p->buf < 0) {
		uint32_t need = p->len ? (p->len + CLICK_BUF_SIZE - 1u) / CLICK_BUF_SIZE : 1u;
		if (need > pnfree)
			return false;
		int32_t prev = -1;
		for (uint32_t off = 0, k = 0; k < need; k++, off += CLICK_BUF_SIZE) {
			int32_t c = pool_get();
			uint32_t n = p->len - off < CLICK_BUF_SIZE ? p->len - off : CLICK_BUF_SIZE;
			memcpy(pdata[c], p->data + off, n);
			if (prev < 0)
				p->buf = c;
			else
				pmeta[prev].cont = c;
			prev = c;
		}
	}
	struct pbuf *b = &pmeta[p->buf];
	b->len = p->len;
	b->nic = p->nic;
	b->t0 = p->t0;
	b->has_vh = p->has_vh;
	b->vh = p->vh;
	b->segs = p->segs;
	b->wbytes = p->wbytes;
	b->next = -1;
	if (*tail >= 0)
		pmeta[*tail].next = p->buf;
	else
		*head = p->buf;
	*tail = p->buf;
	p->buf = -1;            /* owned by the queue now */
	return true;
}

void click_pkt_free(struct pkt *p)
{
	pool_put(p->buf);
	p->buf = -1;
}

void click_pkt_unhold(int32_t *head, int32_t *tail, struct pkt *p, uint64_t now)
{
	int32_t b = *head;
	*head = pmeta[b].next;
	if (*head < 0)
		*tail = -1;
	p->data = p->wdata = pdata[b];
	p->len = pmeta[b].len;
	p->nic = pmeta[b].nic;
	p->buf = b;
	p->t0 = pmeta[b].t0;
	p->now = now;
	p->pi_ok = false;
	p->has_vh = pmeta[b].has_vh;
	p->vh = pmeta[b].vh;
	p->segs = pmeta[b].segs;
	p->wbytes = pmeta[b].wbytes;
	if (pmeta[b].cont >= 0) {       /* chained: gather, free the chain */
		uint32_t off = 0;
		for (int32_t c = b; c >= 0; c = pmeta[c].cont, off += CLICK_BUF_SIZE) {
			uint32_t k = p->len - off < CLICK_BUF_SIZE ? p->len - off : CLICK_BUF_SIZE;
			memcpy(mirror_buf + off, pdata[c], k);
		}
		pool_put(b);
		p->buf = -1;
		p->data = p->wdata = mirror_buf;
	}
}

void click_pkt_drop_held(int32_t *head, int32_t *tail)
{
	int32_t b = *head;
	while (b >= 0) {
		int32_t next = pmeta[b].next;
		click_nicst[pmeta[b].nic].drop += pmeta[b].segs;
		pool_put(b);
		b = next;
	}
	*head = *tail = -1;
}
