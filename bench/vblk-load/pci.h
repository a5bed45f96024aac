/*
 * PCI: configuration space through ports 0xcf8/0xcfc, finding the
 * virtio-blk-pci function on bus 0, sizing and assigning its BARs, and
 * walking its capability list for the virtio 1.x structures and MSI-X.
 */
#ifndef VBLK_PCI_H
#define VBLK_PCI_H

#include <stdint.h>

/* Where the device's virtio structures and MSI-X table ended up. */
struct vpci {
    uint64_t common, notify_base, devcfg;   /* guest physical addresses */
    uint32_t notify_mult;
    uint64_t msix_table;
    unsigned msix_nvec, msix_cap;
};

uint32_t cfg_rl(unsigned reg);
uint16_t cfg_rw(unsigned reg);
uint8_t cfg_rb(unsigned reg);
void cfg_wl(unsigned reg, uint32_t v);
void cfg_ww(unsigned reg, uint16_t v);

/* Select the virtio-blk-pci function on bus 0 (dies if there is none). */
void pci_find_device(void);
/* Size and assign its BARs, enable memory, I/O and bus mastering. */
void pci_assign_bars(void);
/* Fill d from the capability list (dies if something is missing). */
void pci_find_caps(struct vpci *d);

#endif
