//! Intrusive doubly linked lists over dense `u32` indices.
//!
//! Elements are indices into some other `Vec` (frames, charge entries); the links live here,
//! one record per element, so moving an element between lists or unlinking it from the middle
//! is O(1) and allocation-free. Every element is in at most one list at a time, and knows
//! which one (`list_of`), which is what the invariant checker relies on.

pub(crate) const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Head {
    head: u32,
    tail: u32,
    len: u32,
}

const EMPTY: Head = Head { head: NIL, tail: NIL, len: 0 };

/// An element's links and list, together: unlinking touches one cache line per element,
/// not one per field (reclaim moves elements between lists all the time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Link {
    prev: u32,
    next: u32,
    /// The list the element is on, or `NIL`.
    on: u32,
}

const UNLINKED: Link = Link { prev: NIL, next: NIL, on: NIL };

#[derive(Clone, Debug, Default)]
pub(crate) struct IndexLists {
    links: Vec<Link>,
    heads: Vec<Head>,
}

impl IndexLists {
    pub fn new(elements: usize, lists: usize) -> Self {
        IndexLists { links: vec![UNLINKED; elements], heads: vec![EMPTY; lists] }
    }

    /// Makes room for elements `0..n` (new ones are on no list).
    pub fn grow_elements(&mut self, n: usize) {
        if n > self.links.len() {
            self.links.resize(n, UNLINKED);
        }
    }

    /// Makes room for lists `0..n`.
    pub fn grow_lists(&mut self, n: usize) {
        if n > self.heads.len() {
            self.heads.resize(n, EMPTY);
        }
    }

    pub fn elements(&self) -> usize {
        self.links.len()
    }

    #[inline]
    pub fn len(&self, list: u32) -> u32 {
        self.heads[list as usize].len
    }

    #[inline]
    pub fn is_empty(&self, list: u32) -> bool {
        self.heads[list as usize].len == 0
    }

    #[inline]
    pub fn front(&self, list: u32) -> Option<u32> {
        let h = self.heads[list as usize].head;
        (h != NIL).then_some(h)
    }

    /// The list `x` is on, if any.
    #[inline]
    pub fn list_of(&self, x: u32) -> Option<u32> {
        let l = self.links[x as usize].on;
        (l != NIL).then_some(l)
    }

    /// Appends `x` (which must be on no list) at the tail of `list`.
    #[inline]
    pub fn push_back(&mut self, list: u32, x: u32) {
        debug_assert_eq!(self.links[x as usize].on, NIL, "element {x} is already on list {}", self.links[x as usize].on);
        let h = &mut self.heads[list as usize];
        self.links[x as usize] = Link { prev: h.tail, next: NIL, on: list };
        if h.tail == NIL {
            h.head = x;
        } else {
            self.links[h.tail as usize].next = x;
        }
        h.tail = x;
        h.len += 1;
    }

    /// Unlinks `x` from whatever list it is on (no-op if none).
    #[inline]
    pub fn remove(&mut self, x: u32) {
        let Link { prev: p, next: n, on: list } = self.links[x as usize];
        if list == NIL {
            return;
        }
        let h = &mut self.heads[list as usize];
        if p == NIL {
            h.head = n;
        } else {
            self.links[p as usize].next = n;
        }
        if n == NIL {
            h.tail = p;
        } else {
            self.links[n as usize].prev = p;
        }
        h.len -= 1;
        self.links[x as usize] = UNLINKED;
    }

    /// Moves `x` to the tail of `list` (from wherever it was).
    #[inline]
    pub fn move_to_back(&mut self, list: u32, x: u32) {
        self.remove(x);
        self.push_back(list, x);
    }

    #[inline]
    pub fn pop_front(&mut self, list: u32) -> Option<u32> {
        let x = self.front(list)?;
        self.remove(x);
        Some(x)
    }

    /// Elements of `list` from head to tail.
    pub fn iter(&self, list: u32) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.heads[list as usize].head;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let x = cur;
            cur = self.links[x as usize].next;
            Some(x)
        })
    }

    /// Structural check of every list: links agree both ways, lengths match, membership
    /// tags match, no element is reachable from two lists.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = vec![false; self.links.len()];
        for (l, h) in self.heads.iter().enumerate() {
            let mut count = 0u32;
            let mut prev = NIL;
            let mut cur = h.head;
            while cur != NIL {
                let c = cur as usize;
                if c >= self.links.len() {
                    return Err(format!("list {l}: element {cur} out of range"));
                }
                if seen[c] {
                    return Err(format!("list {l}: element {cur} reachable twice"));
                }
                seen[c] = true;
                if self.links[c].on != l as u32 {
                    return Err(format!("list {l}: element {cur} is tagged as on list {}", self.links[c].on));
                }
                if self.links[c].prev != prev {
                    return Err(format!("list {l}: element {cur} has a wrong back link"));
                }
                count += 1;
                prev = cur;
                cur = self.links[c].next;
            }
            if prev != h.tail {
                return Err(format!("list {l}: tail is {} but the last element is {prev}", h.tail));
            }
            if count != h.len {
                return Err(format!("list {l}: length {} but {count} elements", h.len));
            }
        }
        for (x, l) in self.links.iter().map(|k| k.on).enumerate() {
            if l != NIL && !seen[x] {
                return Err(format!("element {x} is tagged as on list {l} but not linked into it"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_remove_move_keep_order_and_lengths() {
        let mut l = IndexLists::new(5, 2);
        for x in 0..4 {
            l.push_back(0, x);
        }
        l.remove(1);
        l.move_to_back(1, 2);
        l.move_to_back(0, 0);
        assert_eq!(l.iter(0).collect::<Vec<_>>(), vec![3, 0]);
        assert_eq!(l.iter(1).collect::<Vec<_>>(), vec![2]);
        assert_eq!((l.len(0), l.len(1)), (2, 1));
        assert_eq!(l.list_of(1), None);
        assert_eq!(l.pop_front(0), Some(3));
        l.check().unwrap();
        l.grow_elements(8);
        l.push_back(1, 7);
        assert_eq!(l.iter(1).collect::<Vec<_>>(), vec![2, 7]);
        l.check().unwrap();
    }
}
