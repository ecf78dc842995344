/* fluidvim VNF — PCI configuration mechanism #1 (0xcf8/0xcfc), bus 0 only. */
#ifndef FLUIDVIM_PCI_H
#define FLUIDVIM_PCI_H
#include "kstd.h"

struct pci_dev {
	unsigned dev, fn;
	uint16_t vendor, device;
	uint32_t bar0;      /* as read back after any assignment */
	uint8_t irq_line;   /* ISA IRQ = GSI of INTx: from PIIX3 PIRQ routing, else the interrupt line register */
};

/* Is there a PCI host bridge at all (00:00.0 answers)? */
bool pci_present(void);
/* Find functions with this vendor and a device id in [dev_lo, dev_hi] on bus 0, in slot/function
 * order. An I/O BAR0 left unassigned by the firmware is placed at 0xc000 + 0x100*k; I/O space
 * and bus mastering get enabled. Runs in ring 0 (one kcall). Returns the number found (<= max). */
int pci_find(uint16_t vendor, uint16_t dev_lo, uint16_t dev_hi, struct pci_dev *out, int max);

#endif
