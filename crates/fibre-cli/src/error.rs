//! How a command fails, in iproute2's two ways.
//!
//! iproute2 either returns an error code from the command (the batch prints "Command failed
//! FILE:LINE" and goes on with `-force`) or prints a message and calls `exit()` from deep inside
//! its parsers, which ends a batch at once with that status and no "Command failed" line.
//! [`CmdError`] keeps that distinction so `fibre -batch` stops exactly where `ip -batch` stops.

use fibre_fib::RtError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdError {
    /// The command returned `-status` to `do_cmd` after printing `msg` (may be empty).
    Fail { status: i32, msg: String },
    /// iproute2 printed `msg` and called `exit(status)`.
    Exit { status: i32, msg: String },
}

impl CmdError {
    pub fn fail(status: i32, msg: impl Into<String>) -> Self {
        CmdError::Fail {
            status,
            msg: msg.into(),
        }
    }

    pub fn exit(status: i32, msg: impl Into<String>) -> Self {
        CmdError::Exit {
            status,
            msg: msg.into(),
        }
    }

    /// `NEXT_ARG()` past the last word.
    pub fn incomplete() -> Self {
        CmdError::exit(255, "Command line is not complete. Try option \"help\"\n")
    }

    /// iproute2's `invarg(msg, arg)`. Many of its callers end `msg` with "\n", which gives the
    /// blank line iproute2 prints after such errors.
    pub fn invarg(msg: &str, arg: &str) -> Self {
        CmdError::exit(255, format!("Error: argument \"{arg}\" is wrong: {msg}\n"))
    }

    /// iproute2's `duparg2(key, arg)`.
    pub fn duparg2(key: &str, arg: &str) -> Self {
        CmdError::exit(
            255,
            format!("Error: either \"{key}\" is duplicate, or \"{arg}\" is a garbage.\n"),
        )
    }

    /// iproute2's `duparg(key, arg)`.
    pub fn duparg(key: &str, arg: &str) -> Self {
        CmdError::exit(
            255,
            format!("Error: duplicate \"{key}\": \"{arg}\" is the second value.\n"),
        )
    }

    /// iproute2's `nodev(dev)`.
    pub fn nodev(dev: &str) -> Self {
        CmdError::fail(1, format!("Cannot find device \"{dev}\"\n"))
    }

    /// A usage error: iproute2 prints the object's usage text and exits with 255.
    pub fn usage(text: &str) -> Self {
        CmdError::exit(255, text)
    }

    /// The text printed on stderr.
    pub fn message(&self) -> &str {
        match self {
            CmdError::Fail { msg, .. } | CmdError::Exit { msg, .. } => msg,
        }
    }

    /// The exit status of a single (non-batch) `fibre` run that ends with this error.
    pub fn status(&self) -> i32 {
        match self {
            CmdError::Fail { status, .. } | CmdError::Exit { status, .. } => *status,
        }
    }

    /// An error answer from the routing model, printed as `rtnl_talk` prints it: the extended
    /// ACK message when there is one (with a final period added if missing), else strerror.
    pub fn rtnl(e: &RtError) -> Self {
        CmdError::fail(2, rtnl_text(e))
    }
}

/// The text iproute2 prints for an rtnetlink error answer.
pub fn rtnl_text(e: &RtError) -> String {
    match &e.extack {
        Some(m) if !m.is_empty() => {
            if m.ends_with('.') {
                format!("Error: {m}\n")
            } else {
                format!("Error: {m}.\n")
            }
        }
        _ => format!("RTNETLINK answers: {}\n", e.errno.strerror()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fibre_fib::Errno;

    #[test]
    fn rtnl_errors_print_like_iproute2() {
        // From `ip route add 1.2.3.0/24 via 9.9.9.9` and `ip route del 1.2.3.0/24` (iproute2 6.1).
        let e = RtError::msg(Errno::EINVAL, "Nexthop has invalid gateway");
        assert_eq!(rtnl_text(&e), "Error: Nexthop has invalid gateway.\n");
        let e = RtError::new(Errno::ESRCH);
        assert_eq!(rtnl_text(&e), "RTNETLINK answers: No such process\n");
        let e = RtError::msg(Errno::EINVAL, "ipv4: FIB table does not exist.");
        assert_eq!(rtnl_text(&e), "Error: ipv4: FIB table does not exist.\n");
    }

    #[test]
    fn invarg_keeps_iproute2s_blank_line() {
        // From `ip route add 1.2.3.0/24 via 10.0.0.2 metric x`: status 255, then a blank line.
        let e = CmdError::invarg("\"metric\" value is invalid\n", "x");
        assert_eq!(
            e,
            CmdError::exit(
                255,
                "Error: argument \"x\" is wrong: \"metric\" value is invalid\n\n"
            )
        );
    }
}
