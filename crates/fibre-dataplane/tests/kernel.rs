//! The stages against what Linux 6.18 sent for the same frames (`tests/kernel/*.txt`,
//! recorded by `tests/kernel/record.py` from a router in a network namespace): every byte
//! from the IP header on must agree. The two values the kernel draws from its keyed hashes,
//! the IPv4 ID and the IPv6 flow label of what it originates, are read from its frames and
//! passed to the builders (see `icmp`'s module comment); the link-layer headers are the
//! rewrite stage's, not compared here.

use std::net::{Ipv4Addr, Ipv6Addr};

use fibre_dataplane::drop::{Discard, DropReason};
use fibre_dataplane::forward::{
    compile_options, forward_options_v4, forward_v4, forward_v6, Forwarded, Ipv4Options, V4Route,
    V6Route,
};
use fibre_dataplane::frag::fragment_v4;
use fibre_dataplane::icmp::{
    build_error_v4, build_error_v6, echo_reply_v4, echo_reply_v6, eligible_v4, eligible_v6,
    Icmp4Error, Icmp6Error, IcmpError, NotSent, V4Reply, V6Reply, MAX_ERROR_V4_LEN,
    MAX_ERROR_V6_LEN,
};
use fibre_dataplane::ratelimit::{Global, RateLimiter, Settings};
use fibre_dataplane::rx::{receive, L2Class, Meta, Rx};
use fibre_packet::{Headroom, Pool, PoolConfig};
use fibre_wire::ethernet::Address;

/// r0, the router's link towards the sender.
const R0: Address = Address([2, 0, 0, 0, 0, 2]);
const R0_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const R1_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const R0_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
/// r1's MTU; r0's is 1500.
const R1_MTU: u32 = 1400;

struct Case {
    /// The first frame sent; bursts have more in `burst`.
    input: Vec<u8>,
    burst: usize,
    /// Frames captured on the sender's link (s) and the destination's (d).
    s: Vec<Vec<u8>>,
    d: Vec<Vec<u8>>,
}

fn case(text: &str) -> Case {
    let mut c = Case {
        input: Vec::new(),
        burst: 0,
        s: Vec::new(),
        d: Vec::new(),
    };
    for line in text.lines() {
        let (who, hex) = line.split_once(' ').unwrap();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        match who {
            "in" => {
                c.burst += 1;
                if c.input.is_empty() {
                    c.input = bytes;
                }
            }
            "s" => c.s.push(bytes),
            "d" => c.d.push(bytes),
            _ => panic!("{who}"),
        }
    }
    c
}

/// The received IP packet, as the stages see it after the receive checks.
fn ip_of(c: &Case) -> (Meta, Vec<u8>) {
    let Ok(Rx::Ip(m)) = receive(&c.input, R0) else {
        panic!("not received")
    };
    (
        m,
        c.input[usize::from(m.l3)..usize::from(m.frame_len)].to_vec(),
    )
}

/// The IPv4 ID of a frame the kernel originated.
fn ident(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[18], frame[19]])
}

/// The IPv6 flow label of a frame the kernel originated.
fn flow_label(frame: &[u8]) -> u32 {
    u32::from_be_bytes([frame[14], frame[15], frame[16], frame[17]]) & 0xF_FFFF
}

fn icmp4_error(c: &Case, reason: DropReason, want: Icmp4Error) {
    let (m, mut ip) = ip_of(c);
    let d = forward_v4(&mut ip, m.l2, &V4Route { mtu: R1_MTU }).unwrap_err();
    assert_eq!(d, Discard::with_icmp(reason, IcmpError::V4(want)));
    eligible_v4(&ip, m.l2, false).unwrap();
    let [kernel] = &c.s[..] else {
        panic!("{} frames", c.s.len())
    };
    let reply = V4Reply {
        src: R0_V4,
        ident: ident(kernel),
        mtu: 1500,
        options: Ipv4Options::default(),
        now_ms: 0,
    };
    let mut out = [0u8; MAX_ERROR_V4_LEN];
    let n = build_error_v4(want, &ip, &reply, &mut out).unwrap();
    assert_eq!(&out[..n], &kernel[14..]);
}

