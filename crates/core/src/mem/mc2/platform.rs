//! The MC² hardware platform as the allocator sees it: DRAM split into banks by high address
//! bits, a last-level cache whose page colours come from low address bits, and which banks,
//! colours and cache ways each core's level-A/B tasks and the level-C tasks with the OS get.
//!
//! Defaults are the paper's NXP i.MX6 (Sec. 2): 4 cores, 1 GiB of DRAM in 8 banks of 128 MiB
//! (bank interleaving disabled, so a bank is address bits 27–29), a 1 MiB 16-way L2 (one way
//! is 64 KiB, i.e. 16 page colours, address bits 12–15), 4 KiB pages. Fig. 3 gives each core
//! one DRAM bank and a share of the LLC ways for its level-A/B tasks and the rest to level C
//! and the OS; as in the original kernel, core `i` owns bank `4 + i`, level C banks 0–3,
//! core `i` ways `2i` and `2i + 1`, level C ways 8–15. The paper does not colour pages, so
//! every list may use all 16 colours by default.

use crate::mem::frames::Placement;

/// A set of small indices (banks, colours, ways) as a bit mask: bit `i` set means `i` is in.
pub type IndexMask = u64;

/// The mask of indices `lo..lo + count`.
#[inline]
pub const fn range_mask(lo: u32, count: u32) -> IndexMask {
    if count >= 64 {
        !0 << lo
    } else {
        ((1u64 << count) - 1) << lo
    }
}

/// Which banks, colours and LLC ways one allocation list (a core's level A/B, or level C and
/// the OS) may use. Ways are cache lockdown, not frame placement: the allocator reads only the
/// banks and colours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    pub banks: IndexMask,
    pub colours: IndexMask,
    pub ways: IndexMask,
}

/// The platform: address layout and the partition of Fig. 3.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mc2Platform {
    pub cores: u32,
    pub page_bytes: u64,
    pub dram_bytes: u64,
    pub banks: u32,
    /// Lowest address bit of the bank index (bank = `(addr >> bank_shift) % banks`).
    pub bank_shift: u32,
    pub llc_bytes: u64,
    pub llc_ways: u32,
    /// Lowest address bit of the page colour (colour = `(addr >> colour_shift) % colours`).
    pub colour_shift: u32,
    /// Largest buddy block order (a block of order `k` is `2^k` frames).
    pub max_order: u8,
    /// Partition of core `i`'s level-A/B tasks.
    pub core_ab: Vec<Partition>,
    /// Partition of level C (and D) and the OS.
    pub level_c: Partition,
}

impl Default for Mc2Platform {
    fn default() -> Self {
        Mc2Platform::imx6()
    }
}

impl Mc2Platform {
    /// The paper's i.MX6 with the Fig. 3 partition described in the module documentation.
    pub fn imx6() -> Mc2Platform {
        let colours_all = range_mask(0, 16);
        let core_ab = (0..4).map(|i| Partition { banks: range_mask(4 + i, 1), colours: colours_all, ways: range_mask(2 * i, 2) }).collect();
        Mc2Platform {
            cores: 4,
            page_bytes: 4096,
            dram_bytes: 1 << 30,
            banks: 8,
            bank_shift: 27,
            llc_bytes: 1 << 20,
            llc_ways: 16,
            colour_shift: 12,
            max_order: 10,
            core_ab,
            level_c: Partition { banks: range_mask(0, 4), colours: colours_all, ways: range_mask(8, 8) },
        }
    }

    /// The i.MX6 layout and partition scaled to `dram_bytes` of DRAM in pages of `page_bytes`:
    /// 8 banks from the top three address bits, 16 page colours from the bits just above the
    /// page offset, 4 cores each owning bank `4 + i` and 2 LLC ways, level C banks 0–3. The
    /// DRAM must be a power of two of at least 128 pages (16 colours in each of 8 banks).
    pub fn imx6_scaled(dram_bytes: u64, page_bytes: u64) -> Result<Mc2Platform, String> {
        const BANKS: u64 = 8;
        const COLOURS: u64 = 16;
        if !dram_bytes.is_power_of_two() || !page_bytes.is_power_of_two() || dram_bytes < BANKS * COLOURS * page_bytes {
            return Err(format!(
                "{dram_bytes} bytes of DRAM is not a power of two of at least {} pages of {page_bytes} bytes (16 colours in each of 8 banks)",
                BANKS * COLOURS
            ));
        }
        let mut p = Mc2Platform::imx6();
        p.page_bytes = page_bytes;
        p.dram_bytes = dram_bytes;
        p.bank_shift = (dram_bytes / BANKS).trailing_zeros();
        p.colour_shift = page_bytes.trailing_zeros();
        p.llc_bytes = COLOURS * u64::from(p.llc_ways) * page_bytes;
        p.max_order = p.max_order.min((p.bank_shift - p.colour_shift) as u8);
        p.validate()?;
        Ok(p)
    }

    /// Page colours: one LLC way's bytes over the page size.
    #[inline]
    pub fn colours(&self) -> u32 {
        (self.llc_bytes / u64::from(self.llc_ways) / self.page_bytes) as u32
    }

