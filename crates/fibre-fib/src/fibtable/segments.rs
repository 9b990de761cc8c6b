//! [`Segments`]: a growable array kept in segments of [`SEGMENT`] elements that never move once
//! made. A table load appends a million route slots and winners to a table's arrays; a `Vec`
//! doubling inside the heap is copied by `realloc` at each doubling, tens of megabytes on the
//! way, every copied page faulted in again (the copies of one such array were a quarter of the
//! daemon writer's page faults in a table load). A new segment copies nothing.
//!
//! Indices are `u32`, as the table's slot numbers and compiled values are. The first segment
//! grows from one element as a small table does (a table of one route, as VRF and policy
//! tables often are, holds one element, not a segment); the others are allocated whole.
//!
//! The array records the lowest index written since [`Segments::settle`], so that a copy that
//! was equal to it then can be made equal again by copying only the elements from there on
//! ([`Segments::copy_changes_from`]): the second copy of a left-right pair copies a table
//! load's new slots and winners instead of making them again.

/// Elements per segment: a power of two, so that an index's segment is a shift away.
pub(crate) const SEGMENT: usize = 1024;

#[derive(Debug, Clone)]
pub(crate) struct Segments<T> {
    segments: Vec<Vec<T>>,
    len: usize,
    /// The lowest index written (set or pushed) since the last [`Segments::settle`]: the
    /// elements below it are as they were then. 0 for a new array: all of it is new.
    changed_from: usize,
}

impl<T> Default for Segments<T> {
    fn default() -> Self {
        Segments {
            segments: Vec::new(),
            len: 0,
            changed_from: 0,
        }
    }
}

impl<T> Segments<T> {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `v`; returns its index.
    pub fn push(&mut self, v: T) -> u32 {
        self.changed_from = self.changed_from.min(self.len);
        let s = self.len / SEGMENT;
        if s == self.segments.len() {
            let capacity = if s == 0 { 1 } else { SEGMENT };
            self.segments.push(Vec::with_capacity(capacity));
        }
        self.segments[s].push(v);
        self.len += 1;
        (self.len - 1) as u32
    }

    #[inline]
    pub fn get(&self, i: u32) -> Option<&T> {
        let i = i as usize;
        self.segments.get(i / SEGMENT)?.get(i % SEGMENT)
    }

    /// The lowest index written since the last [`Segments::settle`] (the length when none
    /// was).
    pub fn changed_from(&self) -> usize {
        self.changed_from.min(self.len)
    }

    /// How many elements [`Segments::copy_changes_from`] would copy from this array.
    pub fn changed(&self) -> usize {
        self.len - self.changed_from()
    }

    /// Records that nothing was written since now (both copies of a pair are equal).
    pub fn settle(&mut self) {
        self.changed_from = self.len;
    }

    /// Drops the elements from `n` on (and the segments after the one `n` falls in); the
    /// caller records the write.
    fn truncate(&mut self, n: usize) {
        if n >= self.len {
            return;
        }
        let s = n / SEGMENT;
        self.segments.truncate(s + 1);
        self.segments[s].truncate(n % SEGMENT);
        self.len = n;
    }
}

impl<T: Clone> Segments<T> {
    /// Makes this array equal to `src`, given that it was equal to `src` when `src` last
    /// settled: copies `src`'s elements from its lowest written index on, and nothing before.
    pub fn copy_changes_from(&mut self, src: &Segments<T>) {
        let from = src.changed_from().min(self.len);
        self.truncate(from);
        self.changed_from = self.changed_from.min(from);
        let mut i = from;
        while i < src.len {
            let (s, o) = (i / SEGMENT, i % SEGMENT);
            let part = &src.segments[s][o..];
            if s == self.segments.len() {
                let capacity = if s == 0 { part.len() } else { SEGMENT };
                self.segments.push(Vec::with_capacity(capacity));
            }
            self.segments[s].extend_from_slice(part);
            i += part.len();
        }
        self.len = src.len;
    }
}

impl<T> std::ops::Index<u32> for Segments<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: u32) -> &T {
        let i = i as usize;
        &self.segments[i / SEGMENT][i % SEGMENT]
    }
}

impl<T> std::ops::IndexMut<u32> for Segments<T> {
    #[inline]
    fn index_mut(&mut self, i: u32) -> &mut T {
        let i = i as usize;
        self.changed_from = self.changed_from.min(i);
        &mut self.segments[i / SEGMENT][i % SEGMENT]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_follow_pushes_across_segments() {
        let mut s = Segments::default();
        assert!(s.is_empty() && s.get(0).is_none());
        let n = 3 * SEGMENT as u32 + 7;
        for v in 0..n {
            assert_eq!(s.push(v * 2), v);
        }
        assert_eq!(s.len(), n as usize);
        for i in 0..n {
            assert_eq!(s[i], i * 2);
            assert_eq!(s.get(i), Some(&(i * 2)));
        }
        assert!(s.get(n).is_none());
        s[SEGMENT as u32] = 1;
        assert_eq!(s[SEGMENT as u32], 1);
        // Full segments are made whole, so later pushes never move earlier elements.
        let first = &s[SEGMENT as u32 + 1] as *const u32;
        for v in 0..SEGMENT as u32 {
            s.push(v);
        }
        assert_eq!(first, &s[SEGMENT as u32 + 1] as *const u32);
    }
}