/// Time exceeded for a packet with options, read on receive at `now_ms` (the kernel's stamp,
/// from its frame) as the router does before it forwards.
fn time_exceeded_with_options(c: &Case, now_ms: u32) {
    let (m, mut ip) = ip_of(c);
    let options = compile_options(&mut ip, R0_V4, now_ms, |a| a == R0_V4 || a == R1_V4).unwrap();
    let d = forward_v4(&mut ip, m.l2, &V4Route { mtu: R1_MTU }).unwrap_err();
    let Some(IcmpError::V4(e)) = d.icmp else {
        panic!("{d:?}")
    };
    eligible_v4(&ip, m.l2, false).unwrap();
    let kernel = &c.s[0];
    let reply = V4Reply {
        src: R0_V4,
        ident: ident(kernel),
        mtu: 1500,
        options,
        now_ms,
    };
    let mut out = [0u8; MAX_ERROR_V4_LEN];
    let n = build_error_v4(e, &ip, &reply, &mut out).unwrap();
    assert_eq!(&out[..n], &kernel[14..]);
}

#[test]
fn errors_echo_record_route() {
    time_exceeded_with_options(&case(include_str!("kernel/ttl1_options.txt")), 0);
    time_exceeded_with_options(&case(include_str!("kernel/ttl1_rr_full.txt")), 0);
}

#[test]
fn errors_echo_timestamps_with_a_second_stamp() {
    let c = case(include_str!("kernel/ttl1_timestamp.txt"));
    // The reply's timestamp option: both stamps, taken in the same millisecond.
    let stamp = &c.s[0][14 + 20 + 8..14 + 20 + 12];
    assert_eq!(stamp, &c.s[0][14 + 20 + 16..14 + 20 + 20]);
    time_exceeded_with_options(&c, u32::from_be_bytes(stamp.try_into().unwrap()));
}

#[test]
fn redirect_quotes_the_forwarded_packet() {
    let c = case(include_str!("kernel/redirect.txt"));
    let (m, mut ip) = ip_of(&c);
    assert_eq!(
        forward_v4(&mut ip, m.l2, &V4Route { mtu: 1500 }),
        Ok(Forwarded { fragment: false })
    );
    eligible_v4(&ip, m.l2, false).unwrap();
    let [redirect, forwarded] = &c.s[..] else {
        panic!("{} frames", c.s.len())
    };
    let reply = V4Reply {
        src: R0_V4,
        ident: ident(redirect),
        mtu: 1500,
        options: Ipv4Options::default(),
        now_ms: 0,
    };
    let gateway = Ipv4Addr::new(10, 0, 0, 3);
    let mut out = [0u8; MAX_ERROR_V4_LEN];
    let n = build_error_v4(Icmp4Error::RedirectHost { gateway }, &ip, &reply, &mut out).unwrap();
    assert_eq!(&out[..n], &redirect[14..]);
    assert_eq!(ip, &forwarded[14..]);
}

#[test]
fn time_exceeded() {
    icmp4_error(
        &case(include_str!("kernel/ttl1.txt")),
        DropReason::IpInhdr,
        Icmp4Error::TimeExceeded,
    );
}

#[test]
fn fragmentation_needed() {
    icmp4_error(
        &case(include_str!("kernel/df_too_big.txt")),
        DropReason::PktTooBig,
        Icmp4Error::FragNeeded { mtu: R1_MTU },
    );
}

#[test]
fn small_packets_are_quoted_whole() {
    icmp4_error(
        &case(include_str!("kernel/ttl1_small.txt")),
        DropReason::IpInhdr,
        Icmp4Error::TimeExceeded,
    );
}

#[test]
fn the_ttl_before_the_mtu() {
    icmp4_error(
        &case(include_str!("kernel/ttl1_df_too_big.txt")),
        DropReason::IpInhdr,
        Icmp4Error::TimeExceeded,
    );
}

#[test]
fn no_error_about_a_later_fragment() {
    let c = case(include_str!("kernel/ttl1_later_fragment.txt"));
    assert!(c.s.is_empty() && c.d.is_empty());
    let (m, mut ip) = ip_of(&c);
    assert!(m.later_fragment);
    forward_v4(&mut ip, m.l2, &V4Route { mtu: R1_MTU }).unwrap_err();
    assert_eq!(eligible_v4(&ip, m.l2, false), Err(NotSent::LaterFragment));
}

