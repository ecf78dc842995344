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
void serial_write(uint16_t port, const char *s, size_t n);
/* Non-blocking: returns -1 if no byte is waiting. */
int serial_getc(uint16_t port);

/* Console (COM1) formatted output: %s %c %d %u %x %lu %lx %llu %p %%, width/zero-pad for numbers. */
void kprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ksnprintf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int kvsnprintf(char *buf, size_t cap, const char *fmt, va_list ap);

#endif
