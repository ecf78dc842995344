/* fluidvim bench/dataplane packet generator and latency sink (Linux, no dependencies).
 *
 *   pktgen send IFNAME DST_MAC SRC_IP DST_IP DPORT SIZE|imix PPS SECONDS
 *       Sends UDP frames on IFNAME through a PACKET_MMAP TX ring (one send() per batch,
 *       PACKET_QDISC_BYPASS), paced to PPS (0 = as fast as possible). SIZE is the Ethernet frame
 *       length without FCS (64 = the classic 64-byte packet, i.e. 60 bytes here + 4 FCS on a wire
 *       we do not have: we send 60-byte frames for "64"); imix = 7:4:1 of 64/594/1518. Each
 *       payload carries a sequence number and the CLOCK_REALTIME send time. Prints one JSON line:
 *       {"sent":N,"seconds":S,"pps":R,"bytes":B}.
 *   pktgen recv IP PORT SECONDS [INTERVAL]
 *       Receives on a UDP socket with kernel receive timestamps (SO_TIMESTAMPNS) and prints
 *       {"received":N,"lat_p50_us":..,"lat_p99_us":..,"lat_max_us":..}: one-way latency from the
 *       sender's timestamp to the kernel's receive timestamp (both hosts are namespaces of one
 *       machine: one clock). With INTERVAL (seconds), also "interval_p99_us" and
 *       "interval_samples": per INTERVAL from "ready" by receive time, its p99 (-1: none).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FRAME_SZ 2048
#define NFRAMES 4096
#define BATCH 64

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint16_t csum(const void *p, size_t n, uint32_t s)
{
	const uint8_t *b = p;
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (n & 1)
		s += (uint32_t)b[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Build an Ethernet/IPv4/UDP frame of `len` bytes (>= 60) into f; returns the payload offset. */
static size_t build(uint8_t *f, size_t len, const uint8_t *dmac, const uint8_t *smac, uint32_t sip,
		    uint32_t dip, uint16_t sport, uint16_t dport)
{
	memset(f, 0, len);
	memcpy(f, dmac, 6);
	memcpy(f + 6, smac, 6);
	f[12] = 0x08;
	uint8_t *ip = f + 14;
	uint16_t iplen = (uint16_t)(len - 14);
	ip[0] = 0x45;
	ip[2] = (uint8_t)(iplen >> 8);
	ip[3] = (uint8_t)iplen;
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &sip, 4);
	memcpy(ip + 16, &dip, 4);
	uint16_t c = csum(ip, 20, 0);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
	uint8_t *u = ip + 20;
	uint16_t ulen = (uint16_t)(iplen - 20);
	u[0] = (uint8_t)(sport >> 8);
	u[1] = (uint8_t)sport;
	u[2] = (uint8_t)(dport >> 8);
	u[3] = (uint8_t)dport;
	u[4] = (uint8_t)(ulen >> 8);
	u[5] = (uint8_t)ulen;
	return 14 + 20 + 8; /* UDP checksum 0: none (IPv4) */
}

