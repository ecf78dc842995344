/* fluidvim VNF — boot and main loop.
 *
 * Boot: serial ports, command line, clock, interrupts, NICs, Click engine, IRQ routing, then the
 * `ready` event on COM2 (boot_us measured right before it) and a one-line summary on COM1.
 * Main loop (interrupts off): poll RX rings -> click_rx, click_run_tasks, kick TX, serve COM2.
 * After IDLE_SPIN_US without work: re-enable RX interrupts, arm the 1 ms timer, `sti; hlt`. */
#include "kstd.h"
#include "apic.h"
#include "arch.h"
#include "click.h"
#include "control.h"
#include "mem.h"
#include "pvh.h"
#include "serial.h"
#include "time.h"
#include "virtio.h"

#define VERSION "0.1.0"
#define IDLE_SPIN_US 80
#define TICK_US 1000
#define COM2_GSI 3

static char cmdline[1024];
static char vnf_name[64] = "vnf";
static struct mmio_hint hints[32];
static int nhints;

static bool parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	bool hex = n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	if (hex)
		i = 2;
	if (i >= n)
		return false;
	for (; i < n; i++) {
		unsigned d;
		char c = s[i];
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (hex && c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else if (hex && c >= 'A' && c <= 'F')
			d = (unsigned)(c - 'A' + 10);
		else
			return false;
		v = v * (hex ? 16 : 10) + d;
	}
	*out = v;
	return true;
}

/* virtio_mmio.device=<size>@<base>:<irq> (size may carry a K suffix) */
static void parse_mmio_hint(const char *v, size_t n)
{
	size_t at = 0, colon = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i] == '@')
			at = i;
		else if (v[i] == ':')
			colon = i;
	}
	uint64_t base, irq;
	if (!at || colon <= at || nhints >= (int)ARRAY_SIZE(hints))
		return;
	if (!parse_u64(v + at + 1, colon - at - 1, &base) || !parse_u64(v + colon + 1, n - colon - 1, &irq))
		return;
	if (base < 0xfe000000ull || base >= 0xffffffffull)
		return; /* must lie in the MMIO window our page tables map */
	hints[nhints].base = base;
	hints[nhints].gsi = (int)irq;
	nhints++;
}

struct boot_args { uint64_t slots, flow_timeout_ms, tsc_khz; };

static void parse_cmdline(struct boot_args *a)
{
	const char *s = cmdline;
	while (*s) {
		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		const char *k = s;
		while (*s && *s != ' ' && *s != '\t' && *s != '\n')
			s++;
		size_t tl = (size_t)(s - k);
		const char *eq = NULL;
		for (size_t i = 0; i < tl; i++)
			if (k[i] == '=') {
				eq = k + i;
				break;
			}
		if (!eq)
			continue;
		size_t kl = (size_t)(eq - k), vl = tl - kl - 1;
		const char *v = eq + 1;
		uint64_t x;
#define KEY(lit) (kl == sizeof(lit) - 1 && !memcmp(k, lit, kl))
		if (KEY("slots")) {
			if (parse_u64(v, vl, &x) && x >= 1 && x <= CLICK_MAX_SLOTS)
				a->slots = x;
			else
				kprintf("cmdline: bad slots= (1..65536), using %lu\n", a->slots);
		} else if (KEY("flow_timeout_ms")) {
			if (parse_u64(v, vl, &x) && x >= 1 && x <= 0xffffffffull)
				a->flow_timeout_ms = x;
			else
				kprintf("cmdline: bad flow_timeout_ms=, using %lu\n", a->flow_timeout_ms);
		} else if (KEY("tsc_khz")) {
			if (parse_u64(v, vl, &x) && x > 0)
				a->tsc_khz = x;
		} else if (KEY("name")) {
			size_t l = vl < sizeof vnf_name - 1 ? vl : sizeof vnf_name - 1;
			if (l) {
				memcpy(vnf_name, v, l);
				vnf_name[l] = 0;
			}
		} else if (KEY("virtio_mmio.device"))
			parse_mmio_hint(v, vl);
#undef KEY
	}
}

static uint8_t macs[NET_MAX_NICS][6];
static struct vnf_info info;
static char errs[1024];
static bool com2_irq;

static void idle(void)
{
	bool busy = net_prepare_idle();
	if (!busy && !irq_peek(VEC_GSI(COM2_GSI))) {
		timer_arm_idle();
		sti_hlt(); /* the IRQ stub returns with IF clear */
		irq_take(VEC_TIMER);
	}
	net_end_idle();
}