    /// Physical frames.
    #[inline]
    pub fn total_frames(&self) -> u32 {
        (self.dram_bytes / self.page_bytes) as u32
    }

    /// Physical address of frame `f`'s first byte (DRAM starts at address 0).
    #[inline]
    pub fn phys_of_frame(&self, f: u32) -> u64 {
        u64::from(f) * self.page_bytes
    }

    /// The frame holding physical address `addr`, `None` past the end of DRAM.
    #[inline]
    pub fn frame_of_phys(&self, addr: u64) -> Option<u32> {
        (addr < self.dram_bytes).then(|| (addr / self.page_bytes) as u32)
    }

    /// DRAM bank of physical address `addr`.
    #[inline]
    pub fn bank_of_phys(&self, addr: u64) -> u32 {
        ((addr >> self.bank_shift) % u64::from(self.banks)) as u32
    }

    /// LLC colour of physical address `addr`.
    #[inline]
    pub fn colour_of_phys(&self, addr: u64) -> u32 {
        ((addr >> self.colour_shift) % u64::from(self.colours())) as u32
    }

    /// (bank, colour) of frame `f`.
    #[inline]
    pub fn bank_colour(&self, f: u32) -> (u32, u32) {
        let a = self.phys_of_frame(f);
        (self.bank_of_phys(a), self.colour_of_phys(a))
    }

    /// Number of allocation lists: one per core for levels A/B, then level C.
    #[inline]
    pub fn lists(&self) -> usize {
        self.cores as usize + 1
    }

    /// Index of the level-C list.
    #[inline]
    pub fn level_c_list(&self) -> usize {
        self.cores as usize
    }

    /// The partition of list `l`.
    pub fn partition(&self, l: usize) -> &Partition {
        if l < self.cores as usize {
            &self.core_ab[l]
        } else {
            &self.level_c
        }
    }

    /// The list a placement names: its core's level-A/B list, or level C's for level C,
    /// `Placement::Any` and the OS; `None` for a core the platform lacks.
    pub fn list_for(&self, placement: Placement) -> Option<usize> {
        match placement.ab_core() {
            None => Some(self.level_c_list()),
            Some(core) => (core < self.cores).then_some(core as usize),
        }
    }

    /// Frames of list `l`: its banks' frames of its colours (colours cycle within a bank,
    /// each taking an equal share of it).
    pub fn list_frames(&self, l: usize) -> u64 {
        let p = self.partition(l);
        let per_bank = u64::from(self.total_frames()) / u64::from(self.banks);
        u64::from(p.banks.count_ones()) * per_bank / u64::from(self.colours()) * u64::from(p.colours.count_ones())
    }

    /// The list whose partition holds frame `f`, or `None` when no list may use it (a colour
    /// no list of its bank takes).
    pub fn list_of_frame(&self, f: u32) -> Option<usize> {
        let (bank, colour) = self.bank_colour(f);
        (0..self.lists()).find(|&l| {
            let p = self.partition(l);
            p.banks >> bank & 1 == 1 && p.colours >> colour & 1 == 1
        })
    }

