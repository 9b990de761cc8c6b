//! Prints every message of a raw netlink stream (a capture, an `ip monitor file` input) as the
//! codec decodes it:  cargo run -p fibre-netlink --example decode -- FILE
use fibre_netlink::Messages;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: decode FILE");
        std::process::exit(2);
    };
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    for item in Messages::new(&bytes) {
        match item {
            Ok((offset, msg)) => println!("@{offset} {msg:?}"),
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(1);
            }
        }
    }
}
