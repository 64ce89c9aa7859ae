"""CRC-32 of Unitree's low-level messages (``LowCmd_`` / ``LowState_``), computed in numpy.

The robot checks a CRC on every ``rt/lowcmd`` and stamps one on every ``rt/lowstate``
(Unitree SDK ``utils/crc.py``; facts in docs/hardware.md). The algorithm: CRC-32, polynomial
``0x04C11DB7``, initial register ``0xFFFFFFFF``, no reflection, no final XOR, fed one 32-bit
little-endian word at a time, most significant bit first; for each of the 32 bits the register is
shifted left, XOR-ed with the polynomial if its top bit was set before the shift, and XOR-ed with
the polynomial again if the current data bit is set. The message is packed in the SDK's fixed
layout (:mod:`contactflow.hardware.unitree_msgs`) and every word except the last (the ``crc``
field) is fed.

The per-word update is linear over GF(2) in (register, word): ``u(c, w) = R(c) ^ W(w)``. So the
CRC of ``N`` words is ``R^N(0xFFFFFFFF) ^ XOR_i R^(N-1-i)(W(w_i))``: :class:`FixedLengthCrc`
precomputes, for one message length, a 256-entry table per word position and byte (from the
bitwise definition, :func:`crc32_word_bitwise`) and computes a CRC as one numpy gather and XOR
reduction (about 20 us for a ``LowState_`` instead of ~300 us word by word in Python).
"""

from __future__ import annotations

import numpy as np

from contactflow.errors import ContractError

__all__ = ["POLY", "crc32_word_bitwise", "crc32_words", "crc32_bytes", "FixedLengthCrc"]

POLY = 0x04C11DB7
_MASK = 0xFFFFFFFF


def crc32_word_bitwise(crc: int, word: int) -> int:
    """One word of the algorithm, bit by bit (the definition; slow, for tables and tests).

    Args:
        crc: the register (32-bit). word: the data word (32-bit).

    Returns:
        The register after the word.
    """
    for bit in range(31, -1, -1):
        top = crc & 0x80000000
        crc = (crc << 1) & _MASK
        if top:
            crc ^= POLY
        if (word >> bit) & 1:
            crc ^= POLY
    return crc


def _tables() -> tuple[list[list[int]], list[list[int]]]:
    # linearity: update(c, w) = update(c, 0) ^ update(0, w); each is XOR-linear in the bytes
    reg = [[crc32_word_bitwise(b << (8 * k), 0) for b in range(256)] for k in range(4)]
    word = [[crc32_word_bitwise(0, b << (8 * k)) for b in range(256)] for k in range(4)]
    return reg, word


_REG, _WORD = _tables()


def crc32_words(words) -> int:
    """CRC of a sequence of 32-bit words (e.g. ``np.frombuffer(buf, '<u4')[:-1]``).

    Returns:
        The 32-bit CRC (int).
    """
    r0, r1, r2, r3 = _REG
    w0, w1, w2, w3 = _WORD
    crc = _MASK
    for w in np.asarray(words, dtype=np.uint32).tolist():
        crc = (r0[crc & 0xFF] ^ r1[(crc >> 8) & 0xFF] ^ r2[(crc >> 16) & 0xFF] ^ r3[crc >> 24]
               ^ w0[w & 0xFF] ^ w1[(w >> 8) & 0xFF] ^ w2[(w >> 16) & 0xFF] ^ w3[w >> 24])
    return crc


def crc32_bytes(buf: bytes) -> int:
    """CRC of a packed message: every little-endian 32-bit word of ``buf`` except the last.

    Raises:
        ContractError: ``len(buf)`` is not a multiple of 4.
    """
    if len(buf) % 4:
        raise ContractError(f"packed message of {len(buf)} bytes is not a whole number of 32-bit words")
    return crc32_words(np.frombuffer(buf, dtype="<u4")[:-1])


def _apply_reg(x: np.ndarray) -> np.ndarray:
    """R (the register part of one word update) applied elementwise to uint32 array ``x``."""
    r = [np.array(t, dtype=np.uint32) for t in _REG]
    return r[0][x & 0xFF] ^ r[1][(x >> 8) & 0xFF] ^ r[2][(x >> 16) & 0xFF] ^ r[3][x >> 24]


class FixedLengthCrc:
    """The same CRC for messages of a fixed packed length, vectorised (module docstring).

    Args:
        n_bytes: packed message length [bytes] (a multiple of 4; the last word, the ``crc``
            field, is not covered): 1004 for ``LowCmd_``, 2092 for ``LowState_``.

    Raises:
        ValueError: ``n_bytes`` not a positive multiple of 4.
    """

    def __init__(self, n_bytes: int):
        if n_bytes <= 4 or n_bytes % 4:
            raise ValueError(f"n_bytes must be a multiple of 4 above 4, got {n_bytes}")
        self.n_bytes = int(n_bytes)
        n = n_bytes // 4 - 1
        tab = np.empty((n, 4, 256), dtype=np.uint32)
        tab[n - 1] = np.array(_WORD, dtype=np.uint32)
        for i in range(n - 2, -1, -1):
            tab[i] = _apply_reg(tab[i + 1])
        self._tab = tab.reshape(-1)
        self._base = (np.arange(n * 4, dtype=np.intp) * 256)
        c = np.array([_MASK], dtype=np.uint32)
        for _ in range(n):
            c = _apply_reg(c)
        self._init = int(c[0])

    def __call__(self, buf: bytes) -> int:
        """CRC of ``buf`` (``n_bytes`` long; the last 4 bytes are ignored).

        Raises:
            ContractError: wrong length.
        """
        if len(buf) != self.n_bytes:
            raise ContractError(f"expected a packed message of {self.n_bytes} bytes, got {len(buf)}")
        b = np.frombuffer(buf, dtype=np.uint8)[:-4]
        # little-endian words: byte k of word i is buf[4 i + k]
        return self._init ^ int(np.bitwise_xor.reduce(self._tab[self._base + b]))
