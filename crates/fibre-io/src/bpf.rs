//! The XDP program that steers an interface's frames into AF_XDP sockets, written as eBPF
//! bytecode here and loaded with bpf(2), so fibre needs no compiler for BPF at build or run
//! time; and the XSKMAP it reads.
//!
//! The program (the logic of libxdp's default `xsk_def_prog`, as Firedancer's
//! `fd_xdp_gen_program` also emits it):
//!
//! ```text
//! r2 = *(u32 *)(r1 + 16)        ; ctx->rx_queue_index
//! r1 = map_fd XSKMAP            ; ld_imm64 with src_reg BPF_PSEUDO_MAP_FD
//! r3 = XDP_PASS                 ; what bpf_redirect_map returns when the slot is empty
//! call bpf_redirect_map
//! exit
//! ```
//!
//! A frame that arrives on a queue with a socket in the map goes to that socket; any other
//! frame goes on to the kernel's stack. The flags argument of `bpf_redirect_map` as the
//! fallback action needs Linux 5.3; attaching by BPF_LINK_CREATE needs 5.9.
//!
//! Ownership: [`XskMap`], [`Program`] and [`Link`] own their descriptors; closing the link's
//! descriptor detaches the program (it is never pinned), so a port that drops or fails to
//! open leaves no program on the interface.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// One eBPF instruction as the kernel reads it (`struct bpf_insn`): opcode, the destination
/// register in the low nibble and the source register in the high one, offset, immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src << 4) | (dst & 0x0F),
            off,
            imm,
        }
    }

    /// The 8 bytes the kernel reads, in this machine's byte order.
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = self.regs;
        b[2..4].copy_from_slice(&self.off.to_ne_bytes());
        b[4..8].copy_from_slice(&self.imm.to_ne_bytes());
        b
    }
}

