/* fluidvim VNF — boot and main loop.
 *
 * Boot: ring 0 sets up the TSS and the kcall gate and drops to ring 3 (see boot.S for why);
 * ring 3 does the rest: IDT, COM1, command line, clock, virtio devices (NICs, console), Click
 * engine, COM2 if there is no virtio-console, IRQ routing, then the `ready` event on the control
 * channel (boot_us measured right before it) and a summary on COM1.
 * Main loop (ring 3): poll RX rings -> click_rx, click_run_tasks, kick TX, serve the control
 * channel (virtio-console: whenever its receive ring moved, a memory read; COM2: on its
 * interrupt, else every tick). Idle: once the busy-poll window (net_busy_poll_us, the `poll` op)
 * has passed since the last frame and the spin (below) since the last work of any kind,
 * re-enable RX interrupts, then cpu_idle() (ring 0: arm the one-shot timer for the next
 * deadline, if any, then `sti; hlt`). With interrupt moderation on (the `poll` op's
 * coalesce_us, see nap) a round that took frames naps on the timer, RX interrupts off.
 * Tickless: an idle VNF with no sessions has no timer armed at all and wakes only for a packet
 * or a control request. */
#include "kstd.h"
#include "apic.h"
#include "arch.h"
#include "click.h"
#include "control.h"
#include "mem.h"
#include "pvh.h"
#include "serial.h"
#include "time.h"
#include "version.h"
#include "virtio.h"

/* The spin after the last work (a frame, a task, a request) before halting: never longer than
 * the busy-poll window and counted from the same moment, not after it (it used to add 80 us
 * after the window: 130 us of polling per frame at a 50 us window, bench/powercap), so the
 * window alone sets how long an idle VNF polls; after a request or a task with no frame it still
 * polls this long for what follows. */
#define IDLE_SPIN_US 80
/* Busy polling pays only while the host has a CPU to spare for it. When the host kept this vCPU
 * waiting >= STALL_US between two rounds (KVM steal time: the cgroup's CPU quota ran out and
 * CFS throttled the whole QEMU until its next period, or other threads took the CPU), polling is
 * paused for BACKOFF_US: an idle round halts at once and the next frame's interrupt wakes it.
 * A VNF's quota is one core per vCPU and covers QEMU's main thread too, which moves every frame
 * between the taps and the rings: a guest that polls a whole core between frames (at ~1 kpps
 * the 1 ms window never closes) leaves that thread nothing, and the throttle holds frames for the
 * rest of the 100 ms period (end-to-end p99 ~10 ms at 1 kpps, 19-31 ms at 2-10 kpps on a quiet
 * host, in-VNF p99 2-4 us; bench/results/slots.md). Frames still wake the halted vCPU by their
 * interrupt; rounds with frames never count as polling. */
#define STALL_US 1000
#define BACKOFF_US 5000000
#define TICK_US 1000        /* idle wake-up when some device has no interrupt (polled) */
#define TICK_IRQ_US 10000   /* periodic-timer fallback (no TSC-deadline) when every device interrupts */
#define CTL_SAFETY_US 1000000 /* COM2 with a working IRQ is still polled this often */
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

bool boot_log_full __attribute__((section(".data"))); /* boot_log=full (serial.h); .data: see boot.S */

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
		} else if (KEY("boot_log")) {
			if (vl == 4 && !memcmp(v, "full", 4))
				boot_log_full = true;
			else if (vl == 5 && !memcmp(v, "brief", 5))
				boot_log_full = false;
			else
				kprintf("cmdline: bad boot_log= (brief | full), using %s\n",
					boot_log_full ? "full" : "brief");
		} else if (KEY("virtio_mmio.device"))
			parse_mmio_hint(v, vl);
#undef KEY
	}
}

/* boot profile, printed on COM1 after `ready` */
static struct { const char *what; uint64_t tsc; } marks[12];
static int nmarks;
static void mark(const char *what)
{
	if (nmarks < (int)ARRAY_SIZE(marks)) {
		marks[nmarks].what = what;
		marks[nmarks++].tsc = rdtsc();
	}
}

