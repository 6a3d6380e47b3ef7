"""The text of torch.metalx.memory_summary(): the allocator's numbers as a table.

Kept apart from memory.py because it is only presentation: every number comes from
the allocator's statistics and snapshot, passed in.
"""


def format_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


_CELLS = 3
_WIDTH = 2 + 30 + 1 + 15 * _CELLS  # every line as wide as a row of three cells


def _row(name, *cells):
    cells = cells + ("",) * (_CELLS - len(cells))
    return f"| {name:<30}|" + "".join(f" {cell:>12} |" for cell in cells)


def format_summary(index, info, stats, segments, limit, fraction, abbreviated=False) -> str:
    rule = "|" + "-" * (_WIDTH - 2) + "|"
    heavy = "|" + "=" * (_WIDTH - 2) + "|"
    allocated = stats["allocated_bytes.all.current"]
    reserved = stats["reserved_bytes.all.current"]
    pending = stats["pending_free_bytes"]
    lines = [
        heavy,
        f"|{'metalx memory summary, device ' + str(index):^{_WIDTH - 2}}|",
        f"|{info['name'][: _WIDTH - 4]:^{_WIDTH - 2}}|",
        heavy,
        _row("Memory", "current", "peak"),
        rule,
        _row("Allocated (held by tensors)", format_bytes(allocated), format_bytes(stats["allocated_bytes.all.peak"])),
        _row("Requested (as asked for)", format_bytes(stats["requested_bytes.all.current"]),
             format_bytes(stats["requested_bytes.all.peak"])),
        _row("Reserved (device buffers)", format_bytes(reserved), format_bytes(stats["reserved_bytes.all.peak"])),
    ]
    if not abbreviated:
        for pool in ("small", "large"):
            held = sum(s["total_size"] for s in segments if s["segment_type"] == pool)
            lines.append(_row(f"  {pool} pool", format_bytes(held), ""))
    lines += [
        _row("  cached, free", format_bytes(reserved - allocated - pending), ""),
        _row("  freed, awaiting GPU work", format_bytes(pending), ""),
        rule,
        _row("Counts", "current", "created", "released"),
        rule,
        _row("Segments (device buffers)", str(len(segments)), str(stats["segment.all.allocated"]),
             str(stats["segment.all.freed"])),
        _row("Blocks held by tensors", str(stats["active.all.current"]), str(stats["allocation.all.allocated"]),
             str(stats["allocation.all.freed"])),
        rule,
        _row("Served from cache", str(stats["cache_hits"])),
        _row("Cache released to retry", str(stats["num_alloc_retries"])),
        _row("Out-of-memory errors", str(stats["num_ooms"])),
        rule,
        f"| Limit: {format_bytes(limit)} = {fraction:g} x recommended working set of "
        f"{format_bytes(info['recommended_max_working_set_size'])}".ljust(_WIDTH - 1) + "|",
        heavy,
    ]
    return "\n".join(lines) + "\n"