static int do_send(int argc, char **argv)
{
	if (argc < 10) {
		fprintf(stderr, "usage: pktgen send IFNAME DST_MAC SRC_IP DST_IP DPORT SIZE|imix PPS SECONDS\n");
		return 2;
	}
	const char *ifn = argv[2];
	uint8_t dmac[6], smac[6];
	if (sscanf(argv[3], "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &dmac[0], &dmac[1], &dmac[2], &dmac[3], &dmac[4],
		   &dmac[5]) != 6)
		return 2;
	uint32_t sip = inet_addr(argv[4]), dip = inet_addr(argv[5]);
	uint16_t dport = (uint16_t)atoi(argv[6]);
	int imix = !strcmp(argv[7], "imix");
	int size = imix ? 0 : atoi(argv[7]);
	double pps = atof(argv[8]), secs = atof(argv[9]);
	if (!imix && (size < 60 || size > 1518))
		return 2;

	int s = socket(AF_PACKET, SOCK_RAW, 0);
	if (s < 0)
		die("socket");
	int one = 1, v = TPACKET_V2;
	setsockopt(s, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
	if (setsockopt(s, SOL_PACKET, PACKET_VERSION, &v, sizeof v) < 0)
		die("PACKET_VERSION");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifn);
	if (ioctl(s, SIOCGIFHWADDR, &ifr) < 0)
		die("SIOCGIFHWADDR");
	memcpy(smac, ifr.ifr_hwaddr.sa_data, 6);
	struct tpacket_req req = { .tp_block_size = FRAME_SZ * 64, .tp_block_nr = NFRAMES / 64,
				   .tp_frame_size = FRAME_SZ, .tp_frame_nr = NFRAMES };
	if (setsockopt(s, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) < 0)
		die("PACKET_TX_RING");
	uint8_t *ring = mmap(NULL, (size_t)FRAME_SZ * NFRAMES, PROT_READ | PROT_WRITE, MAP_SHARED, s, 0);
	if (ring == MAP_FAILED)
		die("mmap");
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
				   .sll_ifindex = (int)if_nametoindex(ifn) };
	if (bind(s, (struct sockaddr *)&sll, sizeof sll) < 0)
		die("bind");

	/* pre-build every slot's frame: only seq + timestamp change per send */
	static const int imix_sizes[12] = { 60, 60, 60, 60, 60, 60, 60, 590, 590, 590, 590, 1514 };
	size_t pay = 0;
	for (int i = 0; i < NFRAMES; i++) {
		struct tpacket2_hdr *h = (struct tpacket2_hdr *)(ring + (size_t)i * FRAME_SZ);
		int len = imix ? imix_sizes[i % 12] : size;
		uint8_t *f = (uint8_t *)h + TPACKET2_HDRLEN - sizeof(struct sockaddr_ll);
		pay = build(f, (size_t)len, dmac, smac, sip, dip, (uint16_t)(10000 + (i & 255)), dport);
		h->tp_len = (uint32_t)len;
	}
	uint64_t t0 = now_ns(CLOCK_MONOTONIC), end = t0 + (uint64_t)(secs * 1e9), sent = 0, bytes = 0;
	unsigned slot = 0;
	double ns_per = pps > 0 ? 1e9 / pps : 0;
	for (;;) {
		uint64_t t = now_ns(CLOCK_MONOTONIC);
		if (t >= end)
			break;
		uint64_t due = pps > 0 ? (uint64_t)((double)(t - t0) / ns_per) + 1 : sent + BATCH;
		if (due <= sent) {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
			continue;
		}
		uint64_t n = due - sent;
		if (n > BATCH)
			n = BATCH;
		uint64_t rt = now_ns(CLOCK_REALTIME);
		uint64_t k = 0;
		for (; k < n; k++) {
			struct tpacket2_hdr *h = (struct tpacket2_hdr *)(ring + (size_t)slot * FRAME_SZ);
			if (h->tp_status != TP_STATUS_AVAILABLE)
				break; /* ring full: the kernel is still sending */
			uint8_t *f = (uint8_t *)h + TPACKET2_HDRLEN - sizeof(struct sockaddr_ll);
			uint64_t seq = sent + k;
			memcpy(f + pay, &seq, 8);
			memcpy(f + pay + 8, &rt, 8);
			bytes += h->tp_len;
			h->tp_status = TP_STATUS_SEND_REQUEST;
			slot = (slot + 1) % NFRAMES;
		}
		if (k == 0) {
			struct pollfd p = { s, POLLOUT, 0 };
			poll(&p, 1, 1);
		}
		if (send(s, NULL, 0, MSG_DONTWAIT) < 0 && errno != EAGAIN && errno != ENOBUFS)
			die("send");
		sent += k;
	}
	send(s, NULL, 0, 0); /* flush */
	double took = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
	printf("{\"sent\":%llu,\"seconds\":%.3f,\"pps\":%.0f,\"bytes\":%llu}\n", (unsigned long long)sent, took,
	       (double)sent / took, (unsigned long long)bytes);
	return 0;
}