static uint8_t macs[NET_MAX_NICS][6];
static struct vnf_info info;
static char errs[1024];
static bool com2_irq, ctl_virtio;

struct cpu_use cpu_use;

/* The KVM steal time (ns) already charged, and what accrued beyond the time charged since (TSC
 * ticks): see charge(). */
static uint64_t steal_mark_ns, steal_pending;

/* Charge `ticks` of the main loop's wall-clock time to *where (busy, poll or halt), less the KVM
 * steal time that accrued meanwhile (the host kept this vCPU from running: its cgroup's CPU
 * quota throttled, its thread preempted), which goes to cpu_use.steal instead: busy + poll +
 * halt + steal = the loop's wall time, and a round that spans a throttled gap no longer counts
 * the gap as polling (bench/results/powercap.md: "poll 0.65" under a 28.6 % cap was the gap).
 * KVM publishes the steal at the vCPU's next entry, so a gap shows in the round it ended; steal
 * beyond the time charged (rounding, or published late) waits for the next charge. */
static void charge(uint64_t *where, uint64_t ticks)
{
	uint64_t st = clock_steal_ns();
	if (st > steal_mark_ns) {
		steal_pending += ns_to_tsc(st - steal_mark_ns);
		steal_mark_ns = st;
	}
	uint64_t s = steal_pending < ticks ? steal_pending : ticks;
	steal_pending -= s;
	cpu_use.steal += s;
	*where += ticks - s;
}

/* Halt if nothing is pending; the wall-clock ticks halted (charged to halt, less steal). */
static uint64_t idle(uint64_t deadline)
{
	uint64_t halted = 0;
	bool busy = virtio_prepare_idle(); /* includes console input */
	if (!busy && (ctl_virtio || !irq_peek(VEC_GSI(COM2_GSI)))) {
		uint64_t t = rdtsc();
		int v = cpu_idle(deadline); /* returns at once (0) if a device interrupt was noted meanwhile */
		halted = rdtsc() - t;
		charge(&cpu_use.halt, halted);  /* first: a wake-up's wait for the throttle is in it */
		cpu_use.halts++;
		/* what ended it; frames waiting after a wake-up no NIC caused missed their interrupt */
		bool nic = v ? net_is_vector(v) : net_irq_noted();
		if (nic)
			cpu_use.wake_rx++;
		else if (v == VEC_TIMER)
			cpu_use.wake_timer++;
		else
			cpu_use.wake_other++;
		if (!nic && net_rx_ready())
			cpu_use.rx_no_irq++;
	}
	virtio_end_idle();
	return halted;
}

/* Interrupt moderation (the `poll` op's coalesce_us; NAPI / ethtool rx-usecs style): after a
 * round that took the frames there were, halt until `until` on the timer with the NICs' RX
 * interrupts still off, instead of polling for the next frame (a round each, and under PVM a
 * frame that comes while a round's kick is emulated makes the next round) or halting for its
 * interrupt; the round after it takes whatever arrived meanwhile and sends it with one TX kick
 * per NIC, then naps again. A nap that brought nothing ends it: the window, then the
 * interrupt-driven halt, so an idle VNF costs nothing more. Under PVM (kvm_pvm: the VNF's ring-0
 * code emulated) every VM exit and kcall (a kick, an injected interrupt's acknowledgement, a halt
 * and its wake-up) costs tens of us of the vCPU thread's host CPU:
 * at 10 % load (a frame every ~108 us) the vCPU used ~0.8 CPU taking them per frame, window 0
 * or 1000 alike (bench/results/powercap.md); moderation pays them once per nap. A frame waits up
 * to coalesce_us in the RX ring, which the VNF's latency_ns (from click_rx) does not count:
 * whoever sets it spends a share of the latency target on it. Returns the ticks halted. */
