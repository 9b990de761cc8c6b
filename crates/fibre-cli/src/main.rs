//! `fibre`: see the library crate for what it does.

#![forbid(unsafe_code)]

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let status = fibre_cli::batch::main_with(&args, &mut stdout.lock(), &mut stderr.lock());
    std::process::exit(status);
}
