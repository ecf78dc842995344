/* fluidvim VNF — 16550 UARTs: COM1 console, COM2 control channel. */
#ifndef FLUIDVIM_SERIAL_H
#define FLUIDVIM_SERIAL_H
#include "kstd.h"
#include <stdarg.h>

#define COM1 0x3f8
#define COM2 0x2f8

/* Returns false (and makes the port a no-op) if no UART answers at `port`. */
bool serial_init(uint16_t port, bool rx_irq);
bool serial_present(uint16_t port);
/* These run the port I/O loop in ring 0 via one kcall (callable from ring 0 and 3). */
void serial_write(uint16_t port, const char *s, size_t n);
/* Non-blocking burst read (NUL bytes are dropped). Returns the number of bytes read. */
size_t serial_read(uint16_t port, char *buf, size_t max);
/* ring 0 only (exception handler) */
void serial_write_k(uint16_t port, const char *s, size_t n);
void serial_panic_write(const char *s, size_t n);

/* Console (COM1) formatted output: %s %c %d %u %x %lu %lx %llu %p %%, width/zero-pad for numbers. */
void kprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Same, but queued (4 KiB) and written by kprintf_flush(), which the main loop calls with 16 when
 * idle; kprintf() writes the queue first. For logging on the request path. */
void kprintf_later(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool kprintf_pending(void);
void kprintf_flush(size_t max);
/* Kernel cmdline boot_log=full: the whole boot summary (boot profile, timer, control channel,
 * NICs, cmdline) and per-NIC MAC lines on configure go to the console log. Default (brief): one
 * line per boot and per configure, and every error: each COM1 byte is a VM exit, and under PVM
 * the full summary cost ~12 ms of host CPU per launch (bench/RESULTS.md, bench/density). */
extern bool boot_log_full;
int ksnprintf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int kvsnprintf(char *buf, size_t cap, const char *fmt, va_list ap);

#endif