static uint64_t nap(uint64_t until)
{
	net_nap_prepare();
	if (con_rx_pending())   /* a request came meanwhile: answer it first */
		return 0;
	uint64_t t = rdtsc();
	(void)cpu_idle(until);  /* the timer, or the console's interrupt (still enabled) */
	uint64_t halted = rdtsc() - t;
	charge(&cpu_use.halt, halted);
	cpu_use.naps++;
	return halted;
}

static void user_main(void);
/* .data (reloaded at every boot, reset included): what ring 0 hands to ring 3 past the clear */
static uint32_t start_info __attribute__((section(".data")));
static bool bss_dirty __attribute__((section(".data")));
#define BOOT_MARKER 0x666c7569645f766eull /* "fluid_vn" */
static uint64_t boot_marker; /* in .bss, which is not loaded (linker.ld): set = this RAM booted before */

/* After a guest reset, the C part of .bss as it was on the first boot: all zero. Ring 3, first
 * thing (nothing there is live yet; the ring-0 state, IDT and TSS, is in .data): PVM emulated the
 * ring-0 `rep stos` instruction by instruction (~1.8 s for the 4.4 MiB; 4.5 s as bytes). A page
 * the last boot never wrote is still zero and costs no host memory: it is only read (the host maps
 * its zero page), not written. */
static void clear_c_bss(void)
{
	extern char __bss_c_start[], __bss_end[];
	uint64_t *p = (uint64_t *)(void *)__bss_c_start, *end = (uint64_t *)(void *)__bss_end;
	while (p < end) {
		uint64_t *next = (uint64_t *)(((uintptr_t)p & ~(uintptr_t)4095) + 4096);
		if (next > end)
			next = end;
		for (uint64_t *q = p; q < next; q++)
			if (*q) {
				memset(p, 0, (size_t)(next - p) * sizeof *p);
				break;
			}
		p = next;
	}
	boot_marker = BOOT_MARKER;
}

/* ring 0: the least possible (every instruction here is emulated under PVM), then ring 3 */
void kmain(uint32_t si);
void kmain(uint32_t si)
{
	bss_dirty = boot_marker == BOOT_MARKER;  /* a guest reset: the previous boot's .bss is in RAM */
	boot_marker = BOOT_MARKER;
	start_info = si;
	/* Firmware other than qboot (SeaBIOS: the stock libvirt path) leaves the 8259 PICs routing
	 * the PIT to vectors 8..15, which are exceptions here: mask them before IF is ever set. */
	outb(0x21, 0xff);
	outb(0xa1, 0xff);
	intr_early();
	extern char boot_stack_top[];
	enter_user(user_main, boot_stack_top);
}

