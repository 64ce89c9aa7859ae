"""Bad input is refused with a ConfigError naming what is wrong; the shipped config loads."""

import dataclasses

import numpy as np
import pytest

from contactflow.errors import ConfigError
from contactflow.lac.config import LacConfig, check_stiffness, load_lac_config
from contactflow.lac.contact_frames import load_contact_frames, sample_synthetic_frame, save_contact_frames
from contactflow.lac.events import sample_episode
from contactflow.lac.model import LacRobot


@pytest.fixture(scope="module")
def lac():
    return LacRobot()


GOOD_YAML = """
frames:
  - q_ref: [0.0, 0.2, 0.2, 0.0, 0.6, 0.0, 0.2, -0.2, 0.0, 0.6, 0.0]
    contacts:
      {link}: {{point: [0.1, 0.0, 0.0], normal: [0.0, 0.0, -1.0]}}
"""


def test_shipped_config_equals_table_ii_defaults():
    assert load_lac_config() == LacConfig()


def test_config_unknown_key_and_range(tmp_path):
    f = tmp_path / "lac.yaml"
    f.write_text("gates:\n  decay_balanse: 0.8\n")
    with pytest.raises(ConfigError, match="decay_balanse"):
        load_lac_config(f)
    f.write_text("gates:\n  decay_balance: 1.5\n")
    with pytest.raises(ConfigError, match="decay_balance"):
        load_lac_config(f)


def test_unknown_link_is_refused(tmp_path, lac):
    f = tmp_path / "frames.yaml"
    f.write_text(GOOD_YAML.format(link="left_hand"))
    with pytest.raises(ConfigError, match=r"frames\[0\].*unknown LAC contact link 'left_hand'"):
        load_contact_frames(f, lac)
    with pytest.raises(ConfigError, match="'left_palm'"):
        lac.link_index("left_palm")
    f.write_text(GOOD_YAML.format(link="left_wrist_roll_link"))
    (fr,) = load_contact_frames(f, lac)
    assert fr.links.tolist() == [5]


@pytest.mark.parametrize(
    "k,name",
    [([5.0, 100, 100, 30, 30], "K_lin_left_arm"), ([100, 100, 900, 30, 30], "K_lin_torso"),
     ([100, 100, 100, 30, 150], "K_ang_right_arm"), ([100, 100, 100, np.nan, 30], "K_ang_left_arm")],
)
def test_stiffness_out_of_range_is_refused(lac, k, name):
    with pytest.raises(ConfigError, match=name):
        check_stiffness(k, k_lin_range=(10.0, 500.0), k_ang_range=(10.0, 100.0))
    frame = sample_synthetic_frame(lac, np.random.default_rng(0))
    with pytest.raises(ConfigError, match=name):
        sample_episode(lac, LacConfig(), frame, np.random.default_rng(0), stiffness=k)


def test_malformed_contact_frame_files(tmp_path, lac):
    bad = tmp_path / "bad.yaml"
    bad.write_text("frames:\n  - q_ref: [0.0, 0.1]\n    contacts: {torso_link: {point: [0, 0, 0], normal: [1, 0, 0]}}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: frames\[0\]: q_ref must have 11 values"):
        load_contact_frames(bad, lac)
    bad.write_text(GOOD_YAML.format(link="torso_link").replace("normal: [0.0, 0.0, -1.0]", "normal: [0.0, 0.0, -2.0]"))
    with pytest.raises(ConfigError, match="normal of torso_link is not a unit vector"):
        load_contact_frames(bad, lac)
    bad.write_text("frames: [ {q_ref: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_contact_frames(bad, lac)
    npz = tmp_path / "lib.npz"
    np.savez(npz, q_ref=np.zeros((2, 11)), mask=np.ones((2, 11), bool))
    with pytest.raises(ConfigError, match=r"lib.npz: missing array\(s\) \['points', 'normals'\]"):
        load_contact_frames(npz, lac)
    garbage = tmp_path / "junk.npz"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match="junk.npz: not a readable"):
        load_contact_frames(garbage, lac)
    with pytest.raises(ConfigError, match="unknown contact-frame file type '.csv'"):
        load_contact_frames(tmp_path / "x.csv", lac)


def test_library_round_trip(tmp_path, lac):
    rng = np.random.default_rng(5)
    frames = [sample_synthetic_frame(lac, rng) for _ in range(4)]
    save_contact_frames(tmp_path / "lib.npz", frames, lac)
    back = load_contact_frames(tmp_path / "lib.npz", lac)
    for a, b in zip(frames, back):
        np.testing.assert_array_equal(a.mask, b.mask)
        np.testing.assert_allclose(a.points, b.points)
        assert dataclasses.replace(b, source="synthetic").q_ref.tolist() == a.q_ref.tolist()
