//! Neighbor Discovery messages (RFC 4861 section 4): router solicitation and advertisement,
//! neighbor solicitation and advertisement, redirect. They travel as ICMPv6 messages:
//! [`crate::icmpv6`] reads the type, code and checksum and hands the bytes after them (the
//! "body") to [`Repr::parse`]; options stay as bytes in the `Repr`, checked when parsed and read
//! with [`Repr::options`].
//!
//! Panic contract: nothing here panics except [`Repr::emit`] on a body shorter than
//! [`Repr::body_len`]. Reserved fields are ignored when read and written as zero.

use core::net::Ipv6Addr;

use crate::consts::icmpv6;
use crate::error::{Error, Result};
use crate::field::{array, be16, be32, set_be16, set_be32};
use crate::ndp_option::NdpOptions;

/// Neighbor advertisement flags, in the first byte of its body.
pub mod na_flags {
    pub const ROUTER: u8 = 0x80;
    pub const SOLICITED: u8 = 0x40;
    pub const OVERRIDE: u8 = 0x20;
}

/// Router advertisement flags (RFC 4861, RFC 4191 for the preference bits kept as read).
pub mod ra_flags {
    pub const MANAGED: u8 = 0x80;
    pub const OTHER: u8 = 0x40;
}

/// An NDP message by value; `options` are its option bytes, every one well-formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    RouterSolicit {
        options: &'a [u8],
    },
    RouterAdvert {
        /// The hop limit hosts should use; 0 leaves it unspecified.
        hop_limit: u8,
        flags: u8,
        /// Seconds; 0 says the router is not a default router.
        router_lifetime: u16,
        /// Milliseconds.
        reachable_time: u32,
        /// Milliseconds.
        retrans_time: u32,
        options: &'a [u8],
    },
    NeighborSolicit {
        target: Ipv6Addr,
        options: &'a [u8],
    },
    /// Flags from [`na_flags`]; the other 29 bits are reserved.
    NeighborAdvert {
        flags: u8,
        target: Ipv6Addr,
        options: &'a [u8],
    },
    Redirect {
        target: Ipv6Addr,
        dest: Ipv6Addr,
        options: &'a [u8],
    },
}

/// The body length before the options: the fixed fields of each message.
fn fixed_len(msg_type: u8) -> Option<usize> {
    Some(match msg_type {
        icmpv6::ROUTER_SOLICIT => 4,
        icmpv6::ROUTER_ADVERT => 12,
        icmpv6::NEIGHBOR_SOLICIT | icmpv6::NEIGHBOR_ADVERT => 20,
        icmpv6::REDIRECT => 36,
        _ => return None,
    })
}

/// True for the ICMPv6 types this module reads.
pub fn is_ndp(msg_type: u8) -> bool {
    fixed_len(msg_type).is_some()
}

impl<'a> Repr<'a> {
    /// Reads the body (the ICMPv6 message after its 4-byte type, code and checksum) of a
    /// message of `msg_type`. [`Error::Unsupported`] for a type that is not NDP,
    /// [`Error::Truncated`] for a body shorter than the fixed fields, and the option errors of
    /// [`NdpOptions`].
    pub fn parse(msg_type: u8, body: &'a [u8]) -> Result<Repr<'a>> {
        let fixed = fixed_len(msg_type).ok_or(Error::Unsupported)?;
        if body.len() < fixed {
            return Err(Error::Truncated);
        }
        let options = &body[fixed..];
        NdpOptions::validate(options)?;
        let addr = |at| Ipv6Addr::from(array::<16>(body, at));
        Ok(match msg_type {
            icmpv6::ROUTER_SOLICIT => Repr::RouterSolicit { options },
            icmpv6::ROUTER_ADVERT => Repr::RouterAdvert {
                hop_limit: body[0],
                flags: body[1],
                router_lifetime: be16(body, 2),
                reachable_time: be32(body, 4),
                retrans_time: be32(body, 8),
                options,
            },
            icmpv6::NEIGHBOR_SOLICIT => Repr::NeighborSolicit {
                target: addr(4),
                options,
            },
            icmpv6::NEIGHBOR_ADVERT => Repr::NeighborAdvert {
                flags: body[0] & 0xE0,
                target: addr(4),
                options,
            },
            _ => Repr::Redirect {
                target: addr(4),
                dest: addr(20),
                options,
            },
        })
    }

    pub fn msg_type(&self) -> u8 {
        match self {
            Repr::RouterSolicit { .. } => icmpv6::ROUTER_SOLICIT,
            Repr::RouterAdvert { .. } => icmpv6::ROUTER_ADVERT,
            Repr::NeighborSolicit { .. } => icmpv6::NEIGHBOR_SOLICIT,
            Repr::NeighborAdvert { .. } => icmpv6::NEIGHBOR_ADVERT,
            Repr::Redirect { .. } => icmpv6::REDIRECT,
        }
    }

    pub fn option_bytes(&self) -> &'a [u8] {
        match *self {
            Repr::RouterSolicit { options }
            | Repr::RouterAdvert { options, .. }
            | Repr::NeighborSolicit { options, .. }
            | Repr::NeighborAdvert { options, .. }
            | Repr::Redirect { options, .. } => options,
        }
    }

    /// The options, one by one.
    pub fn options(&self) -> NdpOptions<'a> {
        NdpOptions::new(self.option_bytes())
    }

    /// The body's length: fixed fields and options.
    pub fn body_len(&self) -> usize {
        fixed_len(self.msg_type()).unwrap_or(0) + self.option_bytes().len()
    }

    /// Writes the body (fixed fields, zeroed reserved fields, options).
    pub fn emit(&self, body: &mut [u8]) {
        let fixed = fixed_len(self.msg_type()).unwrap_or(0);
        let body = &mut body[..self.body_len()];
        body[..fixed].fill(0);
        match *self {
            Repr::RouterSolicit { .. } => {}
            Repr::RouterAdvert {
                hop_limit,
                flags,
                router_lifetime,
                reachable_time,
                retrans_time,
                ..
            } => {
                body[0] = hop_limit;
                body[1] = flags;
                set_be16(body, 2, router_lifetime);
                set_be32(body, 4, reachable_time);
                set_be32(body, 8, retrans_time);
            }
            Repr::NeighborSolicit { target, .. } => body[4..20].copy_from_slice(&target.octets()),
            Repr::NeighborAdvert { flags, target, .. } => {
                body[0] = flags & 0xE0;
                body[4..20].copy_from_slice(&target.octets());
            }
            Repr::Redirect { target, dest, .. } => {
                body[4..20].copy_from_slice(&target.octets());
                body[20..36].copy_from_slice(&dest.octets());
            }
        }
        body[fixed..].copy_from_slice(self.option_bytes());
    }
}
