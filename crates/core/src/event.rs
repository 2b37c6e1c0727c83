//! The event queue: ordered by (time, sequence number), so events at the same instant are
//! handled in the order they were scheduled and a run never depends on heap internals.

use crate::time::Nanos;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Debug)]
struct Entry<E> {
    time: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest (time, seq) first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.time.cmp(&self.time).then_with(|| other.seq.cmp(&self.seq))
    }
}

/// A min-queue of timed events with FIFO order among equal times.
#[derive(Debug)]
pub struct EventQueue<E> {
    /// The earliest entry, when it was pushed as such: most pushes are a job's next stop, due
    /// before anything else, and are popped next; kept out of the heap, they cost no sifting.
    /// Never later than any entry in `heap`.
    first: Option<Entry<E>>,
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { first: None, heap: BinaryHeap::new(), next_seq: 0 }
    }
}

impl<E> EventQueue<E> {
    #[inline(always)]
    pub fn push(&mut self, time: Nanos, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let e = Entry { time, seq, event };
        // `seq` is the largest yet, so `e` goes first only if strictly earlier in time.
        if self.peek_time().is_some_and(|t| t <= time) {
            self.heap.push(e);
        } else if let Some(old) = self.first.replace(e) {
            self.heap.push(old);
        }
    }
    #[inline]
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        self.first.take().or_else(|| self.heap.pop()).map(|e| (e.time, e.event))
    }
    #[inline]
    pub fn peek_time(&self) -> Option<Nanos> {
        match &self.first {
            Some(f) => Some(f.time),
            None => self.heap.peek().map(|e| e.time),
        }
    }
    pub fn len(&self) -> usize {
        self.heap.len() + usize::from(self.first.is_some())
    }
    pub fn is_empty(&self) -> bool {
        self.first.is_none() && self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_times_come_out_in_insertion_order() {
        let mut q = EventQueue::default();
        q.push(Nanos(5), 'a');
        q.push(Nanos(1), 'b');
        q.push(Nanos(5), 'c');
        q.push(Nanos(1), 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'd', 'a', 'c']);
    }

    /// Interleaved pushes and pops come out exactly as from a plain heap ordered by (time,
    /// insertion order), whichever entry sits in the front slot.
    #[test]
    fn pops_match_a_plain_heap_under_interleaving() {
        use rand::{Rng, SeedableRng};
        const SEED: u64 = 7;
        eprintln!("event queue interleaving: seed {SEED}");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(SEED);
        let mut q = EventQueue::default();
        let mut reference = BinaryHeap::new();
        let mut seq = 0u64;
        for step in 0..20_000 {
            if rng.random_bool(0.55) {
                let t = Nanos(rng.random_range(0..50));
                q.push(t, seq);
                reference.push(Entry { time: t, seq, event: seq });
                seq += 1;
            } else {
                assert_eq!(q.pop(), reference.pop().map(|e| (e.time, e.event)), "seed {SEED}, step {step}");
            }
            assert_eq!(q.peek_time(), reference.peek().map(|e| e.time), "seed {SEED}, step {step}");
            assert_eq!(q.len(), reference.len(), "seed {SEED}, step {step}");
        }
    }
}
