fn main() {
    eprintln!("fibre: not built yet");
    std::process::exit(1);
}
