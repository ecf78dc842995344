/* fluidvim VNF — x86-64 helpers: port I/O, MMIO, MSRs, CPUID, TSC, barriers. */
#ifndef FLUIDVIM_ARCH_H
#define FLUIDVIM_ARCH_H
#include "kstd.h"

static inline void outb(uint16_t p, uint8_t v) { __asm__ volatile("outb %0, %1" ::"a"(v), "Nd"(p)); }
static inline void outw(uint16_t p, uint16_t v) { __asm__ volatile("outw %0, %1" ::"a"(v), "Nd"(p)); }
static inline void outl(uint16_t p, uint32_t v) { __asm__ volatile("outl %0, %1" ::"a"(v), "Nd"(p)); }
static inline uint8_t inb(uint16_t p) { uint8_t v; __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(p)); return v; }
static inline uint16_t inw(uint16_t p) { uint16_t v; __asm__ volatile("inw %1, %0" : "=a"(v) : "Nd"(p)); return v; }
static inline uint32_t inl(uint16_t p) { uint32_t v; __asm__ volatile("inl %1, %0" : "=a"(v) : "Nd"(p)); return v; }

static inline uint32_t mmio_read32(uintptr_t a) { return *(volatile uint32_t *)a; }
static inline void mmio_write32(uintptr_t a, uint32_t v) { *(volatile uint32_t *)a = v; }
static inline uint8_t mmio_read8(uintptr_t a) { return *(volatile uint8_t *)a; }

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
static inline uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;
	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return ((uint64_t)hi << 32) | lo;
}
static inline void wrmsr(uint32_t msr, uint64_t v)
{
	__asm__ volatile("wrmsr" ::"c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32)) : "memory");
}
static inline void cpuid(uint32_t leaf, uint32_t sub, uint32_t *a, uint32_t *b, uint32_t *c, uint32_t *d)
{
	__asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d) : "a"(leaf), "c"(sub));
}

#define barrier() __asm__ volatile("" ::: "memory")
static inline void mb(void) { __asm__ volatile("mfence" ::: "memory"); }
static inline void cpu_relax(void) { __asm__ volatile("pause" ::: "memory"); }
static inline void cli(void) { __asm__ volatile("cli" ::: "memory"); }
/* Ring 0: enable interrupts and halt atomically (the STI shadow covers HLT); returns after the
 * waking interrupt's handler ran. */
static inline void sti_hlt(void) { __asm__ volatile("sti; hlt" ::: "memory"); }
static inline void sti(void) { __asm__ volatile("sti" ::: "memory"); }
/* ---- kcall: run fn(a, b, c) in ring 0 (see boot.S). Usable from ring 0 and ring 3. ---- */
typedef uint64_t (*kfn_t)(uint64_t a, uint64_t b, uint64_t c);
static inline uint64_t kcall(kfn_t fn, uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t r;
	/* the #UD handler preserves every register but rax (no red zone: -mno-red-zone) */
	__asm__ volatile("call kcall_ud2" : "=a"(r) : "a"(fn), "D"(a), "S"(b), "d"(c) : "memory", "cc");
	return r;
}
#define KCALL(fn, a, b, c) kcall((kfn_t)(void *)(fn), (uint64_t)(a), (uint64_t)(b), (uint64_t)(c))

/* Port I/O from ring 3: one kcall each (batch hot paths into a single ring-0 function instead). */
uint64_t k_pio(uint64_t op, uint64_t port, uint64_t val);
enum { PIO_INB, PIO_INW, PIO_INL, PIO_OUTB, PIO_OUTW, PIO_OUTL };
static inline uint8_t io_inb(uint16_t p) { return (uint8_t)KCALL(k_pio, PIO_INB, p, 0); }
static inline uint16_t io_inw(uint16_t p) { return (uint16_t)KCALL(k_pio, PIO_INW, p, 0); }
static inline uint32_t io_inl(uint16_t p) { return (uint32_t)KCALL(k_pio, PIO_INL, p, 0); }
static inline void io_outb(uint16_t p, uint8_t v) { KCALL(k_pio, PIO_OUTB, p, v); }
static inline void io_outw(uint16_t p, uint16_t v) { KCALL(k_pio, PIO_OUTW, p, v); }
static inline void io_outl(uint16_t p, uint32_t v) { KCALL(k_pio, PIO_OUTL, p, v); }

static inline __attribute__((noreturn)) void halt_forever(void)
{
	for (;;)
		__asm__ volatile("cli; hlt");
}

#endif