// Opcode parts (include/uapi/linux/bpf_common.h, bpf.h).
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;
const BPF_W: u8 = 0x00;
const BPF_DW: u8 = 0x18;
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
const BPF_K: u8 = 0x00;
const BPF_MOV: u8 = 0xB0;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;
/// ld_imm64's source register when the immediate is a map's descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// Helper number of `bpf_redirect_map`.
const FUNC_REDIRECT_MAP: i32 = 51;
/// `XDP_PASS` as an XDP program's verdict.
const XDP_PASS: i32 = 2;
/// Offset of `rx_queue_index` in `struct xdp_md`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// The redirect program for the XSKMAP whose descriptor is `map_fd`.
pub fn redirect_program(map_fd: i32) -> [Insn; 6] {
    [
        Insn::new(BPF_LDX | BPF_MEM | BPF_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        Insn::new(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        // ld_imm64's second half: the upper 32 bits of the immediate, zero for a descriptor.
        Insn::new(0, 0, 0, 0, 0),
        Insn::new(BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, XDP_PASS),
        Insn::new(BPF_JMP | BPF_CALL, 0, 0, 0, FUNC_REDIRECT_MAP),
        Insn::new(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
    ]
}

// bpf(2) commands, map and program types, the XDP attach type and its flags
// (include/uapi/linux/bpf.h, if_link.h).
const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_UPDATE_ELEM: i32 = 2;
const BPF_PROG_LOAD: i32 = 5;
const BPF_LINK_CREATE: i32 = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The program's license string; `bpf_redirect_map` is not restricted to GPL programs.
const LICENSE: &std::ffi::CStr = c"MIT";

fn bpf<T>(cmd: i32, attr: &mut T) -> io::Result<i64> {
    // SAFETY: `attr` is a `repr(C)` prefix of `union bpf_attr` for `cmd`, valid for reads and
    // writes of its size for the whole call; the kernel reads no more than the size given,
    // and what it points to (instructions, keys, the log) outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A command that returns a new descriptor (map and program creation, links).
fn bpf_fd<T>(cmd: i32, attr: &mut T) -> io::Result<OwnedFd> {
    let r = bpf(cmd, attr)?;
    let fd = i32::try_from(r).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: for these commands a non-negative result is a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[repr(C)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

#[repr(C)]
struct MapUpdate {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// An XSKMAP: queue index to AF_XDP socket.
pub struct XskMap(OwnedFd);

impl XskMap {
    /// A map with room for queues `0..queues`.
    pub fn new(queues: u32) -> io::Result<XskMap> {
        let mut attr = MapCreate {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: queues,
            map_flags: 0,
        };
        bpf_fd(BPF_MAP_CREATE, &mut attr).map(XskMap)
    }

    /// Sends queue `queue`'s frames to the AF_XDP socket `xsk` (bound to that queue).
    pub fn insert(&self, queue: u32, xsk: &impl AsRawFd) -> io::Result<()> {
        let key = queue;
        let value = xsk.as_raw_fd() as u32;
        let mut attr = MapUpdate {
            map_fd: self.0.as_raw_fd() as u32,
            pad: 0,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: 0,
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
    }
}

/// A loaded redirect program.
pub struct Program(OwnedFd);

impl Program {
    /// Loads [`redirect_program`] for `map`. On refusal the error carries the verifier's log.
    pub fn load(map: &XskMap) -> io::Result<Program> {
        let insns = redirect_program(map.0.as_raw_fd());
        let mut log = [0u8; 4096];
        let mut name = [0u8; 16];
        name[..10].copy_from_slice(b"fibre_xsks");
        let mut attr = ProgLoad {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: LICENSE.as_ptr() as u64,
            log_level: 1,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr() as u64,
            kern_version: 0,
            prog_flags: 0,
            prog_name: name,
            prog_ifindex: 0,
            expected_attach_type: BPF_XDP,
        };
        bpf_fd(BPF_PROG_LOAD, &mut attr).map(Program).map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            io::Error::new(e.kind(), format!("{e}: {}", text.trim()))
        })
    }
}

/// Where the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// In the driver (native XDP), else generic if the driver has none.
    Auto,
    Native,
    /// Generic (SKB) XDP: every driver, after the kernel has built its socket buffer.
    Generic,
}

/// The program attached to an interface; detached when dropped.
pub struct Link {
    _fd: OwnedFd,
    /// Whether it runs in the driver (native) rather than generic.
    pub native: bool,
}

impl Link {
    /// Attaches `prog` to interface `ifindex` in `mode`.
    pub fn attach(prog: &Program, ifindex: u32, mode: Mode) -> io::Result<Link> {
        let create = |flags| {
            let mut attr = LinkCreate {
                prog_fd: prog.0.as_raw_fd() as u32,
                target_ifindex: ifindex,
                attach_type: BPF_XDP,
                flags,
            };
            bpf_fd(BPF_LINK_CREATE, &mut attr)
        };
        match mode {
            Mode::Native => create(XDP_FLAGS_DRV_MODE).map(|fd| Link {
                _fd: fd,
                native: true,
            }),
            Mode::Generic => create(XDP_FLAGS_SKB_MODE).map(|fd| Link {
                _fd: fd,
                native: false,
            }),
            Mode::Auto => match create(XDP_FLAGS_DRV_MODE) {
                Ok(fd) => Ok(Link {
                    _fd: fd,
                    native: true,
                }),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) => {
                    create(XDP_FLAGS_SKB_MODE).map(|fd| Link {
                        _fd: fd,
                        native: false,
                    })
                }
                Err(e) => Err(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding() {
        let bytes: Vec<[u8; 8]> = redirect_program(7).iter().map(|i| i.to_bytes()).collect();
        let imm = |v: i32| v.to_ne_bytes();
        let off = |v: i16| v.to_ne_bytes();
        // r2 = *(u32 *)(r1 + 16): LDX|MEM|W, dst 2, src 1.
        assert_eq!(bytes[0][..2], [0x61, 0x12]);
        assert_eq!(bytes[0][2..4], off(16));
        // r1 = map fd 7: LD|DW|IMM, dst 1, src BPF_PSEUDO_MAP_FD; then the zero upper half.
        assert_eq!(bytes[1][..2], [0x18, 0x11]);
        assert_eq!(bytes[1][4..], imm(7));
        assert_eq!(bytes[2], [0; 8]);
        // r3 = 2 (XDP_PASS): ALU64|MOV|K, dst 3.
        assert_eq!(bytes[3][..2], [0xB7, 0x03]);
        assert_eq!(bytes[3][4..], imm(2));
        // call 51 (bpf_redirect_map); exit.
        assert_eq!(bytes[4][..2], [0x85, 0x00]);
        assert_eq!(bytes[4][4..], imm(51));
        assert_eq!(bytes[5], [0x95, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn insn_layout_matches_the_kernel() {
        assert_eq!(size_of::<Insn>(), 8);
        let i = Insn::new(0x61, 2, 1, -1, -2);
        assert_eq!(i.to_bytes()[1], 0x12);
        assert_eq!(i.to_bytes()[2..4], (-1i16).to_ne_bytes());
    }
}
