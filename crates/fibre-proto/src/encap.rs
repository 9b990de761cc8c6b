//! Encapsulations (RTA_ENCAP with RTA_ENCAP_TYPE, a route's or a multipath next hop's)
//! converted to and from the FIB's [`Encap`].
//!
//! Reading keeps the kernel's order of checks before the FIB's own (`Encap::build`): an
//! RTA_ENCAP_TYPE of no known type is refused when it is read, an RTA_ENCAP without its type
//! when the next hop is made, then the type's own attributes (a missing required one, a value
//! of the wrong size). Writing gives the attributes in the order the kernel's fill_encap
//! functions put them, so a dump of a route fibre holds is the kernel's byte for byte.

use fibre_fib::encap::{ioam6_mode, Counters, Encap, Flavors, Ioam6, Rpl, Seg6, Seg6Local};
use fibre_fib::types::{Errno, RtError};
use fibre_netlink::lwtunnel::ioam6::Ioam6Attr;
use fibre_netlink::lwtunnel::rpl::RplAttr;
use fibre_netlink::lwtunnel::seg6::{Seg6Attr, Seg6Tunnel};
use fibre_netlink::lwtunnel::seg6local::{CounterAttr, FlavorAttr, Seg6LocalAttr};
use fibre_netlink::lwtunnel::{self as lwt, LWTUNNEL_ENCAP};
use fibre_netlink::nexthop::NexthopAttr;
use fibre_netlink::nla::{Nest, NestedBytes};
use fibre_netlink::route::RouteAttr;

use crate::convert::RequestError;

/// The encapsulation attributes of one next hop, gathered in message order.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Pending<'a> {
    kind: Option<u16>,
    nest: Option<NestedBytes<'a>>,
}

fn bare() -> RequestError {
    RtError::new(Errno::EINVAL).into()
}

fn invalid(text: &str) -> RequestError {
    RtError::msg(Errno::EINVAL, text).into()
}

