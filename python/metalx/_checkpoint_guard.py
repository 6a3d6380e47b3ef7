"""torch.load of metalx tensors in a process where metalx failed to load.

Without this, torch only says it "doesn't know how to restore data location ...
(tagged with metalx:0)". When metalx's own load fails (an ABI break, a torch upgrade
under it), metalx registers a deserializer that explains why metalx is missing and
how to read the checkpoint anyway. (With TORCH_DEVICE_BACKEND_AUTOLOAD=0 and no
`import metalx`, no metalx code runs at all: torch's message is all there is.)
"""

BACKEND_NAME = "metalx"


def _is_metalx_location(location: str) -> bool:
    return location == BACKEND_NAME or location.startswith(BACKEND_NAME + ":")


def refuse_metalx_storages(torch, failure) -> None:
    """Makes torch.load raise a clear error for storages saved on a metalx device."""
    # The failure's headline and its "error: ..." line; the rest is in the warning.
    lines = [line.strip() for line in str(failure).splitlines()]
    reason = " ".join(line for line in lines[:1] + [l for l in lines if l.startswith("error:")] if line)

    def deserialize(storage, location):
        if not _is_metalx_location(location):
            return None  # another device: let torch's own deserializers handle it
        raise RuntimeError(
            f"this checkpoint holds tensors saved on the metalx device ({location}), but "
            f"metalx is not available in this process ({reason}). Load it with "
            f"torch.load(..., map_location='cpu') to get them on the CPU, or fix metalx "
            f"(see the warning given when torch was imported)."
        )

    # The tagger never claims a storage: this entry only restores, and only refuses.
    torch.serialization.register_package(99, lambda storage: None, deserialize)
