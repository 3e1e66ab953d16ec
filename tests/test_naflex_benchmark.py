"""benchmarks/naflex_padding.py: the padding of NaFlex batches against
square resizing (deterministic part; the timing is not run in tests)."""
import importlib
import math
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / 'benchmarks'


@pytest.fixture
def naflex_padding(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module('naflex_padding')


def test_padding_fraction_by_hand(naflex_padding):
    """Budget 16 at patch 16: 64x64 -> 4x4 = 16 tokens, 48x80 -> 3x5 = 15,
    16x160 -> 1x10 = 10. Batches of 2 in order: [16, 15] + [10] = 42 slots
    for 41 tokens; sorted: [10, 15] + [16] = 46 slots; one batch of 3:
    48 slots."""
    sizes = [(64, 64), (48, 80), (16, 160)]
    stats = naflex_padding.padding_stats(sizes, 16, 16, batch_size=2)
    assert stats['naflex']['padding'] == pytest.approx(1 / 42)
    assert stats['naflex']['tokens_per_image'] == pytest.approx(41 / 3)
    assert naflex_padding.padding_stats(sizes, 16, 16, 2, sort=True)[
        'naflex']['padding'] == pytest.approx(5 / 46)
    assert naflex_padding.padding_stats(sizes, 16, 16, 3)['naflex'][
        'padding'] == pytest.approx(7 / 48)
    square = stats['square']
    assert square['padding'] == 0 and square['tokens_per_image'] == 16
    assert square['aspect_distortion'] == pytest.approx(
        (0 + math.log(80 / 48) + math.log(10)) / 3)


def test_the_mix_is_seeded_and_covers_the_aspects(naflex_padding):
    sizes = naflex_padding.image_sizes(400)
    assert sizes == naflex_padding.image_sizes(400)
    ratios = {round(w / h, 1) for h, w in sizes}
    assert {0.3, 1.0, 3.0} <= ratios
    assert all(200 <= max(hw) <= 1000 for hw in sizes)
    # sorting by length never pads more than dataset order
    for budget in (64, 256):
        plain, ordered = (naflex_padding.padding_stats(
            sizes, 16, budget, 32, sort=s)['naflex']['padding']
            for s in (False, True))
        assert 0 < ordered <= plain < 0.5