static int cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int do_recv(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: pktgen recv IP PORT SECONDS [INTERVAL]\n");
		return 2;
	}
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	int one = 1, rcvbuf = 8 << 20;
	setsockopt(s, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
	setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3])),
				 .sin_addr.s_addr = inet_addr(argv[2]) };
	if (bind(s, (struct sockaddr *)&a, sizeof a) < 0)
		die("bind");
	printf("ready\n");
	fflush(stdout);
	size_t cap = 4u << 20, n = 0;
	uint64_t *lat = malloc(cap * sizeof *lat), got = 0;
	uint64_t ivl = argc > 5 ? (uint64_t)(atof(argv[5]) * 1e9) : 0, t0 = now_ns(CLOCK_REALTIME);
	size_t nivl = ivl ? (size_t)(atof(argv[4]) * 1e9 / (double)ivl) + 1 : 0;
	uint32_t *iv = ivl ? malloc(cap * sizeof *iv) : NULL;   /* each sample's interval */
	if (!lat || (ivl && !iv))
		die("malloc");
	uint64_t end = now_ns(CLOCK_MONOTONIC) + (uint64_t)(atof(argv[4]) * 1e9);
	enum { VB = 64 };
	struct mmsghdr msgs[VB];
	struct iovec iov[VB];
	static uint8_t bufs[VB][2048];
	static char ctl[VB][256];
	for (;;) {
		uint64_t t = now_ns(CLOCK_MONOTONIC);
		if (t >= end)
			break;
		for (int i = 0; i < VB; i++) {
			iov[i].iov_base = bufs[i];
			iov[i].iov_len = sizeof bufs[i];
			memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
			msgs[i].msg_hdr.msg_iov = &iov[i];
			msgs[i].msg_hdr.msg_iovlen = 1;
			msgs[i].msg_hdr.msg_control = ctl[i];
			msgs[i].msg_hdr.msg_controllen = sizeof ctl[i];
		}
		int r = recvmmsg(s, msgs, VB, MSG_DONTWAIT, NULL);
		if (r <= 0) {
			struct pollfd p = { s, POLLIN, 0 };
			poll(&p, 1, 100);
			continue;
		}
		for (int i = 0; i < r; i++) {
			got++;
			if (msgs[i].msg_len < 16)
				continue;
			uint64_t tx;
			memcpy(&tx, bufs[i] + 8, 8);
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c))
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
					struct timespec ts;
					memcpy(&ts, CMSG_DATA(c), sizeof ts);
					uint64_t rx = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
					if (rx >= tx && n < cap) {
						if (iv) {
							uint64_t k = rx > t0 ? (rx - t0) / ivl : 0;
							iv[n] = (uint32_t)(k < nivl ? k : nivl - 1);
						}
						lat[n++] = rx - tx;
					}
				}
		}
	}
	if (iv) {                       /* per interval, before the whole set is sorted */
		uint64_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
		if (!tmp)
			die("malloc");
		printf("{\"interval_s\":%.3f,\"interval_p99_us\":[", (double)ivl / 1e9);
		size_t *cnt = calloc(nivl, sizeof *cnt);
		for (size_t k = 0; k < nivl; k++) {
			size_t m = 0;
			for (size_t i = 0; i < n; i++)
				if (iv[i] == k)
					tmp[m++] = lat[i];
			cnt[k] = m;
			qsort(tmp, m, sizeof *tmp, cmp64);
			printf("%s%.1f", k ? "," : "", m ? (double)tmp[(m * 99) / 100] / 1e3 : -1.0);
		}
		printf("],\"interval_samples\":[");
		for (size_t k = 0; k < nivl; k++)
			printf("%s%zu", k ? "," : "", cnt[k]);
		printf("],");
		free(tmp);
		free(cnt);
	} else {
		printf("{");
	}
	qsort(lat, n, sizeof *lat, cmp64);
	double p50 = n ? (double)lat[n / 2] / 1e3 : -1, p99 = n ? (double)lat[(n * 99) / 100] / 1e3 : -1;
	double mx = n ? (double)lat[n - 1] / 1e3 : -1;
	printf("\"received\":%llu,\"samples\":%zu,\"lat_p50_us\":%.1f,\"lat_p99_us\":%.1f,\"lat_max_us\":%.1f}\n",
	       (unsigned long long)got, n, p50, p99, mx);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "send"))
		return do_send(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "recv"))
		return do_recv(argc, argv);
	fprintf(stderr, "usage: pktgen send|recv ...\n");
	return 2;
}
