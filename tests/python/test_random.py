"""Per-device generators: seeding, state round trips, determinism."""

import pytest


def test_manual_seed_and_initial_seed(torch):
    torch.metalx.manual_seed(1234)
    assert torch.metalx.initial_seed() == 1234
    torch.manual_seed(99)  # seeds every device's generator too
    assert torch.metalx.initial_seed() == 99
    torch.metalx.seed()
    first = torch.metalx.initial_seed()
    torch.metalx.seed()
    assert torch.metalx.initial_seed() != first  # non-deterministic 64-bit seeds


def test_state_round_trip(torch):
    torch.metalx.manual_seed(7)
    state = torch.metalx.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    assert state.numel() == 16

    generator = torch.metalx.random.default_generator(0)
    generator.set_offset(8)
    moved = torch.metalx.get_rng_state()
    assert not torch.equal(moved, state)

    torch.metalx.set_rng_state(state)
    assert torch.equal(torch.metalx.get_rng_state(), state)
    assert torch.metalx.initial_seed() == 7
    assert generator.get_offset() == 0


def test_seeding_is_deterministic(torch):
    torch.metalx.manual_seed(5)
    first = torch.metalx.get_rng_state()
    torch.metalx.manual_seed(6)
    torch.metalx.manual_seed(5)
    assert torch.equal(torch.metalx.get_rng_state(), first)


def test_bad_state_is_rejected(torch):
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.metalx.set_rng_state(torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="uint8"):
        torch.metalx.set_rng_state(torch.zeros(16, dtype=torch.float32))


def test_generator_objects(torch):
    g = torch.Generator(device="metalx")
    assert g.device == torch.device("metalx:0")
    g.manual_seed(42)
    assert g.initial_seed() == 42
    clone = g.clone_state()
    assert torch.equal(clone.get_state(), g.get_state())
    assert torch.metalx.random.default_generator("metalx:0") is torch.metalx.random.default_generator(0)
