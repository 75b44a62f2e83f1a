"""Reading a byte buffer the way Java's ``DataInputStream`` wrote it, for Flink's ``_metadata``.

Big-endian fixed-width integers, one-byte booleans, and ``writeUTF`` strings: an unsigned 16-bit
byte count followed by Java's *modified* UTF-8 (NUL as ``C0 80``, characters outside the BMP as
two three-byte surrogates). Every read checks the bounds first, so a truncated or foreign file
ends in one StorageError naming the file, the offset and what was being read, never in
``struct.error`` or ``IndexError``. No Java and no PyFlink here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cutcheck.model.errors import StorageError

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")


def java_utf(raw: bytes) -> str:
    """Decode Java's modified UTF-8 (what ``DataOutputStream.writeUTF`` writes)."""
    if raw.isascii():
        return raw.decode("ascii")
    units: list[int] = []  # UTF-16 code units, as Java holds the string
    i, n = 0, len(raw)
    while i < n:
        b = raw[i]
        if b < 0x80:
            units.append(b)
            i += 1
        elif b & 0xE0 == 0xC0 and i + 1 < n and raw[i + 1] & 0xC0 == 0x80:
            units.append(((b & 0x1F) << 6) | (raw[i + 1] & 0x3F))
            i += 2
        elif b & 0xF0 == 0xE0 and i + 2 < n and raw[i + 1] & 0xC0 == 0x80 and raw[i + 2] & 0xC0 == 0x80:
            units.append(((b & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F))
            i += 3
        else:
            raise ValueError(f"byte {b:#04x} at position {i} is not modified UTF-8")
    # Surrogate pairs become one character; a lone surrogate stays as it is (Java allows it).
    return struct.pack(f"<{len(units)}H", *units).decode("utf-16-le", "surrogatepass")


@dataclass(slots=True)
class JavaInput:
    """A cursor over the bytes of one file; ``source`` names the file in error messages."""

    data: bytes
    source: str
    pos: int = 0

    def _need(self, n: int, what: str) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.data):
            raise StorageError(f"{self.source}: truncated at byte {start} of {len(self.data)} while reading {what} "
                               f"({n} bytes needed); the file is incomplete or not Flink checkpoint metadata.")
        self.pos = start + n
        return start

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def u8(self, what: str) -> int:
        return self.data[self._need(1, what)]

    def boolean(self, what: str) -> bool:
        return self.u8(what) != 0

    def i32(self, what: str) -> int:
        return int(_I32.unpack_from(self.data, self._need(4, what))[0])

    def i64(self, what: str) -> int:
        return int(_I64.unpack_from(self.data, self._need(8, what))[0])

    def count(self, what: str, item_bytes: int = 1) -> int:
        """A non-negative element count that cannot exceed what is left of the file."""
        at = self.pos
        n = self.i32(what)
        if n < 0 or n * item_bytes > self.remaining():
            raise StorageError(f"{self.source}: byte {at} holds {n} as the number of {what}, which the "
                               f"{self.remaining()} remaining bytes cannot hold; the file is corrupt or not Flink checkpoint metadata.")
        return n

    def skip(self, n: int, what: str) -> None:
        self._need(n, what)

    def raw(self, n: int, what: str) -> bytes:
        start = self._need(n, what)
        return self.data[start:start + n]

    def utf(self, what: str) -> str:
        length = int(_U16.unpack_from(self.data, self._need(2, what))[0])
        start = self._need(length, what)
        try:
            return java_utf(self.data[start:start + length])
        except ValueError as exc:
            raise StorageError(f"{self.source}: the string at byte {start} ({what}) is not Java modified UTF-8 ({exc}).") from None
