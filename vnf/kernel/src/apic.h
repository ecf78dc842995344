/* fluidvim VNF — IDT, local APIC (timer), IO-APIC routing. */
#ifndef FLUIDVIM_APIC_H
#define FLUIDVIM_APIC_H
#include "kstd.h"

#define VEC_TIMER 0x20
#define VEC_GSI(g) (0x21 + (g)) /* device interrupts: one vector per IO-APIC input (GSI 0..47) */
#define MAX_GSI 48

void intr_init(void);
/* Start the idle wake-up timer; returns "tsc-deadline", "periodic" or "none". */
const char *timer_init(uint32_t period_us);
/* Called right before `sti; hlt`: make sure the timer fires within the tick. */
void timer_arm_idle(void);
/* Route IO-APIC input `gsi` (edge, active high) to VEC_GSI(gsi) on this CPU. Returns the
 * vector or -1 if there is no IO-APIC input with that number. */
int ioapic_route(unsigned gsi);
/* Did an interrupt arrive on `vector` since the last call? (clears the note) */
bool irq_take(int vector);
bool irq_peek(int vector);

#endif
