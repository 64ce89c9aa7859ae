"""The G1's wireless remote as ``rt/lowstate`` carries it (``wireless_remote``, 40 bytes).

Layout (read from Unitree's public ``unitree_sdk2_python`` wireless-controller example, the
``unitree_hg`` ``LowState_`` of a G1 / H1-2; not checked on a robot here):

* byte 2, bit 0..7: ``R1``, ``L1``, ``Start``, ``Select``, ``R2``, ``L2``, ``F1``, ``F3``;
* byte 3, bit 0..7: ``A``, ``B``, ``X``, ``Y``, ``Up``, ``Right``, ``Down``, ``Left``;
* little-endian float32 sticks: ``lx`` at byte 4, ``rx`` at 8, ``ry`` at 12, ``ly`` at 20 (16: the
  analog L2, unused); bytes 0-1 and 24-39: not used here.

The driver's e-stop on the remote (:data:`DEFAULT_ESTOP_COMBO`, ``L2+B``: the combination Unitree's
remote uses for its own damping mode, so the owner's reflex works in low-level mode too) latches
damping from the 500 Hz thread, without the graph.
"""

from __future__ import annotations

from contactflow.errors import ConfigError

__all__ = ["BUTTONS", "DEFAULT_ESTOP_COMBO", "pressed_buttons", "parse_combo", "combo_masks", "combo_pressed", "remote_bytes"]

BUTTONS: dict[str, tuple[int, int]] = {
    name: (2, bit) for bit, name in enumerate(("R1", "L1", "Start", "Select", "R2", "L2", "F1", "F3"))
} | {
    name: (3, bit) for bit, name in enumerate(("A", "B", "X", "Y", "Up", "Right", "Down", "Left"))
}
"""Button name -> (byte index, bit) in ``wireless_remote``."""

DEFAULT_ESTOP_COMBO = "L2+B"


def pressed_buttons(data) -> set[str]:
    """The buttons pressed in a 40-byte ``wireless_remote`` (bytes or a list of ints)."""
    if len(data) < 4:
        return set()
    b2, b3 = int(data[2]), int(data[3])
    return {name for name, (byte, bit) in BUTTONS.items() if ((b2 if byte == 2 else b3) >> bit) & 1}


def parse_combo(text: str, where: str = "remote e-stop") -> frozenset[str]:
    """``"L2+B"`` -> {"L2", "B"}; ``""`` or ``"none"`` -> empty (no remote e-stop).

    Raises:
        ConfigError: an unknown button name (the message lists the known ones).
    """
    if text.strip().lower() in ("", "none"):
        return frozenset()
    names = [t.strip() for t in text.split("+")]
    bad = [n for n in names if n not in BUTTONS]
    if bad:
        raise ConfigError(f"{where}: unknown button(s) {bad} in {text!r}; expected names joined by '+' among "
                          f"{sorted(BUTTONS)}, or 'none'")
    return frozenset(names)


def combo_masks(combo: frozenset[str]) -> tuple[int, int]:
    """The bit masks of ``combo`` in bytes 2 and 3 of ``wireless_remote`` (computed once from the
    parsed names; tested at every state by :func:`combo_pressed`)."""
    b = remote_bytes(combo)
    return b[2], b[3]


def combo_pressed(data, masks: tuple[int, int]) -> bool:
    """True if every button of a combo (its :func:`combo_masks`, not both zero) is pressed in ``data``."""
    m2, m3 = masks
    if not (m2 or m3) or len(data) < 4:
        return False
    return (int(data[2]) & m2) == m2 and (int(data[3]) & m3) == m3


def remote_bytes(buttons=()) -> bytes:
    """A 40-byte ``wireless_remote`` with ``buttons`` pressed and the sticks at 0 (the emulator's)."""
    out = bytearray(40)
    for name in buttons:
        byte, bit = BUTTONS[name]
        out[byte] |= 1 << bit
    return bytes(out)
