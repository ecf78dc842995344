/* fluidvim VNF — 16550 UART driver and a tiny printf. Every register access is a VM exit, so TX
 * writes up to 16 bytes per "transmitter empty" check (the FIFO depth). */
#include "serial.h"
#include "arch.h"

#define UART_RBR 0
#define UART_THR 0
#define UART_IER 1
#define UART_FCR 2
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define LSR_DR 0x01
#define LSR_THRE 0x20

static bool present[2]; /* COM1, COM2 */
static inline bool *pres(uint16_t port) { return &present[port == COM2]; }

bool serial_present(uint16_t port) { return *pres(port); }

static uint64_t serial_init_k(uint64_t port_, uint64_t rx_irq, uint64_t c)
{
	uint16_t port = (uint16_t)port_;
	/* no UART there: reads float to 0xff; the scratch register holds what we write */
	outb(port + 7, 0x5a);
	if (inb(port + 7) != 0x5a) {
		*pres(port) = false;
		return false;
	}
	*pres(port) = true;
	/* No baud divisor and no IER clearing: each port write is a VM exit (~10-20 us under PVM),
	 * QEMU's UART sends at once whatever its divisor, and IER is 0 after every reset. */
	outb(port + UART_LCR, 0x03); /* 8N1, DLAB off */
	outb(port + UART_FCR, 0x07); /* FIFO on, clear both, RX trigger level 1 byte */
	outb(port + UART_MCR, 0x0b); /* DTR, RTS, OUT2 (IRQ gate) */
	if (rx_irq)
		outb(port + UART_IER, 0x01); /* received data available */
	return true;
}

/* ring 0, for the exception handler: works even before serial_init() */
void serial_panic_write(const char *s, size_t n)
{
	if (!present[0])
		serial_init_k(COM1, 0, 0);
	serial_write_k(COM1, s, n);
}

bool serial_init(uint16_t port, bool rx_irq) { return KCALL(serial_init_k, port, rx_irq, 0) != 0; }

/* ring 0 */
void serial_write_k(uint16_t port, const char *s, size_t n)
{
	if (!*pres(port))
		return;
	while (n) {
		uint32_t spins = 0;
		while (!(inb(port + UART_LSR) & LSR_THRE)) {
			if (++spins > 20000) /* nobody draining: give up rather than hang */
				return;
			cpu_relax();
		}
		size_t chunk = n < 16 ? n : 16;
		for (size_t i = 0; i < chunk; i++)
			outb(port + UART_THR, (uint8_t)s[i]);
		s += chunk;
		n -= chunk;
	}
}

/* QEMU's 16550 returns 0 from RBR when its RX FIFO is empty, and JSON text never contains a NUL
 * byte, so read RBR directly (one VM exit per byte) and consult LSR only when a 0 comes back. */
static uint64_t serial_read_k(uint64_t port_, uint64_t buf_, uint64_t max)
{
	uint16_t port = (uint16_t)port_;
	char *buf = (char *)(uintptr_t)buf_;
	size_t n = 0;
	if (!*pres(port))
		return 0;
	while (n < max) {
		uint8_t c = inb(port + UART_RBR);
		if (c) {
			buf[n++] = (char)c;
			continue;
		}
		if (!(inb(port + UART_LSR) & LSR_DR))
			break;
	}
	return n;
}

size_t serial_read(uint16_t port, char *buf, size_t max)
{
	if (!max || !*pres(port))
		return 0;
	return (size_t)KCALL(serial_read_k, port, buf, max);
}

static uint64_t serial_write_kc(uint64_t port, uint64_t s, uint64_t n)
{
	serial_write_k((uint16_t)port, (const char *)(uintptr_t)s, (size_t)n);
	return 0;
}

void serial_write(uint16_t port, const char *s, size_t n)
{
	if (n && *pres(port))
		KCALL(serial_write_kc, port, s, n);
}

/* ---- formatting ---- */
struct outbuf { char *buf; size_t cap, len; };

