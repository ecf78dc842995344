/* fluidvim VNF — clock calibration.
 * Order: kvmclock (pvclock mul/shift gives the TSC rate exactly as KVM sees it), CPUID 0x15/0x16,
 * cmdline tsc_khz=, else assume 1 GHz ("uncalibrated"). Time is the raw TSC scaled by a 32.32
 * fixed-point factor; under KVM the guest TSC is 0 at vCPU reset, so plat_now_ns() is time since
 * reset. */
#include "time.h"
#include "arch.h"

#define MSR_KVM_SYSTEM_TIME_NEW 0x4b564d01
#define MSR_KVM_STEAL_TIME 0x4b564d03
#define KVM_FEATURE_CLOCKSOURCE2 3
#define KVM_FEATURE_STEAL_TIME 5
#define MSR_KVM_POLL_CONTROL 0x4b564d05
#define KVM_FEATURE_POLL_CONTROL 12

/* KVM's steal-time area: the time this vCPU's thread was runnable on the host but waited for a
 * CPU (the host scheduler's run delay), updated by KVM at every entry into the guest. A frame
 * that arrives while the vCPU waits waits with it, and the engine's own histogram cannot see
 * it: stats "cpu" steal_us / stalls (see main.c). */
struct kvm_steal_time {
	uint64_t steal;
	uint32_t version;
	uint32_t flags;
	uint8_t preempted;
	uint8_t pad8[3];
	uint32_t pad[11];
} __attribute__((packed));
static struct kvm_steal_time steal_area __attribute__((aligned(64)));
static bool steal_on;
/* KVM's poll control (MSR_KVM_POLL_CONTROL bit 0, 1 at reset): whether the host may keep this
 * vCPU's thread polling after the guest halts (the kvm module's halt_poll_ns, 200 us on the
 * bench host) before it sleeps: CPU the host burns on the VNF's behalf while it is halted. -1:
 * the hypervisor does not offer it; else what was set last. */
static int host_halt_poll = -1;

struct pvclock_vcpu_time_info {
	uint32_t version;
	uint32_t pad0;
	uint64_t tsc_timestamp;
	uint64_t system_time;
	uint32_t tsc_to_system_mul;
	int8_t tsc_shift;
	uint8_t flags;
	uint8_t pad[2];
} __attribute__((packed));

static struct pvclock_vcpu_time_info pvti __attribute__((aligned(64)));
static const char *src = "uncalibrated";
static uint64_t tsc_hz = 1000000000ull;
static uint64_t ns_mult = 1ull << 32;   /* ns = tsc * ns_mult >> 32 */
static uint64_t tsc_mult = 1ull << 32;  /* tsc = ns * tsc_mult >> 32 */
static uint64_t kvm_sys_ns, kvm_stamp;   /* one kvmclock sample: system time at a TSC value */

static uint64_t kvmclock_hz(void)
{
	uint32_t a, b, c, d;
	cpuid(0x40000000, 0, &a, &b, &c, &d);
	if (b != 0x4b4d564b || c != 0x564b4d56 || d != 0x4d) /* "KVMKVMKVM\0\0\0" */
		return 0;
	if (a < 0x40000001)
		return 0;
	cpuid(0x40000001, 0, &a, &b, &c, &d);
	if (a & (1u << KVM_FEATURE_POLL_CONTROL))
		host_halt_poll = 1;
	if (a & (1u << KVM_FEATURE_STEAL_TIME)) {
		wrmsr(MSR_KVM_STEAL_TIME, (uint64_t)(uintptr_t)&steal_area | 1); /* bit 0: enable */
		steal_on = true;
	}
	if (!(a & (1u << KVM_FEATURE_CLOCKSOURCE2)))
		return 0;
	wrmsr(MSR_KVM_SYSTEM_TIME_NEW, (uint64_t)(uintptr_t)&pvti | 1);
	uint32_t mul;
	int8_t shift;
	uint64_t sys, stamp;
	for (int tries = 0; tries < 1000; tries++) {
		uint32_t v = *(volatile uint32_t *)&pvti.version;
		barrier();
		mul = *(volatile uint32_t *)&pvti.tsc_to_system_mul;
		shift = *(volatile int8_t *)&pvti.tsc_shift;
		sys = *(volatile uint64_t *)&pvti.system_time;
		stamp = *(volatile uint64_t *)&pvti.tsc_timestamp;
		barrier();
		if (!(v & 1) && v == *(volatile uint32_t *)&pvti.version && mul)
			goto ok;
		cpu_relax();
	}
	wrmsr(MSR_KVM_SYSTEM_TIME_NEW, 0);
	return 0;
ok:
	/* We only needed the rate: stop the hypervisor from updating our memory. */
	wrmsr(MSR_KVM_SYSTEM_TIME_NEW, 0);
	/* ns = ((tsc << shift) * mul) >> 32  =>  hz = 1e9 * 2^32 / mul / 2^shift */
	uint64_t hz = (1000000000ull << 32) / mul;
	if (shift < 0)
		hz <<= -shift;
	else
		hz >>= shift;
	kvm_sys_ns = sys;
	kvm_stamp = stamp;
	return hz;
}

