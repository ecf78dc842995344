/* fluidvim VNF — interrupts and privilege split (see boot.S).
 * Ring 3 runs with IF=1; the IRQ stubs note the vector in irq_hit[] and EOI; the main loop
 * polls/acks the device. Exceptions print vector/RIP/CR2 on COM1 and halt, except a ring-3
 * in/out that faulted because the hypervisor ignores IOPL (PVM): that one is emulated. */
#include "apic.h"
#include "arch.h"
#include "serial.h"
#include "time.h"

#define LAPIC_BASE 0xfee00000ul
#define LAPIC_ID 0x20
#define LAPIC_TPR 0x80
#define LAPIC_EOI 0xb0
#define LAPIC_SVR 0xf0
#define LAPIC_LVT_TIMER 0x320
#define LAPIC_LVT_LINT0 0x350
#define LAPIC_TIMER_INIT 0x380
#define LAPIC_TIMER_CUR 0x390
#define LAPIC_TIMER_DIV 0x3e0
#define MSR_TSC_DEADLINE 0x6e0

#define IOAPIC0 0xfec00000ul
#define IOAPIC1 0xfec10000ul /* microvm's second IO-APIC (GSI 24..47), when present */

#define IRQ_VECS 61          /* 0x20..0x5c, see boot.S */
#define SPURIOUS_VEC 0x5f
#define IDT_ENTRIES 0x60     /* vectors above the spurious one are never used */

struct idt_entry {
	uint16_t off_lo, sel;
	uint8_t ist, type;
	uint16_t off_mid;
	uint32_t off_hi, zero;
} __attribute__((packed));

struct tss64 {
	uint32_t reserved0;
	uint64_t rsp0, rsp1, rsp2;
	uint64_t reserved1;
	uint64_t ist[7];
	uint64_t reserved2;
	uint16_t reserved3, iomap_base;
} __attribute__((packed));

/* in .data, not .bss: see boot.S/README (first touch of fresh pages is expensive under PVM) */
static struct idt_entry idt[IDT_ENTRIES] __attribute__((aligned(16), section(".data")));
static struct tss64 tss __attribute__((aligned(16), section(".data")));
extern const uint64_t exc_stub_table[32];
extern const uint64_t irq_stub_table[IRQ_VECS];
extern void irq_spurious(void);
extern uint8_t irq_hit[IRQ_VECS];
extern uint8_t irq_last;
extern uint64_t irq_hook[IRQ_VECS];
static void (*hook_fn[IRQ_VECS])(int vector);
extern uint64_t gdt_tss[2];
extern char kernel_stack_top[];

static enum { TIMER_NONE, TIMER_DEADLINE, TIMER_PERIODIC } timer_mode;
static uint64_t tick_tsc;
static unsigned ioapic_pins[2];
static uint32_t lapic_id;

static inline uint32_t lapic_read(uint32_t reg) { return mmio_read32(LAPIC_BASE + reg); }
static inline void lapic_write(uint32_t reg, uint32_t v) { mmio_write32(LAPIC_BASE + reg, v); }

static void idt_set(int vec, uint64_t handler, int dpl)
{
	idt[vec].off_lo = (uint16_t)handler;
	idt[vec].sel = 0x08;
	idt[vec].ist = 0;
	idt[vec].type = (uint8_t)(0x8e | (dpl << 5)); /* present, 64-bit interrupt gate */
	idt[vec].off_mid = (uint16_t)(handler >> 16);
	idt[vec].off_hi = (uint32_t)(handler >> 32);
	idt[vec].zero = 0;
}

void intr_early(void)
{
	uint64_t b = (uint64_t)(uintptr_t)&tss;
	tss.rsp0 = (uint64_t)(uintptr_t)kernel_stack_top;
	tss.iomap_base = sizeof tss; /* no I/O bitmap: IOPL decides */
	gdt_tss[0] = (sizeof tss - 1) | ((b & 0xffffff) << 16) | (0x89ull << 40) | (((b >> 24) & 0xff) << 56);
	gdt_tss[1] = b >> 32;
	__asm__ volatile("ltr %w0" ::"r"(0x28));
	idt_set(6, exc_stub_table[6], 0); /* #UD carries kcalls */
	struct { uint16_t limit; uint64_t base; } __attribute__((packed)) idtr = { sizeof idt - 1, (uint64_t)(uintptr_t)idt };
	__asm__ volatile("lidt %0" ::"m"(idtr));
}

struct exc_frame {
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8, rbp, rdi, rsi, rdx, rcx, rbx, rax;
	uint64_t vector, error, rip, cs, rflags, rsp, ss;
};

