//! The `idem` binary: everything it does is `idem::main`.

fn main() -> std::process::ExitCode {
    idem::main()
}
