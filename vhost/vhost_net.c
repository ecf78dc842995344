/* Copyright 2026 The fluidvim Authors
 * SPDX-License-Identifier: Apache-2.0
 *
 * fluidvim-vhost-net: a vhost-user virtio-net backend that joins a VNF's NICs to tap devices,
 * one thread per NIC, so the per-frame tap syscalls leave QEMU's main thread (which serves
 * every NIC of a VM in one thread and has no vhost-net here).
 *
 *   fluidvim-vhost-net FD:TAP [FD:TAP ...]      FD: an inherited listening (or connected) unix
 *                                               socket QEMU connects to (-chardev socket,path=)
 *   fluidvim-vhost-net -l PATH:TAP ...          or a socket path to listen on (by hand)
 *
 * QEMU is the vhost-user front-end (-netdev vhost-user,chardev=...); guest RAM must be shared
 * (memory-backend-memfd,share=on). The backend opens each tap with IFF_VNET_HDR, sets its
 * offloads to what the guest acked, and moves frames between the tap and the rings:
 *   RX (tap -> guest): read a frame (vnet header included) and copy it into as many posted
 *      buffers as it needs (MRG_RXBUF), then one used-ring update and at most one interrupt
 *      per batch; no buffers -> stop reading the tap (the tap queues) until the guest kicks;
 *   TX (guest -> tap): writev each chain as it is, one used-ring update per batch; the guest's
 *      kick arrives as an eventfd KVM signals directly (ioeventfd), not through QEMU.
 * Exits when every front-end has hung up (QEMU gone). Protocol: docs/interop/vhost-user.rst
 * in QEMU; legacy (no protocol features): a ring starts once it has a kick fd.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_NICS 8
#define MAX_REGIONS 8
#define MAX_FRAME (65536 + 64)
#define BATCH 64
#define MAX_IOV 64
#define RX_IOV 256

enum {
	U_GET_FEATURES = 1, U_SET_FEATURES, U_SET_OWNER, U_RESET_OWNER, U_SET_MEM_TABLE, U_SET_LOG_BASE,
	U_SET_LOG_FD, U_SET_VRING_NUM, U_SET_VRING_ADDR, U_SET_VRING_BASE, U_GET_VRING_BASE,
	U_SET_VRING_KICK, U_SET_VRING_CALL, U_SET_VRING_ERR, U_GET_PROTOCOL_FEATURES,
	U_SET_PROTOCOL_FEATURES, U_GET_QUEUE_NUM, U_SET_VRING_ENABLE,
};
#define U_VERSION 0x1
#define U_REPLY 0x4
#define U_VRING_NOFD (1ull << 8)

#define F_CSUM 0
#define F_GUEST_CSUM 1
#define F_GUEST_TSO4 7
#define F_GUEST_TSO6 8
#define F_GUEST_ECN 9
#define F_HOST_TSO4 11
#define F_HOST_TSO6 12
#define F_HOST_ECN 13
#define F_MRG_RXBUF 15
#define F_PROTOCOL_FEATURES 30   /* QEMU enables rings with SET_VRING_ENABLE only with it */
#define F_VERSION_1 32
#define BIT(b) (1ull << (b))
#define OFFERED (BIT(F_CSUM) | BIT(F_GUEST_CSUM) | BIT(F_GUEST_TSO4) | BIT(F_GUEST_TSO6) | \
		 BIT(F_GUEST_ECN) | BIT(F_HOST_TSO4) | BIT(F_HOST_TSO6) | BIT(F_HOST_ECN) | \
		 BIT(F_MRG_RXBUF) | BIT(F_VERSION_1) | BIT(F_PROTOCOL_FEATURES))

#define VRING_DESC_F_NEXT 1
#define VRING_DESC_F_WRITE 2
#define VRING_USED_F_NO_NOTIFY 1
#define VRING_AVAIL_F_NO_INTERRUPT 1