/* Emulate a ring-3 port I/O instruction (PVM does not honour IOPL). Returns false if it is not one. */
static bool emulate_pio(struct exc_frame *f)
{
	const uint8_t *ip = (const uint8_t *)f->rip;
	int len = 0, size = 4;
	if (ip[0] == 0x66) {
		size = 2;
		len = 1;
	}
	uint8_t op = ip[len++];
	uint16_t port;
	if (op == 0xe4 || op == 0xe5 || op == 0xe6 || op == 0xe7)
		port = ip[len++];
	else if (op >= 0xec && op <= 0xef)
		port = (uint16_t)f->rdx;
	else
		return false;
	if (!(op & 1))
		size = 1;
	if (op & 2) { /* out */
		if (size == 1)
			outb(port, (uint8_t)f->rax);
		else if (size == 2)
			outw(port, (uint16_t)f->rax);
		else
			outl(port, (uint32_t)f->rax);
	} else if (size == 1)
		f->rax = (f->rax & ~0xffull) | inb(port);
	else if (size == 2)
		f->rax = (f->rax & ~0xffffull) | inw(port);
	else
		f->rax = inl(port); /* 32-bit destination zero-extends */
	f->rip += (uint64_t)len;
	return true;
}

void exc_handler(struct exc_frame *f);
void exc_handler(struct exc_frame *f)
{
	if (f->vector == 13 && (f->cs & 3) == 3 && emulate_pio(f))
		return;
	uint64_t cr2;
	__asm__ volatile("mov %%cr2, %0" : "=r"(cr2));
	char buf[200];
	int n = ksnprintf(buf, sizeof buf, "\nfluidvim-vnf: EXCEPTION vector %lu error 0x%lx rip 0x%lx cr2 0x%lx rsp 0x%lx cs 0x%lx\n",
			  f->vector, f->error, f->rip, cr2, f->rsp, f->cs);
	serial_panic_write(buf, (size_t)n);
	halt_forever();
}

uint64_t k_pio(uint64_t op, uint64_t port, uint64_t val)
{
	uint16_t p = (uint16_t)port;
	switch (op) {
	case PIO_INB: return inb(p);
	case PIO_INW: return inw(p);
	case PIO_INL: return inl(p);
	case PIO_OUTB: outb(p, (uint8_t)val); return 0;
	case PIO_OUTW: outw(p, (uint16_t)val); return 0;
	case PIO_OUTL: outl(p, (uint32_t)val); return 0;
	}
	return 0;
}

static unsigned ioapic_count_pins(uintptr_t base);

/* ring 0 */
static uint64_t lapic_init_k(uint64_t a, uint64_t b, uint64_t c)
{
	/* the 8259 PICs were masked by kmain, before IF was first set (each port write is a VM exit) */
	lapic_write(LAPIC_SVR, 0x100 | SPURIOUS_VEC); /* enable */
	lapic_write(LAPIC_TPR, 0);
	lapic_write(LAPIC_LVT_LINT0, 1u << 16); /* masked (no ExtINT from the PIC) */
	lapic_id = lapic_read(LAPIC_ID) >> 24;
	ioapic_pins[0] = ioapic_count_pins(IOAPIC0);
	return 0;
}

static unsigned ioapic_count_pins(uintptr_t base)
{
	mmio_write32(base, 1);
	uint32_t ver = mmio_read32(base + 0x10);
	if (ver == 0xffffffffu || ver == 0)
		return 0;
	return ((ver >> 16) & 0xff) + 1;
}

void intr_init(void)
{
	for (int i = 0; i < 32; i++)
		idt_set(i, exc_stub_table[i], 0);
	for (int i = 0; i < IRQ_VECS; i++)
		idt_set(0x20 + i, irq_stub_table[i], 0);
	idt_set(SPURIOUS_VEC, (uint64_t)(uintptr_t)irq_spurious, 0);
	KCALL(lapic_init_k, 0, 0, 0);
}

/* ring 0, from the IRQ stub (index = vector - 0x20) */
void irq_run_hook(uint64_t index);
void irq_run_hook(uint64_t index)
{
	if (index < IRQ_VECS && hook_fn[index])
		hook_fn[index](0x20 + (int)index);
}

void irq_set_hook(int vector, void (*fn)(int vector))
{
	if (vector < 0x20 || vector >= 0x20 + IRQ_VECS)
		return;
	hook_fn[vector - 0x20] = fn;
	irq_hook[vector - 0x20] = fn != NULL;
}

/* ring 0 */
static uint64_t ioapic_route_k(uint64_t gsi_, uint64_t level, uint64_t c)
{
	unsigned gsi = (unsigned)gsi_;
	uintptr_t base;
	unsigned pin;
	if (gsi >= MAX_GSI)
		return (uint64_t)-1;
	if (gsi < ioapic_pins[0]) {
		base = IOAPIC0;
		pin = gsi;
	} else {
		if (gsi >= 24 && !ioapic_pins[1])
			ioapic_pins[1] = ioapic_count_pins(IOAPIC1);
		if (gsi < 24 || gsi - 24 >= ioapic_pins[1])
			return (uint64_t)-1;
		base = IOAPIC1;
		pin = gsi - 24;
	}
	int vec = VEC_GSI(gsi);
	mmio_write32(base, 0x11 + 2 * pin);
	mmio_write32(base + 0x10, lapic_id << 24);
	mmio_write32(base, 0x10 + 2 * pin);
	/* fixed delivery, physical destination, active high, edge or level, unmasked */
	mmio_write32(base + 0x10, (uint32_t)vec | (level ? 1u << 15 : 0));
	return (uint64_t)vec;
}