void kmain(uint32_t start_info);
void kmain(uint32_t start_info)
{
	const struct hvm_start_info *si = (const struct hvm_start_info *)(uintptr_t)start_info;
	struct boot_args a = { 1024, 30000, 0 };

	serial_init(COM1, false);
	serial_init(COM2, true);
	if (si && si->magic == HVM_START_MAGIC && si->cmdline_paddr) {
		const char *c = (const char *)(uintptr_t)si->cmdline_paddr;
		size_t i = 0;
		while (c[i] && i < sizeof cmdline - 1) {
			cmdline[i] = c[i];
			i++;
		}
		cmdline[i] = 0;
	}
	parse_cmdline(&a);
	clock_init(a.tsc_khz);
	mem_init(start_info);
	intr_init();

	int nics = net_init(hints, nhints, errs, sizeof errs);
	for (int i = 0; i < nics; i++)
		memcpy(macs[i], net_mac(i), 6);
	click_init(nics, (uint32_t)a.slots, (uint32_t)a.flow_timeout_ms);

	const char *tmode = timer_init(TICK_US);
	com2_irq = serial_present(COM2) && ioapic_route(COM2_GSI) >= 0;
	for (int i = 0; i < 64 && serial_getc(COM2) >= 0; i++) /* drop what came before we listened */
		;
	net_setup_irqs();

	/* Under KVM the TSC is 0 at vCPU reset. Under TCG it is the host's: then count from entry. */
	info.tsc_base = tsc_to_ns(boot_entry_tsc) > 10000000000ull ? boot_entry_tsc : 0;
	info.name = vnf_name;
	ctl_init(&info);
	for (char *e = errs; *e;) {
		char *nl = e;
		while (*nl && *nl != '\n')
			nl++;
		char save = *nl;
		*nl = 0;
		ctl_send_error_event(e);
		*nl = save;
		e = *nl ? nl + 1 : nl;
	}
	uint64_t ready_tsc = rdtsc();
	info.boot_us = tsc_to_ns(ready_tsc - info.tsc_base) / 1000;
	ctl_send_ready((const uint8_t(*)[6])macs, nics, click_slots_total(), clock_source());

	kprintf("fluidvim-vnf %s: %d NICs, clock %s, ready in %lu us\n", VERSION, nics, clock_source(), info.boot_us);
	kprintf("  name %s, slots %u, flow_timeout_ms %lu, tsc %lu kHz, timer %s, com2 irq %s, ram top 0x%lx\n",
		vnf_name, click_slots_total(), a.flow_timeout_ms, clock_tsc_hz() / 1000, tmode,
		com2_irq ? "on" : "off (polled)", mem_ram_top());
	for (int i = 0; i < nics; i++) {
		char d[96];
		kprintf("  nic %d: %02x:%02x:%02x:%02x:%02x:%02x %s\n", i, macs[i][0], macs[i][1], macs[i][2],
			macs[i][3], macs[i][4], macs[i][5], net_desc(i, d, sizeof d));
	}
	for (char *e = errs; *e;) {
		char *nl = e;
		while (*nl && *nl != '\n')
			nl++;
		kprintf("  error: ");
		serial_write(COM1, e, (size_t)(nl - e));
		serial_write(COM1, "\n", 1);
		e = *nl ? nl + 1 : nl;
	}
	if (!serial_present(COM2))
		kprintf("  error: no UART at 0x2f8 (COM2): no control channel\n");
	kprintf("  cmdline: %s\n", cmdline);

	uint64_t spin = ns_to_tsc(IDLE_SPIN_US * 1000ull), ctl_period = ns_to_tsc(TICK_US * 1000ull);
	uint64_t last_work = rdtsc(), last_ctl = last_work;
	for (;;) {
		bool work = net_poll();
		work |= click_run_tasks();
		net_flush_tx();
		uint64_t now = rdtsc();
		/* COM2: on its interrupt, else every tick (each UART access is a VM exit) */
		if (irq_take(VEC_GSI(COM2_GSI)) || now - last_ctl >= ctl_period) {
			last_ctl = now;
			if (ctl_poll()) {
				work = true;
				now = rdtsc();
			}
		}
		if (work) {
			last_work = now;
			continue;
		}
		if (now - last_work < spin) {
			cpu_relax();
			continue;
		}
		idle();
		last_work = rdtsc() - spin; /* after a wake, poll once then sleep again if idle */
	}
}