static uint64_t cpuid_hz(void)
{
	uint32_t a, b, c, d, max;
	cpuid(0, 0, &max, &b, &c, &d);
	if (max >= 0x15) {
		cpuid(0x15, 0, &a, &b, &c, &d);
		if (a && b && c)
			return (uint64_t)c * b / a;
	}
	if (max >= 0x16) {
		cpuid(0x16, 0, &a, &b, &c, &d);
		if (a & 0xffff)
			return (uint64_t)(a & 0xffff) * 1000000ull;
	}
	return 0;
}

/* ring 0: CPUID and the kvmclock MSR */
static uint64_t clock_init_k(uint64_t cmdline_tsc_khz, uint64_t b, uint64_t c)
{
	uint64_t hz;
	if ((hz = kvmclock_hz()) != 0)
		src = "kvmclock";
	else if ((hz = cpuid_hz()) != 0)
		src = "cpuid";
	else if (cmdline_tsc_khz) {
		hz = cmdline_tsc_khz * 1000;
		src = "cmdline";
	} else {
		hz = 1000000000ull;
		src = "uncalibrated";
	}
	tsc_hz = hz;
	ns_mult = (1000000000ull << 32) / hz;
	tsc_mult = ((hz / 1000000000ull) << 32) + ((hz % 1000000000ull) << 32) / 1000000000ull;
	return 0;
}

void clock_init(uint64_t cmdline_tsc_khz) { KCALL(clock_init_k, cmdline_tsc_khz, 0, 0); }

uint64_t clock_zero_tsc(uint64_t entry_tsc)
{
	if (kvm_stamp) {
		/* kvmclock counts from VM creation: TSC at kvmclock 0 */
		uint64_t d = ns_to_tsc(kvm_sys_ns);
		return d <= kvm_stamp ? kvm_stamp - d : 0;
	}
	if (tsc_to_ns(entry_tsc) < 10000000000ull)
		return 0; /* TSC was reset with the vCPU */
	return entry_tsc; /* TCG (host TSC) etc.: count from kernel entry */
}

const char *clock_source(void) { return src; }
bool clock_has_steal(void) { return steal_on; }

static uint64_t halt_poll_k(uint64_t on, uint64_t b, uint64_t c)
{
	(void)b;
	(void)c;
	wrmsr(MSR_KVM_POLL_CONTROL, on ? 1 : 0);
	return 0;
}

int clock_host_halt_poll(int on)
{
	if (host_halt_poll >= 0 && on >= 0 && on != host_halt_poll) {
		KCALL(halt_poll_k, on, 0, 0);
		host_halt_poll = on;
	}
	return host_halt_poll;
}

uint64_t clock_steal_ns(void)
{
	if (!steal_on)
		return 0;
	for (;;) {
		uint32_t v = *(volatile uint32_t *)&steal_area.version;
		barrier();
		uint64_t st = *(volatile uint64_t *)&steal_area.steal;
		barrier();
		if (!(v & 1) && v == *(volatile uint32_t *)&steal_area.version)
			return st;
		cpu_relax();
	}
}
uint64_t clock_tsc_hz(void) { return tsc_hz; }
uint64_t tsc_to_ns(uint64_t tsc) { return (uint64_t)(((unsigned __int128)tsc * ns_mult) >> 32); }
uint64_t ns_to_tsc(uint64_t ns) { return (uint64_t)(((unsigned __int128)ns * tsc_mult) >> 32); }
uint64_t plat_now_ns(void) { return tsc_to_ns(rdtsc()); }
uint64_t plat_steal_ns(void) { return clock_steal_ns(); }
