//! One seed for the whole simulation; each subsystem draws from its own derived stream,
//! so adding draws in one subsystem never shifts the numbers another one sees.

use chacha20::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The generator type every subsystem uses.
pub type SimRng = ChaCha8Rng;

/// Derives a stable sub-seed from the master seed, a subsystem label and an index
/// (FNV-1a over the label, mixed with SplitMix64 finalisation).
pub fn derive_seed(master: u64, label: &str, index: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    splitmix(master ^ splitmix(h ^ splitmix(index)))
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Words of the generator that [`Words`] can take from the cipher's keystream: ChaCha's
/// 32-bit block counter (with a zero nonce) and the generator's 64-bit one agree below 2^32
/// blocks of 16 words.
const KEYSTREAM_WORDS: u128 = 1 << 36;

/// The generator's next `count` 32-bit words, read in pieces: the same words
/// `rng.fill_bytes` gives, made as ChaCha8's keystream at the generator's position by the
/// `chacha20` cipher, which uses AVX-512 where the CPU has it (the access streams draw
/// gigabytes of these per study). [`Words::finish`] moves the generator past them.
pub struct Words {
    cipher: Option<chacha20::ChaCha8>,
    end: u128,
}

impl Words {
    pub fn of(rng: &SimRng, count: usize) -> Words {
        let pos = rng.get_word_pos();
        let end = pos + count as u128;
        let cipher = (rng.get_stream() == 0 && end < KEYSTREAM_WORDS).then(|| {
            let mut c = chacha20::ChaCha8::new(&rng.get_seed().into(), &[0u8; 12].into());
            c.seek(pos as u64 * 4);
            c
        });
        Words { cipher, end }
    }

    /// Fills `bytes` (whole words) with the next of them.
    #[inline]
    pub fn fill(&mut self, rng: &mut SimRng, bytes: &mut [u8]) {
        debug_assert_eq!(bytes.len() % 4, 0, "whole words");
        match &mut self.cipher {
            Some(c) => c.write_keystream(bytes),
            None => rng.fill_bytes(bytes),
        }
    }

    /// Leaves `rng` after the `count` words, all of which were read.
    pub fn finish(self, rng: &mut SimRng) {
        if self.cipher.is_some() {
            rng.set_word_pos(self.end);
        }
        debug_assert_eq!(rng.get_word_pos(), self.end, "every word was read");
    }
}

/// A generator for subsystem `label`, instance `index`.
pub fn sub_rng(master: u64, label: &str, index: u64) -> SimRng {
    SimRng::seed_from_u64(derive_seed(master, label, index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn sub_streams_are_stable_and_distinct() {
        let a: u64 = sub_rng(7, "task", 0).random();
        let b: u64 = sub_rng(7, "task", 0).random();
        let c: u64 = sub_rng(7, "task", 1).random();
        let d: u64 = sub_rng(8, "task", 0).random();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }

    proptest::proptest! {
        /// The keystream's words are the generator's own, from any position and read in
        /// pieces, and both end in the same place.
        #[test]
        fn words_are_what_fill_bytes_gives(seed in 0u64..1000, skip in 0u128..5000, words in 0usize..300) {
            let mut a = sub_rng(seed, "m", 0);
            a.set_word_pos(skip);
            let mut b = a.clone();
            let (mut x, mut y) = (vec![0u8; 4 * words], vec![0u8; 4 * words]);
            a.fill_bytes(&mut x);
            let mut w = Words::of(&b, words);
            let (first, second) = y.split_at_mut(4 * (words / 3));
            w.fill(&mut b, first);
            w.fill(&mut b, second);
            w.finish(&mut b);
            proptest::prop_assert_eq!(x, y);
            proptest::prop_assert_eq!(a.next_u32(), b.next_u32());
        }
    }
}
