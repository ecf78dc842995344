/* fluidvim VNF — clock: TSC frequency from kvmclock / CPUID / cmdline, TSC -> ns. */
#ifndef FLUIDVIM_TIME_H
#define FLUIDVIM_TIME_H
#include "kstd.h"

/* Calibrate. cmdline_tsc_khz = tsc_khz= from the command line (0 if absent). */
void clock_init(uint64_t cmdline_tsc_khz);
const char *clock_source(void);   /* "kvmclock", "cpuid", "cmdline" or "uncalibrated" */
uint64_t clock_tsc_hz(void);
uint64_t tsc_to_ns(uint64_t tsc);
uint64_t ns_to_tsc(uint64_t ns);
uint64_t plat_now_ns(void);
/* The TSC value taken as "vCPU reset" for boot_us/uptime_us: from kvmclock (which counts from
 * VM creation) when available; else 0 if the TSC looks reset at power-on (< 10 s at kernel entry);
 * else the kernel-entry TSC (e.g. TCG, whose TSC is the host's). */
uint64_t clock_zero_tsc(uint64_t entry_tsc);
/* KVM steal time (ns since boot): how long the vCPU was runnable on the host but not running.
 * 0 and false where the hypervisor offers none. */
bool clock_has_steal(void);
uint64_t clock_steal_ns(void);
/* Allow (1) or forbid (0) the host to keep polling after this vCPU halts (KVM poll control;
 * -1: only read); what is in force, -1 when the hypervisor does not offer it. */
int clock_host_halt_poll(int on);

#endif