#[test]
fn unicast_in_a_broadcast_frame_is_dropped_silently() {
    let c = case(include_str!("kernel/l2_broadcast_ttl1.txt"));
    assert!(c.s.is_empty() && c.d.is_empty());
    let (m, mut ip) = ip_of(&c);
    assert_eq!(
        forward_v4(&mut ip, m.l2, &V4Route { mtu: R1_MTU }),
        Err(Discard::from(DropReason::NotSpecified))
    );
}

#[test]
fn malformed_options_get_a_parameter_problem() {
    let c = case(include_str!("kernel/bad_option.txt"));
    let (m, mut ip) = ip_of(&c);
    let e = compile_options(&mut ip, R0_V4, 0, |a| a == R0_V4).unwrap_err();
    let want = Icmp4Error::ParamProblem { pointer: 22 };
    assert_eq!(
        e.discard,
        Discard::with_icmp(DropReason::IpInhdr, IcmpError::V4(want))
    );
    eligible_v4(&ip, m.l2, false).unwrap();
    let reply = V4Reply {
        options: e.options,
        ..echo_reply_from(&c)
    };
    let mut out = [0u8; MAX_ERROR_V4_LEN];
    let n = build_error_v4(want, &ip, &reply, &mut out).unwrap();
    assert_eq!(&out[..n], &c.s[0][14..]);
}

#[test]
fn link_padding_is_trimmed() {
    let c = case(include_str!("kernel/fwd4_padded.txt"));
    let (m, mut ip) = ip_of(&c);
    assert_eq!(usize::from(m.frame_len) + 20, c.input.len());
    forward_v4(&mut ip, m.l2, &V4Route { mtu: R1_MTU }).unwrap();
    assert_eq!(ip, &c.d[0][14..]);
}

#[test]
fn no_error_about_an_error() {
    let c = case(include_str!("kernel/ttl1_icmp_error.txt"));
    assert!(c.s.is_empty() && c.d.is_empty());
    let (m, ip) = ip_of(&c);
    assert_eq!(eligible_v4(&ip, m.l2, false), Err(NotSent::AboutError));
}

#[test]
fn forwarded_with_the_ttl_decremented() {
    let c = case(include_str!("kernel/fwd4.txt"));
    let (m, mut ip) = ip_of(&c);
    assert_eq!(
        forward_v4(&mut ip, m.l2, &V4Route { mtu: R1_MTU }),
        Ok(Forwarded { fragment: false })
    );
    assert_eq!(ip, &c.d[0][14..]);
}

#[test]
fn fragmented_with_the_route_recorded() {
    let c = case(include_str!("kernel/frag_rr.txt"));
    let (m, mut ip) = ip_of(&c);
    assert!(m.options);
    let opts = compile_options(&mut ip, R0_V4, 0, |a| a == R0_V4 || a == R1_V4).unwrap();
    let route = V4Route { mtu: R1_MTU };
    assert_eq!(
        forward_v4(&mut ip, m.l2, &route),
        Ok(Forwarded { fragment: true })
    );
    forward_options_v4(&mut ip, &opts, R1_V4);
    let mut pool = Pool::new(PoolConfig {
        frames: 8,
        frame_size: 2048,
        large_frames: 0,
        large_frame_size: 2048,
        headroom: Headroom::default(),
    })
    .unwrap();
    let mut b = pool.alloc().unwrap();
    b.append(&mut pool, ip.len()).unwrap().copy_from_slice(&ip);
    let mut frags = Vec::new();
    fragment_v4(&mut pool, b, 0, route.mtu, |pool, f| {
        frags.push(f.data(pool).to_vec());
        pool.free(f);
    })
    .unwrap();
    let kernel: Vec<_> = c.d.iter().map(|f| f[14..].to_vec()).collect();
    assert_eq!(frags, kernel);
}

/// The reply values for an echo from r0's address, the ID from the kernel's reply.
fn echo_reply_from(c: &Case) -> V4Reply {
    V4Reply {
        src: R0_V4,
        ident: ident(&c.s[0]),
        mtu: 1500,
        options: Ipv4Options::default(),
        now_ms: 0,
    }
}