struct vring_desc { uint64_t addr; uint32_t len; uint16_t flags, next; };
struct vring_avail { uint16_t flags, idx, ring[]; };
struct vring_used_elem { uint32_t id, len; };
struct vring_used { uint16_t flags, idx; struct vring_used_elem ring[]; };

struct region { uint64_t gpa, size, uva; uint8_t *host; size_t map_len; };

struct ring {
	unsigned num;
	struct vring_desc *desc;
	struct vring_avail *avail;
	struct vring_used *used;
	uint16_t last_avail;
	int kick, call;
	bool enabled;               /* SET_VRING_ENABLE (rings start disabled with protocol features) */
};

struct nic {
	int sock, tap;
	char tapname[IFNAMSIZ];
	uint64_t features;
	unsigned hdr;               /* vnet header bytes: 12 with MRG_RXBUF or VERSION_1, else 10 */
	struct region mem[MAX_REGIONS];
	int nregions;
	struct ring q[2];           /* 0 = RX (to the guest), 1 = TX */
	pthread_t thread;
	bool running;
	int stop;                   /* eventfd: tells the data thread to stop */
	uint8_t *frame;             /* RX: a frame read but not yet placed (no buffers) */
	ssize_t frame_len;
};

static struct nic nics[MAX_NICS];
static int nnics;
static long tx_spin_ns;          /* --tx-spin-us: after draining TX, poll this long before
                                  * asking the guest to kick again (a kick is a VM exit) */

static inline long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void vwarn(const char *fmt, va_list ap)
{
	fprintf(stderr, "fluidvim-vhost-net: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
}

static void warnx_(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
}

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
	exit(1);
}

/* ---- guest memory ---- */
static void *gpa_to_host(struct nic *n, uint64_t gpa, uint64_t len)
{
	for (int i = 0; i < n->nregions; i++) {
		struct region *r = &n->mem[i];
		if (gpa >= r->gpa && gpa - r->gpa + len <= r->size)
			return r->host + (gpa - r->gpa);
	}
	return NULL;
}

static void *uva_to_host(struct nic *n, uint64_t uva)
{
	for (int i = 0; i < n->nregions; i++) {
		struct region *r = &n->mem[i];
		if (uva >= r->uva && uva - r->uva < r->size)
			return r->host + (uva - r->uva);
	}
	return NULL;
}

static void unmap_all(struct nic *n)
{
	for (int i = 0; i < n->nregions; i++)
		munmap(n->mem[i].host - (n->mem[i].map_len - n->mem[i].size), n->mem[i].map_len);
	n->nregions = 0;
}

/* ---- tap ---- */
static int tap_open(const char *name, char *out)
{
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		die("open /dev/net/tun: %s", strerror(errno));
	struct ifreq ifr = {0};
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		die("tap %s: TUNSETIFF: %s", name, strerror(errno));
	snprintf(out, IFNAMSIZ, "%s", ifr.ifr_name);
	return fd;
}

static void tap_features(struct nic *n)
{
	int sz = (int)n->hdr;
	if (ioctl(n->tap, TUNSETVNETHDRSZ, &sz) < 0)
		warnx_("%s: TUNSETVNETHDRSZ %d: %s", n->tapname, sz, strerror(errno));
	/* what the tap may hand us = what the guest accepts on receive */
	unsigned off = 0;
	uint64_t f = n->features;
	if (f & BIT(F_GUEST_CSUM)) {
		off |= TUN_F_CSUM;
		if (f & BIT(F_GUEST_TSO4))
			off |= TUN_F_TSO4;
		if (f & BIT(F_GUEST_TSO6))
			off |= TUN_F_TSO6;
		if ((f & BIT(F_GUEST_ECN)) && (off & (TUN_F_TSO4 | TUN_F_TSO6)))
			off |= TUN_F_TSO_ECN;
	}
	if (ioctl(n->tap, TUNSETOFFLOAD, off) < 0)
		warnx_("%s: TUNSETOFFLOAD %#x: %s", n->tapname, off, strerror(errno));
}

