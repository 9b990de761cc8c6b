//! IPv4 fragmentation of a forwarded packet, as `ip_do_fragment`'s copying path cuts it
//! (the path every forwarded packet takes: its fast path only serves locally built fragment
//! lists).
//!
//! The rules, in the kernel's words turned to facts: every fragment carries a header as long
//! as the original's; the first keeps every option, the later ones carry the options whose
//! copied flag is set and NOPs in place of the others (`ip_options_fragment`, applied once
//! after the first fragment, and only when the original starts at offset 0); each fragment
//! but the last carries a multiple of 8 payload bytes, as many as the MTU leaves; the flags
//! word is rewritten whole (offset, MF when more follows or the original had MF; the reserved
//! bit and DF are cleared); total length and checksum are recomputed; the ID, TTL (already
//! decremented) and the rest are the original's.
//!
//! Fragments come from the caller's `fibre_packet::Pool`, each starting at the pool's headroom
//! so the link-layer header can be prepended. The pool lends one frame at a time, so payload
//! moves from the original into a fragment through a small buffer on the stack.

use fibre_packet::{Buf, Pool};
use fibre_wire::ipv4;
use fibre_wire::ipv4_option::kind;

use crate::drop::DropReason;

/// Bytes moved per copy from the original into a fragment.
const BOUNCE: usize = 256;

/// Why fragmentation stopped; the fragments handed out before stay sent, as in the kernel
/// (`ip_do_fragment` frees the rest on failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragError {
    /// The MTU leaves less than 8 payload bytes after the header.
    MtuTooSmall,
    /// The pool ran out of frames.
    Nomem,
    /// A fragment does not fit even a large frame.
    TooLarge,
}

impl FragError {
    /// The drop reason the packet (or what was left of it) is counted under.
    pub fn reason(self) -> DropReason {
        match self {
            FragError::MtuTooSmall => DropReason::PktTooBig,
            FragError::Nomem | FragError::TooLarge => DropReason::Nomem,
        }
    }
}

/// Cuts the IPv4 packet that starts `l3` bytes into `buf` (the bytes before it, an old
/// link-layer header, are ignored) into fragments of at most `mtu` bytes, and hands each to
/// `emit` in order as a new buffer holding the IP fragment alone. Consumes `buf`: its frame
/// goes back to the pool in every case. Returns how many fragments went out.
///
/// The packet must be a valid IPv4 packet trimmed to its total length, as
/// [`crate::rx::receive`] and [`crate::forward`] leave it (a shorter buffer is a caller's
/// mistake and yields [`FragError::TooLarge`] at worst, never a panic).
pub fn fragment_v4(
    pool: &mut Pool,
    buf: Buf,
    l3: usize,
    mtu: u32,
    mut emit: impl FnMut(&mut Pool, Buf),
) -> Result<usize, FragError> {
    let result = cut(pool, &buf, l3, mtu as usize, &mut emit);
    pool.free(buf);
    result
}

fn cut(
    pool: &mut Pool,
    orig: &Buf,
    l3: usize,
    mtu: usize,
    emit: &mut impl FnMut(&mut Pool, Buf),
) -> Result<usize, FragError> {
    let data = orig.data(pool).get(l3..).ok_or(FragError::TooLarge)?;
    let p = ipv4::Packet::new_checked(data).map_err(|_| FragError::TooLarge)?;
    let (hlen, total) = (p.header_len(), usize::from(p.total_len()));
    let mut offset = usize::from(p.frag_offset()) * 8;
    let more_after_all = p.more_frags();
    let mut header = [0u8; 60];
    header[..hlen].copy_from_slice(&data[..hlen]);
    let space = mtu
        .checked_sub(hlen)
        .filter(|s| *s >= 8)
        .ok_or(FragError::MtuTooSmall)?;
    let trim_options = offset == 0;
    let (mut ptr, mut left, mut count) = (hlen, total - hlen, 0);
    while left > 0 {
        let mut len = left.min(space);
        if len < left {
            len &= !7;
        }
        let mut frag = alloc(pool, hlen + len)?;
        let filled = match frag.append(pool, hlen) {
            Ok(out) => {
                out.copy_from_slice(&header[..hlen]);
                copy_payload(pool, orig, l3 + ptr, &mut frag, len)
            }
            Err(_) => Err(FragError::TooLarge),
        };
        if let Err(e) = filled {
            pool.free(frag);
            return Err(e);
        }
        left -= len;
        let mut h = ipv4::Packet::new_unchecked(frag.data_mut(pool));
        h.set_flags_frag(
            false,
            false,
            left > 0 || more_after_all,
            (offset / 8) as u16,
        );
        h.set_total_len((hlen + len) as u16);
        h.fill_checksum();
        emit(pool, frag);
        count += 1;
        if count == 1 && trim_options {
            options_fragment(&mut header[ipv4::HEADER_LEN..hlen]);
        }
        ptr += len;
        offset += len;
    }
    Ok(count)
}

/// A buffer from `pool` with room for `len` bytes after the headroom: a base frame when one
/// is free and large enough, else a large one.
fn alloc(pool: &mut Pool, len: usize) -> Result<Buf, FragError> {
    if len + pool.headroom() <= pool.frame_size() {
        if let Ok(b) = pool.alloc() {
            return Ok(b);
        }
    }
    if len + pool.headroom() > pool.large_frame_size() {
        return Err(FragError::TooLarge);
    }
    pool.alloc_large().map_err(|_| FragError::Nomem)
}