impl<'a> Pending<'a> {
    /// Takes RTA_ENCAP or RTA_ENCAP_TYPE (`false` for any other attribute).
    pub(crate) fn take(&mut self, a: &RouteAttr<'a>) -> Result<bool, RequestError> {
        match a {
            RouteAttr::Encap(n) => self.nest = Some(*n),
            RouteAttr::EncapType(t) => self.kind(*t)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// RTA_ENCAP_TYPE or NHA_ENCAP_TYPE: lwtunnel_valid_encap_type refuses a type it does not
    /// know as it is read.
    pub(crate) fn kind(&mut self, t: u16) -> Result<(), RequestError> {
        if t == LWTUNNEL_ENCAP::NONE || t > LWTUNNEL_ENCAP::XFRM {
            return Err(invalid("Unknown LWT encapsulation type"));
        }
        self.kind = Some(t);
        Ok(())
    }

    /// RTA_ENCAP or NHA_ENCAP.
    pub(crate) fn nest(&mut self, n: NestedBytes<'a>) {
        self.nest = Some(n);
    }

    /// A route next hop's encapsulation: none without RTA_ENCAP (a lone RTA_ENCAP_TYPE is
    /// ignored, as the kernel ignores it).
    pub(crate) fn finish(self) -> Result<Option<Encap>, RequestError> {
        match (self.nest, self.kind) {
            (None, _) => Ok(None),
            (Some(_), None) => Err(invalid("LWT encap type not specified")),
            (Some(nest), Some(kind)) => decode(kind, nest).map(Some),
        }
    }

    /// A next-hop object's (rtm_to_nh_config): NHA_ENCAP and NHA_ENCAP_TYPE go together.
    pub(crate) fn finish_object(self) -> Result<Option<Encap>, RequestError> {
        match (self.nest, self.kind) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(invalid("LWT encapsulation type is missing")),
            (None, Some(_)) => Err(invalid("LWT encapsulation attribute is missing")),
            (Some(nest), Some(kind)) => decode(kind, nest).map(Some),
        }
    }
}

/// The inside of RTA_ENCAP / NHA_ENCAP of a known type, as the FIB takes it.
fn decode(kind: u16, nest: NestedBytes<'_>) -> Result<Encap, RequestError> {
    let e = match lwt::Encap::decode(kind, &nest) {
        lwt::Encap::Seg6(a) => Encap::Seg6(seg6(&a)?),
        lwt::Encap::Seg6Local(a) => Encap::Seg6Local(seg6local(&a)?),
        lwt::Encap::Ioam6(a) => Encap::Ioam6(ioam6(&a)?),
        lwt::Encap::Rpl(a) => Encap::Rpl(rpl(&a)?),
        // Another type (MPLS, IP tunnels, ILA, BPF, XFRM), or one whose attributes do not
        // parse.
        lwt::Encap::Other(_) => match kind {
            LWTUNNEL_ENCAP::SEG6
            | LWTUNNEL_ENCAP::SEG6_LOCAL
            | LWTUNNEL_ENCAP::IOAM6
            | LWTUNNEL_ENCAP::RPL => return Err(bare()),
            _ => {
                return Err(
                    RtError::msg(Errno::EOPNOTSUPP, "lwt encapsulation type not supported").into(),
                )
            }
        },
    };
    Ok(e)
}

/// An attribute of a known number in the wrong form: the type's policy refuses it.
fn policy() -> RequestError {
    invalid("Attribute failed policy validation")
}

fn seg6(attrs: &[Seg6Attr<'_>]) -> Result<Seg6, RequestError> {
    attrs
        .iter()
        .find_map(|a| match a {
            Seg6Attr::Srh(t) => Some(Seg6 {
                mode: t.mode,
                srh: t.srh.to_vec(),
            }),
            _ => None,
        })
        .ok_or_else(bare)
}

fn seg6local(attrs: &[Seg6LocalAttr<'_>]) -> Result<Seg6Local, RequestError> {
    let mut s = Seg6Local::default();
    let mut action = None;
    for a in attrs {
        match a {
            Seg6LocalAttr::Action(v) => action = Some(*v),
            Seg6LocalAttr::Srh(b) => s.srh = Some(b.to_vec()),
            Seg6LocalAttr::Table(v) => s.table = Some(*v),
            Seg6LocalAttr::Nh4(v) => s.nh4 = Some(*v),
            Seg6LocalAttr::Nh6(v) => s.nh6 = Some(*v),
            Seg6LocalAttr::Iif(v) => s.iif = Some(*v),
            Seg6LocalAttr::Oif(v) => s.oif = Some(*v),
            Seg6LocalAttr::Bpf(_) => s.bpf = true,
            Seg6LocalAttr::VrfTable(v) => s.vrftable = Some(*v),
            Seg6LocalAttr::Counters(n) => s.counters = Some(counters(&n.attrs)?),
            Seg6LocalAttr::Flavors(n) => s.flavors = Some(flavors(&n.attrs)?),
            // SEG6_LOCAL_* ends at 11: later numbers are ignored, as the kernel's lenient
            // parse ignores them.
            Seg6LocalAttr::Other(raw) if raw.number() <= 11 => return Err(policy()),
            Seg6LocalAttr::Other(_) => {}
        }
    }
    s.action = action.ok_or_else(bare)?;
    Ok(s)
}

/// parse_nla_counters: the three counters must all be there (their values are not read: a
/// behaviour's counters start at zero).
fn counters(attrs: &[CounterAttr<'_>]) -> Result<Counters, RequestError> {
    let has = |f: fn(&CounterAttr<'_>) -> bool| attrs.iter().any(f);
    if has(|a| matches!(a, CounterAttr::Packets(_)))
        && has(|a| matches!(a, CounterAttr::Bytes(_)))
        && has(|a| matches!(a, CounterAttr::Errors(_)))
    {
        Ok(Counters::default())
    } else {
        Err(bare())
    }
}

fn flavors(attrs: &[FlavorAttr<'_>]) -> Result<Flavors, RequestError> {
    let mut f = Flavors::default();
    for a in attrs {
        match a {
            FlavorAttr::Operation(v) => f.ops = Some(*v),
            FlavorAttr::LcblockBits(v) => f.lcblock_bits = Some(*v),
            FlavorAttr::LcnodeFnBits(v) => f.lcnode_fn_bits = Some(*v),
            FlavorAttr::Other(raw) if raw.number() <= 3 => return Err(policy()),
            FlavorAttr::Other(_) => {}
        }
    }
    Ok(f)
}

fn ioam6(attrs: &[Ioam6Attr<'_>]) -> Result<Ioam6, RequestError> {
    let mut s = Ioam6::default();
    for a in attrs {
        match a {
            Ioam6Attr::Mode(v) => s.mode = Some(*v),
            Ioam6Attr::Dst(v) => s.dst = Some(*v),
            Ioam6Attr::Trace(b) => s.trace = Some(b.to_vec()),
            Ioam6Attr::FreqK(v) => s.freq_k = Some(*v),
            Ioam6Attr::FreqN(v) => s.freq_n = Some(*v),
            Ioam6Attr::Other(raw) if raw.number() <= 5 => return Err(policy()),
            Ioam6Attr::Other(_) => {}
        }
    }
    Ok(s)
}

fn rpl(attrs: &[RplAttr<'_>]) -> Result<Rpl, RequestError> {
    attrs
        .iter()
        .find_map(|a| match a {
            RplAttr::Srh(b) => Some(Rpl { srh: b.to_vec() }),
            _ => None,
        })
        .ok_or_else(bare)
}

/// RTA_ENCAP and RTA_ENCAP_TYPE for a next hop's encapsulation, in that order (as
/// lwtunnel_fill_encap puts them).
pub(crate) fn attrs(e: &Encap) -> [RouteAttr<'_>; 2] {
    let (kind, inner) = wire(e);
    [RouteAttr::EncapOut(inner), RouteAttr::EncapType(kind)]
}

/// NHA_ENCAP and NHA_ENCAP_TYPE, in that order.
pub(crate) fn nexthop_attrs(e: &Encap) -> [NexthopAttr<'_>; 2] {
    let (kind, inner) = wire(e);
    [NexthopAttr::EncapOut(inner), NexthopAttr::EncapType(kind)]
}

/// The type and attributes of an encapsulation as the kernel's fill_encap functions give them.
fn wire(e: &Encap) -> (u16, lwt::Encap<'_>) {
    match e {
        Encap::Seg6(s) => (
            LWTUNNEL_ENCAP::SEG6,
            lwt::Encap::Seg6(vec![Seg6Attr::Srh(Seg6Tunnel {
                mode: s.mode,
                srh: &s.srh,
            })]),
        ),
        Encap::Seg6Local(s) => (
            LWTUNNEL_ENCAP::SEG6_LOCAL,
            lwt::Encap::Seg6Local(seg6local_attrs(s)),
        ),
        Encap::Ioam6(s) => (LWTUNNEL_ENCAP::IOAM6, lwt::Encap::Ioam6(ioam6_attrs(s))),
        Encap::Rpl(s) => (
            LWTUNNEL_ENCAP::RPL,
            lwt::Encap::Rpl(vec![RplAttr::Srh(&s.srh)]),
        ),
    }
}

/// seg6_local_fill_encap: the action, then each attribute the behaviour holds in attribute
/// order; the counters and flavors nests carry NLA_F_NESTED.
fn seg6local_attrs(s: &Seg6Local) -> Vec<Seg6LocalAttr<'_>> {
    let mut out = vec![Seg6LocalAttr::Action(s.action)];
    out.extend(s.srh.as_deref().map(Seg6LocalAttr::Srh));
    out.extend(s.table.map(Seg6LocalAttr::Table));
    out.extend(s.nh4.map(Seg6LocalAttr::Nh4));
    out.extend(s.nh6.map(Seg6LocalAttr::Nh6));
    out.extend(s.iif.map(Seg6LocalAttr::Iif));
    out.extend(s.oif.map(Seg6LocalAttr::Oif));
    if s.bpf {
        // The model keeps only that a program was given, not the program: an empty nest says
        // as much.
        out.push(Seg6LocalAttr::Bpf(NestedBytes {
            flagged: true,
            bytes: &[],
        }));
    }
    out.extend(s.vrftable.map(Seg6LocalAttr::VrfTable));
    if let Some(c) = s.counters {
        out.push(Seg6LocalAttr::Counters(flagged(vec![
            CounterAttr::Packets(c.packets),
            CounterAttr::Bytes(c.bytes),
            CounterAttr::Errors(c.errors),
        ])));
    }
    if let Some(f) = s.flavors {
        // Each attribute written when held, as read: the model requires the operations and
        // keeps the lengths only with NEXT-C-SID (what the kernel reports), while a request
        // carries what its sender gave.
        let mut attrs: Vec<FlavorAttr<'_>> = f.ops.map(FlavorAttr::Operation).into_iter().collect();
        attrs.extend(f.lcblock_bits.map(FlavorAttr::LcblockBits));
        attrs.extend(f.lcnode_fn_bits.map(FlavorAttr::LcnodeFnBits));
        out.push(Seg6LocalAttr::Flavors(flagged(attrs)));
    }
    out
}

/// A nest with NLA_F_NESTED (nla_nest_start).
fn flagged<A>(attrs: Vec<A>) -> Nest<A> {
    Nest {
        flagged: true,
        attrs,
    }
}

/// ioam6_fill_encap_info: frequency, mode, the tunnel destination outside inline mode, trace.
fn ioam6_attrs(s: &Ioam6) -> Vec<Ioam6Attr<'_>> {
    let mut out = Vec::with_capacity(5);
    out.extend(s.freq_k.map(Ioam6Attr::FreqK));
    out.extend(s.freq_n.map(Ioam6Attr::FreqN));
    out.extend(s.mode.map(Ioam6Attr::Mode));
    if s.mode != Some(ioam6_mode::INLINE) {
        out.extend(s.dst.map(Ioam6Attr::Dst));
    }
    out.extend(s.trace.as_deref().map(Ioam6Attr::Trace));
    out
}
