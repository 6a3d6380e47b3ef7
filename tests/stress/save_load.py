"""torch.save / torch.load of metalx tensors while the stream threads run."""

import io
import threading

import torch

DEVICE = "metalx"


def run(stop, tally, seed):
    generator = torch.Generator().manual_seed(seed)
    while not stop.is_set():
        try:
            cpu = {"w": torch.randn(64, 33, generator=generator), "step": torch.tensor(7),
                   "h": torch.randn(129, generator=generator).half()}
            state = {k: v.to(DEVICE) for k, v in cpu.items()}
            state["view"] = state["w"][3:, ::2]  # shares w's storage
            buffer = io.BytesIO()
            torch.save(state, buffer)
            buffer.seek(0)
            loaded = torch.load(buffer)
            for key, value in cpu.items():
                if loaded[key].device.type != DEVICE or not torch.equal(loaded[key].cpu(), value):
                    tally.error("save/load", f"{key} changed in a round trip")
            if loaded["view"].untyped_storage().data_ptr() != loaded["w"].untyped_storage().data_ptr():
                tally.error("save/load", "a view lost its storage sharing")
            tally.count("save/load round trips")
        except Exception as e:
            tally.error("save/load", f"{type(e).__name__}: {e}")


def start(stop, tally, seed):
    thread = threading.Thread(target=run, args=(stop, tally, seed), name="stress-save-load")
    thread.start()
    return thread