/// Appends `len` bytes of `from`'s data at `at` to `to`, both frames of `pool`.
fn copy_payload(
    pool: &mut Pool,
    from: &Buf,
    at: usize,
    to: &mut Buf,
    len: usize,
) -> Result<(), FragError> {
    let mut bounce = [0u8; BOUNCE];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(BOUNCE);
        let src = from
            .data(pool)
            .get(at + done..at + done + n)
            .ok_or(FragError::TooLarge)?;
        bounce[..n].copy_from_slice(src);
        to.append(pool, n)
            .map_err(|_| FragError::TooLarge)?
            .copy_from_slice(&bounce[..n]);
        done += n;
    }
    Ok(())
}

/// `ip_options_fragment`: the options a later fragment carries. Options without the copied
/// flag become NOPs; the walk stops at End of List or at a length it cannot trust.
fn options_fragment(opts: &mut [u8]) {
    let mut at = 0;
    while at < opts.len() {
        match opts[at] {
            kind::END => return,
            kind::NOP => {
                at += 1;
                continue;
            }
            _ => {}
        }
        let len = usize::from(*opts.get(at + 1).unwrap_or(&0));
        if len < 2 || len > opts.len() - at {
            return;
        }
        if opts[at] & 0x80 == 0 {
            opts[at..at + len].fill(kind::NOP);
        }
        at += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;
    use fibre_packet::{Headroom, PoolConfig};
    use fibre_wire::consts::ip_proto;

    fn pool() -> Pool {
        Pool::new(PoolConfig {
            frames: 16,
            frame_size: 2048,
            large_frames: 1,
            large_frame_size: 4096,
            headroom: Headroom::default(),
        })
        .unwrap()
    }

    fn packet(options: &[u8], payload: usize, more: bool, offset: u16) -> Vec<u8> {
        let r = ipv4::Repr {
            src_addr: Ipv4Addr::new(192, 0, 2, 1),
            dst_addr: Ipv4Addr::new(198, 51, 100, 7),
            protocol: ip_proto::UDP,
            payload_len: payload,
            ttl: 63,
            tos: 0,
            ident: 0x1234,
            reserved_flag: true,
            dont_frag: false,
            more_frags: more,
            frag_offset: offset,
            options: fibre_wire::OptionBytes::new(options).unwrap(),
        };
        let mut b = vec![0u8; r.header_len() + payload];
        r.emit(&mut ipv4::Packet::new_unchecked(&mut b[..]));
        for (i, x) in b[r.header_len()..].iter_mut().enumerate() {
            *x = i as u8;
        }
        b
    }

    fn run(p: &mut Pool, ip: &[u8], mtu: u32) -> (Result<usize, FragError>, Vec<Vec<u8>>) {
        let mut b = p.alloc().unwrap();
        b.append(p, 14 + ip.len()).unwrap()[14..].copy_from_slice(ip);
        let mut out = Vec::new();
        let r = fragment_v4(p, b, 14, mtu, |pool, f| {
            out.push(f.data(pool).to_vec());
            pool.free(f);
        });
        (r, out)
    }

    #[test]
    fn sizes_flags_and_options() {
        let mut p = pool();
        // RR (not copied) and LSRR-like copied option 0x83 padded to 12 bytes, 1000 bytes.
        let ip = packet(&[7, 7, 8, 10, 0, 0, 1, 131, 3, 4, 0, 0], 1000, false, 0);
        let (r, frags) = run(&mut p, &ip, 500);
        assert_eq!(r, Ok(3));
        // 500 - 32 = 468, cut to 464.
        let lens: Vec<_> = frags.iter().map(|f| f.len()).collect();
        assert_eq!(lens, [496, 496, 32 + 72]);
        let mut payload = Vec::new();
        for (i, f) in frags.iter().enumerate() {
            let h = ipv4::Packet::new_checked(&f[..]).unwrap();
            h.verify_checksum().unwrap();
            assert_eq!(
                (h.ident(), h.ttl(), h.reserved_flag(), h.dont_frag()),
                (0x1234, 63, false, false)
            );
            assert_eq!(
                (h.more_frags(), h.frag_offset()),
                (i < 2, (i * 464 / 8) as u16)
            );
            let opts = &f[20..32];
            if i == 0 {
                assert_eq!(opts, &ip[20..32]);
            } else {
                assert_eq!(opts, &[1, 1, 1, 1, 1, 1, 1, 131, 3, 4, 0, 0]);
            }
            payload.extend_from_slice(h.payload());
        }
        assert_eq!(payload, &ip[32..]);
        assert_eq!(p.available(), 16);
    }

    #[test]
    fn fragmenting_a_fragment_keeps_mf_and_options() {
        let mut p = pool();
        let ip = packet(&[7, 3, 4, 0], 100, true, 10);
        let (r, frags) = run(&mut p, &ip, 64);
        assert_eq!(r, Ok(3));
        for (i, f) in frags.iter().enumerate() {
            let h = ipv4::Packet::new_checked(&f[..]).unwrap();
            assert!(h.more_frags());
            assert_eq!(h.frag_offset(), 10 + 5 * i as u16);
            assert_eq!(&f[20..24], &[7, 3, 4, 0]);
        }
    }

    #[test]
    fn failures_free_the_original() {
        let mut p = pool();
        let ip = packet(&[], 100, false, 0);
        assert_eq!(run(&mut p, &ip, 27).0, Err(FragError::MtuTooSmall));
        let mut held: Vec<_> = (0..14).map(|_| p.alloc().unwrap()).collect();
        // One base frame for the original, one for the first fragment; the large one takes
        // the second, and the third finds none.
        let mut b = p.alloc().unwrap();
        b.append(&mut p, ip.len()).unwrap().copy_from_slice(&ip);
        let r = fragment_v4(&mut p, b, 0, 68, |_, f| held.push(f));
        assert_eq!((r, held.len()), (Err(FragError::Nomem), 16));
        for b in held {
            p.free(b);
        }
        assert_eq!((p.available(), p.available_large()), (16, 1));
    }
}
