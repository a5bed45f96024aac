/*
 * PCI configuration space, BARs and capabilities of the device (pci.h).
 * BARs go from 0xe0000000 (MMIO) and 0xc000 (I/O).
 */
#include "pci.h"

#include <stdbool.h>

#include "qtest.h"
#include "vblk-load.h"

#define PCI_VENDOR_REDHAT_QUMRANET 0x1af4
#define PCI_CMD_IO      0x1
#define PCI_CMD_MEM     0x2
#define PCI_CMD_MASTER  0x4
#define PCI_CAP_ID_VNDR 0x09
#define PCI_CAP_ID_MSIX 0x11

#define VCAP_COMMON 1
#define VCAP_NOTIFY 2
#define VCAP_ISR    3
#define VCAP_DEVICE 4

#define MMIO_BASE 0xe0000000ULL
#define MMIO_LIMIT 0xfe000000ULL
#define PIO_BASE 0xc000

struct bar { uint64_t addr, size; bool io; };
static struct bar bars[6];
static unsigned pci_devfn;

static void cfg_addr(unsigned reg)
{
    outl(0xcf8, 0x80000000u | (pci_devfn << 8) | (reg & 0xfc));
}
uint32_t cfg_rl(unsigned reg) { cfg_addr(reg); return inl(0xcfc); }
uint16_t cfg_rw(unsigned reg) { cfg_addr(reg); return inw(0xcfc + (reg & 2)); }
uint8_t cfg_rb(unsigned reg) { cfg_addr(reg); return inb(0xcfc + (reg & 3)); }
void cfg_wl(unsigned reg, uint32_t v) { cfg_addr(reg); outl(0xcfc, v); }
void cfg_ww(unsigned reg, uint16_t v) { cfg_addr(reg); outw(0xcfc + (reg & 2), v); }

void pci_find_device(void)
{
    for (unsigned dev = 0; dev < 32; dev++) {
        pci_devfn = dev << 3;
        uint32_t id = cfg_rl(0);
        if ((id & 0xffff) != PCI_VENDOR_REDHAT_QUMRANET) {
            continue;
        }
        uint16_t did = id >> 16;
        if (did == 0x1001 || did == 0x1042) {
            return;
        }
    }
    die("no virtio-blk-pci device found on PCI bus 0");
}

void pci_assign_bars(void)
{
    uint64_t mmio = MMIO_BASE;
    uint32_t pio = PIO_BASE;
    cfg_ww(4, 0);
    for (unsigned i = 0; i < 6; i++) {
        unsigned reg = 0x10 + 4 * i;
        uint32_t orig = cfg_rl(reg);
        cfg_wl(reg, 0xffffffff);
        uint32_t sz = cfg_rl(reg);
        if (sz == 0) {
            continue;
        }
        if (orig & 1) {
            uint32_t size = ~(sz & ~3u) + 1;
            size &= 0xffff;
            pio = (pio + size - 1) & ~(size - 1);
            cfg_wl(reg, pio);
            bars[i] = (struct bar){ .addr = pio, .size = size, .io = true };
            pio += size;
            continue;
        }
        bool is64 = ((orig >> 1) & 3) == 2;
        uint64_t mask = sz & ~0xfull;
        if (is64) {
            cfg_wl(reg + 4, 0xffffffff);
            mask |= (uint64_t)cfg_rl(reg + 4) << 32;
        } else {
            mask |= 0xffffffff00000000ull;
        }
        uint64_t size = ~mask + 1;
        mmio = (mmio + size - 1) & ~(size - 1);
        if (mmio + size > MMIO_LIMIT) {
            die("PCI BARs do not fit the MMIO window");
        }
        cfg_wl(reg, (uint32_t)mmio);
        if (is64) {
            cfg_wl(reg + 4, mmio >> 32);
        }
        bars[i] = (struct bar){ .addr = mmio, .size = size };
        mmio += size;
        if (is64) {
            i++;
        }
    }
    cfg_ww(4, PCI_CMD_IO | PCI_CMD_MEM | PCI_CMD_MASTER);
}

void pci_find_caps(struct vpci *d)
{
    if (!(cfg_rw(6) & 0x10)) {
        die("device has no PCI capability list");
    }
    unsigned p = cfg_rb(0x34) & 0xfc;
    int guard = 0;
    bool have_common = false, have_notify = false, have_dev = false;
    while (p && guard++ < 48) {
        uint8_t id = cfg_rb(p);
        if (id == PCI_CAP_ID_VNDR) {
            uint8_t type = cfg_rb(p + 3), bar = cfg_rb(p + 4);
            uint32_t off = cfg_rl(p + 8);
            if (bar < 6 && bars[bar].size && !bars[bar].io) {
                uint64_t a = bars[bar].addr + off;
                if (type == VCAP_COMMON && !have_common) {
                    d->common = a;
                    have_common = true;
                } else if (type == VCAP_NOTIFY && !have_notify) {
                    d->notify_base = a;
                    d->notify_mult = cfg_rl(p + 16);
                    have_notify = true;
                } else if (type == VCAP_DEVICE && !have_dev) {
                    d->devcfg = a;
                    have_dev = true;
                }
            }
        } else if (id == PCI_CAP_ID_MSIX) {
            d->msix_cap = p;
            uint16_t ctl = cfg_rw(p + 2);
            d->msix_nvec = (ctl & 0x7ff) + 1;
            uint32_t t = cfg_rl(p + 4);
            if (!bars[t & 7].size) {
                die("MSI-X table in an unassigned BAR");
            }
            d->msix_table = bars[t & 7].addr + (t & ~7u);
        }
        p = cfg_rb(p + 1) & 0xfc;
    }
    if (!have_common || !have_notify || !have_dev) {
        die("device lacks virtio 1.x PCI capabilities (common %d notify %d device %d)",
            have_common, have_notify, have_dev);
    }
    if (!d->msix_cap) {
        die("device has no MSI-X capability");
    }
}