static void ob_put(struct outbuf *o, char c)
{
	if (o->len + 1 < o->cap)
		o->buf[o->len] = c;
	o->len++;
}

static void ob_num(struct outbuf *o, uint64_t v, unsigned base, int width, char pad, bool neg)
{
	char tmp[24];
	int n = 0;
	do {
		unsigned d = (unsigned)(v % base);
		tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
		v /= base;
	} while (v);
	if (neg)
		tmp[n++] = '-';
	for (int i = n; i < width; i++)
		ob_put(o, pad);
	while (n)
		ob_put(o, tmp[--n]);
}

int kvsnprintf(char *buf, size_t cap, const char *fmt, va_list ap)
{
	struct outbuf o = { buf, cap, 0 };
	for (; *fmt; fmt++) {
		if (*fmt != '%') {
			ob_put(&o, *fmt);
			continue;
		}
		fmt++;
		char pad = ' ';
		int width = 0, lng = 0;
		if (*fmt == '0')
			pad = '0', fmt++;
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		while (*fmt == 'l')
			lng++, fmt++;
		if (*fmt == 'z')
			lng = 2, fmt++;
		switch (*fmt) {
		case 's': {
			const char *s = va_arg(ap, const char *);
			if (!s)
				s = "(null)";
			size_t l = strlen(s);
			for (int i = (int)l; i < width; i++)
				ob_put(&o, ' ');
			while (*s)
				ob_put(&o, *s++);
			break;
		}
		case 'c':
			ob_put(&o, (char)va_arg(ap, int));
			break;
		case 'd': {
			int64_t v = lng ? va_arg(ap, int64_t) : va_arg(ap, int);
			ob_num(&o, v < 0 ? (uint64_t)-v : (uint64_t)v, 10, width, pad, v < 0);
			break;
		}
		case 'u':
			ob_num(&o, lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned), 10, width, pad, false);
			break;
		case 'x':
			ob_num(&o, lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned), 16, width, pad, false);
			break;
		case 'p':
			ob_put(&o, '0');
			ob_put(&o, 'x');
			ob_num(&o, (uintptr_t)va_arg(ap, void *), 16, width, pad, false);
			break;
		case '%':
			ob_put(&o, '%');
			break;
		default:
			ob_put(&o, '%');
			if (*fmt)
				ob_put(&o, *fmt);
			else
				fmt--;
		}
	}
	if (cap)
		buf[o.len < cap ? o.len : cap - 1] = 0;
	return (int)o.len;
}

int ksnprintf(char *buf, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = kvsnprintf(buf, cap, fmt, ap);
	va_end(ap);
	return n;
}

/* Deferred console output: every UART byte is a VM exit (~15 us under PVM, ~1 ms for a log line),
 * so lines logged while serving a request are queued here and written by the main loop when it
 * has nothing else to do, one FIFO load (16 bytes) per round. */
#define DLOG_SIZE 4096u
static char dlog[DLOG_SIZE];
static uint32_t dlog_head, dlog_tail; /* free-running */

bool kprintf_pending(void) { return dlog_head != dlog_tail; }

void kprintf_flush(size_t max)
{
	while (dlog_head != dlog_tail && max) {
		uint32_t off = dlog_tail % DLOG_SIZE;
		size_t n = dlog_head - dlog_tail;
		if (n > DLOG_SIZE - off)
			n = DLOG_SIZE - off;
		if (n > max)
			n = max;
		serial_write(COM1, dlog + off, n);
		dlog_tail += (uint32_t)n;
		max -= n;
	}
}

void kprintf(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = kvsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 1)
		n = sizeof buf - 1;
	kprintf_flush((size_t)-1); /* keep the order */
	serial_write(COM1, buf, (size_t)n);
}

void kprintf_later(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = kvsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 1)
		n = sizeof buf - 1;
	if (dlog_head - dlog_tail + (uint32_t)n > DLOG_SIZE)
		kprintf_flush((size_t)-1); /* full: write the backlog now */
	for (int i = 0; i < n; i++)
		dlog[dlog_head++ % DLOG_SIZE] = buf[i];
}
