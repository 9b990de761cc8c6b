#[path = "../tests/common/rib.rs"]
mod rib;
fn main() {
    let rib = rib::load().unwrap();
    for _ in 0..4 {
        let mut t = fibre_lpm::v4::Lpm4::new();
        for &(p, l, v) in &rib.v4 { t.insert(p, l, v).unwrap(); }
        std::hint::black_box(&t);
    }
}