#[test]
fn echo_reply_records_the_route() {
    let c = case(include_str!("kernel/echo4_rr.txt"));
    let (_, mut ip) = ip_of(&c);
    let options = compile_options(&mut ip, R0_V4, 0, |a| a == R0_V4).unwrap();
    let reply = V4Reply {
        options,
        ..echo_reply_from(&c)
    };
    let mut out = [0u8; 1500];
    let n = echo_reply_v4(&ip, false, &reply, &mut out).unwrap();
    assert_eq!(&out[..n], &c.s[0][14..]);
}

#[test]
fn echo_reply() {
    let c = case(include_str!("kernel/echo4.txt"));
    let (_, ip) = ip_of(&c);
    let mut out = [0u8; 1500];
    let n = echo_reply_v4(&ip, false, &echo_reply_from(&c), &mut out).unwrap();
    assert_eq!(&out[..n], &c.s[0][14..]);
}

fn icmp6_error(c: &Case, want: Icmp6Error) {
    let (m, mut ip) = ip_of(c);
    let route = V6Route {
        mtu: R1_MTU,
        same_link: false,
    };
    let d = forward_v6(&mut ip, m.l2, &route).unwrap_err();
    assert_eq!(d.icmp, Some(IcmpError::V6(want)));
    reply_v6(c, &ip, m.l2, want);
}

/// Builds the ICMPv6 error `want` about `ip` and compares it with the kernel's, whose source
/// address (the caller's choice) is taken from its frame.
fn reply_v6(c: &Case, ip: &[u8], l2: L2Class, want: Icmp6Error) {
    eligible_v6(want, ip, l2).unwrap();
    let [kernel] = &c.s[..] else {
        panic!("{} frames", c.s.len())
    };
    let src: [u8; 16] = kernel[22..38].try_into().unwrap();
    let reply = V6Reply {
        src: Ipv6Addr::from(src),
        flow_label: flow_label(kernel),
    };
    let mut out = [0u8; MAX_ERROR_V6_LEN];
    let n = build_error_v6(want, ip, &reply, &mut out).unwrap();
    assert_eq!(&out[..n], &kernel[14..]);
}

#[test]
fn hop_limit_exceeded() {
    icmp6_error(
        &case(include_str!("kernel/hlim1.txt")),
        Icmp6Error::HopLimitExceeded,
    );
}

#[test]
fn packet_too_big() {
    icmp6_error(
        &case(include_str!("kernel/ptb6.txt")),
        Icmp6Error::PacketTooBig { mtu: R1_MTU },
    );
}

#[test]
fn link_local_sources_stay_on_their_link() {
    icmp6_error(
        &case(include_str!("kernel/linklocal6.txt")),
        Icmp6Error::BeyondScope,
    );
}

#[test]
fn unknown_hop_by_hop_option() {
    let c = case(include_str!("kernel/hbh_unknown.txt"));
    let d = receive(&c.input, R0).unwrap_err();
    let want = Icmp6Error::ParamProblem {
        code: 2,
        pointer: 42,
    };
    assert_eq!(
        d,
        Discard::with_icmp(DropReason::UnhandledProto, IcmpError::V6(want))
    );
    // The receive checks refused it: the error quotes the packet as it came.
    reply_v6(&c, &c.input[14..], L2Class::Host, want);
}

#[test]
fn hop_by_hop_router_alert_is_forwarded() {
    let c = case(include_str!("kernel/hbh_router_alert.txt"));
    let (m, mut ip) = ip_of(&c);
    assert!(m.router_alert && m.proto == 17 && m.dport == 2000);
    let route = V6Route {
        mtu: R1_MTU,
        same_link: false,
    };
    forward_v6(&mut ip, m.l2, &route).unwrap();
    assert_eq!(ip, &c.d[0][14..]);
}

#[test]
fn jumbo_option_with_a_payload_length() {
    let c = case(include_str!("kernel/hbh_jumbo.txt"));
    let want = Icmp6Error::ParamProblem {
        code: 0,
        pointer: 42,
    };
    assert_eq!(
        receive(&c.input, R0).unwrap_err(),
        Discard::with_icmp(DropReason::IpInhdr, IcmpError::V6(want))
    );
    reply_v6(&c, &c.input[14..], L2Class::Host, want);
}

