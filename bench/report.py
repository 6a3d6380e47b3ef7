"""The results file the timing benches write: the machine, torch, the load average
before and after the run (timings on a shared 2-core machine mean little without it),
the bench's own fields, and its rows."""

import json
import os
import platform

import torch


def write_results(path, load_before, rows, **fields):
    with open(path, "w") as f:
        json.dump(dict(machine=platform.platform(), torch=torch.__version__, threads=2, **fields,
                       load_average_before=load_before, load_average_after=os.getloadavg(), rows=rows), f,
                  indent=1)