int ioapic_route(unsigned gsi, bool level) { return (int)(int64_t)KCALL(ioapic_route_k, gsi, level, 0); }

bool irq_take(int vector)
{
	if (vector < 0x20 || vector >= 0x20 + IRQ_VECS)
		return false;
	return __atomic_exchange_n(&irq_hit[vector - 0x20], 0, __ATOMIC_SEQ_CST) != 0;
}

bool irq_peek(int vector)
{
	return vector >= 0x20 && vector < 0x20 + IRQ_VECS && __atomic_load_n(&irq_hit[vector - 0x20], __ATOMIC_SEQ_CST);
}

/* ring 0 */
static uint64_t timer_init_k(uint64_t period_us, uint64_t b_, uint64_t c_)
{
	uint32_t a, b, c, d;
	tick_tsc = ns_to_tsc(period_us * 1000);
	cpuid(1, 0, &a, &b, &c, &d);
	if (c & (1u << 24)) {
		lapic_write(LAPIC_LVT_TIMER, VEC_TIMER | (2u << 17)); /* TSC-deadline mode */
		timer_mode = TIMER_DEADLINE;
		return 0;
	}
	/* periodic: calibrate the APIC timer against the TSC over ~200 us */
	lapic_write(LAPIC_TIMER_DIV, 0x3); /* divide by 16 */
	lapic_write(LAPIC_LVT_TIMER, VEC_TIMER | (1u << 16));
	lapic_write(LAPIC_TIMER_INIT, 0xffffffffu);
	uint64_t t0 = rdtsc(), span = ns_to_tsc(200000);
	while (rdtsc() - t0 < span)
		cpu_relax();
	uint32_t elapsed = 0xffffffffu - lapic_read(LAPIC_TIMER_CUR);
	uint64_t t1 = rdtsc();
	lapic_write(LAPIC_TIMER_INIT, 0);
	if (!elapsed) {
		timer_mode = TIMER_NONE;
		return 0;
	}
	uint64_t count = (uint64_t)elapsed * tick_tsc / (t1 - t0);
	if (count == 0)
		count = 1;
	if (count > 0xffffffffu)
		count = 0xffffffffu;
	lapic_write(LAPIC_LVT_TIMER, VEC_TIMER | (1u << 17)); /* periodic */
	lapic_write(LAPIC_TIMER_INIT, (uint32_t)count);
	timer_mode = TIMER_PERIODIC;
	return 0;
}

const char *timer_init(uint32_t period_us)
{
	KCALL(timer_init_k, period_us, 0, 0);
	return timer_mode == TIMER_DEADLINE ? "tsc-deadline" : timer_mode == TIMER_PERIODIC ? "periodic" : "none";
}

/* ring 0, IF=0 (kcall gate) */
static uint64_t k_idle(uint64_t deadline, uint64_t b, uint64_t c)
{
	/* a device interrupt is already noted: don't sleep. Eight bytes at a time: under PVM every
	 * ring-0 instruction is emulated (~1 us each, KVM's insn_emulation), and the byte loop was
	 * ~240 of them per halt. irq_hit's 61 bytes are followed by irq_last and padding up to
	 * the 8-aligned irq_hook (boot.S): read as 8 words, masked to indices 1..60. */
	_Static_assert(IRQ_VECS > 56 && IRQ_VECS <= 64, "k_idle reads irq_hit as 8 words");
	typedef uint64_t __attribute__((may_alias)) u64a;
	const u64a *w;
	__asm__("" : "=r"(w) : "0"(irq_hit));     /* the 64 bytes from irq_hit, not just its 61 */
	if ((w[0] & ~0xffull) | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] |     /* index 0: the timer */
	    (w[7] & (~0ull >> (8 * (64 - IRQ_VECS)))))        /* nothing past irq_hit[IRQ_VECS - 1] */
		return 0;
	/* tickless: one wake-up at the deadline, none without one (0 disarms the timer). Every
	 * timer interrupt is a VM exit and costs ~0.3 ms under PVM (kvm_pvm); a 10 ms tick was
	 * 3.5 % of a core per idle VNF. */
	if (timer_mode == TIMER_DEADLINE)
		wrmsr(MSR_TSC_DEADLINE, deadline);
	irq_last = 0xff;
	sti_hlt(); /* the interrupt runs its stub, which returns here */
	cli();
	/* the interrupt that ended the hlt (the stubs note the latest: one taken between the
	 * `sti` and the `hlt`, if that could happen, would be overwritten by the one that woke it) */
	return irq_last == 0xff ? 0 : 0x20u + irq_last;
}

int cpu_idle(uint64_t deadline)
{
	int v = (int)KCALL(k_idle, deadline, 0, 0);
	irq_take(VEC_TIMER);
	return v;
}
