"""The environment report, `python -m metalx`: what a bug report needs.

Versions (metalx, torch, Python, how metalx was built), the driver (Apple's Metal or
the metalsim simulator), each device with its limits and memory, the configuration
variables in effect and the CPU-fallback mode. `python -m metalx --json` prints the
same as JSON. It exits with 1 when metalx is unusable: no device, or metalx failed to
load (then `import metalx` itself raises with the diagnosis, unless torch's autoload
already imported it, in which case the report says why).
"""

import argparse
import json
import os
import platform
import sys

# Variables metalx and its simulator read, with what they control.
SETTINGS = {
    "METALX_DRIVER": "runtime driver: metal or sim (default: Metal where available, else sim)",
    "METALX_FALLBACK": "ops without a metalx kernel: allow (default), warn or error",
    "METALX_HIGH_WATERMARK_RATIO": "memory limit, x the recommended working set (default 1.7)",
    "METALX_SYNC_INDEX_CHECKS": "1: index values out of range raise at the op (a host wait per check), not at the next synchronisation",
    "METALX_PIPELINE_CACHE_SIZE": "bound of the compute pipeline cache",
    "METALX_LIBRARY_CACHE_SIZE": "bound of the compiled shader library cache",
    "METALX_SIM_ATTENTION_GPU_CODE": "1: on the simulator, attention runs its GPU code instead of the lane-0 kernels (tests)",
    "METALX_SKIP_TORCH_VERSION_CHECK": "1: load even into another torch than the one built for",
    "TORCH_DEVICE_BACKEND_AUTOLOAD": "0: import torch does not load metalx (default 1)",
    "METALSIM_DEVICE_COUNT": "simulated devices (default 1)",
    "METALSIM_THREADS": "CPU threads running threadgroups (default: all cores)",
    "METALSIM_STRICT": "1: delayed command buffers and 0xCD-filled memory, to expose races",
    "METALSIM_STRICT_DELAY_US": "delay of each command buffer in strict mode (default 2000)",
    "METALSIM_MEMORY_MB": "simulated device memory (default: physical memory)",
    "METALSIM_CACHE_DIR": "cache of run-time compiled shaders",
    "METALSIM_CACHE_MB": "bound of that cache (default 512)",
    "METALSIM_CXX": "host compiler for run-time shaders",
    "METALSIM_FIBER_STACK_KB": "stack of each simulated thread (default 256)",
    "METALSIM_EVENT_TIMEOUT_S": "longest wait of a command buffer for an event (default 60)",
    "METALSIM_SHADER_VALIDATION": "1 (default): compile_shader kernels check every buffer access; 0: off; all: built-in kernels too",
    "METALSIM_KERNEL_TIMEOUT_S": "a compile_shader kernel running longer fails with a GPU timeout (default 10; 0: never)",
    "METALSIM_KERNEL_ISA": "built-in kernel build: auto (default, by CPUID), baseline, x86-64-v3 or x86-64-v4",
    "METALSIM_HOME": "where the simulator's prelude/ and include/ are",
}
_PREFIXES = ("METALX_", "METALSIM_")


def _configuration(environ):
    known = {name: {"value": environ.get(name), "meaning": meaning} for name, meaning in SETTINGS.items()}
    # Set but read by nothing in the runtime: usually a typo worth seeing.
    other = {name: environ[name] for name in sorted(environ)
             if name.startswith(_PREFIXES) and name not in SETTINGS}
    return known, other


def _build_info():
    try:
        from metalx import _build_info as b
    except ImportError:
        return None
    return {name.lower(): getattr(b, name) for name in dir(b) if name.isupper()}


def collect(environ=None) -> dict:
    """Everything the report shows, as plain data."""
    import torch

    import metalx

    environ = os.environ if environ is None else environ
    known, other = _configuration(environ)
    report = {
        "metalx": metalx.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "build": _build_info(),
        "configuration": known,
        "other_variables": other,
        "loaded": False,
    }
    try:
        metalx.load()
    except ImportError as error:
        report["load_error"] = str(error)
        return report
    report["loaded"] = True

    from metalx import _C

    report["fallback_mode"] = torch.metalx.fallback_mode()
    report["drivers_available"] = list(_C.available_drivers())
    try:
        report["driver"] = _C.driver_name()
    except RuntimeError as error:  # the runtime cannot start (no device for the driver)
        report["driver"] = None
        report["driver_error"] = str(error)
    report["devices"] = [_device(torch, index) for index in range(torch.metalx.device_count())]
    return report


