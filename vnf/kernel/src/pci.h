/* fluidvim VNF — PCI configuration mechanism #1 (0xcf8/0xcfc), bus 0 only. */
#ifndef FLUIDVIM_PCI_H
#define FLUIDVIM_PCI_H
#include "kstd.h"

uint32_t pci_read32(unsigned dev, unsigned fn, unsigned off);
void pci_write32(unsigned dev, unsigned fn, unsigned off, uint32_t v);
uint16_t pci_read16(unsigned dev, unsigned fn, unsigned off);
void pci_write16(unsigned dev, unsigned fn, unsigned off, uint16_t v);
/* Is there a PCI host bridge at all (00:00.0 answers)? */
bool pci_present(void);

struct pci_dev { unsigned dev, fn; uint16_t vendor, device; };
/* Calls cb for every function on bus 0, in slot/function order. */
void pci_scan(void (*cb)(const struct pci_dev *d, void *arg), void *arg);

#endif
