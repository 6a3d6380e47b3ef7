"""Process groups made from others, with metalx tensors, on 4 ranks:
torch.distributed.split_group (torch splits each backend of the parent group; metalx's
splits its Gloo), new_subgroups and new_subgroups_by_enumeration (new groups, through
torch's new_group). Each collective runs on metalx tensors and on CPU tensors with the
same values in the same group; both must give the sums over the group's ranks."""

import pytest

from distributed_harness import run_ranks

WORLD = 4


def _value(rank, n=6):
    import torch

    return torch.arange(n, dtype=torch.float32) * (rank + 1) + 10 * rank


def _sum_and_gather(group, rank, dist, torch):
    """all_reduce and all_gather_into_tensor in `group`, on metalx and on CPU tensors."""
    out = {}
    for device in ("metalx", "cpu"):
        t = _value(rank).to(device)
        dist.all_reduce(t, group=group)
        gathered = t.new_empty(dist.get_world_size(group) * 2)
        dist.all_gather_into_tensor(gathered, torch.tensor([rank, 100 + rank], dtype=t.dtype).to(device), group=group)
        out[device] = (str(t.device), t.cpu(), gathered.cpu())
    return out


def _groups(rank, world_size):
    import torch
    import torch.distributed as dist
    from metalx.distributed import serves_metalx

    out = {}
    pairs = dist.split_group(split_ranks=[[0, 1], [2, 3]])
    out["split_pairs"] = (_sum_and_gather(pairs, rank, dist, torch), dist.get_process_group_ranks(pairs),
                          serves_metalx(pairs))
    evens = dist.split_group(split_ranks=[[0, 2]])  # ranks 1 and 3 are in no split
    out["split_evens"] = None if evens is None else (_sum_and_gather(evens, rank, dist, torch),
                                                     dist.get_process_group_ranks(evens))
    # a split of a split
    if pairs is not None:
        single = dist.split_group(parent_pg=pairs, split_ranks=[[0], [1]])
        out["split_of_split"] = (_sum_and_gather(single, rank, dist, torch), dist.get_process_group_ranks(single))
    mine, _ = dist.new_subgroups(group_size=2)
    out["new_subgroups"] = (_sum_and_gather(mine, rank, dist, torch), dist.get_process_group_ranks(mine),
                            serves_metalx(mine))
    mine, _ = dist.new_subgroups_by_enumeration([[0, 3], [1, 2]])
    out["by_enumeration"] = (_sum_and_gather(mine, rank, dist, torch), dist.get_process_group_ranks(mine))
    # the parent group still works after all the splitting
    t = torch.full((3,), float(rank), device="metalx")
    dist.all_reduce(t)
    out["world_after"] = t.cpu()
    return out


@pytest.fixture(scope="module")
def groups(torch):
    return run_ranks(_groups, WORLD, init_kwargs={"device_id": torch.device("metalx", 0)})


def _check(torch, result, ranks, rank):
    by_device, got_ranks = result[0], result[1]
    assert sorted(got_ranks) == sorted(ranks), (rank, got_ranks)
    expected_sum = sum(_value(r) for r in ranks)
    expected_gather = torch.tensor([v for r in sorted(ranks) for v in (r, 100 + r)], dtype=torch.float32)
    for device in ("metalx", "cpu"):
        on, total, gathered = by_device[device]
        assert on.startswith(device)
        assert torch.equal(total, expected_sum), (device, rank, total, expected_sum)
        assert torch.equal(gathered, expected_gather), (device, rank, gathered)


def test_split_group_into_pairs(torch, groups):
    for rank, r in enumerate(groups):
        ranks = [0, 1] if rank < 2 else [2, 3]
        _check(torch, r["split_pairs"], ranks, rank)
        assert r["split_pairs"][2] is True  # the split group's metalx backend is metalx's


def test_split_group_leaves_out_ranks_in_no_split(torch, groups):
    for rank, r in enumerate(groups):
        if rank in (0, 2):
            _check(torch, r["split_evens"], [0, 2], rank)
        else:
            assert r["split_evens"] is None


def test_split_of_a_split_group(torch, groups):
    for rank, r in enumerate(groups):
        _check(torch, r["split_of_split"], [rank], rank)


def test_new_subgroups(torch, groups):
    for rank, r in enumerate(groups):
        _check(torch, r["new_subgroups"], [0, 1] if rank < 2 else [2, 3], rank)
        assert r["new_subgroups"][2] is True


def test_new_subgroups_by_enumeration(torch, groups):
    for rank, r in enumerate(groups):
        _check(torch, r["by_enumeration"], [0, 3] if rank in (0, 3) else [1, 2], rank)


def test_world_group_works_after_splitting(torch, groups):
    for r in groups:
        assert torch.equal(r["world_after"], torch.full((3,), float(sum(range(WORLD)))))


def _split_without_device(rank, world_size):
    import torch.distributed as dist

    try:
        dist.split_group(split_ranks=[[0, 1]])
        return "no error"
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def test_split_group_needs_a_bound_device_as_on_cpu(torch):
    # torch refuses to split a default group made without device_id, whatever the device.
    for message in run_ranks(_split_without_device, 2):
        assert message.startswith("RuntimeError") and "No device associated with the default pg" in message, message
