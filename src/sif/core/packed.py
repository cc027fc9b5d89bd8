"""Many byte strings (paths, digests) in one buffer: no Python object a string.

A scope of a million files held its paths and digests as one ``bytes`` object
each (about 100 and 80 bytes a file with their pointers); :class:`PackedBytes`
keeps them as one buffer and two offset arrays (about the bytes themselves plus
8), and makes a ``bytes`` value only for the item read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
U32 = npt.NDArray[np.uint32]


def same_items(seq: Sequence[Any], other: object) -> bool:
    """``seq == other`` for a sequence made on read: equal to any sequence (a list, a
    tuple) of equal items in order; ``NotImplemented`` for anything else."""
    if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
        return NotImplemented
    return len(seq) == len(other) and all(x == y for x, y in zip(seq, other, strict=True))


class PackedBytes(Sequence[bytes]):
    """A read-only sequence of byte strings: item ``i`` is ``data[start[i]:start[i] + size[i]]``.

    Indexing with an integer gives ``bytes``; with a slice, an integer array or
    a boolean mask, another :class:`PackedBytes` over the same buffer (no copy;
    pickling keeps only the bytes its items use). Items may share bytes (an
    archive member's file on disk is its path's prefix, a plain file's is its path).
    """

    __slots__ = ("data", "size", "start")

    def __init__(self, data: bytes | bytearray, start: I64, size: U32) -> None:
        self.data = data
        self.start = np.asarray(start, dtype=np.int64)
        self.size = np.asarray(size, dtype=np.uint32)

    @classmethod
    def of(cls, items: Iterable[bytes]) -> PackedBytes:
        """The byte strings of ``items`` packed (one Python step an item)."""
        items = list(items)
        size = np.fromiter(map(len, items), dtype=np.uint32, count=len(items))
        start = np.zeros(len(items), dtype=np.int64)
        if len(items) > 1:
            np.cumsum(size[:-1], out=start[1:])
        return cls(b"".join(items), start, size)

    def __len__(self) -> int:
        return len(self.start)

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice | npt.NDArray[Any]) -> PackedBytes: ...
    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, (int, np.integer)):
            s = int(self.start[i])  # IndexError out of range, negative from the end
            return bytes(self.data[s : s + int(self.size[i])])
        return PackedBytes(self.data, self.start[i], self.size[i])

    def __iter__(self) -> Iterator[bytes]:
        data = self.data
        for s, n in zip(self.start.tolist(), self.size.tolist(), strict=True):
            yield bytes(data[s : s + n])

    def __eq__(self, other: object) -> bool:
        return same_items(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<PackedBytes of {len(self):,}>"

    @property
    def nbytes(self) -> int:
        """The memory held: the buffer and both arrays."""
        return len(self.data) + self.start.nbytes + self.size.nbytes

    def compact(self, batch: int = 1 << 16) -> PackedBytes:
        """The same items in a buffer of their own (bytes shared by items are copied
        for each), made ``batch`` items at a time."""
        size = self.size.copy()
        start = np.zeros(len(size), dtype=np.int64)
        if len(size) > 1:
            np.cumsum(size[:-1], out=start[1:])
        data = bytearray(int(size.sum(dtype=np.int64)))
        pos = 0
        for lo in range(0, len(self), batch):
            joined = b"".join(self[lo : lo + batch])
            data[pos : pos + len(joined)] = joined
            pos += len(joined)
        return PackedBytes(data, start, size)

    def __getstate__(self) -> tuple[bytes, bytes, bytes]:
        used = int(self.size.sum(dtype=np.int64))
        packed = self if used >= len(self.data) else self.compact()
        return bytes(packed.data), packed.start.tobytes(), packed.size.tobytes()

    def __setstate__(self, state: tuple[bytes, bytes, bytes]) -> None:
        data, start, size = state
        self.data = data
        self.start = np.frombuffer(start, dtype=np.int64).copy()
        self.size = np.frombuffer(size, dtype=np.uint32).copy()


def packed(items: Sequence[Any] | PackedBytes) -> PackedBytes:
    """``items`` (byte strings, or objects ``bytes()`` accepts) as a :class:`PackedBytes`."""
    if isinstance(items, PackedBytes):
        return items
    return PackedBytes.of(bytes(x) for x in items)


class Labels(Sequence[str]):
    """A sequence of few distinct strings (kinds, content views): a code an item.

    Integer indexing gives the string; a slice, integer array or mask, another
    :class:`Labels` over the same strings.
    """

    __slots__ = ("code", "names")

    def __init__(self, names: Sequence[str], code: npt.NDArray[Any]) -> None:
        self.names = tuple(names)
        self.code = np.asarray(code, dtype=np.uint8 if len(self.names) <= 256 else np.int32)

    @classmethod
    def of(cls, items: Iterable[str]) -> Labels:
        names: dict[str, int] = {}
        code = [names.setdefault(str(x), len(names)) for x in items]
        return cls(list(names), np.asarray(code, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.code)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice | npt.NDArray[Any]) -> Labels: ...
    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, (int, np.integer)):
            return self.names[int(self.code[i])]
        return Labels(self.names, self.code[i])

    def __iter__(self) -> Iterator[str]:
        names = self.names
        return (names[c] for c in self.code.tolist())

    def __eq__(self, other: object) -> bool:
        return same_items(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<Labels of {len(self):,}: {', '.join(self.names)}>"

    @property
    def nbytes(self) -> int:
        return int(self.code.nbytes)


def labels(items: Sequence[Any] | Labels) -> Labels:
    """``items`` (strings) as :class:`Labels`."""
    return items if isinstance(items, Labels) else Labels.of(items)
