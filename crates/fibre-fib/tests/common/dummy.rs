//! A dummy link, set up, for tests that need a device to route through. A test binary
//! includes it with `#[path = "common/dummy.rs"] mod dummy;`.

use fibre_fib::*;

/// Adds the dummy link `name` to `f`, sets it up and returns its index.
pub fn dummy_up(f: &mut Fib, name: &str) -> u32 {
    let link = Link {
        ifname: Some(name.into()),
        kind: Some(LinkKind::Dummy),
        ..Default::default()
    };
    f.link_new(&link, ReqFlags::ADD).unwrap();
    let index = f.link_index(name).unwrap();
    let up = Link {
        ifindex: index,
        flags: iff::UP,
        change: iff::UP,
        ..Default::default()
    };
    f.link_new(&up, ReqFlags::NONE).unwrap();
    index
}