static void user_main(void)
{
	const struct hvm_start_info *si = (const struct hvm_start_info *)(uintptr_t)start_info;
	struct boot_args a = { 1024, 30000, 0 };

	if (bss_dirty)
		clear_c_bss();
	mark("ring3");
	intr_init();
	serial_init(COM1, false);
	mark("serial");
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
	mark("clock");
	mem_init(start_info);

	int nics = virtio_init(hints, nhints, errs, sizeof errs);
	for (int i = 0; i < nics; i++)
		memcpy(macs[i], net_mac(i), 6);
	ctl_virtio = con_present();
	mark("virtio");
	click_init(nics, (uint32_t)a.slots, (uint32_t)a.flow_timeout_ms);
	for (int i = 0; i < nics; i++)
		click_set_mac(i, macs[i]);  /* the device's MAC until `configure` gives another */
	mark("click");

	if (!ctl_virtio) { /* fallback control channel */
		serial_init(COM2, true);
		com2_irq = serial_present(COM2) && ioapic_route(COM2_GSI, false) >= 0; /* edge: drained by the main loop */
		char junk[64]; /* drop what came before we listened */
		serial_read(COM2, junk, sizeof junk);
	}
	virtio_setup_irqs();
	/* the 1 ms tick is for polling a device without a working interrupt (an absent COM2 needs none) */
	bool all_irq = (ctl_virtio || com2_irq || !serial_present(COM2)) && virtio_all_have_irq();
	uint32_t tick_us = all_irq ? TICK_IRQ_US : TICK_US;
	const char *tmode = timer_init(tick_us);
	mark("irqs");

	info.tsc_base = clock_zero_tsc(boot_entry_tsc);
	info.name = vnf_name;
	info.rx_irq = com2_irq;
	info.virtio = ctl_virtio;
	info.deadline_timer = tmode[0] == 't';
	info.nics = nics;
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

	/* the boot log goes out while idle: each UART byte is a VM exit (~10 ms for the full
	 * block), which must not delay the first configure; one line unless boot_log=full */
	kprintf_later("fluidvim-vnf %s %s: %d NICs, clock %s, ready in %lu us\n", VERSION, vnf_name, nics,
		clock_source(), info.boot_us);
	for (char *e = errs; *e;) {
		char *nl = e;
		while (*nl && *nl != '\n')
			nl++;
		char line[160];
		size_t n = (size_t)(nl - e) < sizeof line - 1 ? (size_t)(nl - e) : sizeof line - 1;
		memcpy(line, e, n);
		line[n] = 0;
		kprintf_later("  error: %s\n", line);
		e = *nl ? nl + 1 : nl;
	}
	if (!ctl_virtio && !serial_present(COM2))
		kprintf_later("  error: no virtio-console and no UART at 0x2f8 (COM2): no control channel\n");
	if (boot_log_full) { /* the details: ~10x the bytes of the line above (serial.h) */
		kprintf_later("  boot profile (us since clock zero): entry %lu", tsc_to_ns(boot_entry_tsc - info.tsc_base) / 1000);
		for (int i = 0; i < nmarks; i++)
			kprintf_later(", %s %lu", marks[i].what, tsc_to_ns(marks[i].tsc - info.tsc_base) / 1000);
		kprintf_later(", ready %lu\n", info.boot_us);
		/* tsc-deadline: tickless (one-shot wake-ups at the engine's deadlines; a tick only when
		 * some device is polled); periodic: the tick fallback */
		char tdesc[48];
		if (tmode[0] == 't' && all_irq)
			ksnprintf(tdesc, sizeof tdesc, "%s, tickless", tmode);
		else
			ksnprintf(tdesc, sizeof tdesc, "%s, tick %u us", tmode, tick_us);
		kprintf_later("  name %s, slots %u, flow_timeout_ms %lu, tsc %lu kHz, timer %s, ram top 0x%lx\n",
			vnf_name, click_slots_total(), a.flow_timeout_ms, clock_tsc_hz() / 1000, tdesc,
			mem_ram_top());
		if (ctl_virtio) {
			char d[96];
			kprintf_later("  control channel: virtio-console port 0, %s\n", con_desc(d, sizeof d));
		} else if (serial_present(COM2))
			kprintf_later("  control channel: COM2 (no virtio-console), irq %s\n", com2_irq ? "on" : "off (polled)");
		for (int i = 0; i < nics; i++) {
			char d[96];
			kprintf_later("  nic %d: %02x:%02x:%02x:%02x:%02x:%02x %s\n", i, macs[i][0], macs[i][1], macs[i][2],
				macs[i][3], macs[i][4], macs[i][5], net_desc(i, d, sizeof d));
		}
		kprintf_later("  cmdline: %s\n", cmdline);
	}

	uint32_t spin_window = net_busy_poll_us();
	uint64_t spin = ns_to_tsc((spin_window < IDLE_SPIN_US ? spin_window : IDLE_SPIN_US) * 1000ull);
	uint64_t ctl_period = ns_to_tsc(com2_irq ? CTL_SAFETY_US * 1000ull : TICK_US * 1000ull);
	uint64_t last_work = rdtsc(), last_ctl = last_work, round = last_work;
	uint64_t backoff = ns_to_tsc(BACKOFF_US * 1000ull), backoff_end = 0;
	bool backing_off = false;
	bool can_nap = tmode[0] == 't';  /* a nap needs the one-shot timer (TSC-deadline) */
	cpu_use.steal_ns = steal_mark_ns = clock_steal_ns();
	for (;;) {
		uint64_t st = clock_steal_ns();
		if (st != cpu_use.steal_ns) {  /* the host kept this vCPU waiting since the last round */
			uint64_t d = st - cpu_use.steal_ns;
			cpu_use.steal_ns = st;
			if (d > cpu_use.steal_max_ns)
				cpu_use.steal_max_ns = d;
			if (d >= STALL_US * 1000ull) {
				cpu_use.stalls++;
				cpu_use.backoffs += !backing_off;
				backing_off = true;
				backoff_end = rdtsc() + backoff;
				net_pause_busy_poll(true);
			}
		}
		if (backing_off && rdtsc() >= backoff_end) {
			backing_off = false;
			net_pause_busy_poll(false);
		}
		bool work = net_poll();
		bool tasks = click_run_tasks(), busy = tasks;
		net_flush_tx();
		uint64_t now = rdtsc();
		if (ctl_virtio) {
			/* the console's receive ring is memory: look every round (its interrupt only
			 * wakes us from hlt) */
			if (con_rx_pending() && ctl_poll()) {
				busy = true;
				now = rdtsc();
			}
		} else if (irq_take(VEC_GSI(COM2_GSI)) || now - last_ctl >= ctl_period) {
			/* COM2: on its interrupt, else every tick (UART access is a VM exit, and a kcall) */
			last_ctl = now;
			if (ctl_poll()) {
				busy = true;
				now = rdtsc();
			}
		}
		bool ctl = busy && !tasks;   /* a request answered this round */
		bool frames = net_moved();
		busy |= frames;
		charge(busy ? &cpu_use.busy : &cpu_use.poll, now - round);
		round = now;
		if (busy)
			last_work = now;  /* real work: not a round the busy-poll window kept polling */
		if (frames && !tasks && !ctl && !net_rx_backlog() && can_nap && net_coalesce_us() &&
		    !click_sources_active()) {
			/* a round that took the frames there were: nap (interrupt moderation, nap
			 * above), also when more came meanwhile (they wait for the next round, with
			 * what the nap brings: at a frame per round the loop would pay per frame);
			 * the round after a nap that finds none halts as without moderation */
			uint64_t until = now + ns_to_tsc(net_coalesce_us() * 1000ull);
			uint64_t tnext = click_next_timer_ns(tsc_to_ns(now));
			if (tnext && ns_to_tsc(tnext) < until)
				until = ns_to_tsc(tnext);
			uint64_t halted = nap(until);
			round = rdtsc();
			charge(&cpu_use.poll, round - now - halted);
			cpu_use.naps_empty += !net_rx_ready();
			continue;
		}
		if (work || busy)
			continue;
		if (kprintf_pending()) { /* console log, one UART FIFO load per idle round */
			kprintf_flush(16);
			last_work = rdtsc();
			continue;
		}
		if (net_busy_poll_us() != spin_window) {  /* the `poll` op moved the window */
			spin_window = net_busy_poll_us();
			spin = ns_to_tsc((spin_window < IDLE_SPIN_US ? spin_window : IDLE_SPIN_US) * 1000ull);
		}
		if ((now - last_work < spin && !backing_off) || click_sources_active()) {
			cpu_relax();    /* a generator polls: a wake-up costs more than its frames' gap */
			continue;
		}
		/* tickless: sleep until a packet, a control request or the next deadline (an idle
		 * flow's expiry; the COM2 safety poll; the tick, only if some device is polled) */
		uint64_t deadline = 0;
		if (!all_irq)
			deadline = now + ns_to_tsc(tick_us * 1000ull);
		else if (!ctl_virtio && com2_irq)
			deadline = last_ctl + ctl_period;
		uint64_t tnext = click_next_timer_ns(tsc_to_ns(now));
		if (tnext) {
			uint64_t t = ns_to_tsc(tnext);
			if (!deadline || t < deadline)
				deadline = t;
		}
		uint64_t halted = idle(deadline);
		round = rdtsc();
		charge(&cpu_use.poll, round - now - halted);
		last_work = round - spin; /* after a wake, poll once then sleep again if idle */
	}
}