    /// Whether the layout is consistent; the error says which field is wrong and why.
    pub fn validate(&self) -> Result<(), String> {
        let pow2 = |v: u64| v != 0 && v.is_power_of_two();
        if !pow2(self.page_bytes) {
            return Err(format!("page_bytes {} is not a power of two", self.page_bytes));
        }
        if !(1..=64).contains(&self.cores) {
            return Err(format!("cores {} is not in 1..=64", self.cores));
        }
        if !(1..=64).contains(&self.banks) || !self.banks.is_power_of_two() {
            return Err(format!("banks {} is not a power of two in 1..=64", self.banks));
        }
        if self.bank_shift >= 58 || self.dram_bytes != u64::from(self.banks) << self.bank_shift {
            return Err(format!(
                "dram_bytes {} is not banks ({}) × 2^bank_shift ({}): banks must not interleave",
                self.dram_bytes, self.banks, self.bank_shift
            ));
        }
        let frames = self.dram_bytes / self.page_bytes;
        if frames == 0 || frames > u64::from(u32::MAX) || !self.dram_bytes.is_multiple_of(self.page_bytes) {
            return Err(format!("dram_bytes {} gives no whole number of frames below 2^32", self.dram_bytes));
        }
        if !(1..=64).contains(&self.llc_ways) || !self.llc_bytes.is_multiple_of(u64::from(self.llc_ways) * self.page_bytes) {
            return Err(format!("llc_bytes {} is not a multiple of llc_ways ({}) × page_bytes", self.llc_bytes, self.llc_ways));
        }
        let colours = self.colours();
        if !(1..=64).contains(&colours) || !colours.is_power_of_two() {
            return Err(format!("the LLC gives {colours} page colours, not a power of two in 1..=64"));
        }
        if (1u64 << self.colour_shift) != self.page_bytes {
            return Err(format!("colour_shift {} is not log2(page_bytes)", self.colour_shift));
        }
        if self.colour_shift + colours.trailing_zeros() > self.bank_shift {
            return Err("the colour bits overlap the bank bits".to_string());
        }
        if u64::from(self.max_order) > u64::from(self.bank_shift - self.colour_shift) {
            return Err(format!("max_order {} makes blocks larger than a bank", self.max_order));
        }
        if self.core_ab.len() != self.cores as usize {
            return Err(format!("{} core partitions for {} cores", self.core_ab.len(), self.cores));
        }
        let (all_banks, all_colours, all_ways) = (range_mask(0, self.banks), range_mask(0, colours), range_mask(0, self.llc_ways));
        let mut banks_seen: IndexMask = 0;
        let mut ways_seen: IndexMask = 0;
        for l in 0..self.lists() {
            let p = self.partition(l);
            let who = if l < self.cores as usize { format!("core {l}") } else { "level C".to_string() };
            if p.banks == 0 || p.banks & !all_banks != 0 {
                return Err(format!("{who}: banks {:#x} empty or past bank {}", p.banks, self.banks - 1));
            }
            if p.colours == 0 || p.colours & !all_colours != 0 {
                return Err(format!("{who}: colours {:#x} empty or past colour {}", p.colours, colours - 1));
            }
            if p.ways == 0 || p.ways & !all_ways != 0 {
                return Err(format!("{who}: ways {:#x} empty or past way {}", p.ways, self.llc_ways - 1));
            }
            if p.banks & banks_seen != 0 {
                return Err(format!("{who}: a bank is also another list's"));
            }
            if p.ways & ways_seen != 0 {
                return Err(format!("{who}: an LLC way is also another list's"));
            }
            banks_seen |= p.banks;
            ways_seen |= p.ways;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imx6_known_answers() {
        let p = Mc2Platform::imx6();
        p.validate().unwrap();
        // 1 GiB / 4 KiB = 262144 frames; 1 MiB / 16 ways / 4 KiB = 16 colours.
        assert_eq!((p.total_frames(), p.colours()), (262_144, 16));
        // 0x2345_6000: bits 27–29 = 0x2345_6000 >> 27 = 4; bits 12–15 = 0x6.
        assert_eq!(p.bank_of_phys(0x2345_6000), 4);
        assert_eq!(p.colour_of_phys(0x2345_6000), 6);
        assert_eq!(p.frame_of_phys(0x2345_6fff), Some(0x23456));
        assert_eq!(p.phys_of_frame(0x23456), 0x2345_6000);
        // Frame 0x3ffff is the last one: address 0x3fff_f000, bank 7, colour 15.
        assert_eq!(p.bank_colour(0x3ffff), (7, 15));
        assert_eq!(p.frame_of_phys(1 << 30), None);
        // Bank 4 (core 0) starts at 4 × 128 MiB = frame 4 × 32768 = 131072.
        assert_eq!(p.list_of_frame(131_072), Some(0));
        assert_eq!(p.list_of_frame(131_071), Some(4));
        assert_eq!(p.list_of_frame(7 * 32_768), Some(3));
        // Each core one bank of 32768 frames, level C four.
        assert_eq!((0..5).map(|l| p.list_frames(l)).collect::<Vec<_>>(), [32_768, 32_768, 32_768, 32_768, 131_072]);
        let mut q = p.clone();
        q.core_ab[2].colours = range_mask(0, 4);
        assert_eq!(q.list_frames(2), 8192);
    }

    #[test]
    fn imx6_scaled_keeps_the_layout() {
        assert_eq!(Mc2Platform::imx6_scaled(1 << 30, 4096).unwrap(), Mc2Platform::imx6());
        // 64 MiB: banks of 8 MiB (bits 23–25); the last frame is in bank 7, colour 15.
        let p = Mc2Platform::imx6_scaled(64 << 20, 4096).unwrap();
        assert_eq!((p.bank_shift, p.colours(), p.max_order), (23, 16, 10));
        assert_eq!(p.bank_colour(16383), (7, 15));
        // 128 pages: 16 per bank, one per colour; the largest block is a whole bank.
        let p = Mc2Platform::imx6_scaled(128 * 4096, 4096).unwrap();
        assert_eq!((p.bank_shift, p.max_order), (16, 4));
        assert!(Mc2Platform::imx6_scaled(96 << 20, 4096).is_err());
        assert!(Mc2Platform::imx6_scaled(64 * 4096, 4096).is_err());
    }

    #[test]
    fn refuses_inconsistent_layouts() {
        let mut p = Mc2Platform::imx6();
        p.core_ab[1].banks = 1 << 4;
        assert!(p.validate().unwrap_err().contains("core 1"));
        let mut p = Mc2Platform::imx6();
        p.level_c.ways = range_mask(7, 9);
        assert!(p.validate().unwrap_err().contains("way"));
        let mut p = Mc2Platform::imx6();
        p.dram_bytes = 1 << 29;
        assert!(p.validate().unwrap_err().contains("interleave"));
        let mut p = Mc2Platform::imx6();
        p.max_order = 16;
        assert!(p.validate().is_err());
    }
}