def _device(torch, index):
    from metalx import _C

    info = dict(_C._device_info(index))
    info["max_threads_per_threadgroup_dims"] = list(info["max_threads_per_threadgroup_dims"])
    stats = torch.metalx.memory_stats(index)
    free, total = torch.metalx.mem_get_info(index)
    info["memory"] = {
        "limit": total,
        "fraction": torch.metalx.get_per_process_memory_fraction(index),
        "free": free,
        "allocated": stats["allocated_bytes.all.current"],
        "reserved": stats["reserved_bytes.all.current"],
    }
    return info


def format_report(report) -> str:
    from metalx._memory_summary import format_bytes

    yes_no = {True: "yes", False: "no"}
    lines = ["metalx environment", "=================="]

    def item(name, value, indent="", width=28):
        lines.append(f"{indent}{name:<{width}}{value}")

    item("metalx", report["metalx"])
    build = report["build"]
    built_for = f" (metalx built for torch {build['torch_version']})" if build else ""
    item("torch", report["torch"] + built_for)
    item("python", f"{report['python']} ({report['platform']})")
    if build:
        drivers = [name for name, on in (("sim", build.get("with_sim")), ("metal", build.get("with_metal"))) if on]
        item("build", f"{build.get('build_type') or 'unknown type'}, {build.get('cxx_compiler', '?')}, "
                      f"for {build.get('system', '?')}, drivers: {', '.join(drivers) or 'none'}")
    else:
        item("build", "no build information (metalx._build_info missing)")

    if not report["loaded"]:
        lines += ["", "metalx could not be loaded:", report["load_error"]]
    else:
        driver = report["driver"]
        kind = {"sim": "metalsim, the simulated Metal runtime (kernels run on CPU threads)",
                "metal": "Apple Metal (a real GPU)"}.get(driver, "")
        item("driver", f"{driver} - {kind}" if driver else f"none: {report.get('driver_error', '')}")
        item("drivers available", ", ".join(report["drivers_available"]) or "none")
        item("CPU fallback mode", report["fallback_mode"])
        lines += ["", f"devices: {len(report['devices'])}"]
        for index, d in enumerate(report["devices"]):
            m = d["memory"]
            lines.append(f"  metalx:{index}  {d['name']}")
            item("simulated", yes_no[d["is_simulated"]], "    ")
            item("unified memory", yes_no[d["has_unified_memory"]], "    ")
            item("max threads/threadgroup", f"{d['max_threads_per_threadgroup']} "
                 f"({' x '.join(map(str, d['max_threads_per_threadgroup_dims']))})", "    ")
            item("threadgroup memory", format_bytes(d["max_threadgroup_memory_length"]), "    ")
            item("SIMD width", d["simd_width"], "    ")
            item("recommended working set", format_bytes(d["recommended_max_working_set_size"]), "    ")
            item("max buffer length", format_bytes(d["max_buffer_length"]), "    ")
            item("memory limit", f"{format_bytes(m['limit'])} ({m['fraction']:g} x working set)", "    ")
            item("allocated / reserved", f"{format_bytes(m['allocated'])} / {format_bytes(m['reserved'])}",
                 "    ")
            item("free", format_bytes(m["free"]), "    ")

    lines += ["", "configuration"]
    width = 2 + max(map(len, [*report["configuration"], *report["other_variables"]]))
    for name, setting in report["configuration"].items():
        value = "not set" if setting["value"] is None else repr(setting["value"])
        item(name, f"{value:<12} {setting['meaning']}", "  ", width)
    for name, value in report["other_variables"].items():
        item(name, f"{value!r:<12} (not a metalx runtime setting)", "  ", width)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metalx", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = collect()
    sys.stdout.write(json.dumps(report, indent=2) + "\n" if args.json else format_report(report))
    # Non-zero when metalx cannot be used, so the report doubles as a health check.
    return 0 if report["loaded"] and report["devices"] else 1
