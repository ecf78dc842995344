/* fluidvim VNF — interrupts. The kernel runs with IF=0 and only enables interrupts inside the
 * idle `sti; hlt`; the stubs in boot.S note which vector fired and send EOI, the main loop then
 * polls/acks the device. Exceptions print vector/RIP/CR2 on COM1 and halt. */
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

struct idt_entry {
	uint16_t off_lo, sel;
	uint8_t ist, type;
	uint16_t off_mid;
	uint32_t off_hi, zero;
} __attribute__((packed));

static struct idt_entry idt[256] __attribute__((aligned(16)));
extern const uint64_t exc_stub_table[32];
extern const uint64_t irq_stub_table[64];
extern void irq_spurious(void);
extern volatile uint8_t irq_hit[64];

static enum { TIMER_NONE, TIMER_DEADLINE, TIMER_PERIODIC } timer_mode;
static uint64_t tick_tsc;
static unsigned ioapic_pins[2];
static uint32_t lapic_id;

static inline uint32_t lapic_read(uint32_t reg) { return mmio_read32(LAPIC_BASE + reg); }
static inline void lapic_write(uint32_t reg, uint32_t v) { mmio_write32(LAPIC_BASE + reg, v); }

static void idt_set(int vec, uint64_t handler)
{
	idt[vec].off_lo = (uint16_t)handler;
	idt[vec].sel = 0x08;
	idt[vec].ist = 0;
	idt[vec].type = 0x8e; /* present, DPL 0, 64-bit interrupt gate */
	idt[vec].off_mid = (uint16_t)(handler >> 16);
	idt[vec].off_hi = (uint32_t)(handler >> 32);
	idt[vec].zero = 0;
}

struct exc_frame {
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8, rbp, rdi, rsi, rdx, rcx, rbx, rax;
	uint64_t vector, error, rip, cs, rflags, rsp, ss;
};

void exc_handler(struct exc_frame *f);
void exc_handler(struct exc_frame *f)
{
	uint64_t cr2;
	__asm__ volatile("mov %%cr2, %0" : "=r"(cr2));
	kprintf("\nfluidvim-vnf: EXCEPTION vector %lu error 0x%lx rip 0x%lx cr2 0x%lx rsp 0x%lx rflags 0x%lx\n",
		f->vector, f->error, f->rip, cr2, f->rsp, f->rflags);
	kprintf("rax %lx rbx %lx rcx %lx rdx %lx rsi %lx rdi %lx rbp %lx\n", f->rax, f->rbx, f->rcx,
		f->rdx, f->rsi, f->rdi, f->rbp);
	halt_forever();
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
		idt_set(i, exc_stub_table[i]);
	for (int i = 0; i < 64; i++)
		idt_set(0x20 + i, irq_stub_table[i]);
	for (int i = 0x60; i < 256; i++)
		idt_set(i, (uint64_t)(uintptr_t)irq_spurious);
	struct { uint16_t limit; uint64_t base; } __attribute__((packed)) idtr = { sizeof idt - 1, (uint64_t)(uintptr_t)idt };
	__asm__ volatile("lidt %0" ::"m"(idtr));

	/* 8259 PICs (pc only; harmless without them): mask everything, we use the IO-APIC */
	outb(0x21, 0xff);
	outb(0xa1, 0xff);

	lapic_write(LAPIC_SVR, 0x100 | 0xff); /* enable, spurious vector 0xff */
	lapic_write(LAPIC_TPR, 0);
	lapic_write(LAPIC_LVT_LINT0, 1u << 16); /* masked (no ExtINT from the PIC) */
	lapic_id = lapic_read(LAPIC_ID) >> 24;

	ioapic_pins[0] = ioapic_count_pins(IOAPIC0);
	ioapic_pins[1] = ioapic_count_pins(IOAPIC1);
}

int ioapic_route(unsigned gsi)
{
	uintptr_t base;
	unsigned pin;
	if (gsi < ioapic_pins[0]) {
		base = IOAPIC0;
		pin = gsi;
	} else if (gsi >= 24 && gsi - 24 < ioapic_pins[1]) {
		base = IOAPIC1;
		pin = gsi - 24;
	} else
		return -1;
	if (gsi >= MAX_GSI)
		return -1;
	int vec = VEC_GSI(gsi);
	mmio_write32(base, 0x11 + 2 * pin);
	mmio_write32(base + 0x10, lapic_id << 24);
	mmio_write32(base, 0x10 + 2 * pin);
	mmio_write32(base + 0x10, (uint32_t)vec); /* fixed, physical, active high, edge, unmasked */
	return vec;
}

bool irq_take(int vector)
{
	if (vector < 0x20 || vector >= 0x60 || !irq_hit[vector - 0x20])
		return false;
	irq_hit[vector - 0x20] = 0;
	return true;
}

bool irq_peek(int vector)
{
	return vector >= 0x20 && vector < 0x60 && irq_hit[vector - 0x20];
}

const char *timer_init(uint32_t period_us)
{
	uint32_t a, b, c, d;
	tick_tsc = ns_to_tsc((uint64_t)period_us * 1000);
	cpuid(1, 0, &a, &b, &c, &d);
	if (c & (1u << 24)) {
		lapic_write(LAPIC_LVT_TIMER, VEC_TIMER | (2u << 17)); /* TSC-deadline mode */
		timer_mode = TIMER_DEADLINE;
		return "tsc-deadline";
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
		return "none";
	}
	uint64_t count = (uint64_t)elapsed * tick_tsc / (t1 - t0);
	if (count == 0)
		count = 1;
	if (count > 0xffffffffu)
		count = 0xffffffffu;
	lapic_write(LAPIC_LVT_TIMER, VEC_TIMER | (1u << 17)); /* periodic */
	lapic_write(LAPIC_TIMER_INIT, (uint32_t)count);
	timer_mode = TIMER_PERIODIC;
	return "periodic";
}

void timer_arm_idle(void)
{
	if (timer_mode == TIMER_DEADLINE)
		wrmsr(MSR_TSC_DEADLINE, rdtsc() + tick_tsc);
}