/* ---- rings ---- */
static inline void notify_guest(struct ring *q)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!(__atomic_load_n(&q->avail->flags, __ATOMIC_ACQUIRE) & VRING_AVAIL_F_NO_INTERRUPT) && q->call >= 0) {
		uint64_t one = 1;
		if (write(q->call, &one, 8) < 0 && errno != EAGAIN)
			warnx_("call: %s", strerror(errno));
	}
}

static inline uint16_t avail_idx(struct ring *q)
{
	return __atomic_load_n(&q->avail->idx, __ATOMIC_ACQUIRE);
}

static inline void set_notify(struct ring *q, bool on)
{
	q->used->flags = on ? 0 : VRING_USED_F_NO_NOTIFY;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline void used_publish(struct ring *q, uint16_t idx)
{
	__atomic_store_n(&q->used->idx, idx, __ATOMIC_RELEASE);
}

/* After each of `count` frames: publish the used ring and interrupt (if the guest wants it)
 * every BATCH frames; with last, once more at the end. */
static inline void progress(struct ring *q, uint16_t used, int count, bool last)
{
	if (last || count % BATCH == 0) {
		used_publish(q, used);
		if (count)
			notify_guest(q);
	}
}

/* The chain at head as an iovec of at most max entries: device-writable buffers (RX) or
 * device-readable ones (TX); a descriptor outside guest memory or of the other kind ends it. */
static int chain_iov(struct nic *n, struct ring *q, uint16_t head, struct iovec *iov, int max,
		     bool writable)
{
	int k = 0;
	uint16_t d = head;
	for (unsigned hops = 0; hops < q->num && k < max; hops++) {
		struct vring_desc *ds = &q->desc[d % q->num];
		void *p = gpa_to_host(n, ds->addr, ds->len);
		if (!p || !(ds->flags & VRING_DESC_F_WRITE) == writable)
			break;
		iov[k].iov_base = p;
		iov[k++].iov_len = ds->len;
		if (!(ds->flags & VRING_DESC_F_NEXT))
			break;
		d = ds->next;
	}
	return k;
}

/* TX: every chain the guest posted goes to the tap as one writev */
static int tx_run(struct nic *n)
{
	struct ring *q = &n->q[1];
	uint16_t used = q->used->idx;
	int done = 0;
	for (;;) {
		uint16_t end = avail_idx(q);
		if (q->last_avail == end && done && tx_spin_ns) {
			used_publish(q, used);
			long until = now_ns() + tx_spin_ns;
			while ((end = avail_idx(q)) == q->last_avail && now_ns() < until)
				__builtin_ia32_pause();
		}
		if (q->last_avail == end) {
			set_notify(q, true);
			if (q->last_avail == avail_idx(q))
				break;
			set_notify(q, false);
			continue;
		}
		set_notify(q, false);
		while (q->last_avail != end) {
			uint16_t head = q->avail->ring[q->last_avail % q->num];
			struct iovec iov[MAX_IOV];
			int niov = chain_iov(n, q, head, iov, MAX_IOV, false);
			if (niov && writev(n->tap, iov, niov) < 0 && errno != EAGAIN && errno != EIO)
				warnx_("%s: write: %s", n->tapname, strerror(errno));
			q->used->ring[used % q->num].id = head;
			q->used->ring[used % q->num].len = 0;
			used++;
			q->last_avail++;
			progress(q, used, ++done, false);
		}
		used_publish(q, used);
	}
	progress(q, used, done, true);
	return done;
}

/* Place one frame (vnet header first) into posted RX buffers. false: not enough of them. */
static bool rx_place(struct nic *n, const uint8_t *f, size_t len, uint16_t *used)
{
	struct ring *q = &n->q[0];
	bool mrg = n->features & BIT(F_MRG_RXBUF);
	uint16_t avail = avail_idx(q), last = q->last_avail, u = *used;
	size_t off = 0;
	uint16_t nbufs = 0;
	uint8_t *first = NULL;
	while (off < len) {
		if (last == avail)
			return false;               /* nothing consumed: last_avail unchanged */
		uint16_t head = q->avail->ring[last % q->num];
		struct iovec iov[MAX_IOV];
		int niov = chain_iov(n, q, head, iov, MAX_IOV, true);
		size_t put = 0;
		for (int k = 0; k < niov && off < len; k++) {
			size_t c = len - off < iov[k].iov_len ? len - off : iov[k].iov_len;
			memcpy(iov[k].iov_base, f + off, c);
			if (!first)
				first = iov[k].iov_base;
			off += c;
			put += c;
		}
		q->used->ring[u % q->num].id = head;
		q->used->ring[u % q->num].len = (uint32_t)put;
		u++;
		last++;
		nbufs++;
		if (!mrg && off < len)
			return false;               /* one chain must hold it: too small, drop below */
	}
	if (mrg && first && n->hdr >= 12) {
		first[10] = (uint8_t)nbufs;
		first[11] = (uint8_t)(nbufs >> 8);
	}
	q->last_avail = last;
	*used = u;
	return true;
}

/* Posted RX chains from last_avail on, as one iovec, until they can hold the largest frame the
 * tap can give (then the tap writes into guest memory directly: no bounce copy). */
struct rxv {
	struct iovec iov[RX_IOV];
	int niov;
	uint16_t head[RX_IOV];
	uint32_t cap[RX_IOV];
	int nchains;
	size_t total;
};

static void rx_gather(struct nic *n, struct rxv *v)
{
	struct ring *q = &n->q[0];
	uint16_t avail = avail_idx(q), last = q->last_avail;
	v->niov = v->nchains = 0;
	v->total = 0;
	bool mrg = n->features & BIT(F_MRG_RXBUF);
	while (last != avail && v->total < MAX_FRAME && v->niov < RX_IOV) {
		uint16_t head = q->avail->ring[last % q->num];
		int k = chain_iov(n, q, head, v->iov + v->niov, RX_IOV - v->niov, true);
		uint32_t cap = 0;
		for (int j = 0; j < k; j++)
			cap += (uint32_t)v->iov[v->niov + j].iov_len;
		v->niov += k;
		v->head[v->nchains] = head;
		v->cap[v->nchains++] = cap;
		v->total += cap;
		last++;
		if (!mrg)
			break;              /* one chain per frame */
	}
}

/* RX: read the tap until it is empty or the guest has no buffers; true = out of buffers */
static bool rx_run(struct nic *n)
{
	struct ring *q = &n->q[0];
	uint16_t used = q->used->idx;
	int placed = 0;
	bool starved = false;
	static __thread struct rxv v;
	for (;;) {
		if (n->frame_len <= 0) {
			rx_gather(n, &v);
			if (v.total >= MAX_FRAME) {
				/* straight into guest memory */
				ssize_t len = readv(n->tap, v.iov, v.niov);
				if (len <= 0)
					break;
				size_t left = (size_t)len;
				uint16_t nb = 0;
				for (int c = 0; c < v.nchains && (left || !nb); c++) {
					uint32_t put = left < v.cap[c] ? (uint32_t)left : v.cap[c];
					q->used->ring[used % q->num].id = v.head[c];
					q->used->ring[used % q->num].len = put;
					used++;
					nb++;
					left -= put;
				}
				if (n->hdr >= 12 && (n->features & BIT(F_MRG_RXBUF))) {
					uint8_t *h = v.iov[0].iov_base;
					h[10] = (uint8_t)nb;
					h[11] = (uint8_t)(nb >> 8);
				}
				q->last_avail += nb;
				goto placed;
			}
			/* too few buffers for a frame of any size: read it aside, place it if it fits */
			n->frame_len = read(n->tap, n->frame, MAX_FRAME);
			if (n->frame_len <= 0)
				break;
		}
		if (!rx_place(n, n->frame, (size_t)n->frame_len, &used)) {
			if (!(n->features & BIT(F_MRG_RXBUF)) && avail_idx(q) != q->last_avail) {
				n->frame_len = 0;       /* too big for a whole chain: drop it */
				continue;
			}
			/* out of buffers: ask for a kick, then look once more (the guest may have
			 * posted some after our look and before it saw the flag) */
			used_publish(q, used);
			set_notify(q, true);
			if (!rx_place(n, n->frame, (size_t)n->frame_len, &used)) {
				starved = true;
				break;
			}
			set_notify(q, false);
		}
		n->frame_len = 0;
placed:
		progress(q, used, ++placed, false);
	}
	progress(q, used, placed, true);
	return starved;
}

static void drain_eventfd(int fd)
{
	uint64_t v;
	if (fd >= 0)
		(void)!read(fd, &v, 8);
}

static void *nic_thread(void *arg)
{
	struct nic *n = arg;
	bool starved = false;
	set_notify(&n->q[0], false);
	for (;;) {
		struct pollfd p[4] = {
			{ .fd = starved ? -1 : n->tap, .events = POLLIN },
			{ .fd = n->q[0].kick, .events = POLLIN },
			{ .fd = n->q[1].kick, .events = POLLIN },
			{ .fd = n->stop, .events = POLLIN },
		};
		if (poll(p, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll: %s", strerror(errno));
		}
		if (p[3].revents)
			break;
		if (p[2].revents) {
			drain_eventfd(n->q[1].kick);
			tx_run(n);
		}
		if (p[1].revents) {
			drain_eventfd(n->q[0].kick);
			starved = false;
		}
		if (!starved && (p[0].revents || p[1].revents))
			starved = rx_run(n);
		/* frames the guest sent meanwhile (its kick may be suppressed while we run) */
		tx_run(n);
	}
	return NULL;
}

static bool ready(struct nic *n)
{
	bool en = !(n->features & BIT(F_PROTOCOL_FEATURES)) || (n->q[0].enabled && n->q[1].enabled);
	return en && n->nregions && n->q[0].desc && n->q[1].desc && n->q[0].kick >= 0 && n->q[1].kick >= 0;
}

static void start(struct nic *n)
{
	if (n->running || !ready(n))
		return;
	n->hdr = (n->features & (BIT(F_MRG_RXBUF) | BIT(F_VERSION_1))) ? 12 : 10;
	tap_features(n);
	n->running = true;
	if (pthread_create(&n->thread, NULL, nic_thread, n))
		die("pthread_create");
}

static void stop(struct nic *n)
{
	if (!n->running)
		return;
	uint64_t one = 1;
	(void)!write(n->stop, &one, 8);
	pthread_join(n->thread, NULL);
	drain_eventfd(n->stop);
	n->running = false;
}

/* ---- the vhost-user protocol ---- */
struct msg {
	uint32_t req, flags, size;
	union {
		uint64_t u64;
		struct { uint32_t index, num; } state;
		struct { uint32_t index, flags; uint64_t desc, used, avail, log; } addr;
		struct { uint32_t nregions, pad; struct { uint64_t gpa, size, uva, off; } r[MAX_REGIONS]; } mem;
		uint8_t raw[512];
	} p;
} __attribute__((packed));

static int recv_msg(int s, struct msg *m, int *fds, int *nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * MAX_REGIONS)];
	struct iovec iov = { m, 12 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
	ssize_t r = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	if (r <= 0)
		return -1;
	if (r != 12)
		die("short vhost-user header (%zd bytes)", r);
	*nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds + *nfds, CMSG_DATA(c), sizeof(int) * (size_t)k);
			*nfds += k;
		}
	if (m->size > sizeof m->p)
		die("vhost-user message %u: payload of %u bytes", m->req, m->size);
	size_t got = 0;
	while (got < m->size) {
		r = read(s, m->p.raw + got, m->size - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void reply(int s, struct msg *m, uint32_t size)
{
	m->flags = U_VERSION | U_REPLY;
	m->size = size;
	if (write(s, m, 12 + size) != (ssize_t)(12 + size))
		warnx_("reply to %u: %s", m->req, strerror(errno));
}

static int take_fd(int *fds, int nfds)
{
	for (int i = 1; i < nfds; i++)
		close(fds[i]);
	return nfds ? fds[0] : -1;
}

/* one message; -1 = the front-end hung up */
static int serve(struct nic *n)
{
	struct msg m;
	int fds[MAX_REGIONS], nfds = 0;
	if (recv_msg(n->sock, &m, fds, &nfds) < 0)
		return -1;
	unsigned qi;
	if (getenv("VHOST_DEBUG"))
		warnx_("%s: request %u size %u fds %d payload %llx", n->tapname, m.req, m.size, nfds,
		       (unsigned long long)m.p.u64);
	switch (m.req) {
	case U_GET_FEATURES:
		m.p.u64 = OFFERED;
		reply(n->sock, &m, 8);
		break;
	case U_SET_FEATURES:
		n->features = m.p.u64 & OFFERED;
		break;
	case U_SET_OWNER:
	case U_RESET_OWNER:
		break;
	case U_SET_VRING_ENABLE:
		if (m.p.state.index < 2) {
			if (!m.p.state.num)
				stop(n);
			n->q[m.p.state.index].enabled = m.p.state.num != 0;
			start(n);
		}
		break;
	case U_GET_PROTOCOL_FEATURES:
		m.p.u64 = 0;
		reply(n->sock, &m, 8);
		break;
	case U_SET_PROTOCOL_FEATURES:
		break;
	case U_SET_MEM_TABLE: {
		stop(n);
		unmap_all(n);
		if (m.p.mem.nregions > MAX_REGIONS || (int)m.p.mem.nregions != nfds)
			die("SET_MEM_TABLE: %u regions, %d fds", m.p.mem.nregions, nfds);
		for (unsigned i = 0; i < m.p.mem.nregions; i++) {
			struct region *r = &n->mem[i];
			r->gpa = m.p.mem.r[i].gpa;
			r->size = m.p.mem.r[i].size;
			r->uva = m.p.mem.r[i].uva;
			r->map_len = m.p.mem.r[i].size + m.p.mem.r[i].off;
			void *p = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[i], 0);
			close(fds[i]);
			if (p == MAP_FAILED)
				die("mmap of guest memory (%llu bytes): %s (is guest RAM shared? "
				    "memory-backend-memfd,share=on)", (unsigned long long)r->map_len, strerror(errno));
			r->host = (uint8_t *)p + m.p.mem.r[i].off;
		}
		n->nregions = (int)m.p.mem.nregions;
		nfds = 0;
		start(n);
		break;
	}
	case U_SET_VRING_NUM:
		if (m.p.state.index < 2)
			n->q[m.p.state.index].num = m.p.state.num;
		break;
	case U_SET_VRING_BASE:
		if (m.p.state.index < 2)
			n->q[m.p.state.index].last_avail = (uint16_t)m.p.state.num;
		break;
	case U_SET_VRING_ADDR:
		qi = m.p.addr.index;
		if (qi < 2) {
			struct ring *q = &n->q[qi];
			q->desc = uva_to_host(n, m.p.addr.desc);
			q->avail = uva_to_host(n, m.p.addr.avail);
			q->used = uva_to_host(n, m.p.addr.used);
			if (!q->desc || !q->avail || !q->used)
				die("SET_VRING_ADDR %u: an address outside guest memory", qi);
			start(n);
		}
		break;
	case U_GET_VRING_BASE:
		qi = m.p.state.index;
		stop(n);
		if (qi < 2) {
			m.p.state.num = n->q[qi].last_avail;
			if (n->q[qi].kick >= 0)
				close(n->q[qi].kick);
			n->q[qi].kick = -1;
			n->q[qi].desc = NULL;
		}
		reply(n->sock, &m, 8);
		break;
	case U_SET_VRING_KICK:
	case U_SET_VRING_CALL:
	case U_SET_VRING_ERR: {
		qi = (unsigned)(m.p.u64 & 0xff);
		int fd = (m.p.u64 & U_VRING_NOFD) ? -1 : take_fd(fds, nfds);
		nfds = 0;
		if (qi >= 2 || m.req == U_SET_VRING_ERR) {
			if (fd >= 0)
				close(fd);
			break;
		}
		if (m.req == U_SET_VRING_KICK) {
			stop(n);
			if (n->q[qi].kick >= 0)
				close(n->q[qi].kick);
			n->q[qi].kick = fd;
			start(n);
		} else {
			int old = n->q[qi].call;
			__atomic_store_n(&n->q[qi].call, fd, __ATOMIC_RELEASE);
			if (old >= 0)
				close(old);
		}
		break;
	}
	case U_GET_QUEUE_NUM:
		m.p.u64 = 1;
		reply(n->sock, &m, 8);
		break;
	default:
		warnx_("%s: vhost-user request %u not supported", n->tapname, m.req);
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	return 0;
}

static int listen_on(const char *path)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	unlink(path);
	if (bind(s, (struct sockaddr *)&a, sizeof a) < 0 || listen(s, 1) < 0)
		die("listen on %s: %s", path, strerror(errno));
	return s;
}

static int accept_on(int s)
{
	int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		die("accept: %s", strerror(errno));
	close(s);
	return c;
}

int main(int argc, char **argv)
{
	bool listen_mode = false, listening[MAX_NICS] = {false};
	signal(SIGPIPE, SIG_IGN);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-l")) {
			listen_mode = true;
			continue;
		}
		if (!strcmp(argv[i], "--tx-spin-us") && i + 1 < argc) {
			tx_spin_ns = strtol(argv[++i], NULL, 10) * 1000L;
			continue;
		}
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: fluidvim-vhost-net [--tx-spin-us N] FD:TAP [FD:TAP ...]\n"
			       "       fluidvim-vhost-net [--tx-spin-us N] -l PATH:TAP [PATH:TAP ...]\n");
			return 0;
		}
		const char *colon = strrchr(argv[i], ':');
		if (!colon || nnics == MAX_NICS)
			die("bad argument %s (FD:TAP or -l PATH:TAP; at most %d)", argv[i], MAX_NICS);
		/* argv stays as given (ps and pgrep show FD:TAP) */
		char *where = strndup(argv[i], (size_t)(colon - argv[i]));
		if (!where)
			die("out of memory");
		struct nic *n = &nics[nnics++];
		memset(n, 0, sizeof *n);
		n->q[0].kick = n->q[1].kick = n->q[0].call = n->q[1].call = -1;
		n->tap = tap_open(colon + 1, n->tapname);
		n->stop = eventfd(0, EFD_CLOEXEC);
		n->frame = malloc(MAX_FRAME);
		if (!n->frame || n->stop < 0)
			die("out of memory");
		if (listen_mode) {
			n->sock = listen_on(where);
			listening[nnics - 1] = true;
		}
		else {
			char *end;
			long fd = strtol(where, &end, 10);
			if (*end || fd < 0)
				die("bad socket fd %s", where);
			n->sock = (int)fd;
			int acc = 0;
			socklen_t sl = sizeof acc;
			if (getsockopt(n->sock, SOL_SOCKET, SO_ACCEPTCONN, &acc, &sl) < 0)
				die("fd %ld is not a socket: %s", fd, strerror(errno));
			listening[nnics - 1] = acc != 0;
		}
	}
	if (!nnics)
		die("no NIC (FD:TAP or -l PATH:TAP)");
	for (int i = 0; i < nnics; i++)
		if (listening[i])
			nics[i].sock = accept_on(nics[i].sock);
	int live = nnics;
	while (live) {
		struct pollfd p[MAX_NICS];
		for (int i = 0; i < nnics; i++)
			p[i] = (struct pollfd){ .fd = nics[i].sock, .events = POLLIN };
		if (poll(p, (nfds_t)nnics, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll: %s", strerror(errno));
		}
		for (int i = 0; i < nnics; i++)
			if (p[i].revents && nics[i].sock >= 0 && serve(&nics[i]) < 0) {
				stop(&nics[i]);
				close(nics[i].sock);
				nics[i].sock = -1;
				live--;
			}
	}
	return 0;
}
