/* fluidvim VNF — ring 0/3 setup, IDT, local APIC (timer), IO-APIC routing, idle. */
#ifndef FLUIDVIM_APIC_H
#define FLUIDVIM_APIC_H
#include "kstd.h"

#define VEC_TIMER 0x20
#define VEC_GSI(g) (0x21 + (g)) /* device interrupts: one vector per IO-APIC input (GSI 0..47) */
#define MAX_GSI 48

/* Ring 0, first thing: TSS, the kcall (#UD) gate, lidt. Then enter_user() drops to ring 3. */
void intr_early(void);
__attribute__((noreturn)) void enter_user(void (*fn)(void), void *stack);
/* Ring 3: the remaining IDT gates, local APIC, PIC masking. */
void intr_init(void);
/* Set up the idle wake-up timer; returns "tsc-deadline" (one-shot: tickless idle), "periodic"
 * (no TSC-deadline mode: a tick every period_us) or "none". */
const char *timer_init(uint32_t period_us);
/* Route IO-APIC input `gsi` (active high; edge or level) to VEC_GSI(gsi) on this CPU. Returns
 * the vector or -1 if there is no IO-APIC input with that number. */
int ioapic_route(unsigned gsi, bool level);
/* Run fn(vector) in ring 0 from the interrupt stub, before the EOI (to ack a level-triggered
 * device so its line drops). */
void irq_set_hook(int vector, void (*fn)(int vector));
/* Did an interrupt arrive on `vector` since the last call? (clears the note atomically) */
bool irq_take(int vector);
bool irq_peek(int vector);
/* Sleep until an interrupt (a device, or the timer at TSC `deadline`; 0 = no timer wake-up),
 * unless a device interrupt is already noted (then return at once). Call with device interrupts
 * enabled at the source. In periodic mode the tick wakes it whatever the deadline. Returns the
 * vector of the interrupt that ended the halt (VEC_TIMER: the timer), 0 if it did not halt. */
int cpu_idle(uint64_t deadline);

#endif
