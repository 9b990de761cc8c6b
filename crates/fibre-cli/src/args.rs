//! Argument parsing shared by every object: iproute2's word matching, number and address
//! parsers with the C library's semantics (`strtoul`, iproute2's own dotted-quad reader), and the
//! error texts iproute2 prints when they fail.
//!
//! Invariant: every parser here either returns a value or a [`CmdError`] carrying the exact text
//! and exit behaviour of the iproute2 function it stands for (`get_prefix`, `get_addr`, `invarg`,
//! `NEXT_ARG`'s "Command line is not complete", ...). Nothing here allocates on success.

use crate::error::CmdError;
use fibre_fib::Family;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// iproute2's `matches(arg, word)`: true when `arg` is a non-empty prefix of `word`.
pub fn matches(arg: &str, word: &str) -> bool {
    !arg.is_empty() && word.as_bytes().starts_with(arg.as_bytes())
}

/// A cursor over one command's words, as iproute2 walks `argc`/`argv`.
pub struct Args<'a> {
    words: &'a [&'a str],
    pos: usize,
}

impl<'a> Args<'a> {
    pub fn new(words: &'a [&'a str]) -> Self {
        Args { words, pos: 0 }
    }

    /// The current word, if any.
    pub fn peek(&self) -> Option<&'a str> {
        self.words.get(self.pos).copied()
    }

    /// Moves past the current word.
    pub fn advance(&mut self) {
        self.pos += 1;
    }

    /// Moves back to the previous word: a sub-parser that stops on the first word that is not
    /// its own leaves the cursor on the last one it took, as iproute2's leave `argv`.
    pub fn back(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    /// Returns the current word and moves past it.
    pub fn take(&mut self) -> Option<&'a str> {
        let w = self.peek();
        if w.is_some() {
            self.pos += 1;
        }
        w
    }

    /// iproute2's `NEXT_ARG()`: moves to the word after the current one, which must exist.
    pub fn next_arg(&mut self) -> Result<&'a str, CmdError> {
        self.pos += 1;
        self.peek().ok_or_else(CmdError::incomplete)
    }

    /// The words from the current one on.
    pub fn rest(&self) -> &'a [&'a str] {
        &self.words[self.pos.min(self.words.len())..]
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.words.len()
    }
}