#[test]
fn silent_ipv6_drops() {
    let padn = case(include_str!("kernel/hbh_padn_nonzero.txt"));
    assert_eq!(
        receive(&padn.input, R0),
        Err(Discard::from(DropReason::IpInhdr))
    );
    let route = V6Route {
        mtu: R1_MTU,
        same_link: false,
    };
    let mcast = case(include_str!("kernel/l2_multicast_hlim1.txt"));
    let (m, mut ip) = ip_of(&mcast);
    assert_eq!(
        forward_v6(&mut ip, m.l2, &route),
        Err(Discard::from(DropReason::NotSpecified))
    );
    let about_error = case(include_str!("kernel/hlim1_icmp6_error.txt"));
    let (m, mut ip) = ip_of(&about_error);
    let d = forward_v6(&mut ip, m.l2, &route).unwrap_err();
    let Some(IcmpError::V6(e)) = d.icmp else {
        panic!("{d:?}")
    };
    assert_eq!(eligible_v6(e, &ip, m.l2), Err(NotSent::AboutError));
    for c in [padn, mcast, about_error] {
        assert!(c.s.is_empty() && c.d.is_empty());
    }
}

#[test]
fn echo_reply_keeps_the_code() {
    let c = case(include_str!("kernel/echo4_code5.txt"));
    let (_, ip) = ip_of(&c);
    let mut out = [0u8; 1500];
    let n = echo_reply_v4(&ip, false, &echo_reply_from(&c), &mut out).unwrap();
    assert_eq!(&out[..n], &c.s[0][14..]);
}

#[test]
fn echo_reply_v6_from_the_requested_address() {
    let c = case(include_str!("kernel/echo6.txt"));
    let (m, ip) = ip_of(&c);
    let l4 = usize::from(m.l4 - m.l3);
    let mut out = [0u8; 1500];
    let n = echo_reply_v6(&ip, l4, R0_V6, flow_label(&c.s[0]), &mut out).unwrap();
    assert_eq!(&out[..n], &c.s[0][14..]);
}

/// How many of `n` errors sent at one instant to the sender `dst` the limits let out; each
/// consumes one global credit (the kernel draws 0 to 2). `route_error` adds `ip_error`'s
/// bucket in front, as for reject routes.
fn burst(n: usize, dst: Ipv4Addr, msg_type: u8, code: u8, route_error: bool) -> usize {
    let mut r = RateLimiter::new(Settings::default(), 16);
    (0..n)
        .filter(|_| {
            if route_error && !r.route_error_v4(dst, 0) {
                return false;
            }
            match r.global_v4(msg_type, code, 0) {
                Global::Denied => false,
                Global::Allowed { apply_peer_limit } => r.peer_v4(dst, apply_peer_limit, 1, 0),
            }
        })
        .count()
}

#[test]
fn a_burst_gets_six_errors() {
    let c = case(include_str!("kernel/ttl1_burst.txt"));
    let src = Ipv4Addr::new(10, 0, 0, 20);
    assert_eq!(c.s.len(), burst(c.burst, src, 11, 0, false));
    assert_eq!((c.burst, c.s.len()), (10, 6));
}

#[test]
fn a_burst_to_an_unreachable_route_gets_two() {
    let c = case(include_str!("kernel/unreachable_burst.txt"));
    let src = Ipv4Addr::new(10, 0, 0, 21);
    assert_eq!(c.s.len(), burst(c.burst, src, 3, 1, true));
    assert_eq!((c.burst, c.s.len()), (10, 2));
    // Host unreachable, quoting the packet.
    let (m, ip) = ip_of(&c);
    eligible_v4(&ip, m.l2, false).unwrap();
    let reply = echo_reply_from(&c);
    let mut out = [0u8; MAX_ERROR_V4_LEN];
    let n = build_error_v4(Icmp4Error::HostUnreachable, &ip, &reply, &mut out).unwrap();
    assert_eq!(&out[..n], &c.s[0][14..]);
}
