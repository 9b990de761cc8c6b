"""Reading and writing Ethernet captures without scapy, so the comparison also runs where scapy
is not installed.

Writes classic pcap (microsecond timestamps, LINKTYPE_ETHERNET). Reads classic pcap in either
byte order with microsecond or nanosecond timestamps, and pcapng (enhanced and simple packet
blocks of Ethernet interfaces, default microsecond resolution or the interface's `if_tsresol`).
A frame is `(seconds, bytes)` with `seconds` a float.
"""

from __future__ import annotations

import struct

LINKTYPE_ETHERNET = 1
SNAPLEN = 65535
_PCAP_US = 0xA1B2C3D4
_PCAP_NS = 0xA1B23C4D
_PCAPNG_SHB = 0x0A0D0D0A
_PCAPNG_BOM = 0x1A2B3C4D


def write(path: str, frames: list[tuple[float, bytes]]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", _PCAP_US, 2, 4, 0, 0, SNAPLEN, LINKTYPE_ETHERNET))
        for ts, data in frames:
            # Rounded, not truncated: timestamps are multiples of a millisecond and must come
            # back as written.
            usec_total = round(ts * 1_000_000)
            f.write(struct.pack("<IIII", usec_total // 1_000_000, usec_total % 1_000_000, len(data), len(data)))
            f.write(data)


def read(path: str) -> list[tuple[float, bytes]]:
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 24:
        raise ValueError(f"{path}: too short for a capture")
    (magic_le,) = struct.unpack_from("<I", blob)
    if magic_le == _PCAPNG_SHB:
        return _read_pcapng(path, blob)
    for endian in "<>":
        (magic,) = struct.unpack_from(endian + "I", blob)
        if magic in (_PCAP_US, _PCAP_NS):
            return _read_pcap(path, blob, endian, 1e-6 if magic == _PCAP_US else 1e-9)
    raise ValueError(f"{path}: neither pcap nor pcapng")


def _read_pcap(path: str, blob: bytes, endian: str, unit: float) -> list[tuple[float, bytes]]:
    linktype = struct.unpack_from(endian + "I", blob, 20)[0] & 0x0FFFFFFF
    if linktype != LINKTYPE_ETHERNET:
        raise ValueError(f"{path}: link type {linktype}, not Ethernet")
    out = []
    off = 24
    while off + 16 <= len(blob):
        sec, frac, incl, _orig = struct.unpack_from(endian + "IIII", blob, off)
        off += 16
        if off + incl > len(blob):
            raise ValueError(f"{path}: truncated record at byte {off - 16}")
        out.append((sec + frac * unit, blob[off:off + incl]))
        off += incl
    return out


def _read_pcapng(path: str, blob: bytes) -> list[tuple[float, bytes]]:
    out = []
    endian = "<"
    ifaces: list[float] = []  # seconds per timestamp unit, per interface
    off = 0
    while off + 12 <= len(blob):
        btype, blen = struct.unpack_from(endian + "II", blob, off)
        if btype == _PCAPNG_SHB:
            bom = blob[off + 8:off + 12]
            endian = "<" if struct.unpack("<I", bom)[0] == _PCAPNG_BOM else ">"
            btype, blen = struct.unpack_from(endian + "II", blob, off)
            ifaces = []
        if blen < 12 or off + blen > len(blob):
            raise ValueError(f"{path}: bad block at byte {off}")
        body = blob[off + 8:off + blen - 4]
        if btype == 1:  # interface description
            linktype = struct.unpack_from(endian + "H", body)[0]
            if linktype != LINKTYPE_ETHERNET:
                raise ValueError(f"{path}: interface {len(ifaces)} has link type {linktype}, not Ethernet")
            ifaces.append(_tsresol(body[8:], endian))
        elif btype == 6:  # enhanced packet
            iface, hi, lo, incl = struct.unpack_from(endian + "IIII", body)
            unit = ifaces[iface] if iface < len(ifaces) else 1e-6
            out.append((((hi << 32) | lo) * unit, body[20:20 + incl]))
        elif btype == 3:  # simple packet: no timestamp
            (orig,) = struct.unpack_from(endian + "I", body)
            out.append((0.0, body[4:4 + orig]))
        off += blen
    return out


def _tsresol(options: bytes, endian: str) -> float:
    off = 0
    while off + 4 <= len(options):
        code, length = struct.unpack_from(endian + "HH", options, off)
        if code == 0:
            break
        if code == 9 and length >= 1:  # if_tsresol
            v = options[off + 4]
            return 2.0 ** -(v & 0x7F) if v & 0x80 else 10.0 ** -v
        off += 4 + (length + 3) // 4 * 4
    return 1e-6