/// The C library's `strtoul(s, &end, base)` followed by iproute2's "whole string consumed"
/// check. Returns `None` when no digits were read or characters remain. Negative inputs wrap
/// as in C, and overflow saturates at `u64::MAX` (ERANGE), which every caller rejects.
pub fn strtoul(s: &str, base: u32) -> Option<u64> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut neg = false;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        neg = b[i] == b'-';
        i += 1;
    }
    let mut base = base;
    let hex_prefix = i + 1 < b.len() && b[i] == b'0' && (b[i + 1] | 0x20) == b'x';
    if (base == 0 || base == 16) && hex_prefix && i + 2 < b.len() && b[i + 2].is_ascii_hexdigit() {
        i += 2;
        base = 16;
    } else if base == 0 {
        base = if i < b.len() && b[i] == b'0' { 8 } else { 10 };
    }
    let start = i;
    let mut v: u64 = 0;
    let mut overflow = false;
    while i < b.len() {
        let d = match (b[i] as char).to_digit(base) {
            Some(d) => d as u64,
            None => break,
        };
        match v.checked_mul(base as u64).and_then(|x| x.checked_add(d)) {
            Some(x) => v = x,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start || i != b.len() {
        return None;
    }
    if overflow {
        return Some(u64::MAX);
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// iproute2's `get_u32`/`get_unsigned` (base 0 unless given).
pub fn get_u32(s: &str, base: u32) -> Option<u32> {
    strtoul(s, base).and_then(|v| u32::try_from(v).ok())
}

pub fn get_u16(s: &str, base: u32) -> Option<u16> {
    strtoul(s, base).and_then(|v| u16::try_from(v).ok())
}

pub fn get_u8(s: &str, base: u32) -> Option<u8> {
    strtoul(s, base).and_then(|v| u8::try_from(v).ok())
}

/// An address or prefix as iproute2's `inet_prefix` holds it: the family may still be unknown
/// (`default`/`any`/`all` without a family), in which case `addr` is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inet {
    pub family: Option<Family>,
    pub addr: Option<IpAddr>,
    /// Prefix length; the family's full length for a plain address.
    pub len: u8,
    /// A `/len` was written, or the word was `default`/`any`/`all`.
    pub len_given: bool,
}

impl Inet {
    /// The address, or the family's zero address for `default`.
    pub fn addr_or_zero(&self, family: Family) -> IpAddr {
        self.addr.unwrap_or(match family {
            Family::Inet => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            Family::Inet6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        })
    }

    /// Bytes in the address (iproute2's `bytelen`): 0 for `default`.
    pub fn bytelen(&self) -> usize {
        match self.addr {
            Some(IpAddr::V4(_)) => 4,
            Some(IpAddr::V6(_)) => 16,
            None => 0,
        }
    }
}

/// iproute2's dotted-quad reader: one to four numbers in `strtoul` base 0, each at most 255,
/// missing trailing bytes are zero ("10" is 10.0.0.0).
pub fn parse_ipv4(s: &str) -> Option<Ipv4Addr> {
    let b = s.as_bytes();
    // The common case (plain decimal parts, no leading zeros) without going through strtoul.
    let mut out = [0u8; 4];
    let mut part = 0;
    let mut i = 0;
    loop {
        let start = i;
        let mut v: u32 = 0;
        while i < b.len() && b[i].is_ascii_digit() && i - start < 3 {
            v = v * 10 + (b[i] - b'0') as u32;
            i += 1;
        }
        let n = i - start;
        let ends_part = i == b.len() || b[i] == b'.';
        if n == 0 || !ends_part || (n > 1 && b[start] == b'0') {
            return parse_ipv4_slow(s);
        }
        if v > 255 {
            return None;
        }
        out[part] = v as u8;
        part += 1;
        if i == b.len() {
            return Some(Ipv4Addr::from(out));
        }
        if part == 4 {
            return None;
        }
        i += 1;
    }
}

fn parse_ipv4_slow(s: &str) -> Option<Ipv4Addr> {
    let mut out = [0u8; 4];
    let mut rest = s;
    for (i, slot) in out.iter_mut().enumerate() {
        let (num, tail) = match rest.find('.') {
            Some(p) => (&rest[..p], Some(&rest[p + 1..])),
            None => (rest, None),
        };
        let v = strtoul(num, 0)?;
        if v > 255 {
            return None;
        }
        *slot = v as u8;
        match tail {
            None => return Some(Ipv4Addr::from(out)),
            Some(t) if i < 3 => rest = t,
            Some(_) => return None,
        }
    }
    None
}

/// iproute2's `get_addr_1`: an address of `family` (or of any family when `None`).
/// `Err(())` stands for its -1 return.
#[allow(clippy::result_unit_err)]
pub fn get_addr_1(s: &str, family: Option<Family>) -> Result<Inet, ()> {
    if s == "default" || s == "all" || s == "any" {
        return Ok(Inet {
            family,
            addr: None,
            len: 0,
            len_given: false,
        });
    }
    if s.bytes().any(|b| b == b':') {
        if family == Some(Family::Inet) {
            return Err(());
        }
        let a: Ipv6Addr = s.parse().map_err(|_| ())?;
        return Ok(Inet {
            family: Some(Family::Inet6),
            addr: Some(IpAddr::V6(a)),
            len: 128,
            len_given: false,
        });
    }
    if family == Some(Family::Inet6) {
        return Err(());
    }
    let a = parse_ipv4(s).ok_or(())?;
    Ok(Inet {
        family: Some(Family::Inet),
        addr: Some(IpAddr::V4(a)),
        len: 32,
        len_given: false,
    })
}

/// iproute2's `get_netmask`: a number (base 0) or an IPv4 dotted mask.
fn get_netmask(s: &str) -> Option<u32> {
    if let Some(v) = get_u32(s, 0) {
        return Some(v);
    }
    let m = u32::from(parse_ipv4(s)?);
    // A contiguous mask: ones then zeros.
    let ones = m.leading_ones();
    if m.checked_shl(ones).unwrap_or(0) != 0 {
        return None;
    }
    Some(ones)
}

/// iproute2's `get_prefix_1`.
#[allow(clippy::result_unit_err)]
pub fn get_prefix_1(s: &str, family: Option<Family>) -> Result<Inet, ()> {
    if s == "default" || s == "any" || s == "all" {
        return Ok(Inet {
            family,
            addr: None,
            len: 0,
            len_given: true,
        });
    }
    let (a, plen) = match s.bytes().position(|b| b == b'/') {
        Some(p) => (&s[..p], Some(&s[p + 1..])),
        None => (s, None),
    };
    let mut inet = get_addr_1(a, family)?;
    if let Some(plen) = plen {
        let max = inet.family.map_or(0, |f| f.max_len());
        if inet.addr.is_none() {
            return Err(());
        }
        let l = get_netmask(plen).ok_or(())?;
        if l > max as u32 {
            return Err(());
        }
        inet.len = l as u8;
        inet.len_given = true;
    }
    Ok(inet)
}

/// iproute2's name for a family in its "... is expected rather than" messages.
fn family_verbose(family: Option<Family>) -> &'static str {
    match family {
        None => "any valid",
        Some(Family::Inet) => "inet",
        Some(Family::Inet6) => "inet6",
    }
}

/// iproute2's `get_prefix`: a failure prints its message and ends the program with status 1.
pub fn get_prefix(s: &str, family: Option<Family>) -> Result<Inet, CmdError> {
    get_prefix_1(s, family).map_err(|()| {
        CmdError::exit(
            1,
            format!(
                "Error: {} prefix is expected rather than \"{}\".\n",
                family_verbose(family),
                s
            ),
        )
    })
}

/// iproute2's `get_addr`: like [`get_prefix`] without a length.
pub fn get_addr(s: &str, family: Option<Family>) -> Result<Inet, CmdError> {
    get_addr_1(s, family).map_err(|()| {
        CmdError::exit(
            1,
            format!(
                "Error: {} address is expected rather than \"{}\".\n",
                family_verbose(family),
                s
            ),
        )
    })
}

/// iproute2's `read_family`: the optional family word before a `via` address.
pub fn read_family(s: &str) -> Option<Family> {
    match s {
        "inet" => Some(Family::Inet),
        "inet6" => Some(Family::Inet6),
        _ => None,
    }
}

/// The family of a `-f`/`-family` option or of `-4`/`-6`.
pub fn family_a2n(s: &str) -> Option<Option<Family>> {
    match s {
        "inet" => Some(Some(Family::Inet)),
        "inet6" => Some(Some(Family::Inet6)),
        "unspec" => Some(None),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_is_prefix_of_word() {
        assert!(matches("a", "add"));
        assert!(matches("add", "add"));
        assert!(!matches("adds", "add"));
        assert!(!matches("", "add"));
    }

    #[test]
    fn strtoul_follows_libc() {
        assert_eq!(strtoul("10", 0), Some(10));
        assert_eq!(strtoul("0x10", 0), Some(16));
        assert_eq!(strtoul("010", 0), Some(8));
        assert_eq!(strtoul("10", 16), Some(16));
        assert_eq!(strtoul("0x", 0), None);
        assert_eq!(strtoul("", 0), None);
        assert_eq!(strtoul("1x", 0), None);
        assert_eq!(strtoul("-1", 0), Some(u64::MAX));
        assert_eq!(get_u32("-1", 0), None);
        assert_eq!(get_u32("4294967295", 0), Some(u32::MAX));
        assert_eq!(get_u32("4294967296", 0), None);
    }

    #[test]
    fn ipv4_like_iproute2() {
        assert_eq!(parse_ipv4("10.1.2.3"), Some(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(parse_ipv4("10"), Some(Ipv4Addr::new(10, 0, 0, 0)));
        assert_eq!(parse_ipv4("10.1"), Some(Ipv4Addr::new(10, 1, 0, 0)));
        assert_eq!(parse_ipv4("0x0a.010.0.1"), Some(Ipv4Addr::new(10, 8, 0, 1)));
        assert_eq!(parse_ipv4("0.0.0.0"), Some(Ipv4Addr::new(0, 0, 0, 0)));
        assert_eq!(parse_ipv4("256.0.0.0"), None);
        assert_eq!(parse_ipv4("1.2.3.4.5"), None);
        assert_eq!(parse_ipv4("1.2.3."), None);
        assert_eq!(parse_ipv4("a.b"), None);
    }

    #[test]
    fn prefixes_like_iproute2() {
        let p = get_prefix_1("10.0.0.0/8", None).unwrap();
        assert_eq!(
            (p.family, p.len, p.len_given),
            (Some(Family::Inet), 8, true)
        );
        let p = get_prefix_1("10.0.0.1", None).unwrap();
        assert_eq!((p.len, p.len_given), (32, false));
        let p = get_prefix_1("10.0.0.0/255.255.0.0", None).unwrap();
        assert_eq!(p.len, 16);
        let p = get_prefix_1("default", Some(Family::Inet6)).unwrap();
        assert_eq!((p.family, p.addr, p.len), (Some(Family::Inet6), None, 0));
        assert!(get_prefix_1("1.2.3.0/33", None).is_err());
        assert!(get_prefix_1("default/0", None).is_err());
        assert!(get_prefix_1("2001:db8::/64", Some(Family::Inet)).is_err());
        assert!(get_prefix_1("10.0.0.0/8", Some(Family::Inet6)).is_err());
    }

    #[test]
    fn prefix_errors_carry_iproute2_text() {
        // `ip route add 1.2.3.0/244 via 10.0.0.2` (iproute2 6.1): exit status 1.
        let e = get_prefix("1.2.3.0/244", None).unwrap_err();
        assert_eq!(
            e,
            CmdError::exit(
                1,
                "Error: any valid prefix is expected rather than \"1.2.3.0/244\".\n"
            )
        );
        let e = get_addr("x", Some(Family::Inet)).unwrap_err();
        assert_eq!(
            e,
            CmdError::exit(1, "Error: inet address is expected rather than \"x\".\n")
        );
    }
}
